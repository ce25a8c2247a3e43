"""FedALA (Zhang et al., AAAI 2023): adaptive local aggregation (top layers, the clipped weight step,
convergence then one epoch), what it evaluates, its global model, and its state through a
checkpoint."""
import copy

import pytest
import torch
import torch.nn.functional as F
from support import BN_CNN, check_resume_matches, perturbed, setup, update

import fedrepro
from fedrepro.fl.local import evaluate_model
from fedrepro.methods.fedala import top_parameters


def test_fedala_global_model_learns(tiny):
    res = fedrepro.run(tiny(**{"method.name": "fedala", "train.rounds": 3, "train.local_epochs": 2,
                               "train.global_eval": True}))
    assert res.summary["final_global_acc"] > 0.4, res.summary


def test_fedala_top_layers_count_layers_or_tensors(tiny):
    method, _, _ = setup(tiny(**BN_CNN, **{"method.name": "fedala"}))
    m = method.model
    assert method.top == ["head.weight", "head.bias"]  # default p = 1: the head
    assert top_parameters(m, 1, "tensor") == ["head.bias"]
    assert top_parameters(m, 2, "layer") == ["features.fc.0.weight", "features.fc.0.bias", "head.weight", "head.bias"]
    assert top_parameters(m, 99, "layer") == [n for n, _ in m.named_parameters()]


def test_fedala_weight_step_is_the_clipped_gradient_step(tiny):
    """One full-batch ALA epoch from W = 1: W' = clip(1 − η·∇_θ̂ L ⊙ (θ − θ_i), 0, 1) on the head; lower
    layers are θ; θ̂ = θ_i + (θ − θ_i) ⊙ W'."""
    eta = 0.7
    method, clients, st = setup(tiny(**{"method.name": "fedala", "train.batch_size": 10_000,
                                        "method.args": {"rand_percent": 100, "eta": eta}}))
    c = clients[0]
    init = st.client_states[0]["model"]
    local, glob = perturbed(init, 0.3, 1), perturbed(init, 0.3, 2)
    ones = {k: torch.ones_like(local[k]) for k in method.top}
    new, w, losses = method.adaptive_local_aggregation(local, glob, ones, c, torch.Generator().manual_seed(0),
                                                       until_converged=False)
    assert len(losses) == 1
    ref = copy.deepcopy(method.model)
    ref.load_state_dict(glob)  # θ̂ at W = 1 is the global model
    ref.train()
    x, y = next(c.eval_train_batches(10_000))
    loss = F.cross_entropy(ref(x), y)
    grads = dict(zip(method.top, torch.autograd.grad(loss, [dict(ref.named_parameters())[k] for k in method.top])))
    assert losses[0] == pytest.approx(float(loss.detach()), rel=1e-5)
    for k in method.top:
        expected = (1 - eta * grads[k] * (glob[k] - local[k])).clamp(0, 1)
        assert torch.allclose(w[k], expected, atol=1e-6), k
        assert torch.allclose(new[k], local[k] + (glob[k] - local[k]) * expected, atol=1e-6), k
    assert (w["head.weight"] < 1).any() and (w["head.weight"] == 1).any()  # the clip is active
    for k in glob:
        if k not in method.top:
            assert torch.equal(new[k], glob[k]), k


def test_fedala_converges_first_then_one_epoch_and_keeps_w_local(tiny):
    method, clients, st = setup(tiny(**{"method.name": "fedala", "method.args": {"num_pre_loss": 3}}))
    c = clients[0]
    u0 = update(method, st, c)
    assert "ala_epochs" not in u0.metrics  # round 0: θ_i = θ, nothing to learn
    assert all(torch.equal(v, torch.ones_like(v)) for v in u0.state["ala_w"].values())
    assert set(u0.upload) == set(method.model.state_dict())  # the model only, never W
    shared, _ = method.aggregate(st.shared, [u0] + [update(method, st, x) for x in clients[1:]], st.server_state, 0)
    u1 = update(method, st, c, rnd=1, state=u0.state, shared=shared)
    assert u1.metrics["ala_epochs"] >= 4 and u1.state["ala_started"]  # > num_pre_loss epochs first time
    assert any(not torch.equal(v, torch.ones_like(v)) for v in u1.state["ala_w"].values())
    assert all(((v >= 0) & (v <= 1)).all() for v in u1.state["ala_w"].values())
    u2 = update(method, st, c, rnd=2, state=u1.state, shared=shared)
    assert u2.metrics["ala_epochs"] == 1
    # W is what changes training: with the stored W reset to 1, θ̂ = θ and the result differs
    reset = {**u1.state, "ala_w": {k: torch.ones_like(v) for k, v in u1.state["ala_w"].items()}}
    u2b = update(method, st, c, rnd=2, state=reset, shared=shared)
    assert any(not torch.equal(u2.upload[k], u2b.upload[k]) for k in u2.upload)


def test_fedala_evaluates_the_local_model_and_the_global_one_for_untrained_clients(tiny):
    method, clients, st = setup(tiny(**{"method.name": "fedala"}))
    ups = [update(method, st, c) for c in clients]
    shared, _ = method.aggregate(st.shared, ups, st.server_state, 0)
    ref = copy.deepcopy(method.model)
    ref.load_state_dict(ups[0].state["model"])
    assert method.evaluate(shared, ups[0].state, clients[0], None).loss_sum == \
        pytest.approx(evaluate_model(ref, clients[0]).loss_sum)
    ref.load_state_dict(shared)
    assert method.evaluate(shared, st.client_states[1], clients[1], None).loss_sum == \
        pytest.approx(evaluate_model(ref, clients[1]).loss_sum)
    g = method.global_model(shared, {})
    assert all(torch.equal(g.state_dict()[k], shared[k]) for k in shared)


@pytest.mark.parametrize("name", ["fedala"])
def test_resume_with_partial_participation_matches_uninterrupted(tiny, tmp_path, name):
    """FedFomo's model store, affinity and validation masks, FedALA's W and flags go through the
    checkpoint; half the clients train per round, so some start late."""
    cfg = tiny(**BN_CNN, **{"method.name": name, "train.rounds": 3, "train.participation": 0.5})
    check_resume_matches(cfg, tmp_path)
