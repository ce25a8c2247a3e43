"""The text-prompt methods on a frozen CLIP (FedOTP and its baselines, fedrepro.methods.clip_prompt):
each learns on a tiny few-shot Fashion-MNIST split with the stand-in CLIP, and each keeps its own
mechanism (what is uploaded, what stays, how the server combines), plus the official FedOTP code's
switches of the shared base."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from support import check_resume_matches, setup, update

import fedrepro
from fedrepro.fl.seeding import torch_gen
from fedrepro.methods import METHODS
from fedrepro.methods.clip_prompt import MOMENTUM_KEY
from fedrepro.models.clip_cache import normalized_tokens

# 3 clients × 2 disjoint classes of Fashion-MNIST's 10, 4 shots each; the classifier ranges over
# all 10 classes (FedOTP §5.1), so chance is 10%.
CLIP = {"model.name": "clip", "model.args": {"arch": "standin"}, "data.dataset": "fashion_mnist_federated",
        "data.dataset_args": {}, "data.partition": "pathological",
        "data.partition_args": {"classes_per_client": 2, "shots": 4}, "data.num_clients": 3,
        "data.max_test": 100, "train.batch_size": 8, "train.lr": 0.01, "train.rounds": 2, "train.local_epochs": 2}
CLIP_METHODS = sorted(n for n in METHODS.names() if getattr(METHODS.get(n), "requires_clip", False))
NEW = ("promptfl_ft", "promptfl_fedprox", "promptfl_fedper", "promptfl_fedamp", "pfedprompt")


def cfg(tiny, name, args=None, **over):
    return tiny(**{**CLIP, "method.name": name, "method.args": args or {}, **over})


def build(tiny, name, args=None, **over):
    return setup(cfg(tiny, name, args, **over))


def numel(state):
    return sum(v.numel() for v in state.values() if isinstance(v, torch.Tensor))


def test_every_clip_method_is_registered_as_one():
    assert set(NEW) | {"fedotp", "promptfl", "coop", "zeroshot_clip"} <= set(CLIP_METHODS)


@pytest.mark.parametrize("name", CLIP_METHODS)
def test_clip_methods_beat_chance(tiny, name):
    res = fedrepro.run(cfg(tiny, name))
    # 10 classes: chance is 0.1 (zero-shot is not trained: above chance is all it must be)
    assert res.summary["final_acc_mean"] > (0.2 if name == "zeroshot_clip" else 0.3), res.summary


# ------------------------------------------------------------------------------------------ FedOTP
def test_fedotp_uploads_only_the_global_prompt_and_keeps_a_local_one(tiny):
    m, clients, st = build(tiny, "fedotp")
    L, W = m.prompts.ctx.shape[1:]
    assert m.prompts.ctx.shape[0] == 2 and st.shared["ctx"].shape == (1, L, W)
    ups = [update(m, st, c) for c in clients]
    for c, u in zip(clients, ups):
        assert set(u.upload) == {"ctx"} and u.upload["ctx"].shape == (1, L, W)
        assert u.state["ctx"].shape == (1, L, W)  # the local prompt, never uploaded
        assert not torch.equal(u.state["ctx"], st.client_states[c.cid]["ctx"])  # and trained
    assert not torch.equal(ups[0].state["ctx"], ups[1].state["ctx"])
    new, _ = m.aggregate(st.shared, ups, st.server_state, 0)
    w = torch.tensor([u.num_samples for u in ups], dtype=torch.float32)
    manual = sum(wi * u.upload["ctx"] for wi, u in zip(w, ups)) / w.sum()
    assert torch.allclose(new["ctx"], manual, atol=1e-6)
    # the client is scored with [aggregated global, its own local]
    assert torch.equal(m.eval_ctx(new, ups[0].state, clients[0], None),
                       torch.cat([new["ctx"], ups[0].state["ctx"]]))


def test_fedotp_local_only_uploads_nothing_and_global_only_shares_its_one_prompt(tiny):
    m, clients, st = build(tiny, "fedotp", {"prompts": "local_only"})
    u = update(m, st, clients[0])
    assert u.upload == {} and numel(st.shared) == 0 and u.state["ctx"].shape[0] == 1
    new, _ = m.aggregate(st.shared, [u], st.server_state, 0)
    assert new is st.shared

    m, clients, st = build(tiny, "fedotp", {"prompts": "global_only"})
    assert m.prompts.ctx.shape[0] == 1 and st.shared["ctx"].shape[0] == 1 and st.client_states[0] == {}
    u = update(m, st, clients[0])
    assert u.upload["ctx"].shape == st.shared["ctx"].shape and u.state == {}


def test_fedotp_unbalanced_ot_at_gamma_one_is_classical_ot(tiny):
    solve = {"lam": 0.1, "max_iter": 3000, "thresh": 1e-9}  # both converged
    uot, clients, st = build(tiny, "fedotp", {"ot": "uot", "gamma": 1.0, **solve})
    bal, _, _ = build(tiny, "fedotp", {"ot": "ot", **solve})
    ctx = uot.assemble(st.shared, st.client_states[0])
    feats = uot.features(clients[0], "test")
    a, b = uot.score(ctx, feats), bal.score(ctx, feats)
    assert torch.allclose(a / uot.scale, b / bal.scale, atol=1e-5, rtol=0)
    # and γ < 1 is a different problem
    part, _, _ = build(tiny, "fedotp", {"ot": "uot", "gamma": 0.5, **solve})
    assert not torch.allclose(part.score(ctx, feats), b, atol=1e-3)


@pytest.mark.parametrize("name", ["fedotp", "coop"])
def test_logit_scale_option_rescales_the_class_scores_and_the_run(tiny, name):
    own, clients, st = build(tiny, name)
    clip_like, _, _ = build(tiny, name, {"logit_scale": 100.0})
    assert clip_like.scale == 100.0 and own.scale == pytest.approx(float(own.clip.logit_scale()))
    ctx = own.assemble(st.shared, st.client_states[0])
    feats = own.features(clients[0], "test")
    text = own.text_features(ctx)
    assert torch.allclose(clip_like.logits(text, feats), own.logits(text, feats) * (100.0 / own.scale), atol=1e-4)
    # A named option: it changes the run's hash, so a rescaled run is stored apart.
    assert cfg(tiny, name).hash() != cfg(tiny, name, {"logit_scale": 100.0}).hash()


# ----------------------------------------------------------------------------- CoOp and zero-shot
def test_coop_uploads_nothing_and_the_server_leaves_shared_alone(tiny):
    m, clients, st = build(tiny, "coop")
    ups = [update(m, st, c) for c in clients]
    assert all(u.upload == {} for u in ups) and numel(st.shared) == 0
    new, server = m.aggregate(st.shared, ups, st.server_state, 0)
    assert new is st.shared and server is st.server_state
    assert not torch.equal(ups[0].state["ctx"], st.client_states[0]["ctx"])


def test_zero_shot_uses_the_class_names_in_label_order(tiny):
    m, clients, st = build(tiny, "zeroshot_clip")
    names = list(m.ctx.class_names)
    assert m.class_names == names
    want = F.normalize(m.clip.encode_text([f"a photo of a {n}." for n in names]), dim=-1)
    assert torch.allclose(m.text, want, atol=1e-6)
    u = update(m, st, clients[0])
    assert u.upload == {} and u.state == st.client_states[0]

    s, _, _ = build(tiny, "zeroshot_clip", {"class_order": "set"})
    assert sorted(s.class_names) == sorted(names) and s.class_names != names
    perm = [names.index(n) for n in s.class_names]
    assert torch.allclose(s.text, want[perm], atol=1e-6)


# -------------------------------------------------------------------------------- PromptFL+FT
def test_promptfl_ft_fine_tunes_a_throw_away_copy_at_evaluation(tiny):
    plain, clients, st = build(tiny, "promptfl")
    ft, _, _ = build(tiny, "promptfl_ft", {"ft_epochs": 2})
    c = clients[0]
    # training is PromptFL's
    a, b = update(plain, st, c), update(ft, st, c)
    assert torch.equal(a.upload["ctx"], b.upload["ctx"])
    shared = {k: v.clone() for k, v in st.shared.items()}
    tuned = ft.eval_ctx(st.shared, st.client_states[c.cid], c, torch_gen(0, "eval", 0, c.cid))
    assert not torch.equal(tuned, plain.eval_ctx(st.shared, st.client_states[c.cid], c, None))
    assert all(torch.equal(shared[k], st.shared[k]) for k in shared)  # the global prompt is untouched
    # the copy is what the client is scored with
    res = ft.evaluate(st.shared, st.client_states[c.cid], c, torch_gen(0, "eval", 0, c.cid))
    want = ft.result(ft.score(tuned, ft.features(c, "test")), ft.features(c, "test").labels)
    assert (res.correct, res.loss_sum) == (want.correct, want.loss_sum)


# --------------------------------------------------------------------------- PromptFL+FedProx
PROX_STEPS = {"train.momentum": 0.0, "train.local_epochs": 3}  # 8 samples, batch 8: 3 plain steps


def test_fedprox_term_has_a_real_gradient(tiny):
    m, clients, st = build(tiny, "promptfl_fedprox", {"mu": 0.5})
    base, _, _ = build(tiny, "promptfl_fedprox", {"mu": 0.0})
    anchor = st.shared
    ctx = (anchor["ctx"] + 0.01 * torch.randn(anchor["ctx"].shape, generator=torch.Generator().manual_seed(1)))
    batch = m.features(clients[0], "train")

    def grad(method):
        p = ctx.clone().requires_grad_(True)
        method.batch_loss(p, batch, anchor).backward()
        return p.grad

    assert torch.allclose(grad(m) - grad(base), 0.5 * (ctx - anchor["ctx"]), atol=1e-6)


def test_fedprox_pulls_towards_the_global_prompt_and_the_official_switch_does_not(tiny):
    runs = {}
    for key, args in {"mu0": {"mu": 0.0}, "prox": {"mu": 5.0}, "official": {"mu": 5.0, "prox_grad": False}}.items():
        m, clients, st = build(tiny, "promptfl_fedprox", args, **PROX_STEPS)
        runs[key] = update(m, st, clients[0])
    start = st.shared["ctx"]
    dist = {k: float((u.upload["ctx"] - start).norm()) for k, u in runs.items()}
    assert dist["prox"] < dist["mu0"]
    assert torch.equal(runs["official"].upload["ctx"], runs["mu0"].upload["ctx"])  # bit for bit
    assert runs["official"].metrics["train_loss"] > runs["mu0"].metrics["train_loss"]  # logged, though


# ---------------------------------------------------------------------------- PromptFL+FedPer
def test_fedper_uploads_only_the_base_vectors(tiny):
    m, clients, st = build(tiny, "promptfl_fedper")
    L, W = m.prompts.ctx.shape[1:]
    base, pers = L - L // 2, L // 2
    assert st.shared["ctx"].shape == (1, base, W) and st.client_states[0]["ctx"].shape == (1, pers, W)
    # one initial prompt, split: every client's personal vectors start equal
    assert torch.equal(st.client_states[0]["ctx"], st.client_states[1]["ctx"])
    ups = [update(m, st, c) for c in clients]
    for u in ups:
        assert set(u.upload) == {"ctx"} and u.upload["ctx"].shape == (1, base, W)
        assert u.state["ctx"].shape == (1, pers, W)
    assert not torch.equal(ups[0].state["ctx"], ups[1].state["ctx"])
    new, _ = m.aggregate(st.shared, ups, st.server_state, 0)
    assert new["ctx"].shape == (1, base, W)
    assert torch.equal(m.eval_ctx(new, ups[0].state, clients[0], None), torch.cat([new["ctx"], ups[0].state["ctx"]], 1))

    _, _, st3 = build(tiny, "promptfl_fedper", {"n_personal": 3})
    assert st3.shared["ctx"].shape[1] == L - 3 and st3.client_states[0]["ctx"].shape[1] == 3


# ---------------------------------------------------------------------------- PromptFL+FedAMP
def test_fedamp_cloud_prompts_are_convex_combinations_of_the_clients_prompts(tiny):
    m, clients, st = build(tiny, "promptfl_fedamp")
    assert st.shared == {"cloud": {}}
    # every client starts from the same prompt; the first round has no pull
    assert torch.equal(st.client_states[0]["ctx"], st.client_states[2]["ctx"])
    ups = [update(m, st, c) for c in clients]
    assert all(set(u.upload) == {"cid", "ctx"} for u in ups)
    new, server = m.aggregate(st.shared, ups, st.server_state, 0)
    xi, ids = server["attention"], server["attention_ids"].tolist()
    assert ids == [c.cid for c in clients] and set(new["cloud"]) == set(ids)
    assert (xi >= 0).all() and torch.allclose(xi.sum(1), torch.ones(len(ids), dtype=xi.dtype))
    prompts = torch.stack([u.upload["ctx"] for u in ups]).double()
    for i, cid in enumerate(ids):
        want = torch.einsum("j,j...->...", xi[i], prompts).float()
        assert torch.allclose(new["cloud"][cid], want, atol=1e-6)
    assert not torch.equal(new["cloud"][ids[0]], new["cloud"][ids[1]])


def test_fedamp_pulls_each_client_towards_its_cloud_prompt(tiny):
    out = {}
    for key, lam in {"free": 0.0, "pulled": 50.0}.items():
        m, clients, st = build(tiny, "promptfl_fedamp", {"lam": lam}, **PROX_STEPS)
        ups = [update(m, st, c) for c in clients]
        shared, _ = m.aggregate(st.shared, ups, st.server_state, 0)
        c = clients[0]
        out[key] = update(m, st, c, rnd=1, state=ups[0].state, shared=shared).state["ctx"]
        cloud = shared["cloud"][c.cid]
    assert (out["pulled"] - cloud).norm() < (out["free"] - cloud).norm()


def test_fedamp_resumes_bit_for_bit(tiny, tmp_path):
    # its broadcast and server state are per-client mappings: they must survive the checkpoint
    check_resume_matches(cfg(tiny, "promptfl_fedamp", **{"train.rounds": 3}), tmp_path)


# --------------------------------------------------------------------------------- pFedPrompt
def test_pfedprompt_cache_holds_only_the_clients_own_train_split(tiny):
    m, clients, st = build(tiny, "pfedprompt")
    for c in clients:
        keys, values = m.cache(c)
        assert torch.equal(keys, normalized_tokens(m.clip, c.train_x)[0])
        assert torch.equal(values, F.one_hot(c.train_y, m.num_classes).float())
        assert len(keys) == c.num_train
    k0, _ = m.cache(clients[0])
    assert not any(torch.equal(k0, m.cache(c)[0]) for c in clients[1:])
    # only the text prompt is uploaded; nothing of the cache is kept in the state or sent
    u = update(m, st, clients[0])
    assert set(u.upload) == {"ctx"} and u.upload["ctx"].shape == st.shared["ctx"].shape and u.state == {}
    # evaluation: text logits plus the client's own cache's
    c = clients[1]
    feats = m.features(c, "test")
    logits = m.score(st.shared["ctx"], feats)
    aff = torch.exp(-5.5 * (1 - feats.pooled @ m.cache(c)[0].T))
    want = m.result(logits + m.cache_weight * aff @ m.cache(c)[1], feats.labels)  # tests/methods/test_pfedprompt.py
    res = m.evaluate(st.shared, st.client_states[c.cid], c, None)
    assert res.correct == want.correct and res.loss_sum == pytest.approx(want.loss_sum, rel=1e-6)
    assert res.correct > m.result(logits, feats.labels).correct  # the cache knows the client's classes


# ------------------------------------------------------------------- the official code's switches
def test_misaligned_images_keeps_the_labels_and_permutes_the_images(tiny):
    m, clients, st = build(tiny, "promptfl")
    mis, _, st2 = build(tiny, "promptfl", {"misaligned_images": True})
    for split in ("train", "test"):
        a, b = m.features(clients[0], split), mis.features(clients[0], split)
        assert torch.equal(a.labels, b.labels)  # the label multiset (and order) is the client's
        assert not torch.equal(a.pooled, b.pooled)
        assert torch.equal(a.pooled.sort(0).values, b.pooled.sort(0).values)  # the same images
    assert torch.equal(st.shared["ctx"], st2.shared["ctx"]) and m.class_names == mis.class_names


def test_shared_optimizer_carries_the_momentum_buffer_in_the_broadcast(tiny):
    own, clients, st = build(tiny, "promptfl")
    shared_opt, _, st2 = build(tiny, "promptfl", {"optimizer_scope": "shared"})
    a, b = update(own, st, clients[0]), update(shared_opt, st2, clients[0])
    assert MOMENTUM_KEY not in a.upload and MOMENTUM_KEY in b.upload
    assert torch.equal(a.upload["ctx"], b.upload["ctx"])  # no buffer yet: the same first update
    ups = [update(shared_opt, st2, c) for c in clients]
    new, _ = shared_opt.aggregate(st2.shared, ups, st2.server_state, 0)
    assert torch.equal(new[MOMENTUM_KEY], ups[-1].upload[MOMENTUM_KEY])  # the last client's buffer goes on
    with_buf = update(shared_opt, st2, clients[0], rnd=1, shared=new)
    without = update(shared_opt, st2, clients[0], rnd=1, shared={"ctx": new["ctx"]})
    assert not torch.equal(with_buf.upload["ctx"], without.upload["ctx"])
    plain, _ = own.aggregate(st.shared, [update(own, st, c) for c in clients], st.server_state, 0)
    assert set(plain) == {"ctx"}


def test_seed_zero_unseeded_changes_only_seed_zero(tiny):
    def init(seed, flag):
        _, _, st = build(tiny, "fedotp", {"seed_zero_unseeded": flag}, seed=seed)
        return st.shared["ctx"], st.client_states[0]["ctx"]

    assert not torch.equal(init(0, True)[0], init(0, False)[0])
    assert not torch.equal(init(0, True)[1], init(0, False)[1])
    assert all(torch.equal(x, y) for x, y in zip(init(1, True), init(1, False)))


def test_set_class_order_permutes_the_prompts_class_names(tiny):
    m, _, st = build(tiny, "promptfl")
    s, _, st2 = build(tiny, "promptfl", {"class_order": "set"})
    names = list(m.ctx.class_names)
    assert m.class_names == names == m.prompts.class_names
    assert s.class_names != names and sorted(s.class_names) == sorted(names) and s.prompts.class_names == s.class_names
    assert torch.equal(st.shared["ctx"], st2.shared["ctx"])
    text, text_set = m.text_features(st.shared["ctx"]), s.text_features(st.shared["ctx"])
    perm = [names.index(n) for n in s.class_names]
    assert torch.allclose(text_set, text[:, perm], atol=1e-5)


def test_clip_methods_refuse_another_model(tiny):
    from fedrepro.errors import ConfigError

    with pytest.raises(ConfigError, match="model.name=clip"):
        build(tiny, "promptfl_fedamp", **{"model.name": "mlp", "model.args": {}})


def test_fedotp_trains_on_a_paper_size_clip_from_a_local_file(tiny, tmp_path, monkeypatch, request):
    """The paper profile's path on CPU: ViT-B/16 (random weights written as OpenAI ships them, read
    through $FEDREPRO_CLIP_WEIGHTS), 196 patch tokens at 224×224, L = 16 context vectors of width 512."""
    from fedrepro.models.clip import build_paper_clip
    from fedrepro.models.clip_model import ENV_CLIP_WEIGHTS, _cached_backbone

    request.addfinalizer(_cached_backbone.cache_clear)  # the full-size CLIP must not stay cached after the test

    state = {k: v.half() for k, v in build_paper_clip("ViT-B-16", "openai", seed=1).model.state_dict().items()}
    path = tmp_path / "ViT-B-16.pt"
    torch.save(state, path)
    monkeypatch.setenv(ENV_CLIP_WEIGHTS, str(path))
    m, clients, st = build(tiny, "fedotp", **{"model.args": {"arch": "ViT-B-16"}, "data.num_clients": 2,
                                              "data.partition_args": {"classes_per_client": 2, "shots": 1},
                                              "data.max_test": 8})
    assert m.prompts.ctx.shape == (2, 16, 512)  # the paper's L = 16 fits CLIP's 77-token context
    assert m.features(clients[0], "train").patches.shape[1:] == (196, 512)
    u = update(m, st, clients[0])
    assert set(u.upload) == {"ctx"} and u.upload["ctx"].shape == (1, 16, 512)
    assert torch.isfinite(u.upload["ctx"]).all() and not torch.equal(u.upload["ctx"], st.shared["ctx"])
    res = m.evaluate(st.shared, u.state, clients[0], torch_gen(0, "eval", 1, 0))
    assert res.total == clients[0].num_test and 0 <= res.acc <= 1
