"""SGPT's mechanism (Deng et al., CVPR 2024): nearest-key group selection, its missing gradient, the
key pull loss, the two training stages, the server's momentum on keys and group prompts, what is
uploaded, and learning on PEP-FedPT's smoke setup."""
import pytest
import torch
import torch.nn.functional as F
from support import setup, update

import fedrepro
import fedrepro.papers
from fedrepro.errors import ConfigError
from fedrepro.fl.method import ClientUpdate
from fedrepro.fl.seeding import torch_gen
from fedrepro.methods.sgpt import SGPTParams, default_group_blocks, pull_loss, select_groups

# A tiny random ViT (depth 4: shared prompts at block 0, group prompts at blocks 1-3).
VIT = {"model.name": "tiny_vit", "model.args": {"dim": 16, "depth": 4, "heads": 2}}
SHARED = {"shallow", "deep", "group", "group_keys", "head.weight", "head.bias"}


def _method(tiny, **args):
    return setup(tiny(**VIT, **{"method.name": "sgpt", "method.args": args}))


def _cos(a, b):
    return F.cosine_similarity(a[:, None], b[None], dim=-1)


def test_selection_picks_the_key_of_highest_cosine():
    gen = torch.Generator().manual_seed(0)
    q, keys = torch.randn(50, 8, generator=gen), torch.randn(5, 8, generator=gen)
    choice = select_groups(q, keys)
    assert torch.equal(choice, _cos(q, keys).argmax(1))
    assert len(choice.unique()) > 1
    # Cosine, not distance or dot product: rescaling queries or keys changes nothing.
    scale = torch.rand(5, 1, generator=gen) * 10 + 0.1
    assert torch.equal(select_groups(q * 7.0, keys * scale), choice)
    # The code's rebalancing: (1 − cos)·(freq + ε), so a much-used group loses a near tie.
    q2, k2 = torch.tensor([[1.0, 0.0]]), torch.tensor([[1.0, 0.1], [1.0, 0.2]])
    assert select_groups(q2, k2).item() == 0
    assert select_groups(q2, k2, torch.tensor([0.9, 0.1])).item() == 1


def test_the_network_inserts_the_chosen_groups_prompts_after_cls(tiny):
    method, clients, st = _method(tiny)
    assert method.group_blocks == [1, 2, 3] and method.n_groups == 4
    net = method.load(st.shared, {}).eval()
    x, _ = next(clients[0].eval_train_batches(10_000))
    bb, s = net.backbone, st.shared
    with torch.no_grad():
        logits = net(x)
        t = bb.vit.blocks[0](torch.cat([bb.embed(x)[:, :1], s["shallow"].expand(len(x), -1, -1), bb.embed(x)[:, 1:]],
                                       1))
        g = _cos(t[:, 0], s["group_keys"]).argmax(1)  # the query: cls entering the first group block
        for j, b in enumerate([1, 2, 3]):
            t = bb.vit.blocks[b](torch.cat([t[:, :1], s["group"][j][g][:, None], t[:, 1:]], 1))
        ref = net.head(bb.vit.norm(t)[:, 0])
    assert torch.equal(net.last_choice, g)
    torch.testing.assert_close(logits, ref)


def test_the_selection_gives_the_keys_no_gradient(tiny):
    method, clients, st = _method(tiny)
    net = method.load(st.shared, {}).train()
    for k in ("group", "group_keys"):
        net.get_parameter(k).requires_grad_(True)
        net.get_parameter(k).grad = None
    x, y = next(clients[0].eval_train_batches(10_000))
    F.cross_entropy(net(x), y).backward()
    assert net.group_keys.grad is None or not net.group_keys.grad.any()
    chosen = torch.zeros(method.n_groups, dtype=torch.bool)
    chosen[net.last_choice] = True
    row_grad = net.group.grad.abs().sum((0, 2))
    assert (row_grad[chosen] > 0).all() and not row_grad[~chosen].any()  # only chosen prompts learn
    for k in ("group", "group_keys"):
        net.get_parameter(k).requires_grad_(False)


def test_the_pull_loss_moves_each_chosen_key_toward_its_queries():
    gen = torch.Generator().manual_seed(1)
    q, keys = torch.randn(40, 6, generator=gen), torch.randn(4, 6, generator=gen)
    q[:, 0] += 3.0
    keys[3] = -q.mean(0)  # a key no query picks
    keys = keys.requires_grad_(True)
    choice = select_groups(q, keys)
    assert 3 not in choice.tolist()
    loss = pull_loss(q, keys, choice)
    torch.testing.assert_close(loss, -_cos(q, keys.detach())[torch.arange(40), choice].mean())
    loss.backward()
    assert not keys.grad[3].any()
    new = (keys - 0.5 * keys.grad).detach()
    for g in choice.unique():
        mine = q[choice == g]
        assert _cos(mine, new[g:g + 1]).mean() > _cos(mine, keys.detach()[g:g + 1]).mean()


def _changed(u, st):
    return {k for k in SHARED if not torch.equal(u.upload[k], st.shared[k])}


def test_stages_alternate_between_rounds_shared_prompts_then_groups_and_keys(tiny):
    method, clients, st = _method(tiny)
    u0 = update(method, st, clients[0], rnd=0)  # stage 1: shared prompts and head
    assert _changed(u0, st) == {"shallow", "head.weight", "head.bias"}
    assert not u0.upload["group_count"].any()
    u1 = update(method, st, clients[0], rnd=1)  # stage 2: group prompts, keys and head
    assert _changed(u1, st) == {"group", "group_keys", "head.weight", "head.bias"}
    assert u1.upload["group_count"].sum() == clients[0].num_train and "loss_key" in u1.metrics
    # A stage-1 round leaves keys and group prompts where they were, momentum or not.
    new, _ = method.aggregate(st.shared, [u0], st.server_state, 0)
    for k in ("group", "group_keys"):
        torch.testing.assert_close(new[k], st.shared[k])


def test_the_sequential_schedule_runs_both_stages_every_round(tiny):
    method, clients, st = _method(tiny, schedule="sequential")
    u = update(method, st, clients[0], rnd=0)
    assert _changed(u, st) == {"shallow", "group", "group_keys", "head.weight", "head.bias"}
    assert u.upload["group_count"].sum() == clients[0].num_train
    only2, _, _ = _method(tiny, schedule="sequential", shared_epochs=0)
    assert "shallow" not in _changed(update(only2, st, clients[0], rnd=0), st)


def test_server_averages_and_moves_keys_and_group_prompts_with_momentum(tiny):
    method, _, st = _method(tiny, key_momentum=0.25, prompt_momentum=0.75)
    s = st.shared
    gen = torch.Generator().manual_seed(2)
    ups = []
    for counts in ([3.0, 0, 1, 0], [1.0, 2, 0, 0]):
        theta = {k: torch.randn(s[k].shape, generator=gen) for k in SHARED}
        ups.append(ClientUpdate({**theta, "group_count": torch.tensor(counts)}, {}, 10))
    new, _ = method.aggregate(s, ups, st.server_state, 0)
    a, b = ups[0].upload, ups[1].upload
    for k in ("shallow", "deep", "head.weight", "head.bias"):  # plain FedAvg (uniform by default)
        torch.testing.assert_close(new[k], (a[k] + b[k]) / 2)
    # Keys: each averaged over the clients in proportion to their selections of it; nobody's: mean.
    share = torch.tensor([[0.75, 0.0, 1.0, 0.5], [0.25, 1.0, 0.0, 0.5]])
    avg = share[0][:, None] * a["group_keys"] + share[1][:, None] * b["group_keys"]
    torch.testing.assert_close(new["group_keys"], 0.25 * s["group_keys"] + 0.75 * avg)
    # Group prompts: FedAvg, then momentum.
    torch.testing.assert_close(new["group"], 0.75 * s["group"] + 0.25 * (a["group"] + b["group"]) / 2)
    assert new["group_count"].tolist() == [4.0, 2.0, 1.0, 0.0]


def test_only_the_stated_tensors_are_uploaded_and_nothing_is_kept(tiny):
    method, clients, st = _method(tiny)
    assert method.init_client(0, 0) == {} and set(st.shared) == SHARED | {"group_count"}
    frozen = {k: v.clone() for k, v in method.net.backbone.state_dict().items()}
    u = update(method, st, clients[0])
    assert set(u.upload) == SHARED | {"group_count"} and u.state == {}
    assert all(not v.requires_grad for v in u.upload.values())
    for k, v in method.net.backbone.state_dict().items():
        assert torch.equal(v, frozen[k]), k
    new, _ = method.aggregate(st.shared, [u], st.server_state, 0)
    assert set(new) == set(st.shared)
    # Keys start orthonormal (the code's Gram-Schmidt).
    k = st.shared["group_keys"]
    torch.testing.assert_close(k @ k.T, torch.eye(len(k)), atol=1e-5, rtol=0)


@pytest.mark.parametrize("args", [
    {"query": "pretrained", "query_relu": True, "balance_groups": True, "pool": "mean", "stage1_groups": "off",
     "schedule": "sequential"},
    {"query": "frozen", "group_mode": "replace", "stage2_head": False, "key_weighting": "fedavg",
     "prompt_weighting": "selections", "n_groups": 7, "group_blocks": [2, 3]}])
def test_every_option_runs(tiny, args):
    method, clients, st = _method(tiny, **args)
    u = update(method, st, clients[0])
    new, _ = method.aggregate(st.shared, [u], st.server_state, 0)
    u = update(method, st, clients[1], rnd=1, shared=new)  # round 2: rebalancing has counts now
    new, _ = method.aggregate(new, [u], st.server_state, 1)
    assert method.evaluate(new, {}, clients[0], torch_gen(0, "eval", 0, 0)).total > 0


def test_group_blocks_follow_vit_b16s_relative_position_and_are_checked(tiny):
    p = SGPTParams()
    assert default_group_blocks(p, 12) == [4, 5, 6] and default_group_blocks(p, 6) == [2, 3, 4]
    with pytest.raises(ConfigError, match=r"method\.args\.group_blocks"):
        _method(tiny, group_blocks=[4])
    with pytest.raises(ConfigError, match=r"method\.args\.shared_depth"):
        _method(tiny, group_blocks=[2, 3], shared_depth=3)


def test_it_learns_on_pep_fedpts_smoke_setup(tmp_path):
    cfg = fedrepro.papers.setup("pep_fedpt", "smoke", method__name="sgpt", runs_dir=str(tmp_path))
    res = fedrepro.run(cfg)
    # 2 classes per client of 10: chance is 10%, and 50% even for a model that knows the pair.
    assert res.summary["final_acc_mean"] > 0.6, res.summary
