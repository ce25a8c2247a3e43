"""pFedCSPC (TNNLS): what leaves a client, CPM's prototype counts, PMI's weights, the
server step's reach, the losses' definitions, and that it learns."""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

import fedrepro
from fedrepro.errors import ConfigError
from fedrepro.methods import METHODS
from fedrepro.methods.pfedcspc import (
    MODEL, PMI, angle_loss, augment_prototypes, cluster_prototypes, edge_loss, global_prototypes, node_loss,
    pa_partners, weighted_supcon,
)
from support import BN_CNN, setup, update

CSPC = {"method.name": "pfedcspc", **BN_CNN,
        "method.args": {"server_epochs": 5, "proj_dim": 16, "clusters": 2, "n_repeat": 3}}



def test_learns_global_and_personalised(tiny):
    res = fedrepro.run(tiny(**CSPC, **{"train.rounds": 4, "train.local_epochs": 2, "train.global_eval": True}))
    s = res.summary
    # 4 balanced classes: chance is 0.25 for the global model and ~ the majority share locally.
    assert s["final_global_acc"] > 0.5 and s["final_acc_mean"] > 0.5, s
    from fedrepro.papers.pfedcspc.metrics import run_scores  # HM is derived in the paper's package

    assert 0 < run_scores(res)["final_hm"] <= 1


def test_only_the_model_and_prototypes_leave_a_client(tiny):
    method, clients, st = setup(tiny(**CSPC))
    c = clients[0]
    upd = update(method, st, c)
    model_keys = {MODEL + k for k in method.net.state_dict()}
    assert set(upd.upload) == model_keys | {"protos", "proto_y", "cid"}
    m = method.net.proj[0].in_features
    u, y = upd.upload["protos"], upd.upload["proto_y"]
    assert u.ndim == 2 and u.shape[1] == m and len(u) == len(y)
    # Prototypes are averages of encoder features, never images: nothing image-shaped is uploaded,
    # and no prototype is any single training sample's feature.
    images = c.train_x.shape[1:]
    assert not any(v.shape[-len(images):] == images for k, v in upd.upload.items() if k not in model_keys)
    assert int(upd.upload["cid"]) == c.cid
    # Labels uploaded are exactly the client's classes.
    assert set(y.tolist()) == set(c.train_y.unique().tolist())


def test_kmeans_prototypes_per_class_number_as_configured():
    g = torch.Generator().manual_seed(0)
    feats = torch.randn(70, 6, generator=g)
    labels = torch.tensor([0] * 30 + [1] * 38 + [2] * 2)
    rng = np.random.default_rng(0)
    u, y = cluster_prototypes(feats, labels, "cpm", clusters=3, n_repeat=4, ratio=0.8, replace=True, rng=rng)
    counts = torch.bincount(y).tolist()
    assert counts == [12, 12, 8]  # 3 clusters × 4 repeats; class 2 has 2 samples, so 2 clusters
    assert u.shape == (32, 6)
    tu, ty = cluster_prototypes(feats, labels, "tpg", 3, 4, 0.8, True, rng)
    assert ty.tolist() == [0, 1, 2]
    assert torch.allclose(tu[1], feats[labels == 1].mean(0).to(tu.dtype), atol=1e-6)
    # Each prototype is a mean of points of its own class (it lies inside their bounding box).
    for c in range(3):
        fc = feats[labels == c]
        assert (u[y == c] >= fc.min(0).values - 1e-6).all() and (u[y == c] <= fc.max(0).values + 1e-6).all()


def test_pmi_weights_sum_to_one_and_favour_the_model_that_fits(tiny):
    method, clients, st = setup(tiny(**CSPC))
    ups = [update(method, st, c) for c in clients]
    models = [method._sub(u.upload, MODEL) for u in ups]
    protos = [(u.upload["protos"], u.upload["proto_y"]) for u in ups]
    w = method.pmi_weights(models, protos)
    assert w.shape == (len(clients), len(clients))
    assert torch.allclose(w.sum(1), torch.ones(len(clients)))
    assert (w >= 0).all()
    # A model whose head and classifier classify client 0's prototypes perfectly (logit 50 on the
    # right class) gets nearly all of client 0's weight.
    u0, y0 = protos[0]
    sure = dict(models[1])
    net = method._load(sure)
    with torch.no_grad():
        net.proj[2].weight.zero_()
        net.proj[2].bias.zero_()
        net.cls.weight.zero_()
        net.cls.bias.zero_()
    rigged = {k: v.clone() for k, v in net.state_dict().items()}
    per_class_bias = torch.zeros(method.ctx.num_classes)
    per_class_bias[y0[0]] = 50.0
    rigged["cls.bias"] = per_class_bias
    only_one_class = (u0[y0 == y0[0]], y0[y0 == y0[0]])
    w2 = method.pmi_weights([models[0], rigged], [only_one_class])
    net0 = method._load(models[0])
    net0.eval()
    with torch.no_grad():
        l0 = float(F.cross_entropy(net0.cls(net0.proj(only_one_class[0])), only_one_class[1]))
    # softmax(−[l0, ≈0] / τ_p) with τ_p = 1
    assert float(w2[0, 1]) == pytest.approx(1 / (1 + np.exp(-l0)), abs=1e-4)
    assert w2[0, 1] > w2[0, 0]


def test_pmi_initialises_each_client_with_its_own_encoder_mix(tiny):
    method, clients, st = setup(tiny(**CSPC))
    ups = [update(method, st, c) for c in clients]
    shared, server = method.aggregate(st.shared, ups, st.server_state, 0)
    w = server["pmi_weights"]
    models = [method._sub(u.upload, MODEL) for u in ups]
    key = next(k for k in method.enc_keys if k.endswith("weight"))
    for i, c in enumerate(clients):
        expect = sum(w[i, j] * models[j][key].double() for j in range(len(models)))
        got = method.initial_model(shared, c.cid)[key]
        assert torch.allclose(got.double(), expect, atol=1e-5)
        # ...with the calibrated global head and classifier.
        assert torch.equal(method.initial_model(shared, c.cid)["cls.weight"], shared["g.cls.weight"])
    assert any(k.startswith(PMI.format(0)) for k in shared)


def test_server_step_changes_only_the_head_and_classifier(tiny):
    method, clients, st = setup(tiny(**CSPC))
    ups = [update(method, st, c) for c in clients]
    off = method.__class__(method.ctx, METHODS.get("pfedcspc").parse_params({**CSPC["method.args"], "calibrate": False}))
    plain, _ = off.aggregate(st.shared, ups, st.server_state, 0)
    cal, _ = method.aggregate(st.shared, ups, st.server_state, 0)
    for k in method.net.state_dict():
        a, b = plain["g." + k], cal["g." + k]
        if k.startswith("encoder."):
            assert torch.equal(a, b), k  # E_g is FedAvg's, untouched
    assert not torch.equal(plain["g.cls.weight"], cal["g.cls.weight"])
    assert not torch.equal(plain["g.proj.0.weight"], cal["g.proj.0.weight"])


def test_node_loss_is_cosine_infonce_over_present_prototypes():
    g = torch.Generator().manual_seed(1)
    f, protos = torch.randn(5, 4, generator=g), torch.randn(3, 4, generator=g)
    y = torch.tensor([0, 1, 0, 1, 2])
    has = torch.tensor([True, True, False])
    logits = F.normalize(f[:4], dim=1) @ F.normalize(protos[:2], dim=1).t() / 0.5
    assert torch.allclose(node_loss(f, y, protos, has, 0.5), F.cross_entropy(logits, y[:4]), atol=1e-6)


def test_angle_and_edge_losses_vanish_when_features_sit_on_their_prototypes():
    g = torch.Generator().manual_seed(2)
    protos = torch.randn(4, 5, generator=g)
    y = torch.tensor([0, 1, 2, 3, 1])
    assert float(angle_loss(protos[y], y, protos)) == pytest.approx(0.0, abs=1e-6)
    assert float(edge_loss(protos[y], y, protos)) == pytest.approx(0.0, abs=1e-10)
    f = protos[y] + 0.5 * torch.randn(5, 5, generator=g)
    assert float(angle_loss(f, y, protos)) > 0 and float(edge_loss(f, y, protos)) > 0


def test_weighted_contrastive_uses_the_hard_pair_weights():
    z = torch.tensor([[1.0, 0.0], [1.0, 0.1], [0.0, 1.0], [0.1, 1.0]])
    y = torch.tensor([0, 0, 1, 1])
    cid = torch.tensor([0, 1, 0, 1])
    zn = F.normalize(z, dim=1)
    sim = zn @ zn.t() / 0.5
    same_y, same_c = y[:, None] == y[None], cid[:, None] == cid[None]
    sigma = torch.where(same_y != same_c, 1.0, 0.5)
    expect = []
    for i in range(4):
        others = [s for s in range(4) if s != i]
        den = sum(sigma[i, s] * torch.exp(sim[i, s]) for s in others)
        pos = [p for p in others if y[p] == y[i]]
        expect.append(-sum(torch.log(sigma[i, p] * torch.exp(sim[i, p]) / den) for p in pos) / len(pos))
    assert torch.allclose(weighted_supcon(z, y, cid, 0.5), torch.stack(expect).mean(), atol=1e-5)


def test_prototype_augmentation_stays_within_one_client():
    g = torch.Generator().manual_seed(3)
    u = torch.randn(8, 3, generator=g)
    y = torch.tensor([0, 0, 1, 1, 0, 1, 2, 2])
    cid = torch.tensor([0, 0, 0, 0, 1, 1, 2, 2])
    partners = pa_partners(y, cid)
    a, up, un = augment_prototypes(u, torch.arange(8), partners, 4, torch.tensor([0.1, 0.3, 0.5]), g)
    # Clients 0 and 1 hold two classes; client 2 holds one, so its prototypes have no hard negative.
    assert sorted(set(a.tolist())) == [0, 1, 2, 3, 4, 5] and len(a) == 6 * 4
    for i, plus, minus in zip(a.tolist(), up, un):
        # u⁺ = u + λ(u − u₂) with u₂ of the same client and class: solve for u₂ along each λ.
        ok_pos = any(torch.allclose(plus, u[i] + lam * (u[i] - u[j]), atol=1e-5)
                     for lam in (0.1, 0.3, 0.5) for j in range(8) if cid[j] == cid[i] and y[j] == y[i])
        ok_neg = any(torch.allclose(minus, u[i] + lam * (u[j] - u[i]), atol=1e-5)
                     for lam in (0.1, 0.3, 0.5) for j in range(8) if cid[j] == cid[i] and y[j] != y[i])
        assert ok_pos and ok_neg, i


def test_calibration_step_is_the_plain_loss_with_one_pass_of_the_head():
    """calibrate() projects a batch and its augmentations in one pass; one full-batch step must
    equal SGD on CE + η(L_WCL + triplet) computed with a separate pass for each part."""
    import copy
    import types

    from fedrepro.methods.pfedcspc import CSPCNet, PFedCSPC, PFedCSPCParams, triplet
    from fedrepro.models import create_model

    g = torch.Generator().manual_seed(5)
    net = CSPCNet(create_model("moon_cnn", in_channels=1, num_classes=3, image_size=28, projection_dim=16), 16, 3)
    n = 12
    u, y, cid = torch.randn(n, 84, generator=g), torch.arange(n) % 3, torch.arange(n) // 4
    p = PFedCSPCParams(server_epochs=1, server_batch=n, server_lr=0.1)
    ref = copy.deepcopy(net)
    PFedCSPC.calibrate(types.SimpleNamespace(p=p, server_lr=lambda r, e: 0.1), net, u, y, cid, 0,
                       torch.Generator().manual_seed(9))
    # The same draws, replayed: the permutation, then the augmentation.
    gen = torch.Generator().manual_seed(9)
    idx = torch.randperm(n, generator=gen)
    a, up, un = augment_prototypes(u, idx, pa_partners(y, cid), p.n_aug, torch.tensor(p.pa_lambdas), gen)
    z = ref.proj(u[idx])
    loss = F.cross_entropy(ref.cls(z), y[idx]) + p.eta * (
        weighted_supcon(z, y[idx], cid[idx], p.tau_g)
        + triplet(ref.proj(u[a]), ref.proj(up), ref.proj(un), p.margin, p.triplet_distance))
    params = list(ref.proj.parameters()) + list(ref.cls.parameters())
    grads = torch.autograd.grad(loss, params)
    for q, gq, new in zip(params, grads, list(net.proj.parameters()) + list(net.cls.parameters())):
        assert torch.allclose(new, q - 0.1 * (gq + p.server_weight_decay * q), atol=1e-5)
    assert any(not torch.equal(q, new) for q, new in zip(params, net.proj.parameters()))


def test_global_prototypes_average_clients_then_classes():
    u = torch.tensor([[0.0], [2.0], [10.0], [4.0]])
    y = torch.tensor([0, 0, 0, 1])
    cid = torch.tensor([0, 0, 1, 1])
    out = global_prototypes(u, y, cid, 3)
    assert out[:, 0].tolist() == [pytest.approx((1.0 + 10.0) / 2), 4.0, 0.0]


@pytest.mark.parametrize("bad", [{"clusters": 0}, {"ratio": 1.5}, {"prototypes": "mean"}, {"kp_weight": 2},
                                 {"base": "scaffold"}, {"align_weights": [1, 1]}, {"tau_p": 0}])
def test_bad_hyperparameters_name_the_key(bad):
    with pytest.raises(ConfigError, match=f"method.args.{next(iter(bad))}"):
        METHODS.get("pfedcspc").parse_params(bad)


@pytest.mark.parametrize("args", [{"base": "fedprox"}, {"base": "moon"}, {"prototypes": "tpg", "pa": False},
                                  {"kp": False, "pmi": False, "align": False}])
def test_ablation_and_base_options_run(tiny, args):
    cfg = tiny(**{**CSPC, "method.args": {**CSPC["method.args"], **args}, "train.rounds": 2, "train.global_eval": True})
    s = fedrepro.run(cfg).summary
    assert 0 <= s["final_global_acc"] <= 1


def test_moon_cnn_lends_its_encoder_projection_and_classifier(tiny):
    cfg = tiny(**{**CSPC, "model.name": "moon_cnn", "model.args": {"projection_dim": 12},
                  "data.dataset_args.image_size": 16})
    method, clients, st = setup(cfg)
    assert method.net.enc_dim == 84 and method.net.feature_dim == 12
    assert method.net.proj[2].out_features == 12 and method.net.cls.in_features == 12
    upd = update(method, st, clients[0])
    assert upd.upload["protos"].shape[1] == 84  # prototypes live in encoder space (Eq. 8)


def test_pmi_analyses_on_a_finished_run(tiny):
    from fedrepro.papers.pfedcspc.pmi import pmi_finetune, pmi_start, pmi_start_table
    from fedrepro.claims import evaluate_claims

    table = fedrepro.run_grid(tiny(**{**CSPC, "train.rounds": 2}), seeds=[0], progress=False)
    start = pmi_start(table["path"][0])
    assert len(start) == 4 and start[["pmi_init_acc", "global_init_acc"]].stack().between(0, 1).all()
    curves = pmi_finetune(table["path"][0], epochs=2)
    assert set(curves["init"]) == {"pmi", "global"} and curves["epoch"].max() == 2
    summary = pmi_start_table(table)
    verdict = evaluate_claims(summary, ids=["pfedcspc.pmi_starts_better"])["verdict"].item()
    assert verdict in ("PASS", "FAIL")


def _table(rows):
    import pandas as pd

    return pd.DataFrame([{"setting": s, "seed": seed, "final_global_acc": g, "final_i_local_mean": g}
                         for s, vals in rows.items() for seed, g in enumerate(vals)])


def test_ablation_claims_pass_and_fail_on_the_numbers():
    from fedrepro.claims import evaluate_claims

    good = _table({"Base": [0.60, 0.61, 0.62], "+TPG+CA": [0.58] * 3, "+CPM+CA": [0.63] * 3,
                   "+PTA+CPM+CA": [0.64] * 3, "+PTA+CPM+CA+KP": [0.65] * 3, "+CPM+PA+CA": [0.64] * 3,
                   "+TPG+PA+CA": [0.59] * 3})
    ids = ["pfedcspc.calibration_raises_global", "pfedcspc.clusters_beat_one_mean", "pfedcspc.ablation_adds_up"]
    assert evaluate_claims(good, ids=ids)["verdict"].tolist() == ["PASS"] * 3
    bad = good.assign(final_global_acc=lambda d: d["final_global_acc"].where(d["setting"] != "+CPM+CA", 0.55))
    assert evaluate_claims(bad, ids=ids)["verdict"].tolist() == ["FAIL"] * 3
    chain = _table({"FedAvg": [0.5] * 3, "FedAvg+FT_CE": [0.6] * 3, "FedAvg+PMI+FT_CE": [0.62] * 3,
                    "FedAvg+PMI+FT_CE+Align": [0.61] * 3})
    res = evaluate_claims(chain, ids=["pfedcspc.personalisation_chain"])
    assert res["verdict"].item() == "FAIL" and "FAIL" in res["evidence"].item()


def test_setting_overrides_keep_the_setups_arguments():
    from fedrepro.papers import setup
    from fedrepro.papers.pfedcspc import ABLATION_GLOBAL, setting_overrides

    base = setup("pfedcspc", "laptop")
    assert base.method.name == "pfedcspc" and base.method.args == {"server_epochs": 20}
    tpg = base.replace(**setting_overrides(ABLATION_GLOBAL["+TPG+CA"]))
    assert tpg.method.args["server_epochs"] == 20 and tpg.method.args["prototypes"] == "tpg"
    fedavg = base.replace(**setting_overrides(ABLATION_GLOBAL["Base"]))
    assert fedavg.method.name == "fedavg" and fedavg.method.args == {}
    full = base.replace(**setting_overrides(ABLATION_GLOBAL["+PTA+CPM+PA+CA+KP"]))
    assert full.hash() == base.hash()  # the full method is the setup itself, one run folder


def test_the_claim_settings_are_exactly_what_the_table_iv_claims_read():
    from fedrepro.claims import evaluate_claims
    from fedrepro.papers.pfedcspc import ABLATION_GLOBAL
    from fedrepro.papers.pfedcspc.claims import CLAIM_SETTINGS

    assert set(CLAIM_SETTINGS) <= set(ABLATION_GLOBAL)
    ids = ["pfedcspc.calibration_raises_global", "pfedcspc.clusters_beat_one_mean", "pfedcspc.ablation_adds_up"]
    only = _table({k: [0.6 + 0.01 * i] * 3 for i, k in enumerate(ABLATION_GLOBAL) if k in CLAIM_SETTINGS})
    res = evaluate_claims(only, ids=ids)
    assert "NOT RUN" not in res["verdict"].tolist()
    assert "PA: " in res.set_index("claim_id").loc["pfedcspc.ablation_adds_up", "evidence"]  # optional part ran
    assert "TPG+PA+CA" in res.set_index("claim_id").loc["pfedcspc.clusters_beat_one_mean", "evidence"]


def test_ablation_table_runs_claim_rows_over_the_claim_seeds_in_the_rows_order(tiny):
    from fedrepro.papers.pfedcspc import ABLATION_PERSONAL, TABLES
    from fedrepro.papers.pfedcspc.tables import _ablation_rows

    base = tiny(**{**CSPC, "train.rounds": 1, "train.global_eval": True})
    settings = {k: ABLATION_PERSONAL[k] for k in ["FedAvg", "FedAvg+FT_CE", "FedCSPC"]}
    table = dataclasses.replace(TABLES["ablation_personal"], rows=_ablation_rows(settings, lambda p: ["FedCSPC"]),
                                order=tuple(settings))
    t = table.run("smoke", seeds=[0, 1], table_seeds=[0], progress=False, base=base)
    assert list(dict.fromkeys(t["setting"])) == list(settings)
    assert t.groupby("setting", sort=False)["seed"].apply(sorted).to_dict() == \
        {"FedAvg": [0], "FedAvg+FT_CE": [0], "FedCSPC": [0, 1]}
    assert {"final_i_local_mean", "final_hm"} <= set(t.columns)  # derived from the stored rows


@pytest.mark.parametrize("method", ["moon", "fedntd"])
def test_local_finetuning_leaves_a_global_baselines_training_as_it_is(tiny, method):
    """Notebook 04 reuses notebook 01's runs of Table II's baselines, which score their Local after
    fine-tuning: the per-round global accuracy must be the plain config's."""
    from fedrepro.papers.pfedcspc import GLOBAL_BASELINES, with_local_finetune

    assert method in GLOBAL_BASELINES
    base = tiny(**{"method.name": method, "train.global_eval": True, "train.rounds": 2})
    plain, tuned = fedrepro.run(base), fedrepro.run(with_local_finetune(base, "laptop"))
    assert tuned.config.train.eval_finetune_epochs == 1 and plain.path != tuned.path
    assert plain.rounds["global_acc"].tolist() == tuned.rounds["global_acc"].tolist()
    assert plain.rounds["train_loss"].tolist() == tuned.rounds["train_loss"].tolist()
    assert plain.rounds["acc_mean"].tolist() != tuned.rounds["acc_mean"].tolist()  # the Local score is not
    assert with_local_finetune(base, "paper").train.eval_finetune_epochs == base.train.local_epochs


def test_plug_and_play_and_rounds_claims_pass_and_fail_on_the_numbers():
    from fedrepro.claims import evaluate_claims

    t6 = pd.DataFrame({"method": ["fedprox", "fedprox+pfedcspc", "moon", "moon+pfedcspc"], "seed": 0,
                       "final_global_acc": [0.60, 0.65, 0.61, 0.64]})
    assert evaluate_claims(t6, ids=["pfedcspc.plug_and_play"])["verdict"].item() == "PASS"
    t6.loc[3, "final_global_acc"] = 0.60
    res = evaluate_claims(t6, ids=["pfedcspc.plug_and_play"])
    assert res["verdict"].item() == "FAIL" and "[pass]" in res["evidence"].item()
    ids = ["pfedcspc.fewer_rounds", "pfedcspc.fewer_rounds_beta_0.1"]
    t7 = pd.DataFrame({"method.name": ["pfedcspc", "fedavg"] * 2, "β": [0.5, 0.5, 0.1, 0.1], "seed": 0,
                       "rounds": [7, 16, float("nan"), 13]})
    res = evaluate_claims(t7, ids=ids)
    assert res["verdict"].tolist() == ["PASS", "FAIL"]  # not reached counts as never
    assert "not reached" in res["evidence"].iloc[1]
    assert evaluate_claims(t7.drop(columns="rounds"), ids=ids)["verdict"].tolist() == ["NOT RUN"] * 2


def test_alignment_ratio_and_its_claim():
    from fedrepro.analysis.alignment import alignment_ratio
    from fedrepro.claims import evaluate_claims

    rng = np.random.default_rng(0)
    y, cid = np.tile([0, 1], 20), np.repeat(np.arange(4), 10)
    centre = np.array([[1.0, 0, 0], [0, 1.0, 0]])
    aligned = centre[y] + 0.05 * rng.standard_normal((40, 3))
    drift = aligned + 0.8 * rng.standard_normal((4, 3))[cid]  # each client shifts all its features
    assert alignment_ratio(aligned, y, cid) < 0.2 < alignment_ratio(drift, y, cid)
    assert alignment_ratio(3 * aligned, y, cid) == pytest.approx(alignment_ratio(aligned, y, cid))
    with pytest.raises(ValueError, match="two clients"):
        alignment_ratio(aligned, y, np.zeros(40))  # one client: no cross-client pair
    t = pd.DataFrame({"model": ["FedAvg", "pFedCSPC"], "seed": 0, "alignment_ratio": [0.6, 0.4]})
    assert evaluate_claims(t, ids=["pfedcspc.features_align"])["verdict"].item() == "PASS"
    t["alignment_ratio"] = [0.4, 0.6]
    assert evaluate_claims(t, ids=["pfedcspc.features_align"])["verdict"].item() == "FAIL"
