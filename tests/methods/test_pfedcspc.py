"""pFedCSPC (TNNLS), the method: what leaves a client, CPM's prototype counts, PMI's weights, the
server step's reach, the losses' definitions, its options, and that it learns."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from support import BN_CNN, setup, update

import fedrepro
from fedrepro.methods import METHODS
from fedrepro.methods.pfedcspc import (
    MODEL,
    PMI,
    angle_loss,
    augment_prototypes,
    cluster_prototypes,
    edge_loss,
    global_prototypes,
    node_loss,
    pa_partners,
    weighted_supcon,
)

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
    off = method.__class__(method.ctx, METHODS.get("pfedcspc").parse_params({**CSPC["method.args"],
                                                                             "calibrate": False}))
    plain, _ = off.aggregate(st.shared, ups, st.server_state, 0)
    cal, _ = method.aggregate(st.shared, ups, st.server_state, 0)
    for k in method.net.state_dict():
        a, b = plain["g." + k], cal["g." + k]
        if k.startswith("encoder."):
            assert torch.equal(a, b), k  # E_g is FedAvg's, untouched
    assert not torch.equal(plain["g.cls.weight"], cal["g.cls.weight"])
    assert not torch.equal(plain["g.proj.0.weight"], cal["g.proj.0.weight"])


def test_the_same_rounds_model_is_scored_before_the_calibration(tiny):
    """``global_acc_before_calibration``: the aggregate as it was before CSPC, beside ``global_acc``
    (kept only when ``train.global_eval`` scores it)."""
    method, clients, st = setup(tiny(**CSPC, **{"train.global_eval": True}))
    ups = [update(method, st, c) for c in clients]
    unscored, _, _ = setup(tiny(**CSPC))
    assert not list(unscored.global_variants(*unscored.aggregate(st.shared, ups, st.server_state, 0)))
    off = method.__class__(method.ctx, METHODS.get("pfedcspc").parse_params({**CSPC["method.args"],
                                                                             "calibrate": False}))
    plain, plain_server = off.aggregate(st.shared, ups, st.server_state, 0)
    assert not list(off.global_variants(plain, plain_server))  # nothing calibrated, nothing to compare
    cal, server = method.aggregate(st.shared, ups, st.server_state, 0)
    (name, before), = method.global_variants(cal, server)
    assert name == "before_calibration"
    for k, v in getattr(before, "net", before).state_dict().items():  # under KP's wrapper
        assert torch.equal(v, plain["g." + k]), k
    res = fedrepro.run(tiny(**CSPC, **{"train.rounds": 2, "train.global_eval": True}))
    assert {"global_acc", "global_acc_before_calibration"} <= set(res.rounds.columns)
    assert "final_global_acc_before_calibration" in res.summary


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


def test_edge_loss_readings_of_eq_7():
    """Eq. 7 literally (scale="none"): pairs with different labels, |gap| of the raw distances; options:
    all pairs, squared gap. The default reads the same pairs and penalty on mean-scaled distances."""
    protos = torch.tensor([[0.0, 0.0], [3.0, 4.0]])  # prototype distance 5
    y = torch.tensor([0, 1, 0])
    f = torch.tensor([[0.0, 0.0], [6.0, 8.0], [0.0, 2.0]])
    # different-label pairs: (0,1) distance 10 -> gap 5; (1,2) distance sqrt(36+36) -> gap sqrt(72)-5
    gaps = torch.tensor([5.0, 72 ** 0.5 - 5])
    raw = dict(scale="none")
    assert float(edge_loss(f, y, protos, **raw)) == pytest.approx(float(gaps.abs().mean()), rel=1e-6)
    assert float(edge_loss(f, y, protos, penalty="squared", **raw)) == \
        pytest.approx(float((gaps ** 2).mean()), rel=1e-6)
    # all pairs add (0,2): distance 2 against the shared prototype's 0
    every = torch.cat([gaps, torch.tensor([2.0])])
    assert float(edge_loss(f, y, protos, pairs="all", **raw)) == pytest.approx(float(every.mean()), rel=1e-6)
    assert float(edge_loss(f[[0, 2]], y[[0, 2]], protos)) == 0.0  # one label: no pair
    # The default: each side's two distances over their mean (features 10 and sqrt(72); prototypes 5, 5).
    df = torch.tensor([10.0, 72 ** 0.5])
    assert float(edge_loss(f, y, protos)) == pytest.approx(float((df / df.mean() - 1).abs().mean()), rel=1e-6)


def test_edge_loss_default_is_scale_free_and_the_literal_reading_is_not():
    """pFedCSPC Eq. 7 read on mean-scaled distances (the default): scaling the features, the
    prototypes or both by a constant leaves the loss as it is; on raw distances (scale="none") it
    does not."""
    g = torch.Generator().manual_seed(4)
    protos = torch.randn(4, 6, generator=g, dtype=torch.float64)
    y = torch.tensor([0, 1, 2, 3, 1, 2, 0, 3])
    f = protos[y] + 0.7 * torch.randn(8, 6, generator=g, dtype=torch.float64)
    base = float(edge_loss(f, y, protos))
    assert base > 0.01
    for cf, cp in ((0.1, 0.1), (7.0, 7.0), (0.25, 1.0), (1.0, 3.0)):
        assert float(edge_loss(cf * f, y, cp * protos)) == pytest.approx(base, rel=1e-9)
    raw = float(edge_loss(f, y, protos, scale="none"))
    assert float(edge_loss(0.1 * f, y, 0.1 * protos, scale="none")) == pytest.approx(0.1 * raw, rel=1e-9)
    assert float(edge_loss(0.5 * f, y, protos, scale="none")) != pytest.approx(raw, rel=1e-3)


def test_edge_loss_does_not_reward_shrinking_the_features():
    """The mechanism behind the feature collapse of the literal reading (fail-audit E5): last round's
    prototypes are class means, so two samples of different classes sit farther apart than their
    prototypes (by their within-class spread), and raw distances make the loss fall as every feature
    shrinks: its derivative along the features' common scale, ⟨∇_f L, f⟩, is positive, so a gradient
    step moves the features towards the origin. Mean-scaled, the loss is flat along that direction."""
    g = torch.Generator().manual_seed(5)
    means = 3 * torch.randn(4, 8, generator=g, dtype=torch.float64)
    y = torch.arange(4).repeat(8)
    feats = means[y] + torch.randn(32, 8, generator=g, dtype=torch.float64)
    protos = torch.stack([feats[y == c].mean(0) for c in range(4)])  # the class means: the prototypes

    def along_scale(**kw) -> float:
        f = feats.clone().requires_grad_(True)
        (grad,) = torch.autograd.grad(edge_loss(f, y, protos, **kw), f)
        return float((grad * feats).sum())  # d/ds L(s · f) at s = 1

    assert along_scale(scale="none") > 0.05  # the literal reading pays the features to shrink
    assert abs(along_scale()) < 1e-10
    # Over the features' common scale s, the raw loss is least below s = 1 (the features would shrink,
    # and next round's prototypes, their class means, with them); the default is the same at every s.
    scales = torch.linspace(0.5, 1.5, 21, dtype=torch.float64)
    raw = torch.stack([edge_loss(s * feats, y, protos, scale="none") for s in scales])
    ours = torch.stack([edge_loss(s * feats, y, protos) for s in scales])
    assert float(scales[raw.argmin()]) < 0.99
    assert float(ours.max() - ours.min()) < 1e-9


def test_edge_loss_code_reading_matches_shape_not_size():
    """The FedCSPC code's reading: all pairs, each side over its mean non-zero distance, smooth-L1."""
    protos = torch.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 8.0]])
    y = torch.tensor([0, 1, 2])
    code = dict(pairs="all", penalty="smooth_l1", scale="mean")
    # Features that are the prototypes scaled by 7 have the same shape: no loss, though Eq. 7 sees one.
    assert float(edge_loss(7 * protos[y], y, protos, **code)) == pytest.approx(0.0, abs=1e-7)
    assert float(edge_loss(7 * protos[y], y, protos, scale="none")) > 1
    f = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 3.0]])
    df = torch.tensor([1.0, 3.0, 10 ** 0.5])
    dt = torch.tensor([5.0, 8.0, 5.0])
    expected = torch.nn.functional.smooth_l1_loss(df / df.mean(), dt / dt.mean())
    assert float(edge_loss(f, y, protos, **code)) == pytest.approx(float(expected), rel=1e-6)
    # A same-label pair at zero prototype distance is kept but does not enter the mean.
    y2 = torch.tensor([0, 0, 1])
    assert torch.isfinite(edge_loss(f, y2, protos, **code))


def test_edge_loss_gradient_reaches_features_only():
    protos = torch.randn(3, 4, generator=torch.Generator().manual_seed(0))
    f = torch.randn(6, 4, generator=torch.Generator().manual_seed(1), requires_grad=True)
    y = torch.tensor([0, 1, 2, 0, 1, 2])
    p = protos.clone().requires_grad_(True)
    edge_loss(f, y, p, pairs="all", penalty="smooth_l1", scale="mean").backward()
    assert f.grad is not None and float(f.grad.abs().sum()) > 0 and p.grad is None


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


@pytest.mark.parametrize("args", [{"base": "fedprox"}, {"base": "moon"}, {"base": "fedasam"},
                                  {"prototypes": "tpg", "pa": False},
                                  {"kp": False, "pmi": False, "align": False}])
def test_ablation_and_base_options_run(tiny, args):
    cfg = tiny(**{**CSPC, "method.args": {**CSPC["method.args"], **args}, "train.rounds": 2, "train.global_eval": True})
    s = fedrepro.run(cfg).summary
    assert 0 <= s["final_global_acc"] <= 1


def test_fedasam_base_is_an_ascent_then_a_descent_on_the_whole_objective(tiny):
    """Table VI's FedASAM+pFedCSPC: at radius 0 the ASAM step is the plain step (the same trained
    weights bit for bit; BatchNorm's running statistics see the batch twice); at a positive radius
    the update differs."""
    def upload(**extra):
        cfg = tiny(**{**CSPC, "method.args": {**CSPC["method.args"], **extra}})
        method, clients, st = setup(cfg)
        return update(method, st, clients[0]).upload

    plain, flat, sharp = upload(), upload(base="fedasam", asam_rho=0.0), upload(base="fedasam", asam_rho=0.5)
    weights = [k for k in plain if k.startswith("m.") and plain[k].is_floating_point() and "running_" not in k]
    assert weights and all(torch.equal(plain[k], flat[k]) for k in weights)
    assert any(not torch.equal(plain[k], sharp[k]) for k in weights)


def test_moon_cnn_lends_its_encoder_projection_and_classifier(tiny):
    cfg = tiny(**{**CSPC, "model.name": "moon_cnn", "model.args": {"projection_dim": 12},
                  "data.dataset_args.image_size": 16})
    method, clients, st = setup(cfg)
    assert method.net.enc_dim == 84 and method.net.feature_dim == 12
    assert method.net.proj[2].out_features == 12 and method.net.cls.in_features == 12
    upd = update(method, st, clients[0])
    assert upd.upload["protos"].shape[1] == 84  # prototypes live in encoder space (Eq. 8)


def test_moon_base_pulls_towards_the_model_the_client_starts_from(tiny, monkeypatch):
    """Table VI's MOON+pFedCSPC: MOON's positive model is the model client k starts the round from,
    its PMI model E_k^p ⊙ Ĥ_g ⊙ F̂_g (as the FedProx base's proximal anchor is), not the global
    model E_g ⊙ Ĥ_g ⊙ F̂_g; its negative is the client's own model of last round."""
    import fedrepro.methods.pfedcspc as mod

    cfg = tiny(**{**CSPC, "method.args": {**CSPC["method.args"], "base": "moon"}})
    method, clients, st = setup(cfg)
    ups = [update(method, st, c) for c in clients]
    shared, _ = method.aggregate(st.shared, ups, st.server_state, 0)
    c = clients[0]
    start, glob = method.initial_model(shared, c.cid), method._sub(shared, "g.")
    assert any(not torch.equal(start[k], glob[k]) for k in method.enc_keys)  # PMI moved the encoder
    seen = []
    real = mod.model_contrastive_loss
    monkeypatch.setattr(mod, "model_contrastive_loss",
                        lambda z, zg, zp, tau: seen.append((zg.detach(), zp.detach())) or real(z, zg, zp, tau))
    update(method, st, c, rnd=1, shared=shared, state=ups[0].state)
    zg, zp = seen[0]

    def features(sd):  # every training image through a frozen copy of ``sd``, as MOON's anchors are
        net = method._build(0)
        net.load_state_dict(sd)
        net.eval()
        with torch.no_grad():
            return net.features(next(c.eval_train_batches(10_000))[0])

    def nearest(z, bank):  # each row's distance to the nearest row of ``bank``
        return torch.cdist(z, bank, compute_mode="donot_use_mm_for_euclid_dist").min(1).values.max()

    assert float(nearest(zg, features(start))) < 1e-5 < float(nearest(zg, features(glob)))
    assert float(nearest(zp, features(method._sub(ups[0].state, MODEL)))) < 1e-5
