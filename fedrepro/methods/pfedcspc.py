"""pFedCSPC (Meng, Qi et al., IEEE TNNLS 2025, "Improving Global Generalization and Local
Personalization for Federated Learning"): personalised FL via cross-silo prototypical calibration.
The paper has no algorithm box; the round below is our reconstruction from its equations and Fig. 3.
Each choice is tagged **[paper]** stated in the text, **[code]** taken from the released code of
its predecessor FedCSPC (ACM MM 2023, qizhuang-qz/FedCSPC, which has no personalised parts), or
**[inferred]** our reading where the paper is silent or ambiguous.

The model is encoder E → projection head H → classifier F [paper §III]. With ``moon_cnn`` and its
``projection_dim`` (the CIFAR-10 model of the FedCSPC code) these are the model's own parts; for
another backbone, E is its feature extractor, H is ``Linear(m, m) → ReLU → Linear(m, proj_dim)``
[code, ``proj_dim`` 256] and F is ``Linear(proj_dim, C)``.

One round (client k, then the server):

1. **PMI** (§IV-B1) [paper]: client k starts from ``E_k^p ⊙ Ĥ_g ⊙ F̂_g``: its personalised encoder
   ``E_k^p = Σ_k' p_k^k' E_k'`` with ``p_k^· = softmax(−L_sup(U_k; M_k') / τ_p)`` over the local
   models uploaded last round (Eq. 4), and the *calibrated* global head and classifier. ``tau_p`` is
   not given in the paper: 1.0 [inferred]. BN buffers are mixed like weights [inferred]. The
   round-1 init (and ``pmi=False``) is the global model.
2. **PTA** (§IV-B2) [paper]: E epochs of ``CE(F(H(E(x))), y) + κ · L_align`` (Eq. 18), ``L_align =
   w_N L_N + w_A L_A + w_E L_E`` against last round's global prototypes U_g (dropped while there
   are none [inferred]):

   - ``L_N``: InfoNCE of the L2-normalised feature against the normalised prototypes, τ_l = 0.5
     [paper Eq. 5; cosine from code];
   - ``L_A``: L1 distance between the in-batch angle tensors of the features and of their classes'
     prototypes, over triplets with three distinct labels [paper Eq. 6];
   - ``L_E``: ``|difference|`` of the feature and prototype distances of pairs with different labels
     [paper Eq. 7, ℓ = L2 norm of a scalar], each side's distances divided by their mean [code's
     scale; the combination is our reading], so that the loss asks for the prototypes' shape and not
     their size (``edge_scale="none"`` is the literal raw distances; ``edge_pairs``, ``edge_penalty``
     and ``edge_scale`` give the other readings, the FedCSPC code's among them).

   Weights ``align_weights`` (1, 1, 1) [paper: equal; code 1, 0.2, 0.2 and node only by default].
3. **CPM** (§IV-C1) [paper]: encoder features of the local training set (eval mode [code]); per
   class, scikit-learn ``KMeans`` into ``clusters`` groups (Eq. 8; the paper's value is lost from
   its text: 2 [inferred]), then ``n_repeat`` means of random ``ratio``-subsets per cluster (Eq. 9;
   5 and 0.8 [code]; drawn with replacement [code], ``subsample_replace``). A class with fewer
   samples than clusters uses one cluster per sample. ``prototypes="tpg"`` is the ablations' TPG:
   one class mean. **Only these prototypes, their labels and the model leave the client.**
4. **Server** (§IV-C2): FedAvg of the models (Eq. 2) → M_g; then **CSPC** (``calibrate``) retrains
   only H_g and F_g on the pooled prototypes, minimising ``CE + η · (WCL + ACL)`` [paper Eq. 17]:

   - CE (Eq. 13) on real prototypes [inferred];
   - ``ca``: the σ-weighted supervised contrastive loss over real prototypes (σ = 1 for same
     class/other client and other class/same client, else 0.5), τ_g = 0.5 [paper Eq. 12];
   - ``pa``: in-client augmentation [paper Eq. 10], ``n_aug`` = 5 per prototype, λ drawn from
     {0.1, 0.3, 0.5}; u⁺ = u + λ(u − u₂) with u₂ a same-class prototype of the same client (may be u
     itself [code]); u⁻ = u + λ(u₃ − u) with u₃ another class's prototype of the same client; the
     triplet loss ``max(0, d(H u, H u⁺) − d(H u, H u⁻) + α)``, α = 1 [paper Eq. 11], d squared L2
     [paper, with the hinge the printed equation lacks; ``triplet_distance="euclidean"`` is the
     code's];
   - optimiser [code]: ``server_epochs`` = 100 over the prototypes, batch 100, SGD without momentum,
     weight decay 1e-5, lr 0.1 / 0.01 / 0.001 for rounds ≤ 5 / ≤ 40 / later, × 0.1 every 30
     epochs (``server_lr`` fixes one lr instead).

   Then the exemplars ``e^i`` = mean of Ĥ_g(u) over class i's prototypes [inferred Eq. 14] and the
   global prototypes ``u_g^i`` = mean over the clients holding class i of their class-i prototype
   mean [inferred Eq. 16], and PMI's weights and encoders for next round.
5. **Global model** (``global_model``, ACC_global, Eq. 19): ``E_g ⊙ Ĥ_g ⊙ F̂_g``; with ``kp`` its
   softmax is fused with the knowledge-based prediction ``softmax(cos(Ĥ_g E_g x, e^i) /
   kp_temperature)`` as ``(1 − kp_weight) · net + kp_weight · knowledge`` [paper Eq. 15; Norm =
   softmax and the weight 0.5 are ours, temperature 0.5 from the code's exp(cos/0.5)].
6. **Personalised model** (``evaluate``, I_local, §V-A2, Eq. 20): client k's model after this
   round's local training; before its first round, the global model.

Ablation switches (Tables IV, V): ``prototypes`` ("cpm" | "tpg"), ``calibrate``, ``ca``, ``pa``,
``kp``, ``align`` (PTA), ``pmi``. Table VI's orthogonality: ``base="fedprox"`` (FedProx's proximal
term, μ ``prox_mu``), ``base="moon"`` (MOON's model-contrastive loss, μ ``moon_mu``, τ
``moon_tau``; its positive is the round's start model M_k^p, as FedProx's anchor is, and its
negative the client's last model [inferred]) replaces the CE-only L_base of Eq. 18, and
``base="fedasam"`` takes every local step as FedASAM does (an adaptive sharpness-aware step of
radius ``asam_rho``, ``asam_eta`` as in :mod:`fedrepro.methods.fedasam`) on the whole client
objective L_base + κ L_align (Eq. 18: "the base algorithm could be FedAvg, FedASAM, and so on").
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..fl.aggregate import weighted_average
from ..fl.client_data import ClientData
from ..fl.local import evaluate_model, fit_tensors, make_sgd, proximal_hook, train_epochs
from ..fl.method import ClientUpdate, EvalResult, Method, State
from ..params import hp
from .fedasam import sam_perturbation
from .moon import model_contrastive_loss
from .registry import register_method
from ..errors import TrainingDivergedError

PROTOTYPE_MODES = ("cpm", "tpg")
BASES = ("ce", "fedprox", "moon", "fedasam")
EDGE_PAIRS = ("different_labels", "all")
EDGE_PENALTIES = ("abs", "squared", "smooth_l1")
EDGE_SCALES = ("none", "mean")
TRIPLET_DISTANCES = ("squared", "euclidean")
EXEMPLARS = ("all", "correct")
G = "g."  # global model entries in ``shared``
PMI = "pmi{}."  # client k's personalised initial encoder in ``shared``
MODEL = "m."  # the client's own trained model in its state
PRECAL = "precal."  # the round's aggregated H_g and F_g before the server calibration, in the server state
PRECAL_EXEMPLARS = "exemplars_precal"  # and KP's exemplars from them


def _numbers(v: Any, count: int | None, ok) -> bool:
    """``v`` is a list/tuple of ``count`` (any number if None, but at least one) numbers passing ``ok``."""
    if not isinstance(v, (list, tuple)) or not v or (count is not None and len(v) != count):
        return False
    return all(isinstance(w, (int, float)) and not isinstance(w, bool) and ok(w) for w in v)


@dataclass
class PFedCSPCParams:
    # PTA (client) ---------------------------------------------------------------------------
    kappa: float = hp(0.1, ge=0)  # weight of L_align [paper: from {0.01, 0.05, 0.1, 0.5}; 0.1 ours]
    align: bool = hp(True)  # PTA's alignment loss
    align_weights: tuple = hp((1.0, 1.0, 1.0), check=lambda v: _numbers(v, 3, lambda w: w >= 0),
                              valid="three numbers >= 0 (node, angle, edge)")  # [paper: equal]
    tau_l: float = hp(0.5, gt=0)  # [paper]
    edge_pairs: str = hp("different_labels", choices=EDGE_PAIRS)  # Eq. 7's pairs; see edge_loss
    edge_penalty: str = hp("abs", choices=EDGE_PENALTIES)  # Eq. 7's ℓ of the scalar gap; see edge_loss
    # Eq. 7's distances: "mean" (default; our reading) divides each side's distances by their mean, as
    # the FedCSPC code's edge term does, so the loss does not depend on the features' scale; "none" is
    # the literal reading, raw distances, which on the laptop data shrank the encoder's inter-class
    # distances 2-4x in 12 rounds (fail-audit E5): features shrink, next round's prototypes with them.
    edge_scale: str = hp("mean", choices=EDGE_SCALES)
    # CPM --------------------------------------------------------------------------------------
    prototypes: str = hp("cpm", choices=PROTOTYPE_MODES)  # K-means clusters | one class mean (TPG, FedProto)
    clusters: int = hp(2, ge=1)  # j, lost from the paper's text [inferred]
    n_repeat: int = hp(5, ge=1)  # [code; Fig. 6]
    ratio: float = hp(0.8, gt=0, le=1)  # r [code]
    subsample_replace: bool = hp(True)  # [code: np.random.choice default]
    # CSPC (server) ----------------------------------------------------------------------------
    calibrate: bool = hp(True)
    eta: float = hp(0.1, ge=0)  # [paper: from {0.01, 0.05, 0.1, 0.5}]
    ca: bool = hp(True)  # cross-client weighted contrastive loss
    pa: bool = hp(True)  # in-client prototype augmentation + triplet loss
    n_aug: int = hp(5, ge=1)  # [paper]
    pa_lambdas: tuple = hp((0.1, 0.3, 0.5), check=lambda v: _numbers(v, None, lambda w: w > 0),
                           valid="a non-empty list of numbers > 0")  # [paper]
    margin: float = hp(1.0, ge=0)  # α [paper]
    triplet_distance: str = hp("squared", choices=TRIPLET_DISTANCES)  # [paper]; "euclidean" [code]
    tau_g: float = hp(0.5, gt=0)  # [paper]; the code's SupCon uses 0.07
    server_epochs: int = hp(100, ge=1)  # [code]
    server_batch: int = hp(100, ge=1)  # [code]
    server_lr: float | None = hp(None, gt=0)  # None: the code's round schedule
    server_weight_decay: float = hp(1e-5, ge=0)  # [code]
    proj_dim: int = hp(256, ge=1)  # [code]
    # KP ----------------------------------------------------------------------------------------
    kp: bool = hp(True)
    kp_weight: float = hp(0.5, ge=0, le=1)  # [inferred; code effectively 0.9 without normalisation]
    kp_temperature: float = hp(0.5, gt=0)  # [code]
    exemplars: str = hp("all", choices=EXEMPLARS)  # "correct": prototypes the classifier gets right [code]
    # PMI ---------------------------------------------------------------------------------------
    pmi: bool = hp(True)
    tau_p: float = hp(1.0, gt=0)  # not in the paper [inferred]
    # I_local's model: the client's model after local training (True), or the global model on the
    # client's test split (False: Table V's "FedCSPC" row, no personalisation)
    personal_eval: bool = hp(True)
    # Base algorithm (Table VI) ------------------------------------------------------------------
    base: str = hp("ce", choices=BASES)
    prox_mu: float = hp(0.01, ge=0)
    moon_mu: float = hp(1.0, ge=0)
    moon_tau: float = hp(0.5, gt=0)
    asam_rho: float = hp(0.7, ge=0)  # FedASAM's own defaults (its official CIFAR scripts)
    asam_eta: float = hp(0.2, ge=0)


# ------------------------------------------------------------------------------------------------
# The model: encoder, projection head, classifier
# ------------------------------------------------------------------------------------------------
class CSPCNet(nn.Module):
    """E → H → F. ``features`` (for analyses) is H∘E, the classifier's input; ``head`` is F.

    A backbone whose φ already has ``encoder`` and ``projection`` parts (``moon_cnn`` with
    ``projection_dim``, the FedCSPC code's CIFAR-10 model, which every compared method shares) lends
    both, and its classifier; any other backbone's φ is E, with H and F built here (``proj_dim``).
    """

    def __init__(self, base: nn.Module, proj_dim: int, num_classes: int):
        super().__init__()
        phi = base.features
        if getattr(phi, "projection", None) is not None:
            self.encoder, self.proj, self.cls = phi.encoder, phi.projection, base.head
            m, proj_dim = self.proj[0].in_features, base.feature_dim
        else:
            m = base.feature_dim
            self.encoder = phi
            self.proj = nn.Sequential(nn.Linear(m, m), nn.ReLU(inplace=True), nn.Linear(m, proj_dim))
            self.cls = nn.Linear(proj_dim, num_classes)
        self.enc_dim = m
        self.feature_dim = proj_dim
        self.num_classes = num_classes

    def features(self, x: Tensor) -> Tensor:
        return self.proj(self.encoder(x))

    @property
    def head(self) -> nn.Module:
        return self.cls

    def forward(self, x: Tensor) -> Tensor:
        return self.cls(self.proj(self.encoder(x)))


class _KPModel(nn.Module):
    """The global model with knowledge-based prediction: log of the fused probabilities (Eq. 15)."""

    def __init__(self, net: CSPCNet, exemplars: Tensor, has: Tensor, weight: float, temperature: float):
        super().__init__()
        self.net = net
        self.exemplars = F.normalize(exemplars, dim=1)
        self.has = has
        self.weight, self.temperature = weight, temperature

    def forward(self, x: Tensor) -> Tensor:
        z = self.net.features(x)
        p_net = F.softmax(self.net.cls(z), dim=1)
        sim = F.normalize(z, dim=1) @ self.exemplars.t() / self.temperature
        sim = sim.masked_fill(~self.has, float("-inf"))  # a class no client holds has no exemplar
        p_kp = F.softmax(sim, dim=1)
        return torch.log((1 - self.weight) * p_net + self.weight * p_kp + 1e-12)


# ------------------------------------------------------------------------------------------------
# PTA: the three alignment losses (§IV-B2)
# ------------------------------------------------------------------------------------------------
def node_loss(f: Tensor, y: Tensor, protos: Tensor, has: Tensor, tau: float) -> Tensor:
    """L_N (Eq. 5): cosine InfoNCE of each feature against all global prototypes; its own class is
    the positive. Samples whose class has no global prototype are skipped."""
    keep = has[y]
    if not keep.any():
        return f.sum() * 0
    logits = F.normalize(f[keep], dim=1) @ F.normalize(protos, dim=1).t() / tau
    logits = logits.masked_fill(~has, float("-inf"))
    return F.cross_entropy(logits, y[keep])


def _angles(v: Tensor) -> Tensor:
    """cos∠(v_i, v_j, v_k) for all (i, j, k): ⟨(v_i − v_j)/‖·‖, (v_k − v_j)/‖·‖⟩, shape [j, i, k]."""
    d = F.normalize(v.unsqueeze(0) - v.unsqueeze(1), dim=2)  # d[j, i] = (v_i − v_j)/‖·‖
    return d @ d.transpose(1, 2)


def angle_loss(f: Tensor, y: Tensor, protos: Tensor) -> Tensor:
    """L_A (Eq. 6): L1 between the angle tensors of the features and of their class prototypes,
    over triplets whose three labels differ."""
    t = protos[y]
    ne = y.unsqueeze(0) != y.unsqueeze(1)
    mask = ne.unsqueeze(2) & ne.unsqueeze(1) & ne.unsqueeze(0)  # [j, i, k]: all three labels differ
    if not mask.any():
        return f.sum() * 0
    return (_angles(f) - _angles(t).detach())[mask].abs().mean()


def edge_loss(f: Tensor, y: Tensor, protos: Tensor, pairs: str = "different_labels",
              penalty: str = "abs", scale: str = "mean") -> Tensor:
    """L_E (Eq. 7): the gap between two features' distance and their prototypes' distance, averaged
    over pairs i < j.

    pFedCSPC (TNNLS) §IV-B2: "it requires the distance between the samples to be consistent with the
    corresponding prototypes", L_E = ℓ(‖f_1 − f_2‖_2 − ‖u_g^f1 − u_g^f2‖_2), "where ℓ(·) is the
    L_2-norm". Eq. 7 takes the pair (f_1, f_2) of the angle term, whose samples have "different
    labels", and ℓ of the scalar gap, i.e. its absolute value: ``pairs="different_labels"``,
    ``penalty="abs"``.

    ``scale`` says which distances: ``"none"`` is the literal reading, raw Euclidean distances.
    ``"mean"`` (the default, **our reading**) divides each side's distances by their own mean over
    the pairs at a non-zero distance, as the FedCSPC code's edge term does. Why: the raw gap depends
    on the scale of the features, and last round's prototypes are class means, whose distances are
    shorter than those between two samples with their within-class spread; so the raw loss pulls the
    features in, next round's prototypes shrink with them, and the encoder's feature scale collapses
    (fail-audit E5). Divided by their means the distances keep the prototypes' shape and not their
    size: the loss is the same for ``c · f`` as for ``f``, and shrinking earns nothing.

    ``pairs="all"`` also takes same-label pairs, whose prototype distance is 0, so they pull
    same-class features together; ``penalty="squared"`` squares the gap. The FedCSPC code (its
    relational-distillation edge term) reads it as ``pairs="all", scale="mean",
    penalty="smooth_l1"``.
    """
    n = len(y)
    iu = torch.triu_indices(n, n, 1, device=f.device)
    if pairs == "different_labels":
        iu = iu[:, y[iu[0]] != y[iu[1]]]
    if iu.shape[1] == 0:
        return f.sum() * 0
    df = (f[iu[0]] - f[iu[1]]).norm(dim=1)
    t = protos[y]
    dt = (t[iu[0]] - t[iu[1]]).norm(dim=1).detach()
    if scale == "mean":
        df, dt = df / _mean_nonzero(df), dt / _mean_nonzero(dt)
    gap = df - dt
    if penalty == "smooth_l1":
        return F.smooth_l1_loss(df, dt)
    return (gap.abs() if penalty == "abs" else gap ** 2).mean()


def _mean_nonzero(d: Tensor) -> Tensor:
    """The mean of the positive entries of ``d`` (1 when there are none, so an all-zero set stays 0)."""
    pos = d > 0
    return d[pos].mean() if pos.any() else d.new_ones(())


# ------------------------------------------------------------------------------------------------
# CSPC: the server's losses (§IV-C2)
# ------------------------------------------------------------------------------------------------
def weighted_supcon(z: Tensor, y: Tensor, cid: Tensor, tau: float) -> Tensor:
    """L_WCL (Eq. 12) over a batch of real prototypes' projections ``z`` (normalised here)."""
    z = F.normalize(z, dim=1)
    n = len(y)
    same_y = y.unsqueeze(0) == y.unsqueeze(1)
    same_c = cid.unsqueeze(0) == cid.unsqueeze(1)
    sigma = torch.where(same_y != same_c, 1.0, 0.5).to(z.dtype)  # hard pairs weigh 1
    eye = torch.eye(n, dtype=torch.bool, device=z.device)
    logits = z @ z.t() / tau + sigma.log()
    logits = logits.masked_fill(eye, float("-inf"))
    log_prob = logits - torch.logsumexp(logits, dim=1, keepdim=True)
    pos = same_y & ~eye
    has_pos = pos.any(1)
    if not has_pos.any():
        return z.sum() * 0
    per = -(log_prob.masked_fill(~pos, 0).sum(1)[has_pos] / pos.sum(1)[has_pos])
    return per.mean()


def pa_partners(y: Tensor, cid: Tensor) -> tuple[Tensor, Tensor]:
    """Row i: which pool prototypes may be u₂ (same class, same client, i included [code]) and u₃
    (other class, same client) for anchor i, as float masks for ``torch.multinomial``."""
    same_c = cid.unsqueeze(0) == cid.unsqueeze(1)
    same_y = y.unsqueeze(0) == y.unsqueeze(1)
    return (same_c & same_y).float().cpu(), (same_c & ~same_y).float().cpu()


def augment_prototypes(u: Tensor, idx: Tensor, partners: tuple[Tensor, Tensor], n_aug: int, lambdas: Tensor,
                       gen: torch.Generator) -> tuple[Tensor, Tensor, Tensor]:
    """PA (Eq. 10) for the pool prototypes ``idx``: ``(anchor index, u⁺, u⁻)``, ``n_aug`` per anchor
    whose client holds another class (there is no hard negative otherwise)."""
    same, other = partners
    idx = idx[other[idx].sum(1) > 0]
    if len(idx) == 0:
        return idx, u[:0], u[:0]
    p = torch.multinomial(same[idx], n_aug, replacement=True, generator=gen).flatten()
    q = torch.multinomial(other[idx], n_aug, replacement=True, generator=gen).flatten()
    lam = lambdas[torch.randint(len(lambdas), (len(p),), generator=gen)].to(u.device).unsqueeze(1)
    a = idx.repeat_interleave(n_aug)
    ua, dev = u[a.to(u.device)], u.device
    return a, ua + lam * (ua - u[p.to(dev)]), ua + lam * (u[q.to(dev)] - ua)


def triplet(a: Tensor, p: Tensor, n: Tensor, margin: float, distance: str) -> Tensor:
    dp, dn = (a - p).pow(2).sum(1), (a - n).pow(2).sum(1)
    if distance == "euclidean":
        dp, dn = dp.sqrt(), dn.sqrt()
    return F.relu(dp - dn + margin).mean()


# ------------------------------------------------------------------------------------------------
# CPM (§IV-C1)
# ------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def _openmp_controller():
    """One threadpoolctl controller per process: building one scans every loaded library (about
    4 ms), which a fresh ``threadpool_limits`` per K-means fit would repeat thousands of times."""
    from sklearn.cluster import KMeans  # noqa: F401  (loads scikit-learn's OpenMP runtime first)
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def cluster_prototypes(feats: Tensor, labels: Tensor, mode: str, clusters: int, n_repeat: int, ratio: float,
                       replace: bool, rng: np.random.Generator) -> tuple[Tensor, Tensor]:
    """Per present class: K-means (scikit-learn) into ``clusters`` groups, then ``n_repeat`` means of
    random ``ratio``-subsets per cluster. ``mode="tpg"``: one plain class mean."""
    from sklearn.cluster import KMeans

    x = feats.detach().cpu().double().numpy()
    yv = labels.cpu().numpy()
    protos, ys = [], []
    for c in np.unique(yv):
        xc = x[yv == c]
        if mode == "tpg":
            protos.append(xc.mean(0, keepdims=True))
            ys.append(c)
            continue
        k = min(clusters, len(xc))
        if k > 1:
            km = KMeans(n_clusters=k, n_init=1, random_state=int(rng.integers(2**31 - 1)))
            # scikit-learn's Lloyd step adds each OpenMP thread's partial cluster sums into the
            # centres in the order the threads finish: with 3+ threads (its default is one per
            # core) the last bits, and so the assignments, change from run to run. One thread
            # fixes the order and gives exactly the 1-thread result.
            with _openmp_controller().limit(limits=1, user_api="openmp"):
                assign = km.fit_predict(xc)
        else:
            assign = np.zeros(len(xc), dtype=int)
        for j in range(k):
            members = xc[assign == j]
            if len(members) == 0:  # K-means can leave a cluster empty on duplicate points
                members = xc
            size = max(1, math.ceil(ratio * len(members)))
            for _ in range(n_repeat):
                pick = rng.choice(len(members), size=size, replace=replace) if (replace or size < len(members)) \
                    else np.arange(len(members))
                protos.append(members[pick].mean(0, keepdims=True))
                ys.append(c)
    return (torch.tensor(np.concatenate(protos), dtype=feats.dtype, device=feats.device),
            torch.tensor(ys, dtype=torch.long, device=feats.device))


# ------------------------------------------------------------------------------------------------
# The method
# ------------------------------------------------------------------------------------------------
@register_method("pfedcspc")
class PFedCSPC(Method):
    """pFedCSPC: PMI, prototype-aligned local training, clustered prototypes, and server-side
    cross-silo calibration of the global head and classifier."""

    name = "pfedcspc"
    Params = PFedCSPCParams

    def __init__(self, ctx, params):
        super().__init__(ctx, params)
        self.net = self._build(0)
        self.enc_keys = [k for k in self.net.state_dict() if k.startswith("encoder.")]
        self.head_keys = [k for k in self.net.state_dict() if not k.startswith("encoder.")]

    def _build(self, seed: int) -> CSPCNet:
        base = self.ctx.create_model(seed)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            net = CSPCNet(base, self.p.proj_dim, self.ctx.num_classes)
        return net.to(self.ctx.device)

    def _load(self, sd: dict[str, Tensor]) -> CSPCNet:
        self.net.load_state_dict(sd, strict=True)
        for p in self.net.parameters():
            p.requires_grad_(True)
        return self.net

    @staticmethod
    def _sub(d: State, prefix: str) -> dict[str, Tensor]:
        return {k[len(prefix):]: v for k, v in d.items() if k.startswith(prefix)}

    # Steps ----------------------------------------------------------------------------------
    def init_server(self, seed: int) -> tuple[State, State]:
        sd = self._build(seed).state_dict()
        c, m = self.ctx.num_classes, self.net.enc_dim
        shared = {G + k: v.clone() for k, v in sd.items()}
        shared.update({"U_g": torch.zeros(c, m, device=self.ctx.device),
                       "U_has": torch.zeros(c, dtype=torch.bool, device=self.ctx.device),
                       "exemplars": torch.zeros(c, self.net.feature_dim, device=self.ctx.device)})
        return shared, {}

    def init_client(self, cid: int, seed: int) -> State:
        return {}

    def initial_model(self, shared: State, cid: int) -> dict[str, Tensor]:
        """M_k^p: the PMI encoder (when there is one) with the calibrated global head (§IV-B1)."""
        sd = self._sub(shared, G)
        pmi = self._sub(shared, PMI.format(cid))
        if self.p.pmi and pmi:
            sd.update({"encoder." + k: v for k, v in pmi.items()})
        return sd

    def client_update(self, shared: State, state: State, data: ClientData, gen: torch.Generator,
                      rnd: int) -> ClientUpdate:
        p, t = self.p, self.ctx.cfg.train
        start = self.initial_model(shared, data.cid)
        net = self._load(start)
        hook = None
        if p.base == "fedprox":  # FedProx's proximal gradient, towards the round's starting model
            anchor = [v.detach().clone() for v in net.parameters()]
            hook = proximal_hook(zip(net.parameters(), anchor), p.prox_mu)
        glob = prev = None
        if p.base == "moon":
            glob, prev = self.moon_anchors(start, state)
        protos, has = shared["U_g"], shared["U_has"]
        use_align = p.align and p.kappa > 0 and bool(has.any())
        opt = make_sgd(net.parameters(), t.lr, t.momentum, t.weight_decay)

        def batch_loss(m: CSPCNet, x: Tensor, y: Tensor):
            """L_client = L_base + κ · L_align (Eq. 18); L_base is CE, or CE + μ · MOON's ℓ_con."""
            f = m.encoder(x)
            z = m.proj(f)
            loss = F.cross_entropy(m.cls(z), y)
            parts = {}
            if use_align:
                parts["loss_align"] = la = self.align_loss(f, y, protos, has)
                loss = loss + p.kappa * la
            if glob is not None:
                with torch.no_grad():
                    zg, zp = glob.features(x), prev.features(x)
                parts["loss_con"] = con = model_contrastive_loss(z, zg, zp, p.moon_tau)
                loss = loss + p.moon_mu * con
            return loss, parts

        if p.base == "fedasam":
            def asam_step(x: Tensor, y: Tensor):
                """FedASAM's step on L_client: the gradient at w + ε, applied at w."""
                loss, parts = batch_loss(net, x, y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                eps = sam_perturbation(net.named_parameters(), p.asam_rho, p.asam_eta, adaptive=True)
                with torch.no_grad():
                    for w, e in eps:
                        w.add_(e)
                opt.zero_grad(set_to_none=True)
                batch_loss(net, x, y)[0].backward()
                with torch.no_grad():
                    for w, e in eps:
                        w.sub_(e)
                opt.step()
                return loss.detach(), parts

            stats = train_epochs(net, data, None, t.local_epochs, t.batch_size, gen, step=asam_step)
        else:
            stats = train_epochs(net, data, opt, t.local_epochs, t.batch_size, gen, batch_loss=batch_loss,
                                 grad_hook=hook)
        u, uy = self.local_prototypes(net, data, gen)
        sd = {k: v.detach().clone() for k, v in net.state_dict().items()}
        upload = {**{MODEL + k: v for k, v in sd.items()}, "protos": u, "proto_y": uy,
                  "cid": torch.tensor(data.cid)}
        return ClientUpdate(upload=upload, state={MODEL + k: v for k, v in sd.items()},
                            num_samples=data.num_train, metrics=stats.metrics())

    def moon_anchors(self, start: dict[str, Tensor], state: State) -> tuple[CSPCNet, CSPCNet]:
        """MOON's frozen positive and negative models for L_base (Table VI): the positive is the model
        the client starts the round from (``start``: PMI's E_k^p ⊙ Ĥ_g ⊙ F̂_g, the global model where
        there is no PMI), the negative its own model of last round (the start before its first).

        MOON (Li et al., CVPR 2021) pulls towards the model the server sent, which is the model the
        client starts from; under PMI that is M_k^p, not E_g ⊙ Ĥ_g ⊙ F̂_g, so the positive is the start
        [our reading: pFedCSPC's Eq. 18 only names the base]. The FedProx base's proximal anchor is
        the same start model, so both bases pull towards one point."""
        pos, neg = self._build(0), self._build(0)
        pos.load_state_dict(start)
        neg.load_state_dict(self._sub(state, MODEL) or start)
        for mdl in (pos, neg):
            mdl.eval()
        return pos, neg

    def align_loss(self, f: Tensor, y: Tensor, protos: Tensor, has: Tensor) -> Tensor:
        """L_align = w_N L_N + w_A L_A + w_E L_E (§IV-B2) of encoder features ``f`` against the global
        prototypes; a term whose weight is 0 is not computed."""
        p = self.p
        wn, wa, we = p.align_weights
        la = wn * node_loss(f, y, protos, has, p.tau_l)
        if wa:
            la = la + wa * angle_loss(f, y, protos)
        if we:
            la = la + we * edge_loss(f, y, protos, p.edge_pairs, p.edge_penalty, p.edge_scale)
        return la

    @torch.no_grad()
    def local_prototypes(self, net: CSPCNet, data: ClientData, gen: torch.Generator) -> tuple[Tensor, Tensor]:
        """CPM (§IV-C1) on the client's training set, encoder in eval mode."""
        net.eval()
        feats, labels = [], []
        for x, y in data.eval_train_batches(500):
            feats.append(net.encoder(x))
            labels.append(y)
        feats = torch.cat(feats)
        if not bool(torch.isfinite(feats).all()):

            raise TrainingDivergedError(
                None, f"pfedcspc: client {data.cid}'s encoder features are NaN/inf after local training (lr "
                f"{self.ctx.cfg.train.lr}); the run diverged. Lower train.lr or method.args.kappa.")
        rng = np.random.default_rng(int(torch.randint(2**62, (1,), generator=gen)))
        p = self.p
        return cluster_prototypes(feats, torch.cat(labels), p.prototypes, p.clusters, p.n_repeat,
                                  p.ratio, p.subsample_replace, rng)

    def aggregate(self, shared: State, updates: list[ClientUpdate], server_state: State,
                  rnd: int) -> tuple[State, State]:
        if not updates:
            return shared, server_state
        p = self.p
        models = [self._sub(u.upload, MODEL) for u in updates]
        g = weighted_average(models, [u.num_samples for u in updates])
        u = torch.cat([up.upload["protos"] for up in updates])
        y = torch.cat([up.upload["proto_y"] for up in updates])
        cid = torch.cat([up.upload["cid"].expand(len(up.upload["proto_y"])) for up in updates])
        net = self._load(g)
        gen = torch.Generator().manual_seed(int(torch.randint(2**62, (1,))))  # seeded by the engine's scope
        precal: dict[str, Tensor] = {}
        if p.calibrate:
            if self.ctx.cfg.train.global_eval:
                # H_g and F_g as aggregated, kept so that the same round's model is also scored
                # before the calibration (``global_acc_before_calibration``; only global_eval scores
                # it); E_g is the same either way.
                precal = {PRECAL + k: v.detach().clone() for k, v in net.state_dict().items()
                          if k.startswith(("proj.", "cls."))}
                if p.kp:  # KP's exemplars as that model would have them (Eq. 14, uncalibrated Ĥ_g)
                    precal[PRECAL_EXEMPLARS] = self.exemplars(net, u, y, self.ctx.num_classes)
            self.calibrate(net, u, y, cid, rnd, gen)
        new = {G + k: v.detach().clone() for k, v in net.state_dict().items()}
        c = self.ctx.num_classes
        has = torch.zeros(c, dtype=torch.bool, device=u.device)
        has[y.unique()] = True
        new["U_g"], new["U_has"] = global_prototypes(u, y, cid, c), has
        new["exemplars"] = self.exemplars(net, u, y, c)
        weights = None
        if p.pmi:
            weights = self.pmi_weights(models, [(up.upload["protos"], up.upload["proto_y"]) for up in updates])
            for i, up in enumerate(updates):
                mix = weighted_average([{k: m[k] for k in self.enc_keys} for m in models], weights[i].tolist())
                new.update({PMI.format(int(up.upload["cid"])) + k[len("encoder."):]: v for k, v in mix.items()})
            # Clients that were not sampled keep their last PMI encoder.
            new.update({k: v for k, v in shared.items() if k.startswith("pmi") and k not in new})
        server_state = {**{k: v for k, v in server_state.items() if not k.startswith((PRECAL, PRECAL_EXEMPLARS))},
                        **precal,
                        "pmi_weights": weights if weights is not None else torch.empty(0),
                        "pmi_clients": torch.tensor([int(up.upload["cid"]) for up in updates])}
        return new, server_state

    # Server parts --------------------------------------------------------------------------
    def server_lr(self, rnd: int, epoch: int) -> float:
        """The code's schedule by 1-based round, × 0.1 every 30 epochs, unless ``server_lr`` is set."""
        if self.p.server_lr is not None:
            return float(self.p.server_lr)
        r = rnd + 1
        base = 0.1 if r <= 5 else 0.01 if r <= 40 else 0.001
        return base * 0.1 ** (epoch // 30)

    def calibrate(self, net: CSPCNet, u: Tensor, y: Tensor, cid: Tensor, rnd: int, gen: torch.Generator) -> None:
        """CSPC (§IV-C2): retrain only H_g and F_g on the pooled prototypes; E_g is untouched."""
        p = self.p
        for q in net.encoder.parameters():
            q.requires_grad_(False)
        params = list(net.proj.parameters()) + list(net.cls.parameters())
        opt = torch.optim.SGD(params, lr=self.server_lr(rnd, 0), momentum=0.0, weight_decay=p.server_weight_decay)
        lambdas = torch.tensor(p.pa_lambdas, dtype=u.dtype)
        partners = pa_partners(y, cid) if p.pa else None
        net.train()
        n = len(y)
        slot = torch.empty(n, dtype=torch.long, device=u.device)  # pool index → row in the batch

        def set_lr(epoch: int) -> None:
            for group in opt.param_groups:
                group["lr"] = self.server_lr(rnd, epoch)

        def batch_loss(idx: Tensor) -> Tensor:
            a, up, un = augment_prototypes(u, idx.cpu(), partners, p.n_aug, lambdas, gen) if p.pa \
                else (idx[:0], u[:0], u[:0])
            # One pass of H over the batch and its augmentations; an anchor is a batch row, so
            # its projection is that row's. On one CPU thread the single pass alone saved
            # nothing measurable; `split` (below) saved about a quarter of the calibration.
            out = net.proj(torch.cat([u[idx], up, un]))
            b, m = len(idx), len(a)
            z, zp, zn = out.split([b, m, m])  # split, not slices: its backward is one concat
            loss = F.cross_entropy(net.cls(z), y[idx])
            extra = z.sum() * 0
            if p.ca:
                extra = extra + weighted_supcon(z, y[idx], cid[idx], p.tau_g)
            if m:
                slot[idx] = torch.arange(b, device=u.device)
                # index_select, not z[...]: an anchor repeats n_aug times, and the backward of advanced
                # indexing (index_put_ with accumulate) adds the repeats with unordered atomic adds
                # on 2+ CPU threads, so the last bits changed from run to run. index_select's
                # backward adds them in index order: the 1-thread result at any thread count.
                za = z.index_select(0, slot[a.to(u.device)])
                extra = extra + triplet(za, zp, zn, p.margin, p.triplet_distance)
            return loss + p.eta * extra

        fit_tensors(opt, n, p.server_epochs, p.server_batch, batch_loss, gen, u.device, on_epoch=set_lr)
        for q in net.encoder.parameters():
            q.requires_grad_(True)

    @torch.no_grad()
    def exemplars(self, net: CSPCNet, u: Tensor, y: Tensor, num_classes: int) -> Tensor:
        """e^i: mean of Ĥ_g(u) over class i's prototypes (Eq. 14; ``"correct"``: only those F̂_g
        classifies correctly [code], falling back to all when none is)."""
        net.eval()
        z = net.proj(u)
        out = torch.zeros(num_classes, z.shape[1], device=z.device)
        ok = net.cls(z).argmax(1) == y
        for c in y.unique().tolist():
            sel = y == c
            if self.p.exemplars == "correct" and (sel & ok).any():
                sel = sel & ok
            out[c] = z[sel].mean(0)
        return out

    @torch.no_grad()
    def pmi_weights(self, models: list[dict[str, Tensor]], protos: list[tuple[Tensor, Tensor]]) -> Tensor:
        """p_k^k' (Eq. 4): row k is softmax over the uploaded models k' of −CE(F_k'(H_k'(U_k)))/τ_p."""
        losses = torch.zeros(len(protos), len(models))
        for j, sd in enumerate(models):
            net = self._load(sd)
            net.eval()
            for i, (u, y) in enumerate(protos):
                losses[i, j] = F.cross_entropy(net.cls(net.proj(u)), y)
        return torch.softmax(-losses / self.p.tau_p, dim=1)

    # Evaluation -----------------------------------------------------------------------------
    def evaluate(self, shared: State, state: State, data: ClientData, gen: torch.Generator) -> EvalResult:
        """I_local's model: the client's model after its latest local training (the global model
        before its first round, or always with ``personal_eval=False``)."""
        own = self._sub(state, MODEL) if self.p.personal_eval else {}
        if own:
            return evaluate_model(self._load(own), data)
        return evaluate_model(self.global_model(shared, {}), data)

    def global_model(self, shared: State, server_state: State):
        return self._global(self._sub(shared, G), shared, shared["exemplars"])

    def global_variants(self, shared: State, server_state: State):
        precal = self._sub(server_state, PRECAL)
        if precal:  # the round's aggregate before CSPC: the same E_g, KP on its own exemplars
            yield "before_calibration", self._global({**self._sub(shared, G), **precal}, shared,
                                                     server_state.get(PRECAL_EXEMPLARS))

    def _global(self, sd: dict[str, Tensor], shared: State, exemplars: Tensor | None):
        net = self._load(sd)
        if not self.p.kp or not bool(shared["U_has"].any()):
            return net
        return _KPModel(net, exemplars, shared["U_has"], self.p.kp_weight, self.p.kp_temperature)

    def personalized_model(self, shared: State, state: State):
        own = self._sub(state, MODEL)
        return self._load(own or self._sub(shared, G))


def global_prototypes(u: Tensor, y: Tensor, cid: Tensor, num_classes: int) -> Tensor:
    """u_g^i (Eq. 16): per class, the mean over the clients holding it of their prototype mean."""
    out = torch.zeros(num_classes, u.shape[1], device=u.device, dtype=u.dtype)
    for c in y.unique().tolist():
        sel = y == c
        means = [u[sel & (cid == k)].mean(0) for k in cid[sel].unique().tolist()]
        out[c] = torch.stack(means).mean(0)
    return out
