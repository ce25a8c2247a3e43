"""FedASAM, FedDC and FedProc: each learns, and each one's characteristic mechanism does what its paper says."""
import copy
import math

import pytest
import torch
import torch.nn.functional as F

import fedrepro
from fedrepro.errors import ConfigError
from fedrepro.fl.seeding import torch_gen
from fedrepro.methods import METHODS
from fedrepro.methods.fedasam import sam_perturbation
from fedrepro.methods.feddc import C, DC, H, effective_steps
from fedrepro.methods.fedproc import (COUNT, G_MASK, G_PROTO, PROTO, aggregate_prototypes, class_prototypes,
                                      prototype_contrastive_loss)
from support import BN_CNN, PLAIN_STEP, setup, update

# One full-batch step of plain SGD: the local update is a single, hand-checkable gradient step.



def full_batch(client):
    return next(client.eval_train_batches(10_000))


def model_part(method, shared):
    return {k: shared[k] for k in method.shared_keys}


def fedavg_step(tiny, shared, client, lr):
    """FedAvg's one-step update from ``shared`` (the reference every mechanism is compared to)."""
    avg, _, _ = setup(tiny(**PLAIN_STEP, **{"train.lr": lr}))
    return avg.client_update(shared, {}, client, torch_gen(0, "client", 0, client.cid), 0).upload


@pytest.mark.parametrize("name", ["fedasam", "feddc", "fedproc"])
def test_learns_on_synthetic(tiny, name):
    res = fedrepro.run(tiny(**{"method.name": name, "train.rounds": 3, "train.local_epochs": 2,
                               "train.global_eval": True}))
    assert res.summary["final_acc_mean"] > 0.5, res.summary  # 4 balanced classes: chance is 0.25
    assert res.summary["final_global_acc"] > 0.4, res.summary


@pytest.mark.parametrize("name, args, key", [
    ("fedasam", {"rho": -0.1}, "rho"), ("fedasam", {"eta": -1}, "eta"), ("fedasam", {"adaptive": "yes"}, "adaptive"),
    ("fedasam", {"scale": "biases"}, "scale"),
    ("feddc", {"alpha": -0.01}, "alpha"), ("feddc", {"correction_update": "none"}, "correction_update"),
    ("feddc", {"step_count": "adam"}, "step_count"), ("feddc", {"weighting": "loss"}, "weighting"),
    ("fedproc", {"alpha_schedule": "cosine"}, "alpha_schedule"), ("fedproc", {"alpha": 1.5}, "alpha"),
    ("fedproc", {"similarity": "l2"}, "similarity"), ("fedproc", {"temperature": 0}, "temperature"),
])
def test_bad_hyperparameters_name_the_key(name, args, key):
    with pytest.raises(ConfigError, match=f"method.args.{key}"):
        METHODS.get(name).parse_params(args)


@pytest.mark.parametrize("name", ["fedasam", "feddc", "fedproc"])
def test_runs_with_batchnorm_buffers(tiny, name):
    """Buffers (BN running statistics, the integer step counter) are averaged like FedAvg's."""
    method, clients, st = setup(tiny(**BN_CNN, **{"method.name": name}))
    ups = [update(method, st, c) for c in clients]
    new, _ = method.aggregate(st.shared, ups, st.server_state, 0)
    buffers = [k for k, _ in method.model.named_buffers()]
    assert buffers and all(k in new and new[k].dtype == st.shared[k].dtype for k in buffers)
    assert method.evaluate(new, ups[0].state, clients[0], None).total == clients[0].num_test


# FedASAM ------------------------------------------------------------------------------------------

def _params_with_grads():
    g = torch.Generator().manual_seed(0)
    w = torch.nn.Parameter(torch.randn(3, 2, generator=g))
    b = torch.nn.Parameter(torch.randn(3, generator=g))
    w.grad = torch.randn(3, 2, generator=g)
    b.grad = torch.randn(3, generator=g)
    return w, b


@pytest.mark.parametrize("adaptive, scale", [(True, "weights"), (True, "all"), (False, "weights")])
def test_asam_perturbation_is_rho_T2g_over_norm_Tg(adaptive, scale):
    rho, eta = 0.7, 0.2
    w, b = _params_with_grads()
    eps = dict((id(p), e) for p, e in sam_perturbation([("lin.weight", w), ("lin.bias", b)], rho, eta, adaptive, scale))
    if adaptive:
        tw = w.detach().abs() + eta
        tb = b.detach().abs() + eta if scale == "all" else torch.ones(3)
    else:
        tw, tb = torch.ones(3, 2), torch.ones(3)
    norm = math.sqrt(float((tw * w.grad).pow(2).sum() + (tb * b.grad).pow(2).sum()))
    assert torch.allclose(eps[id(w)], rho * tw ** 2 * w.grad / norm, atol=1e-6)
    assert torch.allclose(eps[id(b)], rho * tb ** 2 * b.grad / norm, atol=1e-6)
    # ε lies on the ρ-sphere of the T-normalised space: ‖T⁻¹ε‖ = ρ
    radius = math.sqrt(float((eps[id(w)] / tw).pow(2).sum() + (eps[id(b)] / tb).pow(2).sum()))
    assert radius == pytest.approx(rho, rel=1e-5)
    # a parameter without a gradient is neither perturbed nor counted
    frozen = torch.nn.Parameter(torch.ones(4))
    assert len(sam_perturbation([("x.weight", frozen), ("lin.bias", b)], rho, eta, adaptive, scale)) == 1


def test_default_rho_follows_the_optimiser():
    cls = METHODS.get("fedasam")
    assert cls.parse_params({}).radius == 0.7 and cls.parse_params({"adaptive": False}).radius == 0.1
    assert cls.parse_params({"rho": 0.05}).radius == 0.05


@pytest.mark.parametrize("adaptive", [True, False])
def test_fedasam_step_descends_with_the_gradient_at_the_perturbed_weights(tiny, adaptive):
    """One full-batch plain-SGD step: w' = w − lr·∇L(w + ε(w)), not FedAvg's w − lr·∇L(w)."""
    lr, rho, eta = 0.1, 0.5, 0.2
    method, clients, st = setup(tiny(**PLAIN_STEP, **{"train.lr": lr, "method.name": "fedasam",
                                                      "method.args": {"rho": rho, "eta": eta, "adaptive": adaptive}}))
    c = clients[0]
    got = update(method, st, c).upload
    # by hand on a copy of the global model
    model = copy.deepcopy(method.load(st.shared, {}))
    x, y = full_batch(c)
    params = dict(model.named_parameters())
    grads = torch.autograd.grad(F.cross_entropy(model(x), y), list(params.values()))
    scaled = {}
    for (n, p), g in zip(params.items(), grads):
        t = (p.detach().abs() + eta) if adaptive and n.endswith("weight") else torch.ones_like(p)
        scaled[n] = (t, g)
    norm = torch.sqrt(sum((t * g).pow(2).sum() for t, g in scaled.values()))
    with torch.no_grad():
        for n, p in params.items():
            t, g = scaled[n]
            p.add_(rho * t * t * g / norm)
    grads_eps = torch.autograd.grad(F.cross_entropy(model(x), y), list(params.values()))
    plain = fedavg_step(tiny, st.shared, c, lr)
    for (n, _), g in zip(params.items(), grads_eps):
        expected = st.shared[n] - lr * g
        assert torch.allclose(got[n], expected, atol=1e-5), n
    assert any(not torch.allclose(got[n], plain[n], atol=1e-4) for n in params)
    # ρ = 0 is FedAvg's step
    zero, clients0, st0 = setup(tiny(**PLAIN_STEP, **{"train.lr": lr, "method.name": "fedasam", "method.args.rho": 0.0}))
    flat = update(zero, st0, clients0[0]).upload
    assert all(torch.allclose(flat[n], plain[n], atol=1e-6) for n in params)


# FedDC --------------------------------------------------------------------------------------------

def _random_like(tensors, scale, seed):
    g = torch.Generator().manual_seed(seed)
    return {k: scale * torch.randn(v.shape, generator=g) for k, v in tensors.items()}


def test_feddc_local_step_has_drift_penalty_and_gradient_correction(tiny):
    """One plain-SGD step from θ = w: FedDC − FedAvg = −lr·(α·h_i + c − c_i); then h, c_i, upload by hand."""
    lr, alpha = 0.1, 0.3
    method, clients, st = setup(tiny(**PLAIN_STEP, **{"train.lr": lr, "method.name": "feddc",
                                                      "method.args.alpha": alpha}))
    cl = clients[0]
    names = method.param_names
    w = {n: st.shared[n] for n in names}
    h = _random_like(w, 0.2, 1)
    c_i = _random_like(w, 0.3, 2)
    shared = dict(st.shared)
    shared.update({C + n: v for n, v in _random_like(w, 0.3, 3).items()})
    state = {**{H + n: h[n] for n in names}, **{C + n: c_i[n] for n in names}}
    upd = update(method, st, cl, state=state, shared=shared)
    plain = fedavg_step(tiny, model_part(method, st.shared), cl, lr)
    for n in names:
        c = shared[C + n]
        theta = plain[n] - lr * (alpha * h[n] + c - c_i[n])
        h_new = h[n] + theta - w[n]
        assert torch.allclose(upd.state[H + n], h_new, atol=1e-6), n
        assert torch.allclose(upd.upload[n], theta + h_new, atol=1e-6), n  # the drift-corrected model
        # SCAFFOLD option II with K = 1 step of size lr: c_i' = c_i − c + (w − θ)/lr
        c_new = c_i[n] - c + (w[n] - theta) / lr
        assert torch.allclose(upd.state[C + n], c_new, atol=1e-4), n
        assert torch.allclose(upd.upload[DC + n], c_new - c_i[n], atol=1e-4), n
    # h_i and c_i stay on the client: the upload carries θ + h and Δc only
    assert not any(k.startswith((H, C)) for k in upd.upload)
    # α = 0 and c = c_i = 0 is FedAvg's step; θ + h = 2θ − w then
    free, clients0, st0 = setup(tiny(**PLAIN_STEP, **{"train.lr": lr, "method.name": "feddc", "method.args.alpha": 0.0}))
    first = update(free, st0, clients0[0])
    for n in names:
        assert torch.allclose(first.upload[n], 2 * plain[n] - w[n], atol=1e-6)


def test_feddc_raw_correction_keeps_the_raw_update(tiny):
    lr = 0.1
    method, clients, st = setup(tiny(**PLAIN_STEP, **{"train.lr": lr, "method.name": "feddc",
                                                      "method.args.correction_update": "raw"}))
    shared = dict(st.shared)
    shared.update({C + n: v for n, v in _random_like({n: st.shared[n] for n in method.param_names}, 0.3, 3).items()})
    upd = update(method, st, clients[1], shared=shared)
    for n in method.param_names:
        theta = upd.state[H + n] + st.shared[n]  # h started at 0
        assert torch.allclose(upd.state[C + n], (st.shared[n] - theta) / lr, atol=1e-4)


@pytest.mark.parametrize("weighting", ["uniform", "samples"])
def test_feddc_server_averages_drift_corrected_models_and_updates_c(tiny, weighting):
    method, clients, st = setup(tiny(**{"method.name": "feddc", "method.args.weighting": weighting,
                                        "data.holdout_clients": 1}))
    assert method.num_trainable == 3  # held-out clients never train: not part of c's average
    ups = [update(method, st, c) for c in clients[:2]]
    new, _ = method.aggregate(st.shared, ups, st.server_state, 0)
    wts = [1.0, 1.0] if weighting == "uniform" else [float(u.num_samples) for u in ups]
    for k in method.shared_keys:
        expected = (wts[0] * ups[0].upload[k] + wts[1] * ups[1].upload[k]) / sum(wts)
        assert torch.allclose(new[k], expected, atol=1e-6), k
    for n in method.param_names:
        expected = st.shared[C + n] + (ups[0].upload[DC + n] + ups[1].upload[DC + n]) / 3
        assert torch.allclose(new[C + n], expected, atol=1e-7)
        assert new[C + n].abs().sum() > 0
    # the global model is the average itself
    g = method.global_model(new, st.server_state)
    assert all(torch.equal(g.state_dict()[k], new[k]) for k in method.shared_keys)


def test_effective_steps_match_sgd_with_momentum():
    assert effective_steps(7, 0.0) == 7
    assert effective_steps(1, 0.9) == pytest.approx(1.0)
    assert effective_steps(2, 0.9) == pytest.approx(1.0 + 1.9)
    # K steps of torch's SGD(momentum) on a constant gradient move lr·S·g
    for k, beta in ((5, 0.9), (40, 0.5)):
        p = torch.nn.Parameter(torch.zeros(3))
        g = torch.tensor([1.0, -2.0, 0.5])
        opt = torch.optim.SGD([p], lr=0.01, momentum=beta)
        for _ in range(k):
            opt.zero_grad()
            (p * g).sum().backward()
            opt.step()
        assert torch.allclose(-p.detach(), 0.01 * effective_steps(k, beta) * g, atol=1e-6)


# FedProc ------------------------------------------------------------------------------------------

def test_prototypes_are_class_means_and_the_server_weights_them_by_count(tiny):
    method, clients, st = setup(tiny(**{"method.name": "fedproc"}))
    cl = clients[0]
    model = method.load(st.shared, {})
    protos, counts = class_prototypes(model, cl, 4)
    x, y = full_batch(cl)
    with torch.no_grad():
        z = model.features(x)
    for k in range(4):
        assert counts[k] == int((y == k).sum())
        expected = z[y == k].mean(0) if counts[k] > 0 else torch.zeros(z.shape[1])
        assert torch.allclose(protos[k], expected, atol=1e-5)
    # server: count-weighted mean; a class nobody sent keeps its previous prototype
    p1, p2 = torch.tensor([[1.0, 0.0], [0.0, 2.0], [0.0, 0.0]]), torch.tensor([[3.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
    n1, n2 = torch.tensor([1.0, 4.0, 0.0]), torch.tensor([3.0, 0.0, 0.0])
    prev, prev_mask = torch.full((3, 2), 7.0), torch.tensor([False, False, True])
    g, mask = aggregate_prototypes([p1, p2], [n1, n2], prev, prev_mask)
    assert torch.allclose(g, torch.tensor([[2.5, 0.0], [0.0, 2.0], [7.0, 7.0]]))
    assert mask.tolist() == [True, True, True]
    _, mask = aggregate_prototypes([p1], [n1], prev, torch.zeros(3, dtype=torch.bool))
    assert mask.tolist() == [True, True, False]


@pytest.mark.parametrize("similarity", ["cosine", "dot"])
def test_prototypical_contrastive_loss_by_hand(similarity):
    tau = 0.5
    z = torch.tensor([[1.0, 0.0], [0.5, 0.5], [0.0, 2.0], [1.0, 1.0]], requires_grad=True)
    y = torch.tensor([0, 1, 2, 1])
    protos = torch.tensor([[2.0, 0.0], [0.0, 1.0], [9.0, 9.0]])
    mask = torch.tensor([True, True, False])  # class 2 has no prototype: sample 2 drops out
    loss = prototype_contrastive_loss(z, y, protos, mask, similarity, tau)
    terms = []
    for i in (0, 1, 3):
        zi = z[i].detach()
        if similarity == "cosine":
            s = [float(zi @ protos[k] / (zi.norm() * protos[k].norm())) for k in (0, 1)]
        else:
            s = [float(zi @ protos[k]) for k in (0, 1)]
        terms.append(-(s[int(y[i])] / tau - math.log(sum(math.exp(v / tau) for v in s))))
    assert float(loss.detach()) == pytest.approx(sum(terms) / 3, rel=1e-5)
    loss.backward()
    assert z.grad[2].abs().sum() == 0 and z.grad[0].abs().sum() > 0  # the pull reaches the features
    none = prototype_contrastive_loss(z, y, protos, torch.zeros(3, dtype=torch.bool), similarity, tau)
    assert float(none.detach()) == 0.0


def test_fedproc_hybrid_loss_schedule_and_what_leaves_the_client(tiny):
    p = METHODS.get("fedproc").parse_params({})
    assert [p.alpha_at(r, 4) for r in range(4)] == [0.0, 0.25, 0.5, 0.75]
    assert METHODS.get("fedproc").parse_params({"alpha_schedule": "constant", "alpha": 0.3}).alpha_at(9, 4) == 0.3

    method, clients, st = setup(tiny(**PLAIN_STEP, **{"method.name": "fedproc", "train.rounds": 4}))
    cl = clients[0]
    u0 = update(method, st, cl)
    assert set(u0.upload) == set(method.shared_keys) | {PROTO, COUNT} and u0.state == {}
    assert "loss_pc" not in u0.metrics  # round 0: no global prototypes, CE only
    plain = fedavg_step(tiny, model_part(method, st.shared), cl, 0.05)
    assert all(torch.allclose(u0.upload[k], plain[k], atol=1e-6) for k in method.shared_keys)

    shared, _ = method.aggregate(st.shared, [update(method, st, c) for c in clients], st.server_state, 0)
    assert bool(shared[G_MASK].all())
    model = method.load(shared, {})
    x, y = full_batch(cl)
    total, ce, pc = method.losses(model, x, y, shared[G_PROTO], shared[G_MASK], 0.5)
    z = model.features(x)
    assert torch.isclose(pc, prototype_contrastive_loss(z, y, shared[G_PROTO], shared[G_MASK], "cosine", 0.5))
    assert torch.isclose(total, 0.5 * F.cross_entropy(model.head(z), y) + 0.5 * pc)
    # in round 2 (α = 1/2) the prototypes change local training
    u2 = update(method, st, cl, rnd=2, shared=shared)
    assert u2.metrics["alpha"] == 0.5 and u2.metrics["loss_pc"] > 0
    plain2 = fedavg_step(tiny, model_part(method, shared), cl, 0.05)
    assert any(not torch.allclose(u2.upload[k], plain2[k], atol=1e-5) for k in method.shared_keys)
