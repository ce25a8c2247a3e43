"""FedPFT's feature transformation module τ (the FTM) and the networks built around it.

The FTM (FedPFT (ICLR) §3.3, Eq. 2; arXiv §3.3): τ takes the feature token f = φ(x) ∈ R^m followed
by n prompt tokens p ∈ R^{n×m} and returns [f′, p′]; f′, the output at the feature token, is the
transformed feature and p′ is discarded. The papers say only that τ is "self-attention-based"; the
rest is ours:

- one attention block (``layers=1``) of ``heads=8`` heads, no FFN and no positional embedding (the
  prompt set is unordered, f is always token 0). The size is read off the communication table
  (ICLR App. N, Table 15; arXiv App. I): τ = 0.26M parameters at m = 256 and 1.05M at m = 512,
  exactly one attention layer's 4m²+4m; any FFN would add at least 2m².
- ``residual="prenorm"`` (default): f′ = f + Attn(LN(x))₀, 4m²+6m parameters (one LayerNorm more,
  still 0.26M / 1.05M after rounding); ``"none"``: f′ = Attn(x)₀, exactly 4m²+4m.
- ``init="default"`` keeps PyTorch's initialisation; ``"zero_out"`` zeroes the output projection,
  so that with the residual τ starts as the identity and the round-0 model is FedAvg's.
- The attention weights returned for ICLR App. H / arXiv App. F (one row per sample over the keys
  [f, p_1..p_n]) are the heads' average in the last block.

:class:`PFTNet` is a client's whole network (φ, τ or FedAvg+Linear's m×m layer, h_κ, h_ρ and the
prompts); :class:`PersonalizedPFT` exposes it to the analyses.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from ..errors import ConfigError
from .base import SplitModel

RESIDUALS = ("prenorm", "none")
FTM_INITS = ("default", "zero_out")

# The prompts' attribute (and state-dict) names in :class:`PFTNet`.
PROMPTS_KAPPA = "prompts_kappa"
PROMPTS_RHO = "prompts_rho"


class _AttnBlock(nn.Module):
    """One self-attention block over the tokens; no FFN (an FFN would break the size match)."""

    def __init__(self, dim: int, heads: int, residual: str):
        super().__init__()
        self.residual = residual
        self.norm = nn.LayerNorm(dim) if residual == "prenorm" else None
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)

    def forward(self, x: Tensor, first_only: bool, need_weights: bool) -> tuple[Tensor, Tensor | None]:
        h = self.norm(x) if self.norm is not None else x
        # Only token 0 is read after the last block, so its query alone is enough there.
        q = h[:, :1] if first_only else h
        out, w = self.attn(q, h, h, need_weights=need_weights, average_attn_weights=True)
        if self.residual == "prenorm":
            out = (x[:, :1] if first_only else x) + out
        return out, w


class FTM(nn.Module):
    """τ: multi-head self-attention over [f, p_1..p_n]; f′ is the output at the feature token.

    ``forward(f, prompts)`` takes f of shape [B, m] and prompts [n, m] (shared by the batch), [B, n, m]
    or ``None`` (τ then sees [f] alone). With ``return_attention`` it also returns the head-averaged
    attention of token 0 over the keys [f, p_1..p_n] in the last block, shape [B, 1+n].
    """

    def __init__(self, dim: int, heads: int = 8, layers: int = 1, residual: str = "prenorm",
                 init: str = "default"):
        super().__init__()
        if residual not in RESIDUALS:
            raise ConfigError(f"ftm residual={residual!r}; valid: {', '.join(RESIDUALS)}")
        if heads < 1 or dim % heads:
            raise ConfigError(f"ftm heads={heads} must divide the feature dimension m={dim}")
        if layers < 1:
            raise ConfigError(f"ftm layers={layers}; valid: an integer >= 1")
        if init not in FTM_INITS:
            raise ConfigError(f"ftm init={init!r}; valid: {', '.join(FTM_INITS)}")
        self.dim = dim
        self.blocks = nn.ModuleList(_AttnBlock(dim, heads, residual) for _ in range(layers))
        if init == "zero_out":  # f′ = f at the start: the round-0 model is FedAvg's (prenorm)
            for block in self.blocks:
                nn.init.zeros_(block.attn.out_proj.weight)

    def forward(self, f: Tensor, prompts: Tensor | None = None,
                return_attention: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        x = f.unsqueeze(1)
        if prompts is not None and prompts.numel():
            p = prompts.unsqueeze(0).expand(f.shape[0], -1, -1) if prompts.dim() == 2 else prompts
            x = torch.cat([x, p.to(f.dtype)], dim=1)
        w = None
        last = len(self.blocks) - 1
        for i, block in enumerate(self.blocks):
            x, w = block(x, first_only=i == last, need_weights=return_attention and i == last)
        out = x[:, 0]
        return (out, w[:, 0]) if return_attention else out


def ftm_param_count(dim: int, layers: int = 1, residual: str = "prenorm") -> int:
    """Exact size of :class:`FTM`: 4m²+4m per attention block, +2m per LayerNorm (prenorm)."""
    return layers * (4 * dim * dim + 4 * dim + (2 * dim if residual == "prenorm" else 0))


class PFTNet(nn.Module):
    """φ (``features``), τ (``ftm``) or an m×m ``linear``, h_κ (``head``), h_ρ (``proj``), prompts.

    f′ = τ([φ(x), p_κ])₀ (or linear(φ(x)), or φ(x) itself) feeds h_κ; h_ρ is the contrastive
    projection head, one ``Linear(m, proj_dim)`` as the communication table implies (h_ρ = 32.90K =
    256·128 + 128 at m = 256, arXiv App. I). The prompts are parameters of this module only so that
    one state dict covers the client's whole model; the methods keep them in the client state and
    never upload them.
    """

    def __init__(self, base: SplitModel, ftm: FTM | None = None, n_kappa: int = 0, n_rho: int = 0,
                 proj_dim: int | None = None, linear: nn.Linear | None = None):
        super().__init__()
        m = base.feature_dim
        self.feature_dim, self.num_classes = m, base.num_classes
        self.features = base.features
        self.head = base.head
        self.ftm = ftm
        self.linear = linear
        self.proj = nn.Linear(m, proj_dim) if proj_dim else None
        self.prompts_kappa = nn.Parameter(torch.zeros(n_kappa, m)) if n_kappa else None
        self.prompts_rho = nn.Parameter(torch.zeros(n_rho, m)) if n_rho else None

    def transform(self, f: Tensor, prompts: Tensor | None = None) -> Tensor:
        """f -> the classifier's input: linear(f), τ([f, prompts])₀, or f itself."""
        if self.linear is not None:
            return self.linear(f)
        if self.ftm is not None:
            return self.ftm(f, prompts)
        return f

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.transform(self.features(x), self.prompts_kappa))


class _Transformed(nn.Module):
    """x -> τ([φ(x), p])₀ for a fixed prompt set (``which`` = "kappa" or "rho")."""

    def __init__(self, net: PFTNet, which: str):
        super().__init__()
        self.net = net
        self.which = which

    def forward(self, x: Tensor) -> Tensor:
        p = self.net.prompts_kappa if self.which == "kappa" else self.net.prompts_rho
        return self.net.transform(self.net.features(x), p)


class PersonalizedPFT(nn.Module):
    """A client's FedPFT model for analyses; ``features`` ends with the FTM, since the paper's linear
    probes are taken on f′ (FedPFT+Con's Probe values in FedPFT (ICLR) Table 1 equal the "p_κ" row
    of its Table 6).

    ``features``: x -> f′ = τ([φ(x), p_κ])₀; ``head``: h_κ; ``phi``: the raw extractor φ (Table 6's
    "None" row); ``features_rho``: x -> τ([φ(x), p_ρ])₀ (FedPFT+Con only, ICLR Fig. 5(b));
    :meth:`attention` gives the head-averaged attention of f′ over [f, p_1..p_n] (ICLR App. H).
    """

    def __init__(self, net: PFTNet):
        super().__init__()
        self.net = net
        self.features = _Transformed(net, "kappa")
        self.head = net.head
        self.phi = net.features
        self.features_rho = _Transformed(net, "rho") if net.prompts_rho is not None else None

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.features(x))

    @torch.no_grad()
    def attention(self, x: Tensor, which: str = "kappa") -> Tensor:
        """[B, 1+n] attention weights of the feature token over keys [f, p_1..p_n]."""
        if self.net.ftm is None:
            raise ValueError("this model has no FTM")
        p = self.net.prompts_kappa if which == "kappa" else self.net.prompts_rho
        return self.net.ftm(self.net.features(x), p, return_attention=True)[1]
