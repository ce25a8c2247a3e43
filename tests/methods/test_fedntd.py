"""FedNTD (Lee et al., NeurIPS 2022): not-true logits, the not-true distillation loss and its
gradient, and the FedAvg server."""
import pytest
import torch
import torch.nn.functional as F
from support import check_fedavg_server, first_batch, perturbed, setup, update

import fedrepro
from fedrepro.methods.fedntd import not_true_logits, ntd_loss


@pytest.mark.parametrize("name", ["fedntd"])
def test_only_the_model_is_uploaded_and_the_global_model_is_the_average(tiny, name):
    check_fedavg_server(tiny(**{"method.name": name}))


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
    teacher = method.load_teacher(perturbed(st.shared, 0.3, 1))
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


def test_fedntd_global_model_learns(tiny):
    res = fedrepro.run(tiny(**{"method.name": "fedntd", "train.rounds": 3, "train.local_epochs": 2,
                               "train.global_eval": True}))
    assert res.summary["final_acc_mean"] > 0.5, res.summary  # 4 balanced classes: chance is 0.25
    assert res.summary["final_global_acc"] > 0.4, res.summary
