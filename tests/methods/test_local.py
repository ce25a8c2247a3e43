"""Local training only: nothing is uploaded and every client keeps its own model."""
import torch
from support import setup

from fedrepro.fl.seeding import torch_gen


def test_local_uploads_nothing_and_keeps_distinct_models(tiny):
    method, clients, st = setup(tiny(**{"method.name": "local"}))
    ups = [method.client_update(st.shared, st.client_states[c.cid], c, torch_gen(0, "client", 0, c.cid), 0)
           for c in clients[:2]]
    assert ups[0].upload == {} and st.shared == {}
    k = next(iter(ups[0].state))
    assert not torch.equal(ups[0].state[k], ups[1].state[k])
