"""Two-stage FedPFT (ICLR App. G): contrastive training first, then FedPFT."""
import torch
from support import changed, keys_with, setup

from .pft_support import CON_SMALL, update


def test_two_stage_trains_contrastively_then_fedpft(tiny):
    method, clients, st = setup(tiny(**{"method.name": "fedpft_two_stage",
                                        "method.args": {**CON_SMALL, "stage1_rounds": 1}}))
    s0 = st.client_states[0]
    upd = update(method, st, clients, rnd=0)  # stage 1: L_Con only
    assert "loss_ce" not in upd.metrics and "loss_con" in upd.metrics
    assert torch.equal(upd.state["prompts_kappa"], s0["prompts_kappa"])
    assert all(torch.equal(upd.upload[k], st.shared[k]) for k in keys_with(st.shared, "head."))
    assert changed(upd.state["prompts_rho"], s0["prompts_rho"])
    upd = update(method, st, clients, rnd=1)  # stage 2: FedPFT
    assert "loss_con" not in upd.metrics
    assert torch.equal(upd.state["prompts_rho"], s0["prompts_rho"])
    assert all(torch.equal(upd.upload[k], st.shared[k]) for k in keys_with(st.shared, "proj."))
    assert changed(upd.state["prompts_kappa"], s0["prompts_kappa"])
