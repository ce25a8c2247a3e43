"""FedFomo and FedALA: each learns, and each one's characteristic mechanism does what its paper says."""
import copy
import dataclasses

import pytest
import torch
import torch.nn.functional as F

import fedrepro
from fedrepro.errors import ConfigError
from fedrepro.fl.local import evaluate_model, make_sgd, train_epochs
from fedrepro.methods import METHODS
from fedrepro.methods.fedala import top_parameters
from fedrepro.methods.fedfomo import fomo_weights
from support import BN_CNN, interrupt_at, setup, update



def noisy(sd, scale, seed):
    g = torch.Generator().manual_seed(seed)
    return {k: (v + scale * torch.randn(v.shape, generator=g)) if v.is_floating_point() else v.clone()
            for k, v in sd.items()}


@pytest.mark.parametrize("name", ["fedfomo", "fedala"])
def test_learns_on_synthetic(tiny, name):
    res = fedrepro.run(tiny(**{"method.name": name, "train.rounds": 3, "train.local_epochs": 2}))
    assert res.summary["final_acc_mean"] > 0.5, res.summary  # 4 balanced classes: chance is 0.25


def test_fedala_global_model_learns(tiny):
    res = fedrepro.run(tiny(**{"method.name": "fedala", "train.rounds": 3, "train.local_epochs": 2,
                               "train.global_eval": True}))
    assert res.summary["final_global_acc"] > 0.4, res.summary


@pytest.mark.parametrize("name, args, key", [
    ("fedfomo", {"num_models": 0}, "num_models"), ("fedfomo", {"epsilon": 1.5}, "epsilon"),
    ("fedfomo", {"epsilon_decay": -0.1}, "epsilon_decay"), ("fedfomo", {"val_fraction": 1.0}, "val_fraction"),
    ("fedfomo", {"norm": "linf"}, "norm"),
    ("fedala", {"rand_percent": 0}, "rand_percent"), ("fedala", {"layer_idx": 0}, "layer_idx"),
    ("fedala", {"layer_unit": "block"}, "layer_unit"), ("fedala", {"eta": 0.0}, "eta"),
    ("fedala", {"num_pre_loss": 0}, "num_pre_loss"), ("fedala", {"eval_model": "global"}, "eval_model"),
])
def test_bad_hyperparameters_name_the_key(name, args, key):
    with pytest.raises(ConfigError, match=f"method.args.{key}"):
        METHODS.get(name).parse_params(args)


# FedFomo -----------------------------------------------------------------------------------------

def _val_loss(model, sd, x, y):
    model.load_state_dict(sd)
    model.eval()
    with torch.no_grad():
        return float(F.cross_entropy(model(x), y))


def test_fedfomo_weights_and_update_follow_the_first_order_formula(tiny):
    """Hand-computed w_n = max(0, (L(θ_i) − L(θ_n))/‖θ_n − θ_i‖), normalised, and θ_i + Σ w_n(θ_n − θ_i)."""
    method, clients, st = setup(tiny(**{"method.name": "fedfomo"}))
    c = clients[0]
    own = st.client_states[0]["model"]
    ref = copy.deepcopy(method.model)

    def trained(epochs):
        ref.load_state_dict(own)
        opt = make_sgd(ref.parameters(), 0.05, 0.0, 0.0)
        train_epochs(ref, c, opt, epochs, 20, torch.Generator().manual_seed(epochs))
        return {k: v.detach().clone() for k, v in ref.state_dict().items()}

    peers = {1: trained(1), 2: noisy(own, 0.5, 0), 3: trained(4), 5: {k: v.clone() for k, v in own.items()}}
    ids = [1, 2, 3, 5]
    shared = {"models": peers, "download": {0: torch.tensor(ids)}}
    upd = update(method, st, c, rnd=1, shared=shared)

    mask = upd.state["val_mask"]
    n_val = int(mask.sum())
    assert n_val == round(0.2 * c.num_train) and upd.num_samples == c.num_train - n_val
    x, y = c.normalize(c.train_x[mask]), c.train_y[mask]
    keys = [n for n, _ in method.model.named_parameters()]
    l_own = _val_loss(ref, own, x, y)
    raw = []
    for i in ids:
        d = sum(float((peers[i][k] - own[k]).pow(2).sum()) for k in keys) ** 0.5
        raw.append(0.0 if d == 0 else max(0.0, (l_own - _val_loss(ref, peers[i], x, y)) / d))
    expected = torch.tensor(raw, dtype=torch.float64) / sum(raw)
    got = upd.upload["weights"]
    assert torch.allclose(got, expected, atol=1e-9), (got, expected)
    assert got[0] > 0 and got[2] > 0 and got[0] != got[2]  # two helpful models, weighted unequally
    assert got[1] == 0 and got[3] == 0  # the noisy model hurts; the identical one has no direction
    assert torch.equal(upd.upload["ids"], torch.tensor(ids))

    new, w = method.federate(own, [peers[i] for i in ids], x, y)
    assert torch.allclose(w, expected, atol=1e-9)
    for k in own:
        manual = own[k].double() + sum(expected[j] * (peers[i][k].double() - own[k].double())
                                       for j, i in enumerate(ids))
        assert torch.allclose(new[k].double(), manual, atol=1e-6), k
    # no helpful peer: θ_i is kept as it is
    same, w0 = method.federate(own, [peers[2], peers[5]], x, y)
    assert torch.equal(w0, torch.zeros(2, dtype=torch.float64))
    assert all(torch.equal(same[k], own[k]) for k in own)
    assert torch.equal(fomo_weights(1.0, [0.5, 2.0], [0.0, 1.0]), torch.zeros(2, dtype=torch.float64))


def test_fedfomo_validation_split_is_fixed_and_never_trained_on(tiny):
    method, clients, st = setup(tiny(**{"method.name": "fedfomo"}))
    c = clients[0]
    u0 = update(method, st, c)
    mask = u0.state["val_mask"]
    assert u0.upload["ids"].numel() == 0 and torch.equal(u0.upload["weights"], torch.zeros(0, dtype=torch.float64))
    # the same mask next round, whatever the generator
    u1 = update(method, st, c, rnd=1, state=u0.state)
    assert torch.equal(u1.state["val_mask"], mask)
    # relabelling the validation samples does not change local training
    y = c.train_y.clone()
    y[mask] = (y[mask] + 1) % 4
    c2 = dataclasses.replace(c, train_y=y)
    a = update(method, st, c2, rnd=1, state=u0.state).upload["model"]
    assert all(torch.equal(a[k], u1.upload["model"][k]) for k in a)
    # ... while relabelling a training sample does
    y = c.train_y.clone()
    j = int((~mask).nonzero()[0])
    y[j] = (y[j] + 1) % 4
    b = update(method, st, dataclasses.replace(c, train_y=y), rnd=1, state=u0.state).upload["model"]
    assert any(not torch.equal(b[k], u1.upload["model"][k]) for k in b)


def test_fedfomo_server_accumulates_affinity_and_sends_top_m(tiny):
    method, clients, st = setup(tiny(**{"method.name": "fedfomo", "method.args": {"num_models": 1, "epsilon": 0.0}}))
    ups = [update(method, st, c) for c in clients]
    ups[0].upload.update(ids=torch.tensor([1, 2, 3]), weights=torch.tensor([0.1, 0.7, 0.2], dtype=torch.float64))
    ups[1].upload.update(ids=torch.tensor([0, 3]), weights=torch.tensor([0.0, 1.0], dtype=torch.float64))
    shared, server = method.aggregate(st.shared, ups, st.server_state, 0)
    assert torch.allclose(server["affinity"][0], torch.tensor([0.0, 0.1, 0.7, 0.2], dtype=torch.float64))
    assert server["affinity"][2].abs().sum() == 0
    assert shared["download"][0].tolist() == [2] and shared["download"][1].tolist() == [3]
    for cid, ids in shared["download"].items():
        assert len(ids) == 1 and cid not in ids.tolist()  # M models, never the client's own
    assert all(shared["models"][c.cid] is ups[c.cid].upload["model"] for c in clients)
    # the weights accumulate round after round
    ups[0].upload.update(ids=torch.tensor([1]), weights=torch.tensor([1.0], dtype=torch.float64))
    shared, server = method.aggregate(shared, [ups[0]], server, 1)
    assert torch.allclose(server["affinity"][0], torch.tensor([0.0, 1.1, 0.7, 0.2], dtype=torch.float64))
    assert shared["download"][0].tolist() == [1]
    # with ε = 1 the choice is random: over a few draws, more than the top client is sent
    explore, _, _ = setup(tiny(**{"method.name": "fedfomo", "method.args": {"num_models": 1, "epsilon": 1.0}}))
    torch.manual_seed(0)
    seen = {tuple(explore.aggregate(st.shared, ups, server, 0)[0]["download"][0].tolist()) for _ in range(20)}
    assert len(seen) > 1
    p = METHODS.get("fedfomo").parse_params({"epsilon": 0.3, "epsilon_decay": 0.1})
    assert [round(p.epsilon_at(r), 6) for r in (1, 2, 3, 4, 5)] == [0.3, 0.2, 0.1, 0.0, 0.0]


# FedALA ------------------------------------------------------------------------------------------

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
    local, glob = noisy(init, 0.3, 1), noisy(init, 0.3, 2)
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


# Both: state survives a checkpoint, with BatchNorm and partial participation ----------------------

@pytest.mark.parametrize("name", ["fedfomo", "fedala"])
def test_resume_with_partial_participation_matches_uninterrupted(tiny, tmp_path, name):
    """FedFomo's model store, affinity and validation masks, FedALA's W and flags go through the
    checkpoint; half the clients train per round, so some start late."""
    cfg = tiny(**BN_CNN, **{"method.name": name, "train.rounds": 3, "train.participation": 0.5})
    full = fedrepro.run(cfg.replace(runs_dir=str(tmp_path / "full")))
    cut = cfg.replace(runs_dir=str(tmp_path / "cut"))
    interrupt_at(cut, 2)
    resumed = fedrepro.run(cut)
    assert full.clients["acc"].tolist() == resumed.clients["acc"].tolist()
    assert full.rounds["train_loss"].tolist() == resumed.rounds["train_loss"].tolist()
