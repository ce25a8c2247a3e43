"""GRACE (a pFedCSPC global-FL baseline; its server as its code has it): the CORAL loss, the
aggregation weights, the server step, the meta-gradient, and a global model that learns."""
import copy

import pytest
import torch
import torch.nn.functional as F
from support import first_batch, setup, update
from torch.func import functional_call

import fedrepro
from fedrepro.methods.grace import consistency, coral_loss, cra_weights


def test_coral_loss_by_hand():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(7, 3, generator=g), 2 * torch.randn(7, 3, generator=g)
    expected = ((torch.cov(a.T) - torch.cov(b.T)) ** 2).sum() / (4 * 9)
    assert torch.allclose(coral_loss(a, b), expected)


def test_grace_aggregation_weights_by_hand():
    ups = [[torch.tensor(a, dtype=torch.float64), torch.tensor(b, dtype=torch.float64)]
           for a, b in (([1.0, 0.0], [2.0]), ([1.0, 1.0], [-2.0]), ([-1.0, 0.0], [2.0]))]
    flat = [torch.cat(u) for u in ups]
    cos = [[float(F.cosine_similarity(flat[i], flat[j], dim=0)) for j in range(3)] for i in range(3)]
    c = [(cos[k][(k + 1) % 3] + cos[k][(k + 2) % 3]) / 2 for k in range(3)]
    assert consistency(ups, "total") == pytest.approx(c)
    shifted = [v - min(c) + 1e-3 for v in c]  # min c < 0
    shifted = [v / max(shifted) for v in shifted] if max(shifted) > 1 else shifted
    n = [10, 20, 30]
    w = [s * k for s, k in zip(shifted, n)]
    assert cra_weights(c, n) == pytest.approx([v / sum(w) for v in w])
    # per-tensor similarities, plain and linearly re-weighted (first tensor 2x, last 0x, mean 1)
    per = [[[float(F.cosine_similarity(ups[i][t], ups[j][t], dim=0)) for t in range(2)] for j in range(3)]
           for i in range(3)]
    layer = [sum(sum(per[k][j]) / 2 for j in range(3) if j != k) / 2 for k in range(3)]
    reweighted = [sum(per[k][j][0] for j in range(3) if j != k) / 2 for k in range(3)]
    assert consistency(ups, "layer") == pytest.approx(layer)
    assert consistency(ups, "layer_reweight") == pytest.approx(reweighted)
    assert consistency(ups[:1]) == [1.0] and cra_weights([0.2, 0.2], [1, 3]) == pytest.approx([0.25, 0.75])


def test_grace_server_steps_along_the_reweighted_update(tiny):
    method, clients, st = setup(tiny(**{"method.name": "grace", "method.args.server_lr": 0.5}))
    ups = [update(method, st, c) for c in clients]
    new, server = method.aggregate(st.shared, ups, st.server_state, 0)
    deltas = [[st.shared[k].double() - u.upload[k].double() for k in method.param_keys] for u in ups]
    w = cra_weights(consistency(deltas), [u.num_samples for u in ups])
    assert server["cra_weights"].tolist() == pytest.approx(w)
    assert not w == pytest.approx([u.num_samples / sum(x.num_samples for x in ups) for u in ups])  # re-weighted
    for i, k in enumerate(method.param_keys):
        expected = st.shared[k].double() - 0.5 * sum(wk * d[i] for wk, d in zip(w, deltas))
        assert torch.allclose(new[k].double(), expected, atol=1e-6), k
    # each client keeps its trained model as its personalised model
    assert all(torch.equal(ups[0].state["p." + k], ups[0].upload[k]) for k in ups[0].upload)


@pytest.mark.parametrize("first_order", [True, False])
def test_grace_meta_gradient_adds_the_corrected_alignment_term(tiny, first_order):
    """∇_θ [CE(θ) + λ CORAL(φ_{θ'}(x), φ_g(x))], θ' = θ − α∇CE(θ), against an independent torch.func
    computation (first order: the alignment gradient is taken at θ' and added as is)."""
    lam, alpha = 1000.0, 0.5  # CORAL is divided by 4d²: a large λ makes its gradient visible
    method, clients, st = setup(tiny(**{"method.name": "grace", "method.args.first_order": first_order}))
    model = method.load(st.shared, {})
    with torch.no_grad():  # a local model away from the global one
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())))
    gmodel = copy.deepcopy(method.load(st.shared, {}))
    x, y = first_batch(clients[0])
    model.train()
    method.meta_step(model, gmodel, x, y, lam, alpha)
    got = {n: p.grad.clone() for n, p in model.named_parameters()}

    params = {n: p.detach().clone() for n, p in model.named_parameters()}
    target = gmodel.features(x).detach()

    def ce(ps):
        return F.cross_entropy(functional_call(model, ps, (x,)), y)

    def align(ps):
        feats = functional_call(model.features, {k[len("features."):]: v for k, v in ps.items()
                                                 if k.startswith("features.")}, (x,))
        return coral_loss(feats, target)

    g_ce = torch.func.grad(ce)(params)
    if first_order:
        fast = {n: params[n] - alpha * g_ce[n] for n in params}
        g_al = torch.func.grad(align)(fast)
        expected = {n: g_ce[n] + lam * g_al[n] for n in params}
    else:
        expected = torch.func.grad(
            lambda ps: ce(ps) + lam * align({n: ps[n] - alpha * torch.func.grad(ce)(ps)[n] for n in ps}))(params)
    for n in params:
        assert torch.allclose(got[n], expected[n], atol=1e-5), n
    assert any(not torch.allclose(got[n], g_ce[n], atol=1e-4) for n in params)  # the correction is there
    # λ = 0 (or warm-up) is plain CE
    model.zero_grad(set_to_none=True)
    method.meta_step(model, gmodel, x, y, 0.0, alpha)
    assert all(torch.allclose(p.grad, g_ce[n], atol=1e-6) for n, p in model.named_parameters())


def test_grace_global_model_learns(tiny):
    res = fedrepro.run(tiny(**{"method.name": "grace", "train.rounds": 3, "train.local_epochs": 2,
                               "train.global_eval": True}))
    assert res.summary["final_acc_mean"] > 0.5, res.summary  # 4 balanced classes: chance is 0.25
    assert res.summary["final_global_acc"] > 0.4, res.summary
