"""FedBN (Li et al., ICLR 2021): BatchNorm layers, running statistics included, stay on the client."""
import pytest
import torch
from support import BN_CNN, check_personal_layers_stay, setup

from fedrepro.fl.seeding import torch_gen
from fedrepro.models import bn_keys


@pytest.mark.parametrize("name, keys_of", [("fedbn", bn_keys)])
def test_personal_layers_never_leave_the_client(tiny, name, keys_of):
    check_personal_layers_stay(tiny(**BN_CNN, **{"method.name": name}), keys_of)


def test_fedbn_keeps_running_statistics_local(tiny):
    method, clients, st = setup(tiny(**BN_CNN, **{"method.name": "fedbn"}))
    running = [k for k in bn_keys(method.model) if k.endswith("running_mean")]
    assert running
    s0 = method.client_update(st.shared, st.client_states[0], clients[0], torch_gen(0, "client", 0, 0), 0).state
    s1 = method.client_update(st.shared, st.client_states[1], clients[1], torch_gen(0, "client", 0, 1), 0).state
    assert not torch.equal(s0[running[0]], s1[running[0]])
