"""FedRoD, FedAMP and pFedSD: each learns, and each one's characteristic mechanism does what its paper says."""
import pytest
import torch
import torch.nn.functional as F

import fedrepro
from fedrepro.errors import ConfigError
from fedrepro.fl.local import evaluate_model
from fedrepro.fl.seeding import torch_gen
from fedrepro.methods import METHODS
from fedrepro.methods.fedamp import attention_weights
from fedrepro.methods.fedrod import P_HEAD, balanced_softmax_loss, log_class_prior
from fedrepro.methods.pfedsd import PERSONAL, self_distillation_loss
from support import BN_CNN, PLAIN_STEP, first_batch, interrupt_at, setup, update






@pytest.mark.parametrize("name", ["fedrod", "fedamp", "pfedsd"])
def test_learns_on_synthetic(tiny, name):
    res = fedrepro.run(tiny(**{"method.name": name, "train.rounds": 3, "train.local_epochs": 2}))
    assert res.summary["final_acc_mean"] > 0.5, res.summary  # 4 balanced classes: chance is 0.25


@pytest.mark.parametrize("name, args, key", [
    ("fedrod", {"personal_head": "hyper"}, "personal_head"), ("fedrod", {"generic_loss": "ldam"}, "generic_loss"),
    ("fedrod", {"prior_smoothing": -1}, "prior_smoothing"), ("fedamp", {"attention": "dot"}, "attention"),
    ("fedamp", {"alpha_k": 0}, "alpha_k"), ("fedamp", {"self_weight": 2.0}, "self_weight"),
    ("pfedsd", {"kd_weight": -0.1}, "kd_weight"), ("pfedsd", {"temperature": 0}, "temperature"),
    ("pfedsd", {"teacher_mode": "frozen"}, "teacher_mode"),
])
def test_bad_hyperparameters_name_the_key(name, args, key):
    with pytest.raises(ConfigError, match=f"method.args.{key}"):
        METHODS.get(name).parse_params(args)


# FedRoD ------------------------------------------------------------------------------------------

def test_fedrod_generic_head_gradient_is_the_bsm_gradient(tiny):
    """One batch: h_g's gradient from L_g + L_p is the closed-form BSM one, (softmax(g + log π) − y)ᵀz/B."""
    method, clients, st = setup(tiny(**{"method.name": "fedrod"}))
    c = clients[0]
    model = method.load(st.shared, st.client_states[0])
    p_head = method.load_personal_head(st.client_states[0])
    log_prior = log_class_prior(c.train_y, model.num_classes)
    x, y = first_batch(c)
    model.zero_grad(set_to_none=True)
    loss_g, loss_p = method.losses(model, p_head, x, y, log_prior)
    (loss_g + loss_p).backward()
    with torch.no_grad():
        z = model.features(x)
        prob = torch.softmax(model.head(z) + log_prior, dim=1)
        resid = (prob - F.one_hot(y, model.num_classes).float()) / len(y)
    assert torch.allclose(model.head.weight.grad, resid.T @ z, atol=1e-6)
    assert torch.allclose(model.head.bias.grad, resid.sum(0), atol=1e-6)
    # the prior really shifts the loss: plain CE would give another gradient
    assert not torch.allclose(loss_g, F.cross_entropy(model.head(z), y))


def test_bsm_with_an_absent_class_is_finite_and_ignores_it():
    log_prior = log_class_prior(torch.tensor([0, 0, 1, 2]), 4)  # class 3 absent
    assert torch.isinf(log_prior[3]) and torch.isfinite(log_prior[:3]).all()
    logits = torch.randn(4, 4, requires_grad=True)
    loss = balanced_softmax_loss(logits, torch.tensor([0, 0, 1, 2]), log_prior)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(logits.grad).all()
    assert torch.equal(logits.grad[:, 3], torch.zeros(4))
    assert torch.isfinite(log_class_prior(torch.tensor([0, 1]), 4, smoothing=0.5)).all()


@pytest.mark.parametrize("to_body", [False, True])
def test_fedrod_personal_loss_trains_only_the_personal_head(tiny, to_body):
    method, clients, st = setup(tiny(**{"method.name": "fedrod", "method.args.personal_grad_to_body": to_body}))
    model = method.load(st.shared, st.client_states[0])
    p_head = method.load_personal_head(st.client_states[0])
    x, y = first_batch(clients[0])
    model.zero_grad(set_to_none=True)
    p_head.zero_grad(set_to_none=True)
    _, loss_p = method.losses(model, p_head, x, y, log_class_prior(clients[0].train_y, model.num_classes))
    loss_p.backward()
    assert all(p.grad is None for p in model.head.parameters())  # h_g: never from L_p
    body = [p.grad for p in model.features.parameters()]
    assert all(g is not None and g.abs().sum() > 0 for g in body) if to_body else all(g is None for g in body)
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in p_head.parameters())


def test_fedrod_personal_head_never_leaves_the_client_and_is_added_at_evaluation(tiny):
    method, clients, st = setup(tiny(**{"method.name": "fedrod"}))
    upd = update(method, st, clients[0])
    assert not any(k.startswith(P_HEAD) for k in upd.upload) and set(upd.upload) == set(st.shared)
    assert any(not torch.equal(upd.state[k], st.client_states[0][k]) for k in upd.state if k.startswith(P_HEAD))
    new, _ = method.aggregate(st.shared, [upd], st.server_state, 0)
    assert set(new) == set(st.shared)
    pm = method.personalized_model(new, upd.state)
    x, _ = first_batch(clients[0])
    pm.eval()
    with torch.no_grad():
        z = pm.features(x)
        assert torch.allclose(pm(x), pm.head.generic(z) + pm.head.personal(z))
    r = method.evaluate(new, upd.state, clients[0], None)
    assert (r.correct, r.total) == (evaluate_model(pm, clients[0]).correct, clients[0].num_test)


# FedAMP ------------------------------------------------------------------------------------------

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


# pFedSD ------------------------------------------------------------------------------------------

def test_pfedsd_with_zero_weight_is_fedavg_training(tiny):
    method, clients, st = setup(tiny(**BN_CNN, **{"method.name": "pfedsd", "method.args.kd_weight": 0.0}))
    avg, _, _ = setup(tiny(**BN_CNN))
    prev = update(method, st, clients[0]).state  # a teacher exists from round 1 on
    a = update(method, st, clients[0], rnd=1, state=prev).upload
    b = avg.client_update(st.shared, {}, clients[0], torch_gen(0, "client", 1, 0), 1).upload
    assert set(a) == set(b) and all(torch.equal(a[k], b[k]) for k in a)


def test_pfedsd_teacher_is_the_previous_personalised_model(tiny):
    method, clients, st = setup(tiny(**BN_CNN, **{"method.name": "pfedsd"}))
    assert method.load_teacher(st.client_states[0]) is None  # first round: CE only
    u0 = update(method, st, clients[0])
    assert "loss_kd" not in u0.metrics
    assert all(torch.equal(u0.state[PERSONAL + k], v) for k, v in u0.upload.items())
    teacher = method.load_teacher(u0.state)
    assert all(torch.equal(teacher.state_dict()[k], v) for k, v in u0.upload.items())
    assert teacher.training  # default teacher_mode="train": BN batch statistics, as both reference codes
    # evaluation uses the personalised model, not the global one
    shared, _ = method.aggregate(st.shared, [u0, update(method, st, clients[1])], st.server_state, 0)
    r = method.evaluate(shared, u0.state, clients[0], None)
    ref = method.model
    ref.load_state_dict(u0.upload)
    assert r.loss_sum == pytest.approx(evaluate_model(ref, clients[0]).loss_sum)
    u1 = update(method, st, clients[0], rnd=1, state=u0.state, shared=shared)
    assert u1.metrics["loss_kd"] > 0


def test_pfedsd_distillation_gradient(tiny):
    s = torch.randn(6, 4, requires_grad=True)
    self_distillation_loss(s, s.detach().clone(), 3.0).backward()
    assert torch.allclose(s.grad, torch.zeros_like(s), atol=1e-7)  # teacher = student: KL at its minimum
    s.grad = None
    t = torch.randn(6, 4)
    loss = self_distillation_loss(s, t, 3.0)
    loss.backward()
    assert loss > 0 and s.grad.abs().sum() > 0
    kl = F.kl_div(F.log_softmax(s / 3, 1), F.softmax(t / 3, 1), reduction="batchmean")
    assert torch.isclose(loss, 9 * kl)
    # and it changes local training once a (different) teacher exists
    method, clients, st = setup(tiny(**{"method.name": "pfedsd", "method.args.kd_weight": 1.0}))
    free, _, _ = setup(tiny(**{"method.name": "pfedsd", "method.args.kd_weight": 0.0}))
    prev = update(method, st, clients[0]).state
    a = update(method, st, clients[0], rnd=1, state=prev).upload
    b = update(free, st, clients[0], rnd=1, state=prev).upload
    assert any(not torch.equal(a[k], b[k]) for k in a)


# All three: state survives a checkpoint ---------------------------------------------------------

@pytest.mark.parametrize("name", ["fedamp", "pfedsd"])
def test_resume_with_partial_participation_matches_uninterrupted(tiny, tmp_path, name):
    """FedAMP's server state (every client's latest model, keyed by id) and pFedSD's per-client
    teachers go through the checkpoint; half the clients train per round, so some start late."""
    cfg = tiny(**{"method.name": name, "train.rounds": 3, "train.participation": 0.5})
    full = fedrepro.run(cfg.replace(runs_dir=str(tmp_path / "full")))

    cut = cfg.replace(runs_dir=str(tmp_path / "cut"))
    interrupt_at(cut, 2)
    resumed = fedrepro.run(cut)
    assert full.clients["acc"].tolist() == resumed.clients["acc"].tolist()
    assert full.rounds["train_loss"].tolist() == resumed.rounds["train_loss"].tolist()
