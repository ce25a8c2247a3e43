"""FedProc (Mu et al.): class prototypes and their count-weighted server average, the prototypical
contrastive loss by hand, the hybrid loss schedule, and a global model that learns."""
import math

import pytest
import torch
import torch.nn.functional as F
from support import BN_CNN, PLAIN_STEP, check_batchnorm_buffers, fedavg_step, full_batch, model_part, setup, update

import fedrepro
from fedrepro.methods import METHODS
from fedrepro.methods.fedproc import (
    COUNT,
    G_MASK,
    G_PROTO,
    PROTO,
    aggregate_prototypes,
    class_prototypes,
    prototype_contrastive_loss,
)


@pytest.mark.parametrize("name", ["fedproc"])
def test_runs_with_batchnorm_buffers(tiny, name):
    """Buffers (BN running statistics, the integer step counter) are averaged like FedAvg's."""
    check_batchnorm_buffers(tiny(**BN_CNN, **{"method.name": name}))


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


def test_fedproc_global_model_learns(tiny):
    res = fedrepro.run(tiny(**{"method.name": "fedproc", "train.rounds": 3, "train.local_epochs": 2,
                               "train.global_eval": True}))
    assert res.summary["final_acc_mean"] > 0.5, res.summary  # 4 balanced classes: chance is 0.25
    assert res.summary["final_global_acc"] > 0.4, res.summary
