"""MOON (Li et al., CVPR 2021): the model-contrastive loss by hand, the step it adds, the previous
model, its state through a checkpoint, and the FedAvg server."""
import math

import pytest
import torch
from support import BN_CNN, PLAIN_STEP, check_fedavg_server, check_resume_matches, first_batch, perturbed, setup, update

import fedrepro
from fedrepro.methods.moon import PREV, model_contrastive_loss


@pytest.mark.parametrize("name", ["moon"])
def test_only_the_model_is_uploaded_and_the_global_model_is_the_average(tiny, name):
    check_fedavg_server(tiny(**{"method.name": name}))


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
        prev_sd = perturbed(st.shared, 0.3, 1)
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
    check_resume_matches(tiny(**BN_CNN, **{"method.name": "moon", "train.rounds": 3, "train.participation": 0.5}),
                         tmp_path)


def test_moon_global_model_learns(tiny):
    res = fedrepro.run(tiny(**{"method.name": "moon", "train.rounds": 3, "train.local_epochs": 2,
                               "train.global_eval": True}))
    assert res.summary["final_acc_mean"] > 0.5, res.summary  # 4 balanced classes: chance is 0.25
    assert res.summary["final_global_acc"] > 0.4, res.summary
