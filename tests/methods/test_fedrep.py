"""FedRep (Collins et al., ICML 2021): the head stays on the client and trains with the body frozen,
then the body with the head frozen."""
import pytest
import torch
from support import BN_CNN, check_personal_layers_stay, setup

from fedrepro.fl.seeding import torch_gen
from fedrepro.models import head_keys


@pytest.mark.parametrize("name, keys_of", [("fedrep", head_keys)])
def test_personal_layers_never_leave_the_client(tiny, name, keys_of):
    check_personal_layers_stay(tiny(**BN_CNN, **{"method.name": name}), keys_of)


def test_fedrep_trains_head_with_body_frozen_then_body_with_head_frozen(tiny):
    cfg = tiny(**{"method.name": "fedrep", "method.args": {"head_epochs": 2, "body_epochs": 0}})
    method, clients, st = setup(cfg)
    upd = method.client_update(st.shared, st.client_states[0], clients[0], torch_gen(0, "client", 0, 0), 0)
    assert all(torch.equal(upd.upload[k], st.shared[k]) for k in st.shared)  # φ untouched
    assert any(not torch.equal(upd.state[k], st.client_states[0][k]) for k in upd.state)  # head moved
    cfg = cfg.replace(**{"method.args": {"head_epochs": 0, "body_epochs": 1}})
    method, clients, st = setup(cfg)
    upd = method.client_update(st.shared, st.client_states[0], clients[0], torch_gen(0, "client", 0, 0), 0)
    assert all(torch.equal(upd.state[k], st.client_states[0][k]) for k in upd.state)  # head untouched
    assert any(not torch.equal(upd.upload[k], st.shared[k]) for k in st.shared)
