"""FedCAC (Wu et al., ICCV 2023; a FedPFT baseline): the critical-parameter mask, the next round's
model, and the averaging of critical parameters over overlapping clients."""
import pytest
import torch
from support import BN_CNN, setup, update

from fedrepro.fl.aggregate import weighted_average
from fedrepro.fl.method import ClientUpdate
from fedrepro.methods.fedcac import MASK, collaborators, critical_mask, sensitivity


def test_fedcac_mask_is_the_top_tau_by_update_times_weight():
    before = torch.zeros(10)
    after = torch.full((10,), 0.1)
    after[[2, 5, 7]] = torch.tensor([1.0, -2.0, 3.0])  # |Δw·w| = 1, 4, 9; everything else 0.01
    assert critical_mask(before, after, 0.3).nonzero().flatten().tolist() == [2, 5, 7]
    # Sensitivity is |Δw ⊙ w_after|, not |Δw|: a big move to a small value ranks below a small move
    # of a big weight.
    b, a = torch.tensor([1.0, 5.0]), torch.tensor([0.0, 5.5])  # Δ = -1, 0.5; |Δ·w| = 0, 2.75
    assert critical_mask(b, a, 0.5).tolist() == [False, True]
    # When the tau-quantile is 0, every parameter that moved (and only those) is critical.
    after = torch.zeros(10)
    after[[1, 4]] = 0.5
    assert critical_mask(torch.zeros(10), after, 0.5).nonzero().flatten().tolist() == [1, 4]


def test_fedcac_client_masks_exactly_the_most_sensitive_parameters(tiny):
    method, clients, st = setup(tiny(**{"method.name": "fedcac", "method.args.tau": 0.3}))
    start = method.assemble(st.shared, st.client_states[0])
    upd = update(method, st, clients[0])
    for k in method.param_keys:
        mask, s = upd.upload[MASK + k], sensitivity(start[k], upd.upload[k]).reshape(-1)
        nz = int(0.3 * s.numel())
        top = set(torch.topk(s, nz).indices.tolist())
        assert set(mask.reshape(-1).nonzero().flatten().tolist()) == top, k
        assert torch.equal(upd.state[MASK + k], mask)


def test_fedcac_next_round_model_is_own_critical_values_and_global_elsewhere(tiny):
    # beta = 1 at round 5: the threshold is above every overlap, so nobody collaborates.
    method, clients, st = setup(tiny(**BN_CNN, **{"method.name": "fedcac", "method.args.beta": 1}))
    ups = [update(method, st, c, rnd=5) for c in clients]
    flat = [torch.cat([u.upload[MASK + k].reshape(-1).float() for k in method.param_keys]) for u in ups]
    assert collaborators(flat, 5, 1) == [[] for _ in ups]
    shared, _ = method.aggregate(st.shared, ups, st.server_state, 5)
    avg = weighted_average([{k: u.upload[k] for k in method.shared_keys} for u in ups],
                           [u.num_samples for u in ups])
    for u, c in zip(ups, clients):
        nxt = method.assemble(shared, u.state)
        for k in method.param_keys:
            m = u.state[MASK + k]
            assert 0 < int(m.sum()) < m.numel()
            assert torch.equal(nxt[k][m], u.upload[k][m]), k  # critical: the client's own values
            assert torch.equal(nxt[k][~m], avg[k][~m]), k  # the rest: the global average
    # BN running statistics stay on the client by default (the official code's download).
    running = {k for k in method.model.state_dict() if "running" in k}
    assert running and not running & set(shared) and running <= set(ups[0].state)


def test_fedcac_critical_parameters_average_over_overlapping_clients(tiny):
    method, clients, st = setup(tiny(**{"method.name": "fedcac"}))
    keys = method.param_keys
    g = torch.Generator().manual_seed(0)
    models = [{k: st.shared[k] + torch.randn(st.shared[k].shape, generator=g) for k in keys} for _ in range(3)]
    half = {k: (torch.arange(st.shared[k].numel()) % 2 == 0).view(st.shared[k].shape) for k in keys}
    masks = [half, half, {k: ~v for k, v in half.items()}]  # 0 and 1 agree; 2 is disjoint
    ups = [ClientUpdate(upload={**models[i], **{MASK + k: masks[i][k] for k in keys}, "cid": torch.tensor(i)},
                        state={}, num_samples=10) for i in range(3)]
    shared, _ = method.aggregate(st.shared, ups, st.server_state, 0)
    for k in keys:
        assert torch.allclose(shared[f"cac.0.{k}"], (models[0][k] + models[1][k]) / 2)
        assert torch.allclose(shared[f"cac.1.{k}"], (models[0][k] + models[1][k]) / 2)
        assert torch.equal(shared[f"cac.2.{k}"], models[2][k])


@pytest.mark.parametrize("rounds, beta", [(50, 5), (1000, 100), (25, 2), (3, 1)])
def test_fedcac_beta_is_a_tenth_of_the_run(tiny, rounds, beta):
    """β = 100 rounds of FedPFT's T = 1000 (ICLR §4.1, App. D.3): by default a tenth of the run's
    rounds, so a 50-round run reaches the personalised phase at round 5; ``beta`` fixes it in rounds."""
    method, _, _ = setup(tiny(**{"method.name": "fedcac", "train.rounds": rounds}))
    assert method.beta == beta
    fixed, _, _ = setup(tiny(**{"method.name": "fedcac", "train.rounds": rounds, "method.args.beta": 100}))
    assert fixed.beta == 100


def test_fedcac_reaches_its_personalised_phase_within_a_short_run(tiny):
    """At 50 rounds, from round β = 5 on nobody collaborates: each client's customised model is its
    own upload (critical parameters fully local). β = 100 rounds would still be collaborating at
    the run's last round."""
    method, clients, st = setup(tiny(**BN_CNN, **{"method.name": "fedcac", "train.rounds": 50}))
    ups = [update(method, st, c, rnd=method.beta) for c in clients]
    shared, _ = method.aggregate(st.shared, ups, st.server_state, method.beta)
    for u in ups:
        cid = int(u.upload["cid"])
        assert all(torch.equal(shared[f"cac.{cid}.{k}"], u.upload[k]) for k in method.param_keys)
    flat = [torch.cat([u.upload[MASK + k].reshape(-1).float() for k in method.param_keys]) for u in ups]
    assert any(collaborators(flat, 49, 100)) and any(collaborators(flat, method.beta - 1, method.beta))


@pytest.mark.parametrize("args, key", [({"beta_fraction": 0}, "beta_fraction"), ({"beta": 0}, "beta")])
def test_fedcac_beta_options_are_checked(args, key):
    from fedrepro.errors import ConfigError
    from fedrepro.methods import METHODS

    with pytest.raises(ConfigError, match=rf"method\.args\.{key}\b"):
        METHODS.get("fedcac").parse_params(args)
