"""FTM attention weights (FedPFT (ICLR) App. H, Fig. 10 / (arXiv) App. F, Fig. 6).

For a test sample the FTM's query is the feature token f; its head-averaged attention row over the
keys [f, p_1 .. p_n] shows how much of f′ comes from the sample itself and how much from each of the
client's prompts. The paper shows these rows for 20 test samples of one client at several α. Its
finding: at α = 0.1 every sample weights the prompts the same way; at α = 1.0 the rows differ
between samples.
"""
from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
from matplotlib.ticker import MaxNLocator
import numpy as np
import pandas as pd
import torch

from ..errors import ConfigError
from ..runs.train import restore


def attention_rows(result, client: int = 0, samples: int = 20, which: str = "kappa",
                   device: str = "auto") -> np.ndarray:
    """``[samples, 1 + n]`` attention rows of one client's first test samples (final-round model).

    ``which``: ``"kappa"`` (classification prompts) or ``"rho"`` (FedPFT+Con's contrastive prompts).
    """
    if which not in ("kappa", "rho"):
        raise ConfigError(f"which={which!r}; valid: 'kappa', 'rho'")
    method, clients, state = restore(result, device)
    if not 0 <= client < len(clients):
        raise ConfigError(f"client={client}; valid: 0..{len(clients) - 1}")
    model = method.personalized_model(state["shared"], state["client_states"][client])
    if not hasattr(model, "attention"):
        raise ConfigError(f"method {result.config.method.name!r} has no FTM attention to show; use a FedPFT method")
    model.eval()
    x = clients[client].test_x[:samples]
    with torch.no_grad():
        return model.attention(clients[client].normalize(x), which).cpu().numpy()


def attention_summary(rows: np.ndarray) -> dict[str, float]:
    """Share of attention on f itself, on the prompts, and how much samples differ (mean over prompt
    columns of the std across samples): the paper's "same for every sample" vs "sample-level"."""
    return {"self": float(rows[:, 0].mean()), "prompts": float(rows[:, 1:].sum(1).mean()),
            "spread_across_samples": float(rows[:, 1:].std(0).mean())}


def plot_attention(panels: dict[str, np.ndarray], axes: Sequence | None = None):
    """One heatmap per panel: rows = samples, columns = [f, p_1 .. p_n]."""
    if axes is None:
        _, axes = plt.subplots(1, len(panels), figsize=(3.2 * len(panels), 3.4), squeeze=False)
        axes = axes[0]
    vmax = max(float(a.max()) for a in panels.values())
    for ax, (title, rows) in zip(axes, panels.items()):
        im = ax.imshow(rows, aspect="auto", cmap="viridis", vmin=0.0, vmax=vmax)
        ax.set_title(title, fontsize=9)
        # f, then every few prompts: at 8 pt more than about eight labels run into each other.
        step = max(1, -(-(rows.shape[1] - 1) // 8))
        ticks = [0] + list(range(step, rows.shape[1], step))
        ax.set_xticks(ticks, ["f" if t == 0 else str(t) for t in ticks])
        ax.set_xlabel("key: feature f, then prompt index")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # samples are counted, not measured
    axes[0].set_ylabel("test sample")  # once: beside a neighbour panel it would run into its heatmap
    plt.colorbar(im, ax=list(axes), fraction=0.03)
    return axes[0].figure


def attention_table(panels: dict[str, np.ndarray]) -> pd.DataFrame:
    return pd.DataFrame({k: attention_summary(v) for k, v in panels.items()}).T
