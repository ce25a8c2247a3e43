"""The mismatch probe (FedPFT Table 1) and linear probes on tiny finished runs: Origin, Probe and
Match, determinism, per-client heads, the learning-rate back-off, and any method (FedPFT
included) through personalized_model."""
import numpy as np
import pandas as pd
import pytest
import torch
from support import BN_CNN, tiny_config

import fedrepro
from fedrepro.analysis import (
    ProbeConfig,
    extract_features,
    linear_probe,
    mismatch_probe,
    mismatch_probe_state,
    summarize_probe,
    upload_params,
)
from fedrepro.analysis.embedding import analysis_generator
from fedrepro.analysis.probe import train_probe
from fedrepro.errors import ConfigError
from fedrepro.runs.train import restore
from fedrepro.models import head_keys


def _clone(obj):
    if isinstance(obj, torch.Tensor):
        return obj.clone()
    if isinstance(obj, dict):
        return {k: _clone(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_clone(v) for v in obj]
    return obj


def _assert_same(a, b):
    if isinstance(a, torch.Tensor):
        assert torch.equal(a, b)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _assert_same(a[k], b[k])
    elif isinstance(a, list):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _assert_same(x, y)


def test_untrained_identity_match_equals_origin_equals_the_runs_accuracy(runs):
    res = runs["fedavg"]
    df = mismatch_probe(res, ProbeConfig(epochs=0), device="cpu")
    assert (df["match"] == df["origin"]).all() and (df["match_train"] == df["origin_train"]).all()
    final = res.final_clients().sort_values("client")
    assert np.array_equal(df["origin"].to_numpy(), final["acc"].to_numpy())
    assert df["n_test"].tolist() == final["n_test"].tolist()


def test_match_fits_train_data_and_probe_matches_it(runs):
    df = mismatch_probe(runs["fedavg"], device="cpu")
    assert (df["match_train_loss"] <= df["origin_train_loss"] + 1e-6).all()
    assert (df["match_train"] >= df["origin_train"] - 0.05).all()
    # C = 4 <= m = 16: the inserted layer is as expressive as a new classifier (W·A spans every C×m map).
    assert abs(df["probe_train"].mean() - df["match_train"].mean()) < 0.1
    s = summarize_probe(df)
    assert s["mismatch"] == pytest.approx(s["match"] - s["origin"])
    assert s["clients"] == len(df) and set(df.columns) >= {"client", "origin", "probe", "match", "n_train", "n_test"}


def test_probe_is_deterministic_and_leaves_the_model_untouched(runs):
    method, clients, state = restore(runs["fedavg"], "cpu")
    before = _clone(state)
    a = mismatch_probe_state(method, clients, state, ProbeConfig(epochs=20))
    b = mismatch_probe_state(method, clients, state, ProbeConfig(epochs=20))
    pd.testing.assert_frame_equal(a, b)
    _assert_same(before, state)
    _assert_same(before, restore(runs["fedavg"], "cpu")[2])
    other = mismatch_probe_state(method, clients, state, ProbeConfig(epochs=20, seed=1))
    assert not np.allclose(other["probe_train_loss"], a["probe_train_loss"])
    # Random-init Match also trains (the option, not the default).
    rnd = mismatch_probe_state(method, clients, state, ProbeConfig(match_init="random"))
    assert (rnd["match_train"] > 0.5).all()


def test_fedper_is_probed_with_each_clients_own_head(runs):
    res = runs["fedper"]
    method, clients, state = restore(res, "cpu")
    hk = sorted(head_keys(method.model))[0]
    heads = [s[hk] for s in state["client_states"]]
    assert not torch.equal(heads[0], heads[1])
    df = mismatch_probe_state(method, clients, state, ProbeConfig(epochs=0))
    final = res.final_clients().sort_values("client")
    assert np.array_equal(df["origin"].to_numpy(), final["acc"].to_numpy())


def test_linear_probe_reuses_the_probe_recipe_and_phi_falls_back(runs):
    res = runs["fedavg"]
    cfg = ProbeConfig(epochs=30)
    probe = mismatch_probe(res, cfg, device="cpu")["probe"].to_numpy()
    on_f = linear_probe(res, "features", cfg, device="cpu")
    on_phi = linear_probe(res, "phi", cfg, device="cpu")  # baselines expose no separate φ
    assert np.array_equal(on_f["probe"].to_numpy(), probe)
    assert np.array_equal(on_phi["probe"].to_numpy(), probe)
    with pytest.raises(ConfigError, match="on="):
        linear_probe(res, "no_such_module", cfg, device="cpu")
    with pytest.raises(ConfigError, match="match_init"):
        mismatch_probe(res, ProbeConfig(match_init="zeros"), device="cpu")


def test_probe_backs_off_the_learning_rate_when_sgd_diverges():
    gen = torch.Generator().manual_seed(0)
    y = torch.arange(200) % 4
    x = 300.0 * (torch.randn(200, 8, generator=gen) + torch.nn.functional.one_hot(y, 8).float() * 3)
    cfg = ProbeConfig(epochs=30, lr=1.0)
    fwd, lr = train_probe(x, y, 4, cfg, lambda: analysis_generator(0, "probe", 0))
    with torch.no_grad():
        assert lr < 1.0 and torch.isfinite(fwd(x)).all()
        assert (fwd(x).argmax(1) == y).float().mean() > 0.9


def test_any_method_through_personalized_model_fedpft(tmp_path):
    """No FedPFT special case: its personalised model exposes f' as ``features`` and φ as ``phi``."""
    from fedrepro.methods import METHODS

    if "fedpft" not in METHODS.names():
        pytest.skip("fedpft is not registered")
    res = fedrepro.run(tiny_config(tmp_path, **BN_CNN, **{"train.rounds": 1, "method.name": "fedpft",
                                                              "method.args": {"r_f": 1, "r_a": 1}}))
    df = mismatch_probe(res, ProbeConfig(epochs=0), device="cpu")
    assert (df["match"] == df["origin"]).all()
    assert np.array_equal(df["origin"].to_numpy(), res.final_clients().sort_values("client")["acc"].to_numpy())
    f_prime = extract_features(res, on="features", device="cpu")[0]
    phi = extract_features(res, on="phi", device="cpu")[0]
    assert f_prime.shape == phi.shape and not np.allclose(f_prime, phi)
    method, _, state = restore(res, "cpu")
    counts = upload_params(method, state["shared"])
    assert sum(counts.values()) == sum(t.numel() for t in state["shared"].values())
    assert len(counts) >= 3  # φ, τ and h_κ are all uploaded
