"""FedFomo (Zhang et al., ICLR 2021): first-order model weights, the fixed validation split, the
server's affinity and top-M models, and its state through a checkpoint."""
import copy
import dataclasses

import pytest
import torch
import torch.nn.functional as F
from support import BN_CNN, check_resume_matches, perturbed, setup, update

from fedrepro.fl.local import make_sgd, train_epochs
from fedrepro.methods import METHODS
from fedrepro.methods.fedfomo import fomo_weights


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

    peers = {1: trained(1), 2: perturbed(own, 0.5, 0), 3: trained(4), 5: {k: v.clone() for k, v in own.items()}}
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


@pytest.mark.parametrize("name", ["fedfomo"])
def test_resume_with_partial_participation_matches_uninterrupted(tiny, tmp_path, name):
    """FedFomo's model store, affinity and validation masks, FedALA's W and flags go through the
    checkpoint; half the clients train per round, so some start late."""
    cfg = tiny(**BN_CNN, **{"method.name": name, "train.rounds": 3, "train.participation": 0.5})
    check_resume_matches(cfg, tmp_path)
