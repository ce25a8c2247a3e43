"""FedPFT+Con (ICLR §3.6, App. C): the gradient-routing table (ICLR Eqs. 8-9), phase-only runs, the
MoCo queue and momentum encoder, and a checkpoint round trip."""
import contextlib

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
    work = method.begin_round(net, st.client_states[0], clients[0])
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
    args = {**CON_SMALL, "queue_size": 48, "queue_cap": "none"}
    method, clients, st = setup(tiny(**{"method.name": "fedpft_con", "method.args": args}))
    s0 = st.client_states[0]
    assert s0[QUEUE].shape == (48, 8) and int(s0[QUEUE_PTR]) == 0
    assert QUEUE not in st.shared and "proj.weight" in st.shared and "prompts_rho" not in st.shared
    upd = update(method, st, clients)
    pushed = 5 * clients[0].num_train  # r_f + r_a epochs, every sample's key enqueued once per epoch
    assert int(upd.state[QUEUE_PTR]) == pushed % 48 and changed(upd.state[QUEUE], s0[QUEUE])
    assert not keys_with(upd.upload, "queue")
    upd2 = update(method, st, clients, rnd=1, state=upd.state)  # the queue carries over
    assert int(upd2.state[QUEUE_PTR]) == (2 * pushed) % 48


def test_con_queue_holds_at_most_one_key_per_training_image(tiny):
    """Our reading of "the default settings from MoCo" (arXiv App. B.3) at a client's scale: a
    client's queue is no longer than its training split (MoCo's holds each image at most once),
    by default; a client with more images keeps queue_size."""
    method, clients, st = setup(tiny(**{"method.name": "fedpft_con", "method.args": {**CON_SMALL, "queue_size": 48}}))
    small = next(c for c in clients if c.num_train < 48)
    large = next(c for c in clients if c.num_train > 48)
    upd = update(method, st, clients, cid=small.cid)
    n = small.num_train
    assert upd.state[QUEUE].shape == (n, 8)
    assert int(upd.state[QUEUE_PTR]) == (5 * n) % n
    # each training image's key is in it once: the last epoch's keys fill it, none twice
    upd2 = update(method, st, clients, cid=small.cid, rnd=1, state=upd.state)
    assert upd2.state[QUEUE].shape == (n, 8) and changed(upd2.state[QUEUE], upd.state[QUEUE])
    assert update(method, st, clients, cid=large.cid).state[QUEUE].shape == (48, 8)


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
                       state=torch.load(buf, weights_only=False))  # unsafe-load-ok: its own SimState
    for a, b in zip(full.client_states, resumed.client_states):
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert all(torch.equal(full.shared[k], resumed.shared[k]) for k in full.shared)


# --- φ's BatchNorm running statistics (issue 54): the views x′ do not write them -------------------
BN_BUFFERS = ("running_mean", "running_var", "num_batches_tracked")


def _bn_buffers(sd):
    return {k: v for k, v in sd.items() if k.startswith("features.") and k.endswith(BN_BUFFERS)}


@contextlib.contextmanager
def _momentum_zero(module):
    """The audit's reference (shared/audits/fedpft-pfedcspc-scripts/e1_fedpft_con_bn.py): BatchNorm
    with momentum 0 keeps its running mean and variance (r ← 1·r + 0·batch) while still normalising
    by the batch."""
    bns = [m for m in module.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    saved = [m.momentum for m in bns]
    for m in bns:
        m.momentum = 0.0
    try:
        yield
    finally:
        for m, v in zip(bns, saved):
            m.momentum = v


def test_con_feature_phase_leaves_phi_bn_running_stats_as_downloaded(tiny):
    """In the feature phase the CE forward runs φ in eval mode, so only the views could write φ's
    running statistics: by default they stay as downloaded; view_bn_stats="update" (the old
    behaviour) lets the views move them."""
    args = {**CON_SMALL, "r_f": 1, "r_a": 0, "epoch_split": "fixed"}
    method, clients, st = setup(tiny(**RESNET, **{"method.name": "fedpft_con", "method.args": args}))
    upd = update(method, st, clients)
    before = _bn_buffers(st.shared)
    assert before and any(changed(upd.upload[k], st.shared[k]) for k in keys_with(st.shared, "features."))  # φ trained
    assert all(torch.equal(upd.upload[k], v) for k, v in before.items())
    method, clients, st = setup(tiny(**RESNET, **{"method.name": "fedpft_con",
                                                  "method.args": {**args, "view_bn_stats": "update"}}))
    upd = update(method, st, clients)
    assert all(changed(upd.upload[k], v) for k, v in before.items() if k.endswith("running_mean"))


def test_con_phi_bn_running_stats_come_from_the_clean_forward_only(tiny):
    """After a whole round (both phases) φ's running statistics equal those of the same round with
    the views kept out of them by another mechanism (momentum 0 around the contrastive branch, the
    audit's), bit for bit, and so does every trained tensor: the views still normalise by their
    batch. ``num_batches_tracked`` counts the clean task-phase batches alone."""
    cfg = tiny(**RESNET, **{"method.name": "fedpft_con", "method.args": {**CON_SMALL, "r_f": 2, "r_a": 2}})
    method, clients, st = setup(cfg)
    ours = update(method, st, clients)

    ref, clients, st = setup(cfg.replace(**{"method.args.view_bn_stats": "update"}))
    plain = update(ref, st, clients)
    views = ref.contrastive_loss

    def without_stats(net, *a, **k):
        with _momentum_zero(net.features):
            return views(net, *a, **k)

    ref.contrastive_loss = without_stats
    kept = update(ref, st, clients)
    bn = _bn_buffers(st.shared)
    stats = [k for k in bn if not k.endswith("num_batches_tracked")]
    for k in ours.upload:
        if not k.endswith("num_batches_tracked"):
            assert torch.equal(ours.upload[k], kept.upload[k]), k
    assert any(not torch.equal(plain.upload[k], ours.upload[k]) for k in stats)  # the old way differs
    batches = -(-clients[0].num_train // cfg.train.batch_size)
    counts = [k for k in bn if k.endswith("num_batches_tracked")]
    assert counts and all(int(ours.upload[k] - st.shared[k]) == 2 * batches for k in counts)  # r_a = 2
