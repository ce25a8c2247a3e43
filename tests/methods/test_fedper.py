"""FedPer (Arivazhagan et al.): the head never leaves the client."""
import pytest
from support import BN_CNN, setup

from fedrepro.fl.seeding import torch_gen
from fedrepro.models import head_keys


@pytest.mark.parametrize("name, keys_of", [("fedper", head_keys)])
def test_personal_layers_never_leave_the_client(tiny, name, keys_of):
    method, clients, st = setup(tiny(**BN_CNN, **{"method.name": name}))
    personal = keys_of(method.model)
    assert personal, "the model must have layers of this kind"
    upd = method.client_update(st.shared, st.client_states[0], clients[0], torch_gen(0, "client", 0, 0), 0)
    assert not personal & set(upd.upload) and not personal & set(st.shared)
    assert personal <= set(upd.state)
    new, _ = method.aggregate(st.shared, [upd], st.server_state, 0)
    assert set(new) == set(st.shared)
