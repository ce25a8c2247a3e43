"""FedAvg+Linear (ICLR App. F): an identity-initialised linear layer that stays on the client."""
import torch
from support import changed, keys_with, setup

from fedrepro.methods import METHODS

from .pft_support import update


def test_fedavg_linear_keeps_an_identity_initialised_layer_local(tiny):
    method, clients, st = setup(tiny(**{"method.name": "fedavg_linear", "method.args": {"r_a": 0}}))
    m = method.model.feature_dim
    assert torch.equal(st.client_states[0]["linear.weight"], torch.eye(m))
    assert not keys_with(st.shared, "linear.") and set(st.shared) == set(METHODS.get("fedavg")(
        method.ctx, None).shared_keys)
    upd = update(method, st, clients)
    assert changed(upd.state["linear.weight"], torch.eye(m)) and not keys_with(upd.upload, "linear.")
    assert all(torch.equal(upd.upload[k], st.shared[k]) for k in st.shared)  # phase 1: φ, h frozen
