"""pFedCSPC's quoted tables: the claims that read each, and the comparisons of its main tables (Tables
II-VII, all in the main text) that no claim makes, with the reason (:mod:`fedrepro.papers.coverage`)."""
from __future__ import annotations

from ..coverage import TableCoverage

MAIN = ("T2", "T3", "T4", "T5", "T6", "T7")
METHOD_ROWS = ("pfedcspc",)
_SEARCHED = ("runs over one table seed at laptop, each after its own learning-rate search (budget; the main "
             "table's runs are pinned), so a claim could not be decided there")
_ROUNDS = "runs over one table seed at laptop (it only fills the table); no claim reads it"


def _c(name: str) -> str:
    return f"pfedcspc.{name}"


TABLES = {
    "T2": TableCoverage(compared={"fedavg": (_c("both_objectives"),)},
                        left_out={b: _SEARCHED for b in ("moon", "feddc", "fedntd", "fedasam", "fedproc", "feddecorr",
                                                         "ccvr", "fedsoup", "grace", "fedetf")}),
    "T3": TableCoverage(compared={"fedavg_ft": (_c("both_objectives"),)},
                        left_out={"fedavg": "its Local score is Table II's FedAvg row, which both_objectives reads as "
                                            "FedAvg-FT (one training)",
                                  **{b: _SEARCHED for b in ("lgfed", "fedperpp", "ditto", "fedfomo", "fedala")}}),
    "T4": TableCoverage(claims=(_c("calibration_raises_global"), _c("clusters_beat_one_mean"), _c("ablation_adds_up")),
                        own=("Base", "+TPG+CA", "+CPM+CA", "+PTA+CPM+CA", "+PTA+CPM+CA+KP", "+TPG+PA+CA",
                             "+CPM+PA+CA", "+PTA+CPM+PA+CA", "+PTA+CPM+PA+CA+KP")),
    "T5": TableCoverage(claims=(_c("personalisation_chain"), _c("cspc_chain_beats_fedavg_chain")),
                        own=("FedAvg", "FedAvg+FT_CE", "FedAvg+PMI+FT_CE", "FedAvg+PMI+FT_CE+Align", "FedCSPC",
                             "FedCSPC+FT_CE", "FedCSPC+PMI+FT_CE", "FedCSPC+PMI+FT_CE+Align")),
    # Each base method against itself with pFedCSPC's calibration added.
    "T6": TableCoverage(compared={b: (_c("plug_and_play"),) for b in ("fedprox", "moon", "fedasam")},
                        own=("fedprox+pfedcspc", "moon+pfedcspc", "fedasam+pfedcspc")),
    "T7": TableCoverage(compared={"fedavg": (_c("fewer_rounds"), _c("fewer_rounds_beta_0.1"))},
                        left_out={b: _ROUNDS for b in ("fedprox", "moon", "feddc", "fedntd", "fedasam", "fedproc",
                                                       "feddecorr", "ccvr")}),
}
