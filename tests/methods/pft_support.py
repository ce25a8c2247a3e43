"""What the FedPFT family's tests share (fedpft, fedpft_con, fedpft_two_stage, fedavg_linear, and the
communication cost in tests/analysis)."""
from fedrepro.fl.seeding import torch_gen

# A small MoCo branch: a 64-key queue, 4 ρ-prompts, an 8-dimensional projection.
CON_SMALL = {"queue_size": 64, "n_rho": 4, "proj_dim": 8}


def update(method, st, clients, cid=0, rnd=0, state=None):
    state = st.client_states[cid] if state is None else state
    return method.client_update(st.shared, state, clients[cid], torch_gen(0, "client", rnd, cid), rnd)
