"""pFedPG's mechanism (Yang et al., ICCV 2023): the server's generator gives each client its own
prompt, its update pulls a client's generated prompt toward the one the client adapted, clients
upload only the prompt change, held-out clients get the prompt of their initial descriptor; and it
learns on PEP-FedPT's smoke setup."""
import math

import torch
from support import setup, update

import fedrepro
from fedrepro.methods.pfedpg import GENERATOR, generate_prompts, generator_step
from fedrepro.papers import setup as paper_setup

VIT = {"model.name": "tiny_vit", "model.args": {"dim": 16, "depth": 4, "heads": 2}}
HEAD = {"head.weight", "head.bias"}


def _method(tiny, **args):
    return setup(tiny(**VIT, **{"method.name": "pfedpg", "method.args": args}))


def test_learns_on_the_smoke_setup(tmp_path):
    cfg = paper_setup("pep_fedpt", "smoke", method__name="pfedpg", runs_dir=str(tmp_path))
    res = fedrepro.run(cfg)
    # 4 clients with 2 of 10 classes each: chance is 10%, a one-class guess 50%; it reaches about 94%.
    assert res.summary["final_acc_mean"] > 0.8, res.summary


def test_generator_gives_each_client_its_own_prompt(tiny):
    method, _, st = _method(tiny, n_prompts=2, n_base=3)
    g = st.server_state
    assert set(g) == set(GENERATOR) and not set(g) & set(st.shared)  # the generator is never broadcast
    assert g["descriptors"].shape == (4, 16) and g["keys"].shape == (3, 16) and g["base"].shape == (3, 2, 16)
    prompts = st.shared["prompts"]
    assert prompts.shape == (4, 2, 16)
    # By hand: client k's prompt is the attention of its descriptor over the keys, applied to the basis.
    for k in range(4):
        a = torch.softmax(g["keys"] @ g["descriptors"][k] / math.sqrt(16), 0)
        torch.testing.assert_close(prompts[k], (a[:, None, None] * g["base"]).sum(0))
    for i in range(4):
        for j in range(i + 1, 4):
            assert not torch.allclose(prompts[i], prompts[j], atol=1e-4), (i, j)
    # Only the descriptor distinguishes clients: a client given another's descriptor gets its prompt.
    d = g["descriptors"].clone()
    d[1] = d[0]
    same = generate_prompts(d, g["keys"], g["base"])
    torch.testing.assert_close(same[1], prompts[0])
    torch.testing.assert_close(same[2:], prompts[2:])
    # The client trains from the prompt generated for it.
    net = method.load(st.shared, st.client_states[2])
    torch.testing.assert_close(net.shallow.detach(), prompts[2])


def test_server_step_moves_the_generated_prompt_toward_the_adapted_one(tiny):
    method, clients, st = _method(tiny)
    u = update(method, st, clients[1])
    adapted = u.state["shallow"]
    before = (st.shared["prompts"][1] - adapted).norm()
    assert before > 0
    new, gen = method.aggregate(st.shared, [u], st.server_state, 0)
    after = (new["prompts"][1] - adapted).norm()
    assert after < before
    torch.testing.assert_close(new["prompts"], generate_prompts(gen["descriptors"], gen["keys"], gen["base"]))
    # Only the uploading client's descriptor moved; the shared keys and basis moved too.
    assert not torch.equal(gen["descriptors"][1], st.server_state["descriptors"][1])
    keep = [0, 2, 3]
    assert torch.equal(gen["descriptors"][keep], st.server_state["descriptors"][keep])
    assert not torch.equal(gen["base"], st.server_state["base"])
    # The opposite sign (following +Δ as a gradient) would move it away.
    away = generator_step(st.server_state, [(1, -u.upload["delta"], 1.0)], 1.0)
    assert (generate_prompts(*(away[k] for k in GENERATOR))[1] - adapted).norm() > before


def test_one_base_prompt_reduces_to_prompt_averaging(tiny):
    # With m = 1 every client gets the one base prompt, whose gradient is −mean Δ: FedVPT's average.
    method, clients, st = _method(tiny, n_base=1, server_lr=1.0, server_weighting="mean")
    ups = [update(method, st, c) for c in clients[:3]]
    new, _ = method.aggregate(st.shared, ups, st.server_state, 0)
    mean = torch.stack([u.state["shallow"] for u in ups]).mean(0)
    for k in range(4):
        torch.testing.assert_close(new["prompts"][k], mean)
    # "sum" gives each client its full pull: the sum of the changes.
    m2, _, st2 = _method(tiny, n_base=1, server_weighting="sum")
    summed, _ = m2.aggregate(st2.shared, ups, st2.server_state, 0)
    torch.testing.assert_close(summed["prompts"][0], st.shared["prompts"][0] + sum(u.upload["delta"] for u in ups))


def test_uploads_only_the_prompt_change_and_keeps_prompt_and_head(tiny):
    method, clients, st = _method(tiny)
    c = clients[2]
    u = update(method, st, c)
    assert set(u.upload) == {"client", "delta"} and int(u.upload["client"]) == 2
    assert set(u.state) == {"client", "shallow"} | HEAD
    torch.testing.assert_close(u.upload["delta"], u.state["shallow"] - st.shared["prompts"][2])
    assert u.upload["delta"].abs().sum() > 0
    assert all(not torch.equal(u.state[k], st.client_states[2][k]) for k in HEAD)  # the head trained
    assert set(st.shared) == {"prompts"}
    new, _ = method.aggregate(st.shared, [u], st.server_state, 0)
    assert set(new) == {"prompts"}
    # The client is scored with the prompt its head was trained with.
    net = method.load(new, u.state, prompt=method.p.eval_prompt)
    torch.testing.assert_close(net.shallow.detach(), u.state["shallow"])
    torch.testing.assert_close(net.head.weight.detach(), u.state["head.weight"])
    # head="fedavg": the head is uploaded and averaged instead of kept.
    m2, _, st2 = _method(tiny, head="fedavg")
    ups = [update(m2, st2, cl) for cl in clients[:2]]
    assert set(ups[0].upload) == {"client", "delta"} | HEAD and set(ups[0].state) == {"client", "shallow"}
    new2, _ = m2.aggregate(st2.shared, ups, st2.server_state, 0)
    torch.testing.assert_close(new2["head.bias"], (ups[0].upload["head.bias"] + ups[1].upload["head.bias"]) / 2)


def test_held_out_client_gets_the_prompt_of_its_initial_descriptor(tiny):
    method, clients, st = setup(tiny(**VIT, **{"method.name": "pfedpg", "data.holdout_clients": 1}))
    held = [c for c in clients if c.held_out]
    assert len(held) == 1
    h = held[0].cid
    shared, gen = st.shared, st.server_state
    for rnd in range(2):
        ups = [update(method, st, c, rnd=rnd, shared=shared) for c in clients if not c.held_out]
        shared, gen = method.aggregate(shared, ups, gen, rnd)
    torch.testing.assert_close(gen["descriptors"][h], st.server_state["descriptors"][h])  # never trained
    assert not torch.equal(gen["base"], st.server_state["base"])
    expected = generate_prompts(st.server_state["descriptors"][h:h + 1], gen["keys"], gen["base"])[0]
    net = method.load(shared, st.client_states[h], prompt=method.p.eval_prompt)  # no adapted prompt: generated
    torch.testing.assert_close(net.shallow.detach(), expected)
    torch.testing.assert_close(net.head.weight.detach(), st.client_states[h]["head.weight"])  # untrained head
    assert method.evaluate(shared, st.client_states[h], held[0], None).total == held[0].num_test
