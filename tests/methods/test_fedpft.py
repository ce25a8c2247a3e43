"""FedPFT (Wu et al., ICLR): prompt locality, the alternating schedule's gradient routing (ICLR
Eqs. 4-5), the epoch split, and evaluation with the client's own prompts."""
import pytest
import torch
from support import RESNET, changed, keys_with, setup

from fedrepro.fl.engine import simulate
from fedrepro.fl.local import evaluate_model
from fedrepro.fl.seeding import torch_gen

from .pft_support import update


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
