"""Analyses of finished runs: the mismatch probe, linear probes, t-SNE views and cost tables.

These reproduce FedPFT's analysis experiments (ICLR Table 1 and App. A; the linear-probe and
prompt-effect Tables 5–6; the time and communication Tables 14–15; Figs. 4–5) for *any* method, through
``Method.personalized_model(shared, state)`` on the run's final-round state.

Typical use::

    res = fedrepro.run(cfg)
    table = mismatch_probe(res)            # per-client Origin / Probe / Match
    summarize_probe(table)                 # means, mismatch = Match − Origin
    feats, y, cid = extract_features(res, max_per_client=200)
    plot_tsne(tsne_embed(feats, seed=0), y, cid)
"""
from .cost import time_per_round, upload_params
from .embedding import (client_features, extract_features, extract_features_state, plot_label_panel, plot_tsne,
                        tsne_embed, tsne_legend)
from .probe import (
    ProbeConfig,
    linear_probe,
    linear_probe_state,
    mismatch_probe,
    mismatch_probe_state,
    probe_client,
    summarize_probe,
)

__all__ = [
    "ProbeConfig", "client_features", "extract_features", "extract_features_state", "linear_probe",
    "linear_probe_state", "mismatch_probe", "mismatch_probe_state", "plot_label_panel", "plot_tsne", "probe_client",
    "summarize_probe", "time_per_round", "tsne_embed", "tsne_legend", "upload_params",
]
