"""FedPR (Feng et al., CVPR 2023) as a PEP-FedPT baseline: the null-space projector, local prompt
updates orthogonal to the global prompt's kept directions, FedVPT-D when the projection is off,
what is uploaded, and learning."""
import pytest
import torch
from support import setup, update

import fedrepro
import fedrepro.papers
from fedrepro.errors import ConfigError
from fedrepro.methods.fedpr import kept_count, null_projector, prompt_layers

VIT = {"model.name": "tiny_vit", "model.args": {"dim": 16, "depth": 4, "heads": 2}}
SHARED = {"shallow", "deep", "head.weight", "head.bias"}


def _method(tiny, name="fedpr", train=None, **args):
    return setup(tiny(**VIT, **{"method.name": name, "method.args": args}, **(train or {})))


def _kept_basis(q, k):
    """The k leading eigenvectors of q^T q: the directions the projection must protect."""
    _, evecs = torch.linalg.eigh((q.T @ q).double())
    return evecs.flip(1)[:, :k].float()


def _deltas(u, shared):
    return list(zip(prompt_layers(u.upload["shallow"] - shared["shallow"], u.upload["deep"] - shared["deep"]),
                    prompt_layers(shared["shallow"], shared["deep"])))


@pytest.mark.parametrize("rule", ["fraction", "energy"])
def test_null_projector_is_an_orthogonal_projector_off_the_kept_directions(rule):
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(5, 12, generator=gen) * torch.tensor([3.0, 2.0, 1.0, 0.1, 0.01])[:, None]
    proj, k = null_projector(q, rule, fraction=0.75, energy=0.99)
    torch.testing.assert_close(proj @ proj, proj, atol=1e-5, rtol=0)  # applied twice = once
    torch.testing.assert_close(proj, proj.T)
    kept = _kept_basis(q, k)
    assert proj.trace().round().item() == 12 - k
    torch.testing.assert_close(proj @ kept, torch.zeros(12, k), atol=1e-5, rtol=0)
    g = torch.randn(7, 12, generator=gen)
    torch.testing.assert_close((g @ proj) @ kept, torch.zeros(7, k), atol=1e-5, rtol=0)
    if rule == "fraction":
        assert k == 3  # ⌊(1 − 0.75)·12⌋ leading directions kept
    else:
        assert 1 <= k <= 5  # never more than the prompt's rank


def test_energy_rule_keeps_the_prompt_row_space_and_nothing_else():
    q = torch.randn(3, 10, generator=torch.Generator().manual_seed(1))
    proj, k = null_projector(q, "energy", energy=1.0)
    assert k == 3
    torch.testing.assert_close(q @ proj, torch.zeros(3, 10), atol=1e-5, rtol=0)  # the prompt itself is kept
    assert kept_count(torch.zeros(4), "energy", 0.8, 0.9) == 0  # a zero prompt protects nothing
    scaled, _ = null_projector(q, "energy", energy=1.0, scale="frobenius")
    torch.testing.assert_close(scaled, proj / 7 ** 0.5)


@pytest.mark.parametrize("args, train", [({}, {}), ({"null_rule": "energy", "kept_energy": 0.9},
                                                    {"train.weight_decay": 0.05})])
def test_local_prompt_update_stays_in_the_null_space_of_the_global_prompt(tiny, args, train):
    method, clients, st = _method(tiny, train=train, **args)
    u = update(method, st, clients[0], rnd=1)
    assert set(u.upload) == SHARED and u.state == {}  # only prompts and head travel
    proj, _ = method.projectors(st.shared["shallow"], st.shared["deep"])
    for i, (delta, q) in enumerate(_deltas(u, st.shared)):
        assert delta.abs().max() > 1e-4  # the prompt did move
        p = proj["shallow"] if i == 0 else proj["deep"][i - 1]
        assert 16 - int(p.trace().round()) >= 1  # one token per block: its own direction is kept
        # The update is orthogonal to the global prompt's token (the direction its Gram keeps) and
        # to every other kept direction (it is unchanged by Π).
        torch.testing.assert_close(delta @ q.T, torch.zeros(delta.shape[0], q.shape[0]), atol=1e-5, rtol=0)
        torch.testing.assert_close(delta @ p, delta, atol=1e-5, rtol=1e-4)
    assert not torch.equal(u.upload["head.weight"], st.shared["head.weight"])


def test_all_scope_protects_the_stacked_prompt_of_every_block(tiny):
    method, clients, st = _method(tiny, null_scope="all", null_rule="energy", kept_energy=1.0)
    u = update(method, st, clients[1], rnd=2)
    rows = torch.cat(prompt_layers(st.shared["shallow"], st.shared["deep"]))
    kept = _kept_basis(rows, rows.shape[0])  # 4 tokens in 16 dims: rank 4
    for delta, _ in _deltas(u, st.shared):
        torch.testing.assert_close(delta @ kept, torch.zeros(delta.shape[0], 4), atol=1e-5, rtol=0)


def test_without_projection_it_is_fedvpt_d_and_with_it_not(tiny):
    vptd, clients, st = _method(tiny, "fedvpt_d")
    off, _, st_off = _method(tiny, projection="none")
    on, _, st_on = _method(tiny)
    for k in SHARED:
        torch.testing.assert_close(st_off.shared[k], st.shared[k])
    ref = update(vptd, st, clients[0], rnd=1)
    same = update(off, st_off, clients[0], rnd=1)
    free = update(on, st_on, clients[0], rnd=0)  # round 0 trains freely (free_rounds = 1)
    ref0 = update(vptd, st, clients[0], rnd=0)
    for k in SHARED:
        torch.testing.assert_close(same.upload[k], ref.upload[k])
        torch.testing.assert_close(free.upload[k], ref0.upload[k])
    projected = update(on, st_on, clients[0], rnd=1)
    assert not torch.allclose(projected.upload["deep"], ref.upload["deep"])
    new, _ = on.aggregate(st_on.shared, [projected, same], {}, 1)
    torch.testing.assert_close(new["deep"], (projected.upload["deep"] + same.upload["deep"]) / 2)


@pytest.mark.parametrize("args, key", [({"null_fraction": 1.5}, "null_fraction"), ({"kept_energy": 0}, "kept_energy"),
                                       ({"null_scope": "model"}, "null_scope"), ({"free_rounds": -1}, "free_rounds")])
def test_bad_arguments_name_the_key(tiny, args, key):
    with pytest.raises(ConfigError, match=f"method.args.{key}"):
        _method(tiny, **args)


def test_fedpr_learns_on_the_smoke_setup(tmp_path):
    cfg = fedrepro.papers.setup("pep_fedpt", "smoke", method__name="fedpr", runs_dir=str(tmp_path))
    res = fedrepro.run(cfg)
    assert res.summary["final_acc_mean"] > 0.65  # 2 classes per client: chance is 0.5; it reaches 0.74
