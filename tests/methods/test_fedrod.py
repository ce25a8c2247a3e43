"""FedRoD (Chen & Chao, ICLR 2022): the balanced-softmax generic head, the personal head's loss and
locality."""
import pytest
import torch
import torch.nn.functional as F
from support import first_batch, setup, update

from fedrepro.fl.local import evaluate_model
from fedrepro.methods.fedrod import P_HEAD, balanced_softmax_loss, log_class_prior


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
