"""FedPFT+Con (ICLR §3.6, App. C): the gradient-routing table (ICLR Eqs. 8-9), phase-only runs, the
MoCo queue and momentum encoder, and a checkpoint round trip."""
import pytest
import torch
from support import RESNET, changed, keys_with, setup

from fedrepro.fl.engine import simulate
from fedrepro.fl.seeding import torch_gen
from fedrepro.methods.fedpft_con import QUEUE, QUEUE_PTR

from .pft_support import CON_SMALL, update

# FedPFT (ICLR) Eqs. 8-9 (arXiv Eqs. 5-6), the gradient-routing table, written out independently of the module.
ROUTING = {
    "feature": ({"p_kappa", "tau"}, {"phi", "tau", "h_rho"}),
    "task": ({"phi", "tau", "h_kappa"}, {"p_rho", "tau"}),
    "joint": ({"phi", "tau", "h_kappa", "p_kappa"}, {"phi", "tau", "h_rho", "p_rho"}),
    "con_only": (set(), {"phi", "tau", "h_rho", "p_rho"}),
}


def _trained_groups(method, net, loss):
    out = set()
    for name, params in method.param_groups(net).items():
        params = [p for p in params if p.requires_grad]
        if not params or loss is None:
            continue
        grads = torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True)
        if any(g is not None and g.abs().sum() > 0 for g in grads):
            out.add(name)
    return out


@pytest.mark.parametrize("phase", list(ROUTING))
def test_con_gradient_routing_follows_the_spec_table(tiny, phase):
    method, clients, st = setup(tiny(**RESNET, **{"method.name": "fedpft_con", "method.args": CON_SMALL}))
    net = method.load(st.shared, st.client_states[0])
    work = method.begin_round(net, st.client_states[0])
    method.configure(net, phase, True)
    net.train()
    gen = torch_gen(0, "client", 0, 0)
    x, y = next(clients[0].train_batches(20, gen))
    phi_graph = []
    hook = net.features.register_forward_hook(lambda m, i, o: phi_graph.append(o.requires_grad))
    parts = method.losses(net, x, y, phase, True, work, gen, clients[0])
    hook.remove()
    lce, lcon, keys = parts.get("ce"), parts["con"], work["keys"]
    ce, con = ROUTING[phase]
    assert _trained_groups(method, net, lce) == ce
    assert _trained_groups(method, net, lcon) == con
    # nothing outside the two sets may even be trainable
    trainable = {n for n, ps in method.param_groups(net).items() if any(p.requires_grad for p in ps)}
    assert trainable == ce | con
    # φ builds a graph only for the loss that trains it (phase 1: L_Con only; phase 2: L_CE only)
    assert sum(phi_graph) == ("phi" in ce) + ("phi" in con)
    assert keys.shape == (20, 8) and torch.allclose(keys.norm(dim=1), torch.ones(20), atol=1e-5)


def test_con_phase_only_runs_change_what_the_table_says(tiny):
    base = {"method.name": "fedpft_con", "method.args": {**CON_SMALL, "r_f": 1, "r_a": 0}}
    method, clients, st = setup(tiny(**base))
    s0, upd = st.client_states[0], update(method, st, clients)
    assert changed(upd.state["prompts_kappa"], s0["prompts_kappa"])
    assert torch.equal(upd.state["prompts_rho"], s0["prompts_rho"])
    assert all(torch.equal(upd.upload[k], st.shared[k]) for k in keys_with(st.shared, "head."))
    for prefix in ("features.", "ftm.", "proj."):
        assert any(changed(upd.upload[k], st.shared[k]) for k in keys_with(st.shared, prefix)), prefix
    method, clients, st = setup(tiny(**{**base, "method.args": {**CON_SMALL, "r_f": 0, "r_a": 1}}))
    s0, upd = st.client_states[0], update(method, st, clients)
    assert torch.equal(upd.state["prompts_kappa"], s0["prompts_kappa"])
    assert changed(upd.state["prompts_rho"], s0["prompts_rho"])
    assert all(torch.equal(upd.upload[k], st.shared[k]) for k in keys_with(st.shared, "proj."))
    for prefix in ("features.", "ftm.", "head."):
        assert any(changed(upd.upload[k], st.shared[k]) for k in keys_with(st.shared, prefix)), prefix


def test_con_queue_is_client_state_of_the_configured_size(tiny):
    method, clients, st = setup(tiny(**{"method.name": "fedpft_con", "method.args": {**CON_SMALL, "queue_size": 48}}))
    s0 = st.client_states[0]
    assert s0[QUEUE].shape == (48, 8) and int(s0[QUEUE_PTR]) == 0
    assert QUEUE not in st.shared and "proj.weight" in st.shared and "prompts_rho" not in st.shared
    upd = update(method, st, clients)
    pushed = 5 * clients[0].num_train  # r_f + r_a epochs, every sample's key enqueued once per epoch
    assert int(upd.state[QUEUE_PTR]) == pushed % 48 and changed(upd.state[QUEUE], s0[QUEUE])
    assert not keys_with(upd.upload, "queue")
    upd2 = update(method, st, clients, rnd=1, state=upd.state)  # the queue carries over
    assert int(upd2.state[QUEUE_PTR]) == (2 * pushed) % 48


@pytest.mark.parametrize("m", [0.0, 1.0, 0.9])
def test_momentum_encoder_is_an_ema_of_phi_and_h_rho(tiny, m):
    args = {**CON_SMALL, "momentum_encoder": "persistent", "moco_momentum": m, "r_f": 1, "r_a": 1}
    method, clients, st = setup(tiny(**{"method.name": "fedpft_con", "method.args": args}))
    s0 = st.client_states[0]
    upd = update(method, st, clients)
    params = [k for k, _ in method.model.named_parameters() if k.startswith(("features.", "proj."))]
    key = {k: upd.state["momentum." + k] for k in params}
    if m == 0.0:  # the key encoder is the query encoder after every step
        assert all(torch.allclose(key[k], upd.upload[k]) for k in params)
    elif m == 1.0:  # never moves
        assert all(torch.equal(key[k], s0["momentum." + k]) for k in params)
    else:
        assert all(not torch.allclose(key[k], upd.upload[k]) for k in params)
        assert any(changed(key[k], s0["momentum." + k]) for k in params)


def test_con_resumed_run_equals_uninterrupted(tiny):
    """Everything a client needs (prompts, queue, pointer) is in its state: a checkpoint round trip
    mid-run reproduces the uninterrupted run exactly."""
    import io
    method, clients, _ = setup(tiny(**{"method.name": "fedpft_con", "method.args": {**CON_SMALL, "r_f": 1,
                                                                                    "r_a": 1}}))
    full = simulate(method, clients, seed=0, rounds=2, progress=False)
    half = simulate(method, clients, seed=0, rounds=1, progress=False)
    buf = io.BytesIO()
    torch.save(half, buf)
    buf.seek(0)
    resumed = simulate(method, clients, seed=0, rounds=2, progress=False,
                       state=torch.load(buf, weights_only=False))
    for a, b in zip(full.client_states, resumed.client_states):
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert all(torch.equal(full.shared[k], resumed.shared[k]) for k in full.shared)
