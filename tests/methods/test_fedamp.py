"""FedAMP (Huang et al., AAAI 2021): attention weights, the cloud model, the proximal term, the
alpha schedule, and its server state through a checkpoint."""
import pytest
import torch
from support import BN_CNN, PLAIN_STEP, check_resume_matches, setup, update

from fedrepro.methods import METHODS
from fedrepro.methods.fedamp import attention_weights


def _models(*scales, seed=0):
    g = torch.Generator().manual_seed(seed)
    base = {"a": torch.randn(20, generator=g), "b": torch.randn(3, 4, generator=g)}
    out = []
    for s in scales:
        out.append({k: v + s * torch.randn(v.shape, generator=g) for k, v in base.items()})
    return out


@pytest.mark.parametrize("mode", ["exp", "cosine"])
def test_fedamp_attention_rows_sum_to_one_and_favour_closer_clients(mode):
    kw = {"mode": mode, "alpha_k": 0.1, "sigma": 1.0}
    same = _models(0.0, 0.0, 0.0, 0.0)
    xi = attention_weights(same, **kw)
    off = xi[~torch.eye(4, dtype=torch.bool)]
    assert torch.allclose(off, off[0].expand_as(off))  # identical models: equal weights
    assert torch.allclose(xi.sum(1), torch.ones(4, dtype=torch.float64))
    ms = _models(0.0, 0.05, 0.8, 0.05)
    ms[3] = {k: v.clone() for k, v in ms[0].items()}  # client 3 = client 0
    xi = attention_weights(ms, **kw)
    assert torch.allclose(xi.sum(1), torch.ones(4, dtype=torch.float64))
    assert xi[0, 3] > xi[0, 1] > xi[0, 2]  # identical > close > far
    assert torch.allclose(xi, xi.T) if mode == "exp" else True  # A'(d_ij) is symmetric
    if mode == "exp":
        assert torch.isclose(xi[0, 3], torch.tensor(0.1, dtype=torch.float64))  # α·A'(0) = α/σ
    else:
        assert torch.allclose(xi.diagonal(), torch.full((4,), 0.25, dtype=torch.float64))  # self_weight = 1/N


def test_fedamp_cloud_model_is_the_attention_mix_and_reaches_its_client(tiny):
    args = {"alpha_k": 0.2, "sigma": 1.0}
    method, clients, st = setup(tiny(**BN_CNN, **{"method.name": "fedamp", "method.args": args}))
    ups = [update(method, st, c) for c in clients]
    params = {n for n, _ in method.model.named_parameters()}
    assert set(ups[0].upload["params"]) == params  # BN running statistics stay personal
    assert set(ups[0].state) == set(method.model.state_dict())
    shared, server = method.aggregate(st.shared, ups, st.server_state, 0)
    xi = server["attention"].double()
    assert server["attention_ids"].tolist() == [c.cid for c in clients]
    assert torch.allclose(xi.sum(1), torch.ones(len(clients), dtype=torch.float64), atol=1e-5)
    for i in range(len(clients)):
        for k in params:
            manual = sum(xi[i, j] * ups[j].upload["params"][k].double() for j in range(len(clients)))
            assert torch.allclose(shared["cloud"][i][k].double(), manual, atol=1e-5), (i, k)
    # round 1 pulls client 0 towards its own cloud model, not anyone else's
    start = ups[0].state
    anchors = {k: shared["cloud"][0][k] for k in params}
    other = {"cloud": {0: shared["cloud"][1]}}
    a = update(method, st, clients[0], rnd=1, state=start, shared=shared).upload["params"]
    b = update(method, st, clients[0], rnd=1, state=start, shared=other).upload["params"]
    assert any(not torch.equal(a[k], b[k]) for k in anchors)


def test_fedamp_proximal_term_pulls_towards_the_cloud_model(tiny):
    """One full-batch plain-SGD step: FedAMP(λ) − FedAMP(0) = −lr·(λ/α_k)·(w − u_i), exactly."""
    lam, alpha, lr = 0.6, 2.0, 0.1
    args = {"alpha_k": alpha, "alpha_decay_every": 0}
    res = {}
    for name, lam_ in (("amp", lam), ("free", 0.0)):
        method, clients, st = setup(tiny(**PLAIN_STEP, **{"train.lr": lr, "method.name": "fedamp",
                                                          "method.args": {**args, "lam": lam_}}))
        w = st.client_states[0]
        g = torch.Generator().manual_seed(3)
        u = {k: v + 0.1 * torch.randn(v.shape, generator=g) for k, v in w.items()}
        res[name] = update(method, st, clients[0], shared={"cloud": {0: u}}).upload["params"]
    for k in res["amp"]:
        expected = -lr * (lam / alpha) * (w[k] - u[k])
        assert torch.allclose(res["amp"][k] - res["free"][k], expected, atol=1e-6), k
    dist = {n: sum(float((r[k] - u[k]).pow(2).sum()) for k in r) for n, r in res.items()}
    assert dist["amp"] < dist["free"]


def test_fedamp_alpha_decays_on_schedule():
    p = METHODS.get("fedamp").parse_params({"alpha_k": 100.0, "alpha_decay_rate": 0.5, "alpha_decay_every": 2})
    assert [p.alpha_at(r) for r in range(5)] == [100.0, 100.0, 50.0, 50.0, 25.0]
    assert METHODS.get("fedamp").parse_params({"alpha_decay_every": 0}).alpha_at(999) == 1e4


@pytest.mark.parametrize("name", ["fedamp"])
def test_resume_with_partial_participation_matches_uninterrupted(tiny, tmp_path, name):
    """FedAMP's server state (every client's latest model, keyed by id) and pFedSD's per-client
    teachers go through the checkpoint; half the clients train per round, so some start late."""
    check_resume_matches(tiny(**{"method.name": name, "train.rounds": 3, "train.participation": 0.5}), tmp_path)


def test_alpha_floor_holds_the_decay_at_lambda_times_lr():
    from fedrepro.errors import ConfigError

    p = METHODS.get("fedamp").parse_params({"alpha_floor": "step", "lam": 2.0})
    assert p.alpha_at(0, 0.1) == 1e4
    assert p.alpha_at(150, 0.1) == pytest.approx(0.2)  # 1e4 · 0.1^5 = 0.1 < λ·lr
    assert p.alpha_at(999, 0.1) == pytest.approx(0.2)
    with pytest.raises(ValueError, match="learning rate"):
        p.alpha_at(3)
    with pytest.raises(ConfigError, match="alpha_floor"):
        METHODS.get("fedamp").parse_params({"alpha_floor": "zero"})
    # Off by default: the schedule as before.
    assert METHODS.get("fedamp").parse_params({}).alpha_at(150, 0.1) == pytest.approx(0.1)
