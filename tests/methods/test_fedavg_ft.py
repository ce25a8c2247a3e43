"""FedAvg+FT: evaluation fine-tunes a throw-away copy, deterministically."""
import torch
from support import setup

from fedrepro.fl.seeding import torch_gen
from fedrepro.methods import METHODS


def test_fedavg_ft_evaluation_fine_tunes_without_side_effects(tiny):
    method, clients, st = setup(tiny(**{"method.name": "fedavg_ft", "method.args.ft_epochs": 3}))
    before = {k: v.clone() for k, v in st.shared.items()}
    r1 = method.evaluate(st.shared, st.client_states[0], clients[0], torch_gen(0, "eval", 1, 0))
    r2 = method.evaluate(st.shared, st.client_states[0], clients[0], torch_gen(0, "eval", 1, 0))
    assert (r1.correct, r1.loss_sum) == (r2.correct, r2.loss_sum)
    assert all(torch.equal(before[k], st.shared[k]) for k in before)
    plain = METHODS.get("fedavg").evaluate(method, st.shared, st.client_states[0], clients[0], None)
    assert (plain.correct, plain.loss_sum) != (r1.correct, r1.loss_sum)
