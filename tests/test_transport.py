"""fedrepro.ot.transport against POT (float64 numpy references) and against its own invariants."""
from __future__ import annotations

import math

import numpy as np
import ot
import pytest
import torch

from fedrepro.errors import ConfigError
from fedrepro.ot.transport import PLANS, kl_uot_plan, ot_score, sinkhorn_plan, uniform_plan, uot_plan

M, N = 49, 2


def _cost(seed, shape=(M, N), lo=0.1, hi=0.35):
    """Cost 1 - s with s ~ U[lo, hi] (the range of CLIP patch-prompt cosines), float64 numpy."""
    return 1.0 - np.random.default_rng(seed).uniform(lo, hi, shape)


def _marginals(gamma, m=M, n=N):
    return np.full(m, 1.0 / m), np.full(n, gamma / n)


def _algorithm1_numpy(C, gamma, lam, max_iter, thresh):
    """FedOTP Algorithm 1 in the linear domain, as written (fine in float64 at lam = 0.1)."""
    a, b = _marginals(gamma, *C.shape)
    K = np.exp(-C / lam)
    v = np.ones(C.shape[1])
    for _ in range(max_iter):
        v_prev = v
        u = np.minimum(a / (K @ v), 1.0)
        v = b / (K.T @ u)
        if np.abs(v - v_prev).mean() < thresh:
            break
    return u[:, None] * K * v[None, :]


# --- against POT ------------------------------------------------------------------------------------

@pytest.mark.parametrize("lam", [0.1, 0.05, 0.01])
@pytest.mark.parametrize("gamma", [0.8, 0.5])
def test_uot_matches_pot_entropic_partial(lam, gamma):
    C = _cost(int(lam * 1000) + int(gamma * 10))
    a, b = _marginals(gamma)
    # POT rejects m = b.sum() by a rounding hair, so its plan carries mass gamma (1 - 1e-12): plans
    # differ by ~1e-13 per entry once both have converged (1000 iterations is far past that at these
    # lam; measured max |dT| 3e-14 .. 5e-13). 1e-11 against entries ~1e-2 is a 1e-9 relative match.
    ref = ot.partial.entropic_partial_wasserstein(a, b, C, reg=lam, m=b.sum() * (1 - 1e-12),
                                                  numItermax=1000, stopThr=0.0)
    T = uot_plan(torch.from_numpy(C), gamma, lam, max_iter=1000, thresh=0.0)
    assert T.dtype == torch.float64 and T.shape == (M, N)
    np.testing.assert_allclose(T.numpy(), ref, rtol=0, atol=1e-11)
    rows = T.sum(1).numpy()
    # the inequality is really in play: some patches are saturated (mass 1/M), others are not
    assert (rows > (1 - 1e-9) / M).any() and (rows < 0.99 / M).any()


@pytest.mark.parametrize("lam", [0.1, 0.01])
def test_uot_at_gamma_one_is_balanced_sinkhorn(lam):
    C = _cost(7)
    a, b = _marginals(1.0)
    ref = ot.sinkhorn(a, b, C, reg=lam, numItermax=3000, stopThr=1e-15)
    # Algorithm 1 from v = 1 approaches the balanced plan more slowly than Sinkhorn at small lam
    # (lam = 0.01: 2e-9 after 1000 iterations, 8e-15 after 3000)
    T = uot_plan(torch.from_numpy(C), 1.0, lam, max_iter=3000, thresh=0.0)
    np.testing.assert_allclose(T.numpy(), ref, rtol=0, atol=1e-12)
    S = sinkhorn_plan(torch.from_numpy(C), lam, max_iter=3000, thresh=0.0)
    np.testing.assert_allclose(S.numpy(), ref, rtol=0, atol=1e-13)  # measured <= 4e-16


@pytest.mark.parametrize("lam,gamma,reg_m", [(0.1, 0.8, 0.1), (0.1, 1.0, 1.0), (0.05, 0.8, 10.0), (0.05, 0.5, 1.0)])
def test_kl_uot_matches_pot_sinkhorn_unbalanced(lam, gamma, reg_m):
    C = _cost(11)
    a, b = _marginals(gamma)
    ref = ot.unbalanced.sinkhorn_unbalanced(a, b, C, reg=lam, reg_m=reg_m, reg_type="kl",
                                            numItermax=3000, stopThr=1e-15)
    T = kl_uot_plan(torch.from_numpy(C), gamma, lam, reg_m=reg_m, max_iter=3000, thresh=0.0)
    np.testing.assert_allclose(T.numpy(), ref, rtol=0, atol=1e-14)  # measured <= 2e-16


@pytest.mark.parametrize("thresh", [1e-3, 1e-6])
def test_uot_early_stopping_is_algorithm1s(thresh):
    """At FedOTP's defaults the solve stops early; it must stop at the same iteration as Algorithm 1
    (absolute mean change of v), not merely converge to the same limit."""
    for seed in range(3):
        C = _cost(100 + seed, lo=-0.2, hi=0.6)
        ref = _algorithm1_numpy(C, 0.8, 0.1, max_iter=100, thresh=thresh)
        T = uot_plan(torch.from_numpy(C), 0.8, 0.1, max_iter=100, thresh=thresh)
        np.testing.assert_allclose(T.numpy(), ref, rtol=1e-10, atol=1e-14)


# --- batching, marginals, dtypes --------------------------------------------------------------------

@pytest.mark.parametrize("plan", ["uot", "ot", "kl_uot"])
def test_batched_equals_one_at_a_time(plan):
    g = torch.Generator().manual_seed(0)
    # problems of very different difficulty in one batch: stopping is per problem, so easy ones
    # must not be carried on (or hard ones cut short) by their batch-mates
    sim = torch.rand(3, 4, M, N, generator=g, dtype=torch.float64) * 0.25 + 0.1
    sim[0, 1] = torch.rand(M, N, generator=g, dtype=torch.float64) * 2 - 1
    sim[2, 3] = 0.2
    cost = 1 - sim
    fn = PLANS[plan]
    batched = fn(cost, 0.8, 0.1, 100, 1e-3, 1.0)
    assert batched.shape == cost.shape
    for i in range(3):
        for k in range(4):
            single = fn(cost[i, k], 0.8, 0.1, 100, 1e-3, 1.0)
            torch.testing.assert_close(batched[i, k], single, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("gamma", [1.0, 0.8, 0.3])
def test_marginals(gamma):
    g = torch.Generator().manual_seed(1)
    cost = 1 - (torch.rand(5, M, N, generator=g, dtype=torch.float64) * 2 - 1)
    # at the defaults the last update is the column projection, so columns are exact whatever the
    # convergence; rows obey <= 1/M only at convergence
    T = uot_plan(cost, gamma, 0.1)
    torch.testing.assert_close(T.sum(-2), torch.full((5, N), gamma / N, dtype=torch.float64), rtol=1e-12, atol=0)
    T = uot_plan(cost, gamma, 0.1, max_iter=5000, thresh=1e-12)
    torch.testing.assert_close(T.sum(-2), torch.full((5, N), gamma / N, dtype=torch.float64), rtol=1e-12, atol=0)
    assert (T.sum(-1) <= 1 / M + 1e-10).all()
    assert (T >= 0).all()
    if gamma == 1.0:
        torch.testing.assert_close(T.sum(-1), torch.full((5, M), 1 / M, dtype=torch.float64), rtol=1e-8, atol=0)
    S = sinkhorn_plan(cost, 0.1, max_iter=2000, thresh=1e-14)
    torch.testing.assert_close(S.sum(-1), torch.full((5, M), 1 / M, dtype=torch.float64), rtol=1e-10, atol=0)
    torch.testing.assert_close(S.sum(-2), torch.full((5, N), 1 / N, dtype=torch.float64), rtol=1e-12, atol=0)
    U = uniform_plan(cost)
    assert torch.equal(U, torch.full_like(cost, 1 / (M * N)))


def test_small_lam_float32_does_not_underflow():
    g = torch.Generator().manual_seed(2)
    sim = torch.rand(4, 10, M, N, generator=g, dtype=torch.float64) * 2 - 1   # cost over [0, 2]
    sim[0, 0] = torch.rand(M, N, generator=g, dtype=torch.float64) * 0.25 + 0.1
    cost = 1 - sim
    # the hazard: the linear-domain kernel is all zeros (fp16) or denormal/zero (fp32) at lam = 0.01
    assert (torch.exp(-cost.half() / 0.01) == 0).float().mean() > 0.9
    for gamma in (0.8, 1.0):
        T64 = uot_plan(cost, gamma, 0.01)
        T32 = uot_plan(cost.float(), gamma, 0.01)
        assert T32.dtype == torch.float32 and torch.isfinite(T32).all()
        torch.testing.assert_close(T32.sum(-2), torch.full((4, 10, N), gamma / N), rtol=1e-5, atol=0)
        # float32 log-potentials of size ~cost/lam <= 200 carry ~1e-5 absolute rounding, i.e. ~1e-5
        # relative error in T (measured max |dT| 3e-6 against entries up to 1/M = 0.02)
        torch.testing.assert_close(T32.double(), T64, rtol=0, atol=2e-5)
        T16 = uot_plan(cost.half(), gamma, 0.01)
        assert T16.dtype == torch.float16 and torch.isfinite(T16).all()
        S32 = sinkhorn_plan(cost.float(), 0.01)
        assert torch.isfinite(S32).all()
        torch.testing.assert_close(S32.double(), sinkhorn_plan(cost, 0.01), rtol=0, atol=2e-5)


# --- ot_score -----------------------------------------------------------------------------------------

def _entropic_value(sim, gamma, lam):
    """gamma - W_lam(1 - S) = <T*, S> + lam H(T*) with H(T) = -sum T (log T - 1) at the optimum."""
    T = uot_plan(1 - sim, gamma, lam, max_iter=500, thresh=0.0)
    return float((T * sim).sum() - lam * (T * (torch.log(T) - 1)).sum())


def test_score_gradient_is_the_plan():
    g = torch.Generator().manual_seed(3)
    sim = (torch.rand(6, 3, generator=g, dtype=torch.float64) * 0.5).requires_grad_(True)
    score, plan = ot_score(sim, "uot", 0.8, 0.1, max_iter=500, thresh=0.0, return_plan=True)
    assert not plan.requires_grad and plan.grad_fn is None
    score.backward()
    torch.testing.assert_close(sim.grad, plan, rtol=0, atol=0)
    # and the fixed-plan gradient is the true gradient of the entropic OT similarity gamma - W_lam
    # (Danskin: the constraint set does not depend on S). Central differences in float64, h = 1e-6:
    # truncation ~h^2, rounding ~1e-16/h = 1e-10, so 1e-8 is comfortable.
    fd = torch.zeros_like(plan)
    base = sim.detach().clone()
    h = 1e-6
    for idx in np.ndindex(*base.shape):
        up, dn = base.clone(), base.clone()
        up[idx] += h
        dn[idx] -= h
        fd[idx] = (_entropic_value(up, 0.8, 0.1) - _entropic_value(dn, 0.8, 0.1)) / (2 * h)
    torch.testing.assert_close(fd, plan, rtol=0, atol=1e-8)


def test_score_variants():
    g = torch.Generator().manual_seed(5)
    sim = torch.rand(3, 7, M, N, generator=g) * 2 - 1
    avg = ot_score(sim, "average", 0.8, 0.1)
    torch.testing.assert_close(avg, sim.mean((-1, -2)))
    for variant in ("uot", "ot", "kl_uot"):
        score, plan = ot_score(sim, variant, 0.8, 0.1, return_plan=True)
        assert score.shape == (3, 7) and score.dtype == torch.float32
        torch.testing.assert_close(score, (plan * sim).sum((-1, -2)))
    uot = ot_score(sim, "uot", 0.8, 0.1)
    assert torch.equal(uot, (uot_plan(1 - sim, 0.8, 0.1) * sim).sum((-1, -2)))
    # the OT plans put mass on the better-matching patches, so they score above plain averaging
    assert (ot_score(sim, "ot", 1.0, 0.1) > avg).all()


def test_score_nan_raises_floating_point_error(monkeypatch):
    sim = torch.full((M, N), 0.2)
    sim[3, 1] = float("nan")
    with pytest.raises(FloatingPointError, match="similarities"):
        ot_score(sim, "uot", 0.8, 0.1)
    monkeypatch.setitem(PLANS, "uot", lambda cost, *args: torch.full_like(cost, float("nan")))
    with pytest.raises(FloatingPointError, match=r"lam=0\.01.*gamma=0\.8"):
        ot_score(torch.full((M, N), 0.2), "uot", 0.8, 0.01)


# --- bad inputs -------------------------------------------------------------------------------------

@pytest.mark.parametrize("gamma", [0.0, -0.1, 1.5, float("nan"), float("inf"), True, "0.8"])
def test_bad_gamma(gamma):
    cost = torch.ones(M, N)
    for call in (lambda: uot_plan(cost, gamma, 0.1), lambda: kl_uot_plan(cost, gamma, 0.1),
                 lambda: ot_score(1 - cost, "uot", gamma, 0.1)):
        with pytest.raises(ConfigError, match=r"gamma.*\(0, 1\]"):
            call()


@pytest.mark.parametrize("lam", [0.0, -0.1, float("inf"), float("nan"), None])
def test_bad_lam(lam):
    cost = torch.ones(M, N)
    for call in (lambda: uot_plan(cost, 0.8, lam), lambda: sinkhorn_plan(cost, lam),
                 lambda: kl_uot_plan(cost, 0.8, lam), lambda: ot_score(1 - cost, "ot", 0.8, lam)):
        with pytest.raises(ConfigError, match=r"lam.*\(0, inf\)"):
            call()


def test_other_bad_inputs():
    cost = torch.ones(M, N)
    with pytest.raises(ConfigError, match="max_iter"):
        uot_plan(cost, 0.8, 0.1, max_iter=0)
    with pytest.raises(ConfigError, match="max_iter"):
        sinkhorn_plan(cost, 0.1, max_iter=2.5)
    with pytest.raises(ConfigError, match="thresh"):
        uot_plan(cost, 0.8, 0.1, thresh=-1e-3)
    with pytest.raises(ConfigError, match="reg_m"):
        kl_uot_plan(cost, 0.8, 0.1, reg_m=0.0)
    with pytest.raises(ConfigError, match="log_domain"):
        uot_plan(cost, 0.8, 0.1, log_domain=False)
    with pytest.raises(ConfigError, match=r"variant.*'uot'"):
        ot_score(cost, "sinkhorn", 0.8, 0.1)
    with pytest.raises(ConfigError, match="cost"):
        uot_plan(torch.ones(M), 0.8, 0.1)
    with pytest.raises(TypeError, match="cost"):
        uot_plan(torch.ones(M, N, dtype=torch.long), 0.8, 0.1)
    with pytest.raises(TypeError, match="cost"):
        uot_plan(np.ones((M, N)), 0.8, 0.1)


def test_plan_is_pure():
    """The plan functions leave autograd to the caller: with a cost that requires grad the plan is
    differentiable (through the unrolled iterations), and the input is not modified."""
    cost = torch.full((M, N), 0.8, dtype=torch.float64, requires_grad=True)
    T = uot_plan(cost, 0.8, 0.1)
    assert T.requires_grad
    assert torch.equal(cost.detach(), torch.full((M, N), 0.8, dtype=torch.float64))
    assert math.isclose(float(T.detach().sum()), 0.8, rel_tol=1e-12)
