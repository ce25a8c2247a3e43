"""MOON, FedDecorr and FedNTD: each learns, and each one's characteristic local term does what its paper says."""
import math

import pytest
import torch
import torch.nn.functional as F

import fedrepro
from fedrepro.errors import ConfigError
from fedrepro.methods import METHODS
from fedrepro.methods.feddecorr import decorrelation_loss
from fedrepro.methods.fedntd import not_true_logits, ntd_loss
from fedrepro.methods.moon import PREV, model_contrastive_loss
from support import BN_CNN, PLAIN_STEP, first_batch, interrupt_at, setup, update





def perturbed(sd, scale=0.3, seed=1):
    g = torch.Generator().manual_seed(seed)
    return {k: v + scale * torch.randn(v.shape, generator=g) if v.is_floating_point() else v.clone()
            for k, v in sd.items()}


# All three --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["moon", "feddecorr", "fedntd"])
@pytest.mark.parametrize("global_eval", [False, True])
def test_learns_on_synthetic(tiny, name, global_eval):
    res = fedrepro.run(tiny(**{"method.name": name, "train.rounds": 3, "train.local_epochs": 2,
                               "train.global_eval": global_eval}))
    assert res.summary["final_acc_mean"] > 0.5, res.summary  # 4 balanced classes: chance is 0.25
    if global_eval:
        assert res.summary["final_global_acc"] > 0.4, res.summary


@pytest.mark.parametrize("name, args, key", [
    ("moon", {"mu": -1}, "mu"), ("moon", {"temperature": 0}, "temperature"),
    ("moon", {"anchor_mode": "frozen"}, "anchor_mode"),
    ("feddecorr", {"beta": -0.1}, "beta"), ("feddecorr", {"loss_form": "barlow"}, "loss_form"),
    ("fedntd", {"tau": 0}, "tau"), ("fedntd", {"beta": "1"}, "beta"), ("fedntd", {"t2_scaling": 1}, "t2_scaling"),
    ("fedntd", {"teacher_mode": "frozen"}, "teacher_mode"),
])
def test_bad_hyperparameters_name_the_key(name, args, key):
    with pytest.raises(ConfigError, match=f"method.args.{key}="):
        METHODS.get(name).parse_params(args)


@pytest.mark.parametrize("name", ["moon", "feddecorr", "fedntd"])
def test_only_the_model_is_uploaded_and_the_global_model_is_the_average(tiny, name):
    method, clients, st = setup(tiny(**{"method.name": name}))
    ups = [update(method, st, c) for c in clients[:2]]
    assert all(set(u.upload) == set(st.shared) for u in ups)
    new, _ = method.aggregate(st.shared, ups, st.server_state, 0)
    w = [u.num_samples for u in ups]
    for k in new:
        manual = (w[0] * ups[0].upload[k] + w[1] * ups[1].upload[k]) / sum(w)
        assert torch.allclose(new[k], manual, atol=1e-6), k
    g = method.global_model(new, st.server_state)
    assert g is not None and all(torch.equal(g.state_dict()[k], new[k]) for k in new)


# MOON -------------------------------------------------------------------------------------------

def test_moon_contrastive_loss_by_hand():
    z = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    zg = torch.tensor([[2.0, 0.0], [1.0, 0.0]])
    zp = torch.tensor([[0.0, 3.0], [-1.0, -1.0]])
    tau = 0.5
    # row 0: sim+ = 1, sim- = 0; row 1: sim+ = 1/√2, sim- = -1
    rows = [-math.log(math.exp(1 / tau) / (math.exp(1 / tau) + math.exp(0.0))),
            -math.log(math.exp(2 ** -0.5 / tau) / (math.exp(2 ** -0.5 / tau) + math.exp(-1 / tau)))]
    assert model_contrastive_loss(z, zg, zp, tau).item() == pytest.approx(sum(rows) / 2, rel=1e-6)
    # previous model = global model: log 2 whatever z is, and no gradient
    zz = torch.randn(5, 3, requires_grad=True)
    zg = torch.randn(5, 3)
    loss = model_contrastive_loss(zz, zg, zg, tau)
    loss.backward()
    assert loss.item() == pytest.approx(math.log(2))
    assert torch.allclose(zz.grad, torch.zeros_like(zz), atol=1e-7)


def test_moon_step_adds_the_contrastive_gradient(tiny):
    """One full-batch plain-SGD step: MOON(μ) − MOON(0) = −lr·μ·∇ℓ_con, ℓ_con written out by hand."""
    mu, tau, lr = 2.0, 0.5, 0.1
    ups, methods = {}, {}
    for mu_ in (mu, 0.0):
        method, clients, st = setup(tiny(**PLAIN_STEP, **{"train.lr": lr, "method.name": "moon",
                                                          "method.args": {"mu": mu_, "temperature": tau}}))
        prev_sd = perturbed(st.shared)
        state = {PREV + k: v for k, v in prev_sd.items()}
        ups[mu_] = update(method, st, clients[0], state=state).upload
        methods[mu_] = method
    # by hand, at the starting (global) weights
    model = methods[mu].load(st.shared, {})
    prev = methods[mu].ctx.create_model(seed=0)
    prev.load_state_dict(prev_sd)
    x, _ = first_batch(clients[0])
    model.zero_grad(set_to_none=True)
    z = model.features(x)
    with torch.no_grad():
        zg, zp = model.features(x).clone(), prev.features(x)
    cos = lambda a, b: (a * b).sum(1) / (a.norm(dim=1) * b.norm(dim=1))  # noqa: E731
    pos, neg = cos(z, zg) / tau, cos(z, zp) / tau
    (-(pos - torch.logsumexp(torch.stack([pos, neg], 1), dim=1))).mean().backward()
    grads = {n: p.grad for n, p in model.named_parameters()}
    assert any(g is not None and g.abs().max() > 1e-4 for g in grads.values())
    for k in ups[mu]:
        g = grads.get(k)
        expected = torch.zeros_like(ups[mu][k]) if g is None else -lr * mu * g
        assert torch.allclose(ups[mu][k] - ups[0.0][k], expected, atol=1e-5), k


def test_moon_previous_model_is_the_clients_last_local_model(tiny):
    method, clients, st = setup(tiny(**{"method.name": "moon", "train.local_epochs": 2}))
    assert st.client_states[0] == {}
    u0 = update(method, st, clients[0])
    # first round: w_prev is the global model, so ℓ_con is log 2 throughout (zero gradient)
    assert u0.metrics["loss_con"] == pytest.approx(math.log(2), abs=1e-5)
    free, _, _ = setup(tiny(**{"method.name": "moon", "method.args.mu": 0.0, "train.local_epochs": 2}))
    plain = update(free, st, clients[0]).upload
    assert all(torch.allclose(u0.upload[k], plain[k], atol=1e-5) for k in plain)
    # the trained model becomes the next round's negative, and only the client keeps it
    assert set(u0.state) == {PREV + k for k in u0.upload}
    assert all(torch.equal(u0.state[PREV + k], v) for k, v in u0.upload.items())
    shared, _ = method.aggregate(st.shared, [u0, update(method, st, clients[1])], st.server_state, 0)
    glob, prev = method.anchors(shared, u0.state)
    assert not glob.training and not prev.training  # default anchor_mode="eval", as the official code
    assert all(torch.equal(prev.state_dict()[k], v) for k, v in u0.upload.items())
    # from round 2 on the negative differs from the global model and changes local training
    u1 = update(method, st, clients[0], rnd=1, state=u0.state, shared=shared).upload
    p1 = update(free, st, clients[0], rnd=1, state=u0.state, shared=shared).upload
    assert any(not torch.allclose(u1[k], p1[k], atol=1e-6) for k in u1)


def test_moon_resume_with_partial_participation_matches_uninterrupted(tiny, tmp_path):
    """The per-client previous models go through the checkpoint; some clients start late."""
    cfg = tiny(**BN_CNN, **{"method.name": "moon", "train.rounds": 3, "train.participation": 0.5})
    full = fedrepro.run(cfg.replace(runs_dir=str(tmp_path / "full")))
    cut = cfg.replace(runs_dir=str(tmp_path / "cut"))
    interrupt_at(cut, 2)
    resumed = fedrepro.run(cut)
    assert full.clients["acc"].tolist() == resumed.clients["acc"].tolist()
    assert full.rounds["train_loss"].tolist() == resumed.rounds["train_loss"].tolist()


# FedDecorr --------------------------------------------------------------------------------------

def test_decorrelation_loss_by_hand():
    # uncorrelated, centred columns: K = I
    z = torch.tensor([[1.0, 1.0], [1.0, -1.0], [-1.0, 1.0], [-1.0, -1.0]])
    assert decorrelation_loss(z, "paper").item() == pytest.approx(1 / 2, rel=1e-6)  # ‖I‖²/d² = 1/d
    assert decorrelation_loss(z, "code").item() == pytest.approx(0.0, abs=1e-7)  # off-diagonal only
    # fully collapsed: both columns the same direction (different scales): every correlation is 1
    c = torch.tensor([1.0, 2.0, 3.0, 4.0])
    z = torch.stack([c, 3 * c - 1], 1)
    assert decorrelation_loss(z, "paper").item() == pytest.approx(1.0, rel=1e-6)
    n = 4  # code: (ẐᵀẐ)_12 = N − 1 with the unbiased std, squared, divided by N
    assert decorrelation_loss(z, "code").item() == pytest.approx((n - 1) ** 2 / n, rel=1e-6)
    # a general batch, written out: Pearson correlations ρ_jk
    g = torch.Generator().manual_seed(0)
    z = torch.randn(7, 3, generator=g, dtype=torch.float64)
    rho = torch.corrcoef(z.T)
    n, d = z.shape
    assert decorrelation_loss(z, "paper").item() == pytest.approx(float(rho.pow(2).sum()) / d ** 2, rel=1e-6)
    off = rho.pow(2).sum() - d
    assert decorrelation_loss(z, "code").item() == pytest.approx(float(off) * (n - 1) ** 2 / (d * (d - 1)) / n,
                                                                 rel=1e-6)
    one = torch.randn(1, 3, requires_grad=True)
    assert decorrelation_loss(one).item() == 0.0


def test_feddecorr_step_adds_the_decorrelation_gradient_to_the_body_only(tiny):
    """One full-batch plain-SGD step: FedDecorr(β) − FedDecorr(0) = −lr·β·∇L_decorr(features(x))."""
    beta, lr = 0.5, 0.1
    ups = {}
    for b in (beta, 0.0):
        method, clients, st = setup(tiny(**PLAIN_STEP, **{"train.lr": lr, "method.name": "feddecorr",
                                                          "method.args.beta": b}))
        ups[b] = update(method, st, clients[0]).upload
    model = method.load(st.shared, {})
    x, _ = first_batch(clients[0])
    model.zero_grad(set_to_none=True)
    z = model.features(x)
    zn = (z - z.mean(0)) / z.std(0, unbiased=True)
    corr = zn.T @ zn
    d = z.shape[1]
    ((corr.pow(2).sum() - corr.diagonal().pow(2).sum()) / (d * (d - 1)) / len(z)).backward()
    grads = {n: p.grad for n, p in model.named_parameters()}
    moved = False
    for k in ups[beta]:
        diff = ups[beta][k] - ups[0.0][k]
        if k.startswith("head."):
            assert torch.allclose(diff, torch.zeros_like(diff), atol=1e-7), k  # the regulariser skips h
        else:
            assert torch.allclose(diff, -lr * beta * grads[k], atol=1e-5), k
            moved = moved or diff.abs().max() > 1e-4
    assert moved


# FedNTD -----------------------------------------------------------------------------------------

def test_not_true_logits_drop_the_true_class():
    logits = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
    out = not_true_logits(logits, torch.tensor([1, 0, 2]))
    assert torch.equal(out, torch.tensor([[1.0, 3.0], [5.0, 6.0], [7.0, 8.0]]))


def test_ntd_loss_by_hand_and_no_gradient_to_the_true_class():
    tau = 3.0
    local = torch.tensor([[2.0, 0.5, -1.0], [0.0, 1.0, 3.0]], requires_grad=True)
    glob = torch.tensor([[0.0, 1.0, 2.0], [1.0, -1.0, 0.5]])
    y = torch.tensor([0, 2])
    # row 0 keeps classes (1, 2), row 1 keeps (0, 1)
    total = 0.0
    for lt, gt in (([0.5, -1.0], [1.0, 2.0]), ([0.0, 1.0], [1.0, -1.0])):
        ql = torch.softmax(torch.tensor(lt) / tau, 0)
        qg = torch.softmax(torch.tensor(gt) / tau, 0)
        total += float((qg * (qg / ql).log()).sum())
    loss = ntd_loss(local, glob, y, tau)
    assert loss.item() == pytest.approx(tau ** 2 * total / 2, rel=1e-6)
    assert ntd_loss(local, glob, y, tau, t2_scaling=False).item() == pytest.approx(total / 2, rel=1e-6)
    loss.backward()
    assert local.grad[0, 0] == 0 and local.grad[1, 2] == 0  # the true class is not distilled
    assert (local.grad[0, 1:] != 0).all() and (local.grad[1, :2] != 0).all()
    # same not-true logits up to a shift: no loss, whatever the true-class logits are
    same = ntd_loss(torch.tensor([[9.0, 1.0, 2.0]]), torch.tensor([[-5.0, 3.0, 4.0]]), torch.tensor([0]), tau)
    assert same.item() == pytest.approx(0.0, abs=1e-5)


def test_fedntd_head_gradient_is_ce_plus_not_true_distillation(tiny):
    """One batch, teacher ≠ student: h's gradient = (resid_CE + β·resid_NTD)ᵀ z, where resid_NTD is
    τ·(q_l − q_g)/N on the not-true classes and 0 on the true class."""
    beta, tau = 0.7, 3.0
    method, clients, st = setup(tiny(**{"method.name": "fedntd", "method.args": {"beta": beta, "tau": tau}}))
    teacher = method.load_teacher(perturbed(st.shared))
    assert not teacher.training  # default teacher_mode="eval"
    model = method.load(st.shared, {})
    x, y = first_batch(clients[0])
    model.zero_grad(set_to_none=True)
    ce, ntd = method.losses(model, teacher, x, y)
    (ce + beta * ntd).backward()
    with torch.no_grad():
        z = model.features(x)
        out, g = model.head(z), teacher(x)
        n, c = out.shape
        onehot = F.one_hot(y, c).bool()
        resid = (torch.softmax(out, 1) - onehot.float()) / n
        ql = torch.softmax(out.masked_fill(onehot, -float("inf")) / tau, 1)
        qg = torch.softmax(g.masked_fill(onehot, -float("inf")) / tau, 1)
        nt = tau * (ql - qg) / n  # zero on the true class (both probabilities are 0 there)
        resid = resid + beta * nt
    assert ntd > 0
    assert torch.allclose(model.head.weight.grad, resid.T @ z, atol=1e-6)
    assert torch.allclose(model.head.bias.grad, resid.sum(0), atol=1e-6)
    # the teacher is the downloaded global model: at the start of a round L_NTD is 0
    _, at_start = method.losses(model, method.load_teacher(st.shared), x, y)
    assert at_start.item() == pytest.approx(0.0, abs=1e-6)


def test_fedntd_changes_local_training(tiny):
    method, clients, st = setup(tiny(**{"method.name": "fedntd", "train.local_epochs": 2}))
    free, _, _ = setup(tiny(**{"method.name": "fedntd", "method.args.beta": 0.0, "train.local_epochs": 2}))
    avg, _, _ = setup(tiny(**{"method.name": "fedavg", "train.local_epochs": 2}))
    a, b, c = (update(m, st, clients[0]).upload for m in (method, free, avg))
    assert all(torch.equal(b[k], c[k]) for k in b)  # β = 0 is FedAvg
    assert any(not torch.allclose(a[k], b[k], atol=1e-6) for k in a)
