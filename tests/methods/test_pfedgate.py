"""pFedGate (Chen et al., ICML 2023; a FedPFT baseline): the local gating layer, the sparsity budget,
per-channel blocks, gating the classifier, and the FedAvg limit."""
import pytest
import torch
from support import BN_CNN, setup, update

from fedrepro.methods.pfedgate import select_blocks


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


@pytest.mark.parametrize("memory_format", ["contiguous", "channels_last"])
def test_pfedgate_without_sparsity_and_with_binary_gates_is_fedavg(tiny, memory_format):
    args = {"sparsity": 0.0, "gate_values": "binary", "clip_grad": None}
    gate, clients, st = setup(tiny(**BN_CNN, memory_format=memory_format,
                                   **{"method.name": "pfedgate", "method.args": args}))
    avg, _, st_avg = setup(tiny(**BN_CNN, memory_format=memory_format))
    assert all(torch.equal(st.shared[k], st_avg.shared[k]) for k in st.shared)
    a, b = update(gate, st, clients[1]), update(avg, st_avg, clients[1])
    if memory_format == "contiguous":
        assert all(torch.equal(a.upload[k], b.upload[k]) for k in b.upload)
    else:  # the gated weights reach the convolution as non-leaf tensors: the same sums, other last bits
        assert all(torch.allclose(a.upload[k], b.upload[k], rtol=0, atol=1e-6) for k in b.upload)
