"""FedPFT (Wu et al.): the FTM, prompt locality, the alternating schedule's gradient routing
(FedPFT (ICLR) Eqs. 4-5, 8-9), the MoCo branch, the ablation map and the communication count."""
import numpy as np
import pytest
import torch

import fedrepro
from fedrepro.errors import ConfigError
from fedrepro.fl.engine import simulate
from fedrepro.fl.local import evaluate_model
from fedrepro.fl.seeding import torch_gen
from fedrepro.methods import METHODS
from fedrepro.analysis.cost import communication_cost, module_param_counts
from fedrepro.data.augment import augment
from fedrepro.methods.fedpft_con import QUEUE, QUEUE_PTR
from fedrepro.models import count_params
from fedrepro.models.ftm import FTM, ftm_param_count
from fedrepro.papers.fedpft.variants import ABLATION_SETTINGS
from support import setup

RESNET = {"model.name": "resnet8", "model.args": {"width": 4}}  # BN everywhere, m = 16
CON_SMALL = {"queue_size": 64, "n_rho": 4, "proj_dim": 8}

# FedPFT (ICLR) Eqs. 8-9 (arXiv Eqs. 5-6), the gradient-routing table, written out independently of the module.
ROUTING = {
    "feature": ({"p_kappa", "tau"}, {"phi", "tau", "h_rho"}),
    "task": ({"phi", "tau", "h_kappa"}, {"p_rho", "tau"}),
    "joint": ({"phi", "tau", "h_kappa", "p_kappa"}, {"phi", "tau", "h_rho", "p_rho"}),
    "con_only": (set(), {"phi", "tau", "h_rho", "p_rho"}),
}


@pytest.fixture(autouse=True)
def one_thread():
    """These models are tiny: extra intra-op threads only add synchronisation (tens of times slower
    on a shared 2-core machine). Restored after each test so other modules are unaffected."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)



def update(method, st, clients, cid=0, rnd=0, state=None):
    state = st.client_states[cid] if state is None else state
    return method.client_update(st.shared, state, clients[cid], torch_gen(0, "client", rnd, cid), rnd)


def changed(a, b):
    return not torch.equal(a, b)


def keys_with(d, prefix):
    return [k for k in d if k.startswith(prefix)]


# --- the FTM (ICLR §3.3; its size: App. N, Table 15) -------------------------------------------
@pytest.mark.parametrize("m, expected", [(256, 263_168), (512, 1_050_624)])
def test_ftm_parameter_count_matches_the_communication_table(m, expected):
    assert count_params(FTM(m, residual="none")) == 4 * m * m + 4 * m == expected
    # the default adds one LayerNorm: 4m² + 6m, still 0.26M / 1.05M after rounding
    assert count_params(FTM(m)) == ftm_param_count(m) == 4 * m * m + 6 * m
    assert round(count_params(FTM(m)) / 1e6, 2) == round(expected / 1e6, 2)
    assert count_params(FTM(m, layers=2, residual="none")) == ftm_param_count(m, 2, "none") == 2 * expected


@pytest.mark.parametrize("residual, layers", [("prenorm", 1), ("none", 1), ("prenorm", 2)])
def test_ftm_output_is_token_zero_of_full_self_attention(residual, layers):
    torch.manual_seed(0)
    ftm = FTM(16, heads=4, layers=layers, residual=residual)
    f, p = torch.randn(5, 16), torch.randn(3, 16)
    out, attn = ftm(f, p, return_attention=True)
    x = torch.cat([f[:, None], p[None].expand(5, -1, -1)], 1)
    for block in ftm.blocks:  # the reference: every token attends, nothing skipped
        h = block.norm(x) if block.norm is not None else x
        a, w = block.attn(h, h, h)
        x = x + a if residual == "prenorm" else a
    assert torch.allclose(out, x[:, 0], atol=1e-5)
    assert attn.shape == (5, 4) and torch.allclose(attn, w[:, 0], atol=1e-6)
    assert torch.allclose(attn.sum(1), torch.ones(5))
    assert torch.allclose(ftm(f, p), out)


# --- prompts stay on the client (ICLR §3.1 step 4) ----------------------------------------------
def test_prompts_are_never_aggregated_and_persist_across_rounds(tiny):
    method, clients, st = setup(tiny(**{"method.name": "fedpft", "method.args": {"r_f": 1, "r_a": 1}}))
    assert "prompts_kappa" not in st.shared and "prompts_kappa" in st.client_states[0]
    assert st.client_states[0]["prompts_kappa"].shape == (10, method.model.feature_dim)
    assert changed(st.client_states[0]["prompts_kappa"], st.client_states[1]["prompts_kappa"])  # per client
    first = st.client_states[0]["prompts_kappa"].clone()
    upd = update(method, st, clients)
    assert not keys_with(upd.upload, "prompts") and changed(upd.state["prompts_kappa"], first)
    new, _ = method.aggregate(st.shared, [upd], st.server_state, 0)
    assert set(new) == set(st.shared)
    # the engine hands each client its own prompts back the next round
    sim = simulate(method, clients, seed=0, rounds=2, progress=False)
    p = [s["prompts_kappa"] for s in sim.client_states]
    assert not keys_with(sim.shared, "prompts") and changed(p[0], p[1])
    upd2 = method.client_update(sim.shared, sim.client_states[0], clients[0], torch_gen(0, "client", 2, 0), 2)
    assert changed(upd2.state["prompts_kappa"], p[0])


# --- the alternating schedule (ICLR §3.5) -------------------------------------------------------
def test_phase1_gives_phi_no_backward_and_trains_only_prompts_and_ftm(tiny):
    method, clients, st = setup(tiny(**RESNET, **{"method.name": "fedpft", "method.args": {"r_f": 2, "r_a": 0}}))
    grad_outputs = []
    hook = method.model.features.register_forward_hook(lambda m, i, o: grad_outputs.append(o.requires_grad))
    upd = update(method, st, clients)
    hook.remove()
    assert grad_outputs and not any(grad_outputs)  # no graph through φ, so no backward reaches it
    assert all(p.grad is None for p in method.model.features.parameters())
    phi = keys_with(st.shared, "features.")
    assert any(k.endswith("running_mean") for k in phi)
    assert all(torch.equal(upd.upload[k], st.shared[k]) for k in phi + keys_with(st.shared, "head."))
    assert any(changed(upd.upload[k], st.shared[k]) for k in keys_with(st.shared, "ftm."))
    assert changed(upd.state["prompts_kappa"], st.client_states[0]["prompts_kappa"])
    # the "train" BN mode uses batch statistics: running stats move, φ's weights still do not
    method, clients, st = setup(tiny(**RESNET, **{"method.name": "fedpft", "method.args": {
        "r_f": 1, "r_a": 0, "phi_bn_mode_phase1": "train"}}))
    upd = update(method, st, clients)
    assert any(changed(upd.upload[k], st.shared[k]) for k in phi if k.endswith("running_mean"))
    assert all(torch.equal(upd.upload[k], st.shared[k]) for k in phi if k.endswith("weight"))


def test_phase2_freezes_prompts_and_trains_phi_ftm_head(tiny):
    method, clients, st = setup(tiny(**{"method.name": "fedpft", "method.args": {"r_f": 0, "r_a": 1}}))
    upd = update(method, st, clients)
    assert torch.equal(upd.state["prompts_kappa"], st.client_states[0]["prompts_kappa"])
    for prefix in ("features.", "ftm.", "head."):
        assert any(changed(upd.upload[k], st.shared[k]) for k in keys_with(st.shared, prefix)), prefix


def test_without_alternation_everything_trains_in_one_epoch(tiny):
    method, clients, st = setup(tiny(**{"method.name": "fedpft", "method.args": {
        "alternate": False, "r_f": 1, "r_a": 0}}))
    upd = update(method, st, clients)
    assert changed(upd.state["prompts_kappa"], st.client_states[0]["prompts_kappa"])
    for prefix in ("features.", "ftm.", "head."):
        assert any(changed(upd.upload[k], st.shared[k]) for k in keys_with(st.shared, prefix)), prefix


def test_per_classifier_keeps_the_head_local(tiny):
    method, clients, st = setup(tiny(**{"method.name": "fedpft", "method.args": {"personal_classifier": True}}))
    head = keys_with(method.model.state_dict(), "head.")
    assert head and not set(head) & set(st.shared)
    upd = update(method, st, clients)
    assert not set(head) & set(upd.upload)
    assert any(changed(upd.state[k], st.client_states[0][k]) for k in head)


def test_epoch_split_rule(tiny):
    alpha = {"data.partition_args": {"alpha": 0.1, "min_size": 5}}
    assert setup(tiny(**alpha, **{"method.name": "fedpft"}))[0].epoch_split() == (4, 1)  # ICLR: (4, 1) always
    assert setup(tiny(**alpha, **{"method.name": "fedpft_con"}))[0].epoch_split() == (3, 2)
    assert setup(tiny(**{"method.name": "fedpft_con"}))[0].epoch_split() == (4, 1)  # α = 0.5
    assert setup(tiny(**alpha, **{"method.name": "fedpft", "method.args.epoch_split": "alpha_rule"}))[0] \
        .epoch_split() == (3, 2)


# --- evaluation: global φ, τ, h_κ + own prompts ----------------------------------------------------
def test_evaluation_uses_the_clients_own_prompts(tiny):
    method, clients, st = setup(tiny(**{"method.name": "fedpft"}))
    sim = simulate(method, clients, seed=0, rounds=1, progress=False)
    a, b = sim.client_states[0], sim.client_states[1]
    x, _ = next(clients[0].test_batches(100))
    with torch.no_grad():
        ma, mb = method.personalized_model(sim.shared, a).eval(), method.personalized_model(sim.shared, b).eval()
        assert not torch.allclose(ma(x), mb(x))
        assert torch.allclose(ma(x), ma.head(ma.features(x)))  # features = f′, the classifier's input
    ra, rb = (method.evaluate(sim.shared, s, clients[0], None) for s in (a, b))
    assert ra.loss_sum != rb.loss_sum
    assert evaluate_model(ma, clients[0]).loss_sum == pytest.approx(ra.loss_sum, rel=1e-5)
    assert ma.attention(x).shape == (x.shape[0], 11)


# --- FedPFT+Con (ICLR §3.6, App. C) -------------------------------------------------------------
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


def test_augment_is_seeded_and_shape_preserving():
    x = torch.randn(6, 3, 8, 8)
    mean, std = torch.full((1, 3, 1, 1), 0.5), torch.full((1, 3, 1, 1), 0.25)
    a = augment(x, torch.Generator().manual_seed(1), mean, std)
    assert a.shape == x.shape and torch.equal(a, augment(x, torch.Generator().manual_seed(1), mean, std))
    assert changed(a, augment(x, torch.Generator().manual_seed(2), mean, std))
    assert augment(x[:, :1], torch.Generator().manual_seed(1), mean[:, :1], std[:, :1]).shape == (6, 1, 8, 8)
    ident = augment(x, torch.Generator().manual_seed(1), mean, std, crop_min=1.0, jitter=0.0, gray_p=0.0)
    clipped = ((x * std + mean).clamp(0, 1) - mean) / std  # full crop, no jitter: x or its mirror image
    flipped = [torch.allclose(i, c, atol=1e-5) or torch.allclose(i, c.flip(-1), atol=1e-5)
               for i, c in zip(ident, clipped)]
    assert all(flipped)


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


# --- two-stage and FedAvg+Linear (ICLR App. G, App. F) -----------------------------------------
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


def test_fedavg_linear_keeps_an_identity_initialised_layer_local(tiny):
    method, clients, st = setup(tiny(**{"method.name": "fedavg_linear", "method.args": {"r_a": 0}}))
    m = method.model.feature_dim
    assert torch.equal(st.client_states[0]["linear.weight"], torch.eye(m))
    assert not keys_with(st.shared, "linear.") and set(st.shared) == set(METHODS.get("fedavg")(
        method.ctx, None).shared_keys)
    upd = update(method, st, clients)
    assert changed(upd.state["linear.weight"], torch.eye(m)) and not keys_with(upd.upload, "linear.")
    assert all(torch.equal(upd.upload[k], st.shared[k]) for k in st.shared)  # phase 1: φ, h frozen


# --- learning ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name, args", [("fedpft", {}), ("fedpft_con", CON_SMALL), ("fedavg_linear", {})])
def test_method_learns_on_synthetic(tiny, name, args):
    res = fedrepro.run(tiny(**{"method.name": name, "method.args": args, "train.rounds": 4}))
    assert res.summary["final_acc_mean"] > 0.6, res.summary  # 4 balanced classes: chance is 25%


# --- communication (ICLR App. N, Table 15) ------------------------------------------------------
def test_communication_cost_counts_the_real_parameters(tiny):
    method, clients, st = setup(tiny(**RESNET, **{"method.name": "fedpft_con", "method.args": CON_SMALL}))
    net, m = method.model, method.model.feature_dim
    cost = communication_cost(method)
    assert cost["phi"] == count_params(net.features)
    assert cost["tau"] == count_params(net.ftm) == ftm_param_count(m)
    assert cost["h_kappa"] == count_params(net.head) == m * net.num_classes + net.num_classes
    assert cost["h_rho"] == m * 8 + 8
    assert cost["total"] == cost["phi"] + cost["tau"] + cost["h_kappa"] + cost["h_rho"]
    upd = update(method, st, clients)
    assert communication_cost(method, upd.upload, include_buffers=True)["total"] == \
        sum(v.numel() for v in upd.upload.values())
    sizes = module_param_counts(method)
    assert sizes["prompts_kappa"] == 10 * m and sizes["prompts_rho"] == 4 * m  # counted, never uploaded
    assert {k: sizes[k] for k in ("phi", "tau", "h_kappa", "h_rho")} == {k: cost[k] for k in sizes if k in cost}
    per_cls = setup(tiny(**{"method.name": "fedpft", "method.args.personal_classifier": True}))[0]
    assert set(communication_cost(per_cls)) == {"phi", "tau", "total"}


# --- configuration ----------------------------------------------------------------------------
def test_ablation_settings_parse_and_map_table4(tiny):
    assert {"I", "II", "III", "IV", "V", "VI"} <= set(ABLATION_SETTINGS)
    for key, s in ABLATION_SETTINGS.items():
        METHODS.get(s["method"]).parse_params(s["args"])
    assert ABLATION_SETTINGS["III"] == {"method": "fedpft", "args": {}}
    assert ABLATION_SETTINGS["V"] == {"method": "fedpft_con", "args": {}}
    assert ABLATION_SETTINGS["II"]["args"]["alternate"] is False
    assert ABLATION_SETTINGS["VI"]["args"]["alternate"] is False


@pytest.mark.parametrize("name, args, key", [
    ("fedpft", {"ftm_heads": 3}, "ftm_heads"),  # does not divide m = 64
    ("fedpft", {"ftm_residual": "post"}, "ftm_residual"),
    ("fedpft", {"ftm_init": "ones"}, "ftm_init"),
    ("fedpft", {"r_f": 0, "r_a": 0}, "r_f"),
    ("fedpft", {"n_prompts": 0}, "n_prompts"),
    ("fedpft_con", {"moco_momentum": 1.5}, "moco_momentum"),
    ("fedpft_con", {"con_prompts": "kappa", "use_prompts": False}, "con_prompts"),
    ("fedavg_linear", {"linear_init": "zeros"}, "linear_init"),
])
def test_bad_hyperparameters_name_the_key(tiny, name, args, key):
    with pytest.raises(ConfigError, match=key):
        setup(tiny(**{"method.name": name, "method.args": args}))


def test_zero_out_init_starts_the_ftm_as_the_identity():
    ftm = FTM(16, heads=4, init="zero_out")
    f = torch.randn(3, 16)
    assert torch.allclose(ftm(f, torch.randn(5, 16)), f)


def test_attention_rows_are_distributions_over_feature_and_prompts(tiny):
    from fedrepro.analysis.attention import attention_rows, attention_summary, attention_table, plot_attention

    res = fedrepro.run(tiny(**{"method.name": "fedpft", "method.args": {"r_f": 1, "r_a": 1, "n_prompts": 4}}))
    rows = attention_rows(res, client=1, samples=5)
    assert rows.shape == (5, 5)  # [f, p_1..p_4]
    assert np.allclose(rows.sum(1), 1.0, atol=1e-5) and (rows >= 0).all()
    s = attention_summary(rows)
    assert s["self"] + s["prompts"] == pytest.approx(1.0, abs=1e-5)
    assert list(attention_table({"a": rows}).columns) == ["self", "prompts", "spread_across_samples"]
    assert len(plot_attention({"a": rows, "b": rows}).axes) == 3  # two panels and a colour bar
    with pytest.raises(ConfigError, match="which"):
        attention_rows(res, which="sigma")
    with pytest.raises(ConfigError, match="no FTM"):
        attention_rows(fedrepro.run(tiny(**{"method.name": "fedavg"})))
