"""FedASAM (Caldarola et al., ECCV 2022): the ASAM perturbation, the step taken at the perturbed
weights, BatchNorm buffers averaged like FedAvg's, and a global model that learns."""
import copy
import math

import pytest
import torch
import torch.nn.functional as F
from support import BN_CNN, PLAIN_STEP, check_batchnorm_buffers, fedavg_step, full_batch, setup, update

import fedrepro
from fedrepro.methods import METHODS
from fedrepro.methods.fedasam import sam_perturbation


@pytest.mark.parametrize("name", ["fedasam"])
def test_runs_with_batchnorm_buffers(tiny, name):
    """Buffers (BN running statistics, the integer step counter) are averaged like FedAvg's."""
    check_batchnorm_buffers(tiny(**BN_CNN, **{"method.name": name}))


def _params_with_grads():
    g = torch.Generator().manual_seed(0)
    w = torch.nn.Parameter(torch.randn(3, 2, generator=g))
    b = torch.nn.Parameter(torch.randn(3, generator=g))
    w.grad = torch.randn(3, 2, generator=g)
    b.grad = torch.randn(3, generator=g)
    return w, b


@pytest.mark.parametrize("adaptive, scale", [(True, "weights"), (True, "all"), (False, "weights")])
def test_asam_perturbation_is_rho_T2g_over_norm_Tg(adaptive, scale):
    rho, eta = 0.7, 0.2
    w, b = _params_with_grads()
    eps = dict((id(p), e) for p, e in sam_perturbation([("lin.weight", w), ("lin.bias", b)], rho, eta, adaptive, scale))
    if adaptive:
        tw = w.detach().abs() + eta
        tb = b.detach().abs() + eta if scale == "all" else torch.ones(3)
    else:
        tw, tb = torch.ones(3, 2), torch.ones(3)
    norm = math.sqrt(float((tw * w.grad).pow(2).sum() + (tb * b.grad).pow(2).sum()))
    assert torch.allclose(eps[id(w)], rho * tw ** 2 * w.grad / norm, atol=1e-6)
    assert torch.allclose(eps[id(b)], rho * tb ** 2 * b.grad / norm, atol=1e-6)
    # ε lies on the ρ-sphere of the T-normalised space: ‖T⁻¹ε‖ = ρ
    radius = math.sqrt(float((eps[id(w)] / tw).pow(2).sum() + (eps[id(b)] / tb).pow(2).sum()))
    assert radius == pytest.approx(rho, rel=1e-5)
    # a parameter without a gradient is neither perturbed nor counted
    frozen = torch.nn.Parameter(torch.ones(4))
    assert len(sam_perturbation([("x.weight", frozen), ("lin.bias", b)], rho, eta, adaptive, scale)) == 1


def test_default_rho_follows_the_optimiser():
    cls = METHODS.get("fedasam")
    assert cls.parse_params({}).radius == 0.7 and cls.parse_params({"adaptive": False}).radius == 0.1
    assert cls.parse_params({"rho": 0.05}).radius == 0.05


@pytest.mark.parametrize("adaptive", [True, False])
def test_fedasam_step_descends_with_the_gradient_at_the_perturbed_weights(tiny, adaptive):
    """One full-batch plain-SGD step: w' = w − lr·∇L(w + ε(w)), not FedAvg's w − lr·∇L(w)."""
    lr, rho, eta = 0.1, 0.5, 0.2
    method, clients, st = setup(tiny(**PLAIN_STEP, **{"train.lr": lr, "method.name": "fedasam",
                                                      "method.args": {"rho": rho, "eta": eta, "adaptive": adaptive}}))
    c = clients[0]
    got = update(method, st, c).upload
    # by hand on a copy of the global model
    model = copy.deepcopy(method.load(st.shared, {}))
    x, y = full_batch(c)
    params = dict(model.named_parameters())
    grads = torch.autograd.grad(F.cross_entropy(model(x), y), list(params.values()))
    scaled = {}
    for (n, p), g in zip(params.items(), grads):
        t = (p.detach().abs() + eta) if adaptive and n.endswith("weight") else torch.ones_like(p)
        scaled[n] = (t, g)
    norm = torch.sqrt(sum((t * g).pow(2).sum() for t, g in scaled.values()))
    with torch.no_grad():
        for n, p in params.items():
            t, g = scaled[n]
            p.add_(rho * t * t * g / norm)
    grads_eps = torch.autograd.grad(F.cross_entropy(model(x), y), list(params.values()))
    plain = fedavg_step(tiny, st.shared, c, lr)
    for (n, _), g in zip(params.items(), grads_eps):
        expected = st.shared[n] - lr * g
        assert torch.allclose(got[n], expected, atol=1e-5), n
    assert any(not torch.allclose(got[n], plain[n], atol=1e-4) for n in params)
    # ρ = 0 is FedAvg's step
    zero, clients0, st0 = setup(tiny(**PLAIN_STEP, **{"train.lr": lr, "method.name": "fedasam",
                                                      "method.args.rho": 0.0}))
    flat = update(zero, st0, clients0[0]).upload
    assert all(torch.allclose(flat[n], plain[n], atol=1e-6) for n in params)


def test_fedasam_global_model_learns(tiny):
    res = fedrepro.run(tiny(**{"method.name": "fedasam", "train.rounds": 3, "train.local_epochs": 2,
                               "train.global_eval": True}))
    assert res.summary["final_acc_mean"] > 0.5, res.summary  # 4 balanced classes: chance is 0.25
    assert res.summary["final_global_acc"] > 0.4, res.summary
