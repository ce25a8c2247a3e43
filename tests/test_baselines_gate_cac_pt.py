"""FedCAC, pFedGate and pFedPT (FedPFT baselines, specs/fedpft.md §4): each one's mechanism.

Learning (default hyperparameters, BN-CNN synthetic config, 4 rounds, > 0.5 accuracy where chance
is 0.25) is checked for these three with every other registered method by
tests/test_methods.py::test_every_method_beats_chance_on_synthetic, so it is not repeated here.
"""
import pytest
import torch

from fedrepro.errors import ConfigError
from fedrepro.fl.aggregate import weighted_average
from fedrepro.fl.method import ClientUpdate
from fedrepro.methods.fedcac import MASK, collaborators, critical_mask, sensitivity
from fedrepro.methods.pfedgate import select_blocks
from fedrepro.methods.pfedpt import PROMPT
from support import BN_CNN, setup, update





@pytest.mark.parametrize("name, bad", [("fedcac", {"beta": 0}), ("fedcac", {"tau": 1.5}), ("fedcac", {"buffers": "x"}),
                                       ("pfedgate", {"sparsity": 1.0}), ("pfedgate", {"gate_values": "x"}),
                                       ("pfedpt", {"prompt_bn": "x"}), ("pfedpt", {"prompt_size": 0})])
def test_bad_hyperparameters_name_the_key(name, bad):
    from fedrepro.methods import METHODS

    with pytest.raises(ConfigError, match=f"method.args.{next(iter(bad))}"):
        METHODS.get(name).parse_params(bad)


# FedCAC ----------------------------------------------------------------------------------------
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


# pFedGate --------------------------------------------------------------------------------------
def test_pfedgate_gating_layer_never_leaves_the_client(tiny):
    method, clients, st = setup(tiny(**BN_CNN, **{"method.name": "pfedgate"}))
    upd = update(method, st, clients[0])
    gate_keys = {k for k in upd.state if k.startswith("gate.")}
    assert gate_keys and not any(k.startswith("gate.") for k in [*upd.upload, *st.shared])
    assert set(upd.upload) == set(method.model.state_dict()) == set(st.shared)
    assert any(not torch.equal(upd.state[k], st.client_states[0][k]) for k in gate_keys)  # it trained
    new, _ = method.aggregate(st.shared, [upd], st.server_state, 0)
    assert set(new) == set(st.shared)


@pytest.mark.parametrize("block_split", [5, None])
def test_pfedgate_gates_respect_the_sparsity_budget(tiny, block_split):
    method, clients, st = setup(tiny(**BN_CNN, **{"method.name": "pfedgate",
                                                  "method.args": {"sparsity": 0.6, "block_split": block_split}}))
    lay = method.layout
    scores = torch.rand(lay.num_blocks, generator=torch.Generator().manual_seed(1)).clamp(min=method.min_gate)
    mask = select_blocks(scores, lay, 0.4, method.min_gate).bool()
    assert mask[lay.first].all()
    for group in (lay.is_linear, ~lay.is_linear):
        budget = int(0.4 * float(lay.sizes[group].sum()))
        used = float(lay.sizes[group & mask].sum())
        assert used <= budget
        # Greedy-maximal: a dropped block does not fit in what is left (used only grows)...
        assert all(used + float(lay.sizes[b]) > budget for b in (group & ~mask).nonzero().flatten().tolist())
    # ...and the gated model is exactly zero on dropped blocks, the global weights on kept ones.
    gated = method.gated_params(method.gates(scores))
    for k, p in method.model.named_parameters():
        if k not in lay.ids:  # the classifier, ungated by default
            assert k.startswith("head.") and torch.equal(gated[k], p.detach()), k
            continue
        kept = mask[lay.ids[k]]
        assert torch.all(gated[k][~kept] == 0) and torch.equal(gated[k][kept], p.detach()[kept]), k


def test_pfedgate_per_channel_blocks_are_output_units(tiny):
    method, _, _ = setup(tiny(**BN_CNN, **{"method.name": "pfedgate", "method.args.block_split": None}))
    params = dict(method.model.named_parameters())
    for k, ids in method.layout.ids.items():
        p = params[k]
        rows = ids.reshape(p.shape[0], -1)
        assert torch.all(rows == rows[:, :1]), k  # a row (output unit/channel) is one block
        assert rows[:, 0].unique().numel() == p.shape[0], k  # and rows are different blocks


@pytest.mark.parametrize("gate_head", [False, True])
def test_pfedgate_gates_the_classifier_only_when_asked(tiny, gate_head):
    method, _, _ = setup(tiny(**BN_CNN, **{"method.name": "pfedgate", "method.args.gate_head": gate_head}))
    names = set(dict(method.model.named_parameters()))
    heads = {k for k in names if k.startswith("head.")}
    assert heads and (heads <= set(method.layout.ids)) == gate_head
    assert names - heads <= set(method.layout.ids)  # the extractor is always gated
    # An all-zero gate vector switches off every gated entry and nothing else.
    gated = method.gated_params(torch.zeros(method.layout.num_blocks))
    w = method.model.head.weight.detach()
    assert torch.equal(gated["head.weight"], torch.zeros_like(w) if gate_head else w)
    assert all(torch.all(gated[k] == 0) for k in names - heads)


def test_pfedgate_without_sparsity_and_with_binary_gates_is_fedavg(tiny):
    args = {"sparsity": 0.0, "gate_values": "binary", "clip_grad": None}
    gate, clients, st = setup(tiny(**BN_CNN, **{"method.name": "pfedgate", "method.args": args}))
    avg, _, st_avg = setup(tiny(**BN_CNN))
    assert all(torch.equal(st.shared[k], st_avg.shared[k]) for k in st.shared)
    a, b = update(gate, st, clients[1]), update(avg, st_avg, clients[1])
    assert all(torch.equal(a.upload[k], b.upload[k]) for k in b.upload)


# pFedPT ----------------------------------------------------------------------------------------
def test_pfedpt_prompt_is_a_border_that_stays_on_the_client(tiny):
    method, clients, st = setup(tiny(**{"method.name": "pfedpt",
                                        "method.args": {"prompt_init": "zeros", "prompt_epochs": 1}}))
    ups = [update(method, st, c) for c in clients[:2]]
    for u in ups:
        assert set(u.upload) == set(method.model.state_dict()) == set(st.shared)
        assert not any(k.startswith(PROMPT) for k in u.upload) and any(k.startswith(PROMPT) for k in u.state)
    x = next(clients[0].test_batches(8))[0]
    added = []
    for u in ups:
        delta = method.personalized_model(st.shared, u.state).features[0](x) - x
        p = method.p.prompt_size
        assert torch.all(delta[..., p:-p, p:-p] == 0)  # interior pixels untouched
        assert delta.abs().sum() > 0
        added.append(delta[0])
    assert not torch.allclose(added[0], added[1])  # each client learned its own prompt


def test_pfedpt_trains_the_prompt_with_the_backbone_frozen_then_the_backbone(tiny):
    cfg = tiny(**{"method.name": "pfedpt", "method.args": {"prompt_epochs": 1, "model_epochs": 0}})
    method, clients, st = setup(cfg)
    upd = update(method, st, clients[0])
    assert all(torch.equal(upd.upload[k], st.shared[k]) for k in st.shared)  # backbone untouched
    assert any(not torch.equal(upd.state[k], st.client_states[0][k]) for k in upd.state)  # prompt moved
    method, clients, st = setup(cfg.replace(**{"method.args": {"prompt_epochs": 0, "model_epochs": 1}}))
    upd = update(method, st, clients[0])
    assert all(torch.equal(upd.state[k], st.client_states[0][k]) for k in upd.state)  # prompt untouched
    assert any(not torch.equal(upd.upload[k], st.shared[k]) for k in st.shared)
