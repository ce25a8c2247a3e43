"""FedDecorr (Shi et al., ICLR 2023): the decorrelation loss by hand, the gradient it adds (to the
body only), and the FedAvg server."""
import pytest
import torch
from support import PLAIN_STEP, check_fedavg_server, first_batch, setup, update

import fedrepro
from fedrepro.methods.feddecorr import decorrelation_loss


@pytest.mark.parametrize("name", ["feddecorr"])
def test_only_the_model_is_uploaded_and_the_global_model_is_the_average(tiny, name):
    check_fedavg_server(tiny(**{"method.name": name}))


def test_decorrelation_loss_by_hand():
    # uncorrelated, centred columns: K = I
    z = torch.tensor([[1.0, 1.0], [1.0, -1.0], [-1.0, 1.0], [-1.0, -1.0]])
    assert decorrelation_loss(z, "paper").item() == pytest.approx(1 / 2, rel=1e-6)  # ‖I‖²/d² = 1/d
    assert decorrelation_loss(z, "code").item() == pytest.approx(0.0, abs=1e-7)  # off-diagonal only
    # fully collapsed: both columns the same direction (different scales): every correlation is 1
    c = torch.tensor([1.0, 2.0, 3.0, 4.0])
    z = torch.stack([c, 3 * c - 1], 1)
    assert decorrelation_loss(z, "paper").item() == pytest.approx(1.0, rel=1e-6)
    n = 4  # code: (ẐᵀẐ)_12 = N − 1 with the unbiased std, squared, divided by N
    assert decorrelation_loss(z, "code").item() == pytest.approx((n - 1) ** 2 / n, rel=1e-6)
    # a general batch, written out: Pearson correlations ρ_jk
    g = torch.Generator().manual_seed(0)
    z = torch.randn(7, 3, generator=g, dtype=torch.float64)
    rho = torch.corrcoef(z.T)
    n, d = z.shape
    assert decorrelation_loss(z, "paper").item() == pytest.approx(float(rho.pow(2).sum()) / d ** 2, rel=1e-6)
    off = rho.pow(2).sum() - d
    assert decorrelation_loss(z, "code").item() == pytest.approx(float(off) * (n - 1) ** 2 / (d * (d - 1)) / n,
                                                                 rel=1e-6)
    one = torch.randn(1, 3, requires_grad=True)
    assert decorrelation_loss(one).item() == 0.0


def test_feddecorr_step_adds_the_decorrelation_gradient_to_the_body_only(tiny):
    """One full-batch plain-SGD step: FedDecorr(β) − FedDecorr(0) = −lr·β·∇L_decorr(features(x))."""
    beta, lr = 0.5, 0.1
    ups = {}
    for b in (beta, 0.0):
        method, clients, st = setup(tiny(**PLAIN_STEP, **{"train.lr": lr, "method.name": "feddecorr",
                                                          "method.args.beta": b}))
        ups[b] = update(method, st, clients[0]).upload
    model = method.load(st.shared, {})
    x, _ = first_batch(clients[0])
    model.zero_grad(set_to_none=True)
    z = model.features(x)
    zn = (z - z.mean(0)) / z.std(0, unbiased=True)
    corr = zn.T @ zn
    d = z.shape[1]
    ((corr.pow(2).sum() - corr.diagonal().pow(2).sum()) / (d * (d - 1)) / len(z)).backward()
    grads = {n: p.grad for n, p in model.named_parameters()}
    moved = False
    for k in ups[beta]:
        diff = ups[beta][k] - ups[0.0][k]
        if k.startswith("head."):
            assert torch.allclose(diff, torch.zeros_like(diff), atol=1e-7), k  # the regulariser skips h
        else:
            assert torch.allclose(diff, -lr * beta * grads[k], atol=1e-5), k
            moved = moved or diff.abs().max() > 1e-4
    assert moved


def test_feddecorr_global_model_learns(tiny):
    res = fedrepro.run(tiny(**{"method.name": "feddecorr", "train.rounds": 3, "train.local_epochs": 2,
                               "train.global_eval": True}))
    assert res.summary["final_acc_mean"] > 0.5, res.summary  # 4 balanced classes: chance is 0.25
    assert res.summary["final_global_acc"] > 0.4, res.summary
