"""PEP-FedPT's mechanism (arXiv 2510.25372 §4, Alg. 1): prototypes, the server's momentum update,
the prior's zero weights, held-out clients, what is uploaded, the DP noise scale, and learning."""
import dataclasses

import pytest
import torch
from support import setup, update

import fedrepro
from fedrepro.errors import ConfigError
from fedrepro.fl.method import ClientUpdate
from fedrepro.fl.seeding import torch_gen
from fedrepro.methods.pep_fedpt import (
    PEPFedPTParams,
    ccmp_blocks,
    class_prior,
    laplace_scale,
    momentum_update,
    sample_laplace,
    soft_weights,
)

# A tiny random ViT: every mechanism below holds whatever the weights are.
VIT = {"model.name": "tiny_vit", "model.args": {"dim": 16, "depth": 4, "heads": 2}}
THETA = {"P_S", "P_C", "head.weight", "head.bias"}


def _method(tiny, **args):
    return setup(tiny(**VIT, **{"method.name": "pep_fedpt", "method.args": args}))


def _with_prototypes(st, method, seed=0):
    """The initial shared state with random global prototypes, past the warm start."""
    gen = torch.Generator().manual_seed(seed)
    return {**st.shared, "mu": torch.randn(st.shared["mu"].shape, generator=gen), "mu_ready": torch.tensor(1)}


def test_prototypes_are_per_class_means_of_the_cls_entering_each_ccmp_block(tiny):
    method, clients, st = _method(tiny, ccmp_blocks=[1, 2])
    shared, client = _with_prototypes(st, method), clients[0]
    net = method.load(shared, client)
    mu, n, _ = method.local_prototypes(net, client)
    # Reference: the blocks run by hand, CCMP inserted at block 1 (Eq. 7: [cls, m, P_S, E]).
    bb = net.backbone
    x, y = next(client.eval_train_batches(10_000))
    log_prior = torch.log(class_prior(client.train_y, 4))
    with torch.no_grad():
        t = torch.cat([bb.embed(x)[:, :1], shared["P_S"].expand(len(x), -1, -1), bb.embed(x)[:, 1:]], 1)
        t = bb.vit.blocks[0](t)
        cls1 = t[:, 0]
        m = soft_weights(cls1, shared["mu"][0], log_prior, 0.05) @ shared["P_C"][0]
        t = bb.vit.blocks[1](torch.cat([t[:, :1], m[:, None], t[:, 1:]], 1))
        cls2 = t[:, 0]
    for c in range(4):
        if (y == c).any():
            torch.testing.assert_close(mu[0, c], cls1[y == c].mean(0))
            torch.testing.assert_close(mu[1, c], cls2[y == c].mean(0))
        else:
            assert not mu[:, c].any()
    assert n.tolist() == torch.bincount(y, minlength=4).float().tolist()


def test_server_momentum_update_every_r_rounds_over_non_zero_uploads(tiny):
    method, _, st = _method(tiny, ccmp_blocks=[1], proto_momentum=0.25, proto_period=2)
    shared = _with_prototypes(st, method)
    L, C, d = shared["mu"].shape
    protos = [torch.randn(L, C, d) for _ in range(3)]
    counts = [torch.tensor([3.0, 0, 1, 0]), torch.tensor([1.0, 2, 0, 0]), torch.tensor([5.0, 1, 0, 0])]

    def upd(i):
        theta = {k: shared[k] for k in THETA}
        return ClientUpdate({**theta, "proto": protos[i] * (counts[i] > 0)[None, :, None],
                             "proto_present": (counts[i] > 0).to(torch.uint8)}, {}, 10)

    after1, server = method.aggregate(shared, [upd(0), upd(1)], st.server_state, 0)
    torch.testing.assert_close(after1["mu"], shared["mu"])  # R = 2: nothing yet
    after2, server = method.aggregate(after1, [upd(2)], server, 1)
    mean = torch.stack([protos[0][:, 0], protos[1][:, 0], protos[2][:, 0]]).mean(0)  # class 0: all three
    torch.testing.assert_close(after2["mu"][:, 0], 0.25 * shared["mu"][:, 0] + 0.75 * mean)
    mean1 = torch.stack([protos[1][:, 1], protos[2][:, 1]]).mean(0)  # class 1: non-zero uploads only (Eq. 20)
    torch.testing.assert_close(after2["mu"][:, 1], 0.25 * shared["mu"][:, 1] + 0.75 * mean1)
    torch.testing.assert_close(after2["mu"][:, 3], shared["mu"][:, 3])  # nobody has class 3: kept
    assert server["period_rounds"] == 0 and not server["proto_n"].any()
    # The same rule as a function.
    torch.testing.assert_close(momentum_update(torch.ones(1, 2, 1), torch.tensor([[[4.0], [0.0]]]),
                                               torch.tensor([[2.0, 0.0]]), 0.5), torch.tensor([[[1.5], [1.0]]]))


def test_warm_start_masks_absent_classes_and_skips_momentum(tiny):
    method, _, st = _method(tiny, ccmp_blocks=[1], proto_momentum=0.9)
    assert int(st.shared["mu_ready"]) == 0 and not st.shared["mu"].any()
    a, b = torch.randn(1, 4, 16), torch.randn(1, 4, 16)
    ups = [ClientUpdate({**{k: st.shared[k] for k in THETA}, "proto": a * torch.tensor([1.0, 1, 0, 0])[None, :, None],
                         "proto_present": torch.tensor([1, 1, 0, 0], dtype=torch.uint8)}, {}, 3),
           ClientUpdate({**{k: st.shared[k] for k in THETA}, "proto": b,
                         "proto_present": torch.ones(4, dtype=torch.uint8)}, {}, 4)]
    new, _ = method.aggregate(st.shared, ups, st.server_state, 0)
    assert int(new["mu_ready"]) == 1
    torch.testing.assert_close(new["mu"][:, :2], (a[:, :2] + b[:, :2]) / 2)
    torch.testing.assert_close(new["mu"][:, 2:], b[:, 2:])  # not shrunk by client 0's zeros


def test_warm_start_prototypes_come_from_the_bare_pretrained_backbone(tiny):
    method, clients, st = _method(tiny, ccmp_blocks=[2])
    client = clients[0]
    up = update(method, st, client).upload
    x, y = next(client.eval_train_batches(10_000))
    with torch.no_grad():
        cls = method.net.backbone.cls_per_block(x)[:, 2]  # no prompts at all
    for c in y.unique():
        torch.testing.assert_close(up["proto"][0, c], cls[y == c].mean(0))


def test_absent_classes_get_zero_weight_through_the_prior():
    feat, mu = torch.randn(5, 8), torch.randn(4, 8)
    prior = torch.tensor([0.5, 0.0, 0.5, 0.0])
    s = soft_weights(feat, mu, torch.log(prior), 0.05)
    assert torch.all(s[:, [1, 3]] == 0) and torch.all(s[:, [0, 2]] > 0)
    torch.testing.assert_close(s.sum(1), torch.ones(5))
    # Eq. 13-15: exp(cos/τ)·δ renormalised; without CP a plain softmax over every class.
    cos = torch.nn.functional.cosine_similarity(feat[:, None], mu[None], dim=-1)
    ref = torch.exp(cos / 0.05) * prior
    torch.testing.assert_close(s, ref / ref.sum(1, keepdim=True))
    assert torch.all(soft_weights(feat, mu, None, 0.05) > 0)
    # A zero prototype (no client has reported the class) only has cosine 0, never NaN.
    assert torch.isfinite(soft_weights(feat, torch.zeros(4, 8), None, 0.05)).all()


def test_the_prior_only_mix_is_the_prior_for_every_image():
    feat, mu = torch.randn(5, 8), torch.randn(4, 8)
    prior = torch.tensor([0.2, 0.0, 0.8, 0.0])
    torch.testing.assert_close(soft_weights(feat, mu, torch.log(prior), 0.05, similarity=False),
                               prior.expand(5, -1))
    torch.testing.assert_close(soft_weights(feat, mu, None, 0.05, similarity=False), torch.full((5, 4), 0.25))


def test_a_held_out_client_needs_nothing_of_its_own_but_its_prior(tiny):
    method, clients, st = _method(tiny, ccmp_blocks=[1, 2])
    shared = _with_prototypes(st, method)
    assert method.init_client(0, 0) == {}
    client = clients[0]
    gen = torch_gen(0, "eval", 0, 0)
    base = method.evaluate(shared, {}, client, gen)
    # Other training images with the same label histogram: the same predictions.
    perm = torch.randperm(client.num_train, generator=torch.Generator().manual_seed(1))
    same_prior = dataclasses.replace(client, train_x=torch.zeros_like(client.train_x), train_y=client.train_y[perm],
                                     held_out=True)
    res = method.evaluate(shared, {}, same_prior, gen)
    assert (res.correct, res.loss_sum) == (base.correct, pytest.approx(base.loss_sum, rel=1e-6))
    # Another prior changes them: it is the one thing the client brings.
    other = dataclasses.replace(client, train_y=torch.zeros_like(client.train_y), held_out=True)
    assert method.evaluate(shared, {}, other, gen).loss_sum != pytest.approx(base.loss_sum, rel=1e-6)


def test_only_shared_prompts_class_prompts_and_head_are_trained_and_uploaded(tiny):
    method, clients, st = _method(tiny, ccmp_blocks=[1])
    frozen = {k: v.clone() for k, v in method.net.backbone.state_dict().items()}
    u = update(method, st, clients[0], shared=_with_prototypes(st, method))
    assert set(u.upload) == THETA | {"proto", "proto_present"}
    # Which classes are present, never how many images of each (the client's label distribution).
    assert u.upload["proto_present"].dtype == torch.uint8 and set(u.upload["proto_present"].tolist()) <= {0, 1}
    assert u.state == {}
    assert all(not u.upload[k].requires_grad for k in u.upload)
    for k, v in method.net.backbone.state_dict().items():
        assert torch.equal(v, frozen[k]), k
    assert not any(p.requires_grad for p in method.net.backbone.parameters())
    assert all(not torch.equal(u.upload[k], st.shared[k]) for k in THETA)  # each of them trained
    # FedAvg is unweighted by default (Eq. 3's mean over S_t).
    u2 = update(method, st, clients[1], shared=_with_prototypes(st, method))
    new, _ = method.aggregate(_with_prototypes(st, method), [u, u2], st.server_state, 0)
    torch.testing.assert_close(new["P_C"], (u.upload["P_C"] + u2.upload["P_C"]) / 2)


def test_laplace_noise_scale_is_sensitivity_over_epsilon(tiny):
    assert laplace_scale(2.0, 0.2) == pytest.approx(10.0)
    noise = sample_laplace((200_000,), torch.tensor(10.0), torch.Generator().manual_seed(0))
    assert noise.abs().mean().item() == pytest.approx(10.0, rel=0.02)  # E|X| = b for Laplace(0, b)
    # On the uploads: noise drawn after training, so the difference is the noise itself.
    kw = {"ccmp_blocks": [0, 1, 2, 3]}
    method, clients, st = _method(tiny, **kw)
    noisy, _, _ = _method(tiny, **kw, dp_epsilon=0.5, dp_sensitivity=0.1)
    shared = _with_prototypes(st, method)
    a, b = update(method, st, clients[0], shared=shared).upload, update(noisy, st, clients[0], shared=shared).upload
    for k in THETA:
        assert torch.equal(a[k], b[k])
    present = a["proto_present"] > 0
    diff = (b["proto"] - a["proto"])[:, present]
    assert diff.abs().mean().item() == pytest.approx(0.1 / 0.5, rel=0.2)
    assert torch.equal(a["proto"][:, ~present], b["proto"][:, ~present])


def test_paper_sensitivity_is_twice_the_largest_l1_deviation_over_the_count(tiny):
    method, clients, st = _method(tiny, ccmp_blocks=[1])
    client = clients[0]
    net = method.load(_with_prototypes(st, method), client)
    mu, _, sens = method.local_prototypes(net, client)
    x, y = next(client.eval_train_batches(10_000))
    rec = []
    with torch.no_grad():
        net(x, record=rec)
    c = int(y[0])
    ref = 2 * (rec[0][y == c] - mu[0, c]).abs().sum(1).max() / (y == c).sum()
    torch.testing.assert_close(sens[0, c], ref)


def test_ccmp_placement_follows_table_12_and_checks_the_model(tiny):
    p = PEPFedPTParams()
    assert ccmp_blocks(p, 12) == [4, 5, 6]  # paper layers 5, 6, 7
    assert ccmp_blocks(dataclasses.replace(p, ccmp_position="first"), 12) == [0, 1, 2]
    assert ccmp_blocks(dataclasses.replace(p, ccmp_position="late"), 12) == [7, 8, 9]
    assert ccmp_blocks(p, 6) == [2, 3, 4]
    with pytest.raises(ConfigError, match=r"method\.args\.ccmp_blocks"):
        _method(tiny, ccmp_blocks=[4])  # depth 4: blocks 0..3
    with pytest.raises(ConfigError, match=r"model\.name='mlp'.*tiny_vit"):
        setup(tiny(**{"method.name": "pep_fedpt"}))


@pytest.mark.parametrize("args", [{"ccmp_mode": "accumulate", "class_prompts": "per_layer", "cls_feature": "ln"},
                                  {"n_shared": 0, "use_prior": False, "warm_start": "none", "detach_scores": True},
                                  {"similarity": False}])
def test_every_option_runs(tiny, args):
    method, clients, st = _method(tiny, ccmp_blocks=[1, 2], **args)
    u = update(method, st, clients[0])
    assert torch.isfinite(u.upload["proto"]).all()
    new, _ = method.aggregate(st.shared, [u], st.server_state, 0)
    assert method.evaluate(new, {}, clients[0], torch_gen(0, "eval", 0, 0)).total > 0


def test_it_learns_on_the_synthetic_task(tiny):
    # The glyph-pretrained stand-in: a random frozen ViT gives CCMP nothing to compare (CCMP relies on
    # class-informative cls prototypes, PEP-FedPT (arXiv) Fig. 2).
    res = fedrepro.run(tiny(**{"model.name": "tiny_vit", "model.args": {"weights": "glyphs"},
                               "method.name": "pep_fedpt", "train.rounds": 6, "train.local_epochs": 2}))
    assert res.summary["final_acc_mean"] > 0.5, res.summary  # 4 classes: chance is 25%


@pytest.mark.parametrize("mode, extra", [("replace", 1), ("accumulate", 2)])
def test_replace_keeps_one_ccmp_slot_and_accumulate_adds_one_per_block(tiny, mode, extra):
    method, clients, st = _method(tiny, ccmp_blocks=[1, 2], ccmp_mode=mode, n_shared=2)
    net = method.load(_with_prototypes(st, method), clients[0])
    seen = []
    handle = net.backbone.vit.blocks[3].register_forward_pre_hook(lambda m, a: seen.append(a[0].shape[1]))
    x, _ = next(clients[0].eval_train_batches(10_000))
    with torch.no_grad():
        net(x)
    handle.remove()
    patches = net.backbone.embed(x).shape[1] - 1
    assert seen == [1 + extra + 2 + patches]  # [cls, CCMP token(s), P_S, E]
