"""FedAvg+Linear (ICLR App. F): an identity-initialised linear layer that stays on the client."""
import pytest
import torch
from support import changed, keys_with, setup

from fedrepro.methods import METHODS

from .pft_support import update


def test_fedavg_linear_keeps_an_identity_initialised_layer_local(tiny):
    method, clients, st = setup(tiny(**{"method.name": "fedavg_linear", "method.args": {"r_a": 0, "alternate": True}}))
    m = method.model.feature_dim
    assert torch.equal(st.client_states[0]["linear.weight"], torch.eye(m))
    assert not keys_with(st.shared, "linear.") and set(st.shared) == set(METHODS.get("fedavg")(
        method.ctx, None).shared_keys)
    upd = update(method, st, clients)
    assert changed(upd.state["linear.weight"], torch.eye(m)) and not keys_with(upd.upload, "linear.")
    assert all(torch.equal(upd.upload[k], st.shared[k]) for k in st.shared)  # phase 1: φ, h frozen


def _phi_graphs(method, clients, st):
    """Per training batch of one round, whether φ's forward built a graph (φ trains on that batch)."""
    net = method.model
    graphs = []
    hook = net.features.register_forward_hook(lambda m, i, o: graphs.append(o.requires_grad))
    try:
        update(method, st, clients)
    finally:
        hook.remove()
    return graphs


@pytest.mark.parametrize("alternate", [False, True])
def test_fedavg_linear_joint_schedule_trains_phi_every_epoch(tiny, alternate):
    """The paper gives no schedule (ICLR §1, App. F). Joint (the default, the claim's row): φ, h_κ and
    the layer train together on every batch of all R = r_f + r_a epochs, as FedAvg's φ does.
    Alternating: φ trains on the R_a epochs' batches only (FedPFT's budget)."""
    args = {} if not alternate else {"alternate": True}
    method, clients, st = setup(tiny(**{"method.name": "fedavg_linear", "method.args": args}))
    assert method.p.alternate is alternate and (method.p.r_f, method.p.r_a) == (4, 1)
    batches = -(-clients[0].num_train // method.ctx.cfg.train.batch_size)
    graphs = _phi_graphs(method, clients, st)
    assert len(graphs) == 5 * batches
    assert sum(graphs) == (batches if alternate else 5 * batches)
    upd = update(method, st, clients)
    m = method.model.feature_dim
    assert changed(upd.state["linear.weight"], torch.eye(m))  # the layer trains either way
    assert any(changed(upd.upload[k], st.shared[k]) for k in keys_with(st.shared, "head."))
