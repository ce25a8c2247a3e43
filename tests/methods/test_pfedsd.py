"""pFedSD (Jin et al.): the FedAvg limit, the teacher (the previous personalised model), the
distillation gradient, and the teachers through a checkpoint."""
import pytest
import torch
import torch.nn.functional as F
from support import BN_CNN, check_resume_matches, setup, update

from fedrepro.fl.local import evaluate_model
from fedrepro.fl.seeding import torch_gen
from fedrepro.methods.pfedsd import PERSONAL, self_distillation_loss


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


@pytest.mark.parametrize("name", ["pfedsd"])
def test_resume_with_partial_participation_matches_uninterrupted(tiny, tmp_path, name):
    """FedAMP's server state (every client's latest model, keyed by id) and pFedSD's per-client
    teachers go through the checkpoint; half the clients train per round, so some start late."""
    check_resume_matches(tiny(**{"method.name": name, "train.rounds": 3, "train.participation": 0.5}), tmp_path)
