"""PEP-FedPT's (arXiv §5.1) simple prompt-tuning baselines, each on its own mechanism: Head-Tuning
trains only the head, FedVPT prompts the input (VPT-shallow), FedVPT-D renews prompts at every block
(VPT-deep), P-PT keeps its prompts on the client; and our prior-adjusted FedVPT control. That each
learns is in test_contract.py."""
import dataclasses

import pytest
import torch
from support import setup, update

from fedrepro.fl.seeding import torch_gen
from fedrepro.methods.prompted import class_prior

VIT = {"model.name": "tiny_vit", "model.args": {"dim": 16, "depth": 4, "heads": 2}}
HEAD = {"head.weight", "head.bias"}


def _method(tiny, name, **args):
    return setup(tiny(**VIT, **{"method.name": name, "method.args": args}))


def _frozen_backbone_unchanged(method, before):
    for k, v in method.net.backbone.state_dict().items():
        assert torch.equal(v, before[k]), k
    assert not any(p.requires_grad for p in method.net.backbone.parameters())


def _tokens_entering(net, x, block):
    seen = {}

    def spy(i, tokens):
        seen.setdefault(i, tokens.clone())

    hook = net.extra_hook
    net.extra_hook = spy
    try:
        net(x)
    finally:
        net.extra_hook = hook
    return seen[block]


def test_head_tuning_uploads_only_the_head_and_keeps_the_cls_feature(tiny):
    method, clients, st = _method(tiny, "head_tuning")
    before = {k: v.clone() for k, v in method.net.backbone.state_dict().items()}
    u = update(method, st, clients[0])
    assert set(u.upload) == HEAD and u.state == {}
    assert all(not torch.equal(u.upload[k], st.shared[k]) for k in HEAD)
    _frozen_backbone_unchanged(method, before)
    x = next(clients[0].eval_train_batches(10_000))[0]
    with torch.no_grad():  # no prompt: the feature is the bare frozen ViT's cls
        torch.testing.assert_close(method.net.features(x), method.net.backbone(x))


def test_fedvpt_inserts_its_prompts_after_cls_at_the_input_only(tiny):
    method, clients, st = _method(tiny, "fedvpt", n_prompts=3)
    net = method.load(st.shared, {})
    x = next(clients[0].eval_train_batches(10_000))[0][:4]
    with torch.no_grad():
        t0 = _tokens_entering(net, x, 0)
        emb = net.backbone.embed(x)
        assert t0.shape[1] == emb.shape[1] + 3
        torch.testing.assert_close(t0[:, 1:4], st.shared["shallow"].expand(4, -1, -1))  # [cls, P, E] (VPT Eq. 1)
        torch.testing.assert_close(t0[:, :1], emb[:, :1])
        torch.testing.assert_close(t0[:, 4:], emb[:, 1:])
        t2 = _tokens_entering(net, x, 2)  # later blocks: the prompts' own outputs, nothing renewed
        assert not torch.allclose(t2[:, 1:4], st.shared["shallow"].expand(4, -1, -1))
    u = update(method, st, clients[0])
    assert set(u.upload) == HEAD | {"shallow"} and u.upload["shallow"].shape == (3, 16)
    new, _ = method.aggregate(st.shared, [u, update(method, st, clients[1])], {}, 0)
    u1 = update(method, st, clients[1])
    torch.testing.assert_close(new["shallow"], (u.upload["shallow"] + u1.upload["shallow"]) / 2)  # unweighted (Eq. 3)


def test_fedvpt_d_renews_its_prompts_at_every_later_block(tiny):
    method, clients, st = _method(tiny, "fedvpt_d")
    assert st.shared["deep"].shape == (3, 1, 16)  # blocks 1, 2, 3 of 4
    net = method.load(st.shared, {})
    x = next(clients[0].eval_train_batches(10_000))[0][:4]
    with torch.no_grad():  # the spy runs after the deep prompts' hook: the tokens each block gets
        seen = {b: _tokens_entering(net, x, b) for b in range(4)}
    torch.testing.assert_close(seen[0][:, 1], st.shared["shallow"][0].expand(4, -1))
    for j, b in enumerate((1, 2, 3)):
        torch.testing.assert_close(seen[b][:, 1], st.shared["deep"][j, 0].expand(4, -1))
        assert seen[b].shape[1] == seen[0].shape[1]  # replaced, not added
    restricted, _, st2 = _method(tiny, "fedvpt_d", blocks=[2])
    assert st2.shared["deep"].shape == (1, 1, 16)
    u = update(method, st, clients[0])
    assert set(u.upload) == HEAD | {"shallow", "deep"}
    assert not torch.equal(u.upload["deep"], st.shared["deep"])


def test_p_pt_keeps_its_prompt_and_a_held_out_client_has_the_initial_one(tiny):
    method, clients, st = _method(tiny, "p_pt")
    u = update(method, st, clients[0])
    assert set(u.upload) == HEAD and set(u.state) == {"shallow"}
    assert not torch.equal(u.state["shallow"], st.client_states[0]["shallow"])
    # Every client starts from the same prompt, so one that never trains holds the initial one.
    assert all(torch.equal(st.client_states[c]["shallow"],
                           st.client_states[0]["shallow"]) for c in range(len(st.client_states)))
    gen = torch_gen(0, "eval", 0, 0)
    trained = method.evaluate(st.shared, u.state, clients[0], gen)
    initial = method.evaluate(st.shared, st.client_states[0], clients[0], gen)
    assert trained.loss_sum != pytest.approx(initial.loss_sum)
    assert method.global_model(st.shared, {}) is None  # no model without a client's prompt


@pytest.mark.parametrize("mode", ["log", "mask"])
def test_prior_logits_control_rules_out_absent_classes_at_evaluation_only(tiny, mode):
    plain, clients, st = _method(tiny, "fedvpt")
    control, _, _ = _method(tiny, "fedvpt", prior_logits=mode)
    client = dataclasses.replace(clients[0], train_y=torch.zeros_like(clients[0].train_y))  # only class 0
    # Training is FedVPT's, unchanged.
    a, b = update(plain, st, clients[0]).upload, update(control, st, clients[0]).upload
    assert all(torch.equal(a[k], b[k]) for k in a)
    gen = torch_gen(0, "eval", 0, 0)
    res = control.evaluate(st.shared, {}, client, gen)
    y = client.test_y
    assert res.correct == int((y == 0).sum())  # every prediction is the one class the client has
    assert control.net.logit_bias is None  # not left behind for the next client
    prior = class_prior(clients[0].train_y, 4)
    net = control.load(st.shared, {})
    x = next(clients[0].test_batches(10_000))[0]
    with torch.no_grad():
        logits = net(x)
    bias = torch.log(prior) if mode == "log" else torch.log((prior > 0).float())
    ref = (logits + bias).argmax(1)
    assert control.evaluate(st.shared, {}, clients[0], gen).correct == int((ref == clients[0].test_y).sum())


def test_the_frozen_backbone_never_changes(tiny):
    for name in ("fedvpt", "fedvpt_d", "p_pt"):
        method, clients, st = _method(tiny, name)
        before = {k: v.clone() for k, v in method.net.backbone.state_dict().items()}
        update(method, st, clients[0])
        _frozen_backbone_unchanged(method, before)
