"""Batched entropic optimal-transport plans between image patches and prompts (FedOTP).

FedOTP (Li et al., "Global and Local Prompts Cooperation via Optimal Transport for Federated
Learning", CVPR 2024) scores class k for an image by transporting the image's M patch features onto
the class's N prompt features (N = 2: the global and the local prompt). With cost
``C[m, n] = 1 - cos(F_m, G_n)``, patch marginal ``a = 1/M`` and prompt marginal ``b = gamma/N``
(0 < gamma <= 1), the unbalanced problem of FedOTP Eq. 6-8 is

    min_T  <T, C> - lam * H(T)   s.t.  T >= 0,  T 1_N <= a,  T^T 1_M = b,

i.e. only the patch side is relaxed to an inequality, so the prompts take the gamma fraction of the
feature map they match best. Written as a KL projection of ``K = exp(-C / lam)`` onto the
intersection of the two constraint sets (Eq. 8), it is solved by the fast scaling form of Dykstra's
algorithm (FedOTP Algorithm 1 / Eq. 9, taken from Chang et al., "CSOT: Curriculum and Structure-Aware
Optimal Transport for Learning with Noisy Labels", NeurIPS 2023)::

    v = 1;  repeat  u = min(a / (K v), 1);  v = b / (K^T u)  until mean|v - v_prev| < thresh
    T = diag(u) K diag(v)

The row scaling is clipped at 1 because the inequality's multiplier is non-negative; u < 1 only on
rows whose constraint is tight. At gamma = 1 the feasible set is the balanced one and the plan is
the balanced Sinkhorn plan.

All solvers here work on log-scalings (``f = log u``, ``g = log v``) with ``logsumexp`` instead of
``K v``, so a small ``lam`` cannot underflow ``K`` to zero (with lam = 0.01 and cost 0.9, K = e^-90
is 0 in float16 and denormal in float32, and the linear-domain iteration returns NaN). Inputs may
have any leading batch dims ``[..., M, N]``; every problem in the batch stops on its own criterion,
so a batched solve gives the same plan as solving each problem alone.

Variants (:data:`PLANS`, used by :func:`ot_score`):

- ``"uot"``: :func:`uot_plan`, FedOTP's default (Algorithm 1);
- ``"ot"``: :func:`sinkhorn_plan`, balanced entropic OT ("Classical OT" in FedOTP Table 4);
- ``"average"``: :func:`uniform_plan`, the uniform plan ("Similarity Averaging" in FedOTP Table 4);
- ``"kl_uot"``: :func:`kl_uot_plan`, KL-penalised unbalanced OT (Chizat et al., "Scaling algorithms
  for unbalanced optimal transport problems", Math. Comp. 2018). Not in the paper; an extra variant.

The plan functions are pure (they do not touch autograd mode). :func:`ot_score` computes the plan
without gradient and differentiates only through the similarities, as FedOTP fixes the plan.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from numbers import Integral, Real

import torch

from ..errors import ConfigError, TrainingDivergedError

__all__ = ["PLANS", "kl_uot_plan", "ot_score", "sinkhorn_plan", "uniform_plan", "uot_plan"]


# ---------------------------------------------------------------------------------------------------
# validation

def _check_real(name: str, value, lo: float, hi: float, lo_open: bool, hi_open: bool, valid: str) -> float:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ConfigError(f"{name} must be a real number in {valid}, got {value!r}")
    x = float(value)
    ok = math.isfinite(x) and (x > lo if lo_open else x >= lo) and (x < hi if hi_open else x <= hi)
    if not ok:
        raise ConfigError(f"{name} must be in {valid}, got {value!r}")
    return x


def _check_gamma(gamma) -> float:
    return _check_real("gamma", gamma, 0.0, 1.0, True, False, "(0, 1] (the prompt-side mass)")


def _check_lam(lam) -> float:
    return _check_real("lam", lam, 0.0, math.inf, True, True,
                       "(0, inf) (the entropic regularisation; FedOTP uses 0.1)")


def _check_iters(max_iter, thresh) -> tuple[int, float]:
    if isinstance(max_iter, bool) or not isinstance(max_iter, Integral) or max_iter < 1:
        raise ConfigError(f"max_iter must be an integer >= 1, got {max_iter!r}")
    t = _check_real("thresh", thresh, 0.0, math.inf, False, True,
                    "[0, inf) (0 runs exactly max_iter iterations)")
    return int(max_iter), t


def _check_cost(cost) -> tuple[torch.Tensor, torch.dtype]:
    """Returns the cost in the working dtype (float32 for half types: their range is the hazard the
    log domain is there to avoid) and the dtype to return the plan in."""
    if not isinstance(cost, torch.Tensor):
        raise TypeError(f"cost must be a torch.Tensor of shape [..., M, N], got {type(cost).__name__}")
    if not cost.is_floating_point():
        raise TypeError(f"cost must be a floating-point tensor (float32 or float64), got {cost.dtype}")
    if cost.dim() < 2 or cost.shape[-1] < 1 or cost.shape[-2] < 1:
        raise ConfigError(f"cost must have shape [..., M, N] with M, N >= 1, got {tuple(cost.shape)}")
    work = cost if cost.dtype in (torch.float32, torch.float64) else cost.float()
    return work, cost.dtype


# ---------------------------------------------------------------------------------------------------
# log-domain helpers

def _log_mean_abs_diff(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """log(mean ``|e^x - e^y|``) over the last dim, without forming e^x.

    The stopping rule is Algorithm 1's absolute change of the linear scaling v, but at small lam v is
    ~e^(C/lam), which overflows float32 (lam = 0.01, C = 1.5 gives e^150); comparing logs keeps the
    rule exactly as stated without overflow.
    """
    hi = torch.maximum(x, y)
    # log|e^x - e^y| = hi + log(1 - e^-|x-y|); expm1 keeps it accurate when x ~ y
    t = hi + torch.log(-torch.expm1(-(x - y).abs()))
    return torch.logsumexp(t, dim=-1) - math.log(x.shape[-1])


def _log_kernel(cost: torch.Tensor, lam: float, shift: float = 0.0) -> torch.Tensor:
    """log K = -cost/lam, stored transposed as [..., N, M]: with N = 2 prompts, reducing over a
    contiguous run of M patches is ~3x faster on CPU than logsumexp over a length-2 last dim."""
    log_k = -cost / lam
    if shift:
        log_k = log_k + shift
    return log_k.transpose(-1, -2).contiguous()


def _log_row_dot(log_kt: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """log(K v) [..., M] from log K^T [..., N, M] and log v [..., N]."""
    return torch.logsumexp(log_kt + g.unsqueeze(-1), dim=-2)


def _log_col_dot(log_kt: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    """log(K^T u) [..., N] from log K^T [..., N, M] and log u [..., M]."""
    return torch.logsumexp(log_kt + f.unsqueeze(-2), dim=-1)


def _scale_loop(log_kt: torch.Tensor, step: Callable, watch: str, max_iter: int, thresh: float):
    """Runs ``f, g = step(g)`` from f = g = 0 (u = v = 1) until each problem's mean change of
    exp(watch) falls below thresh, or max_iter.

    Stopping is per problem: a converged problem keeps its scalings while the rest of the batch
    iterates, so a plan never depends on what else shares the batch (a single global mean, as a
    batched loop would naturally do, lets easy problems stop early or hard ones run on depending on
    their batch-mates).
    """
    batch = log_kt.shape[:-2]
    f = log_kt.new_zeros(*batch, log_kt.shape[-1])
    g = log_kt.new_zeros(*batch, log_kt.shape[-2])
    done = torch.zeros(batch, dtype=torch.bool, device=log_kt.device)
    log_thresh = math.log(thresh) if thresh > 0 else -math.inf
    for _ in range(max_iter):
        f_new, g_new = step(g)
        old, new = (f, f_new) if watch == "f" else (g, g_new)
        err = _log_mean_abs_diff(new, old)
        if bool(done.any()):
            keep = done.unsqueeze(-1)
            f = torch.where(keep, f, f_new)
            g = torch.where(keep, g, g_new)
        else:  # the common case: nothing has stopped yet, so nothing to hold back
            f, g = f_new, g_new
        done = done | (err < log_thresh)
        if bool(done.all()):
            break
    return f, g


def _plan(log_kt: torch.Tensor, f: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """T = diag(u) K diag(v) as [..., M, N]."""
    return torch.exp(f.unsqueeze(-2) + log_kt + g.unsqueeze(-1)).transpose(-1, -2).contiguous()


# ---------------------------------------------------------------------------------------------------
# plans

def uot_plan(cost: torch.Tensor, gamma: float, lam: float, max_iter: int = 100, thresh: float = 1e-3,
             log_domain: bool = True) -> torch.Tensor:
    """FedOTP's unbalanced (semi-relaxed) entropic OT plan, Algorithm 1 / Eq. 9.

    Args:
        cost: [..., M, N] cost (FedOTP: 1 - cosine similarity); leading dims are independent problems.
        gamma: prompt-side mass in (0, 1]; column sums are gamma/N, row sums at most 1/M.
        lam: entropic regularisation > 0 (K = exp(-cost/lam)).
        max_iter: at most this many (u, v) updates.

        thresh: stop a problem once mean_n ``|v_n - v_prev_n|`` < thresh (Algorithm 1's rule, on the
            linear scaling v; absolute, so at small lam, where v ~ e^(cost/lam), it rarely fires and
            the solve runs max_iter).
        log_domain: must be True; kept so a caller asking for the linear-domain iteration (which
            underflows at small lam) gets an error instead of silently different numerics.

    Returns:
        The plan T [..., M, N] in the dtype of ``cost`` (float16/bfloat16 are solved in float32).
    """
    gamma = _check_gamma(gamma)
    lam = _check_lam(lam)
    max_iter, thresh = _check_iters(max_iter, thresh)
    if not log_domain:
        raise ConfigError("log_domain must be True: the linear-domain iteration underflows K = exp(-cost/lam) "
                          "at small lam (NaN plans); only the log-domain solver is provided")
    work, out_dtype = _check_cost(cost)
    m, n = work.shape[-2], work.shape[-1]
    log_a = -math.log(m)
    log_b = math.log(gamma) - math.log(n)
    log_kt = _log_kernel(work, lam)

    def step(g):
        # projection onto {T 1 <= a}: only rows whose mass exceeds a are scaled down (u <= 1)
        f = torch.clamp(log_a - _log_row_dot(log_kt, g), max=0.0)
        # projection onto {T^T 1 = b}
        return f, log_b - _log_col_dot(log_kt, f)

    f, g = _scale_loop(log_kt, step, "g", max_iter, thresh)
    return _plan(log_kt, f, g).to(out_dtype)


def sinkhorn_plan(cost: torch.Tensor, lam: float, max_iter: int = 100, thresh: float = 1e-3) -> torch.Tensor:
    """Balanced entropic OT plan (a = 1/M, b = 1/N), "Classical OT" in FedOTP Table 4.

    Sinkhorn from r = c = 1: r = a / (K c), c = b / (K^T r); a problem stops once
    mean_m ``|r_m - r_prev_m|`` < thresh (the rule of the PLOT/FedOTP balanced solver), or at max_iter.
    Same batching, log domain and dtype handling as :func:`uot_plan`.
    """
    lam = _check_lam(lam)
    max_iter, thresh = _check_iters(max_iter, thresh)
    work, out_dtype = _check_cost(cost)
    m, n = work.shape[-2], work.shape[-1]
    log_a, log_b = -math.log(m), -math.log(n)
    log_kt = _log_kernel(work, lam)

    def step(g):
        f = log_a - _log_row_dot(log_kt, g)
        return f, log_b - _log_col_dot(log_kt, f)

    f, g = _scale_loop(log_kt, step, "f", max_iter, thresh)
    return _plan(log_kt, f, g).to(out_dtype)


def uniform_plan(cost: torch.Tensor) -> torch.Tensor:
    """The uniform plan T = 1/(M N): with it the OT score is the mean similarity ("Similarity
    Averaging" in FedOTP Table 4)."""
    _check_cost(cost)
    m, n = cost.shape[-2], cost.shape[-1]
    return torch.full_like(cost, 1.0 / (m * n))


def kl_uot_plan(cost: torch.Tensor, gamma: float, lam: float, reg_m: float = 1.0, max_iter: int = 100,
                thresh: float = 1e-3) -> torch.Tensor:
    """KL-penalised unbalanced entropic OT plan (Chizat et al. 2018); an extra variant, not FedOTP's.

    Solves min_T <T, C> + lam KL(T | a b^T) + reg_m KL(T 1 | a) + reg_m KL(T^T 1 | b) with a = 1/M,
    b = gamma/N and generalised KL, the objective of POT's ``ot.unbalanced.sinkhorn_unbalanced(a, b, C,
    reg=lam, reg_m=reg_m)`` (its default ``reg_type="kl"``). Both marginals are soft, so neither sums
    exactly to its target. Scaling iterations with exponent reg_m / (reg_m + lam), from u = v = 1;
    a problem stops once mean_n ``|v_n - v_prev_n|`` < thresh, or at max_iter.
    """
    gamma = _check_gamma(gamma)
    lam = _check_lam(lam)
    reg_m = _check_real("reg_m", reg_m, 0.0, math.inf, True, True, "(0, inf) (the marginal KL penalty)")
    max_iter, thresh = _check_iters(max_iter, thresh)
    work, out_dtype = _check_cost(cost)
    m, n = work.shape[-2], work.shape[-1]
    log_a = -math.log(m)
    log_b = math.log(gamma) - math.log(n)
    # the reference measure a b^T is constant here, so it only shifts log K
    log_kt = _log_kernel(work, lam, shift=log_a + log_b)
    power = reg_m / (reg_m + lam)

    def step(g):
        f = power * (log_a - _log_row_dot(log_kt, g))
        return f, power * (log_b - _log_col_dot(log_kt, f))

    f, g = _scale_loop(log_kt, step, "g", max_iter, thresh)
    return _plan(log_kt, f, g).to(out_dtype)


def _uot(cost, gamma, lam, max_iter, thresh, reg_m):
    return uot_plan(cost, gamma, lam, max_iter=max_iter, thresh=thresh)


def _ot(cost, gamma, lam, max_iter, thresh, reg_m):
    return sinkhorn_plan(cost, lam, max_iter=max_iter, thresh=thresh)


def _average(cost, gamma, lam, max_iter, thresh, reg_m):
    return uniform_plan(cost)


def _kl_uot(cost, gamma, lam, max_iter, thresh, reg_m):
    return kl_uot_plan(cost, gamma, lam, reg_m=reg_m, max_iter=max_iter, thresh=thresh)


#: variant name -> plan function ``(cost, gamma, lam, max_iter, thresh, reg_m) -> plan``; each uses
#: only the arguments its problem has ("ot" ignores gamma, "average" ignores everything but the cost).
PLANS: dict[str, Callable[..., torch.Tensor]] = {
    "uot": _uot,
    "ot": _ot,
    "average": _average,
    "kl_uot": _kl_uot,
}


def ot_score(sim: torch.Tensor, variant: str, gamma: float, lam: float, *, max_iter: int = 100,
             thresh: float = 1e-3, reg_m: float = 1.0, return_plan: bool = False):
    """FedOTP's class score sum_{m,n} T[m,n] S[m,n] over the last two dims (Eq. 10 up to the constant
    mass gamma: with d_OT = <T, 1 - S>, the score is gamma - d_OT).

    Args:
        sim: similarities S [..., M, N] (cosine, in [-1, 1]); the cost is C = 1 - S.
        variant: a key of :data:`PLANS` ("uot", "ot", "average", "kl_uot").
        gamma, lam, max_iter, thresh, reg_m: passed to the variant's plan function.
        return_plan: also return the plan.

    The plan is computed under ``torch.no_grad`` from a detached S: FedOTP holds it fixed, so the
    gradient of the score with respect to S is the plan itself.

    Returns:
        The scores [...] (and the plan [..., M, N], which carries no gradient, if ``return_plan``).

    Raises:
        ConfigError: unknown variant or invalid gamma / lam / max_iter / thresh / reg_m.
        TrainingDivergedError (a FloatingPointError): the plan has NaN/inf entries.
    """
    if variant not in PLANS:
        raise ConfigError(f"variant must be one of {sorted(PLANS)}, got {variant!r}")
    with torch.no_grad():
        plan = PLANS[variant](1.0 - sim.detach(), gamma, lam, max_iter, thresh, reg_m)
        finite = bool(torch.isfinite(plan).all())
    if not finite:
        sims_ok = bool(torch.isfinite(sim.detach()).all())
        why = ("the similarities themselves have NaN/inf entries (check the features)" if not sims_ok
               else f"with lam={lam!r}, gamma={gamma!r}; a larger lam (FedOTP uses 0.1) or float64 may help")
        raise TrainingDivergedError(None, f"ot_score: the '{variant}' transport plan has NaN/inf entries: {why}")
    score = (plan * sim).sum(dim=(-2, -1))
    return (score, plan) if return_plan else score
