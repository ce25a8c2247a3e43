"""FedAvg (McMahan et al., 2017): the global model is the sample-weighted mean of the uploads."""
import torch
from support import setup

from fedrepro.fl.seeding import torch_gen


def test_fedavg_global_model_is_sample_weighted_mean(tiny):
    method, clients, st = setup(tiny())
    ups = [method.client_update(st.shared, st.client_states[c.cid], c, torch_gen(0, "client", 0, c.cid), 0)
           for c in clients]
    new, _ = method.aggregate(st.shared, ups, st.server_state, 0)
    n = torch.tensor([float(u.num_samples) for u in ups])
    for k in new:
        manual = sum(w * u.upload[k].double() for w, u in zip(n / n.sum(), ups))
        assert torch.allclose(new[k].double(), manual, atol=1e-6)
    assert [u.num_samples for u in ups] == [c.num_train for c in clients]
