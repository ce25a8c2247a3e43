"""FedPFT's quoted tables: the claims that read each, and the comparisons of its main tables (ICLR
Tables 1, 2, 4, 5, 6, and Table 8, CIFAR-10, which the laptop profile's main table reproduces) that no
claim makes, with the reason (:mod:`fedrepro.papers.coverage`)."""
from __future__ import annotations

from ..coverage import TableCoverage

MAIN = ("T1", "T-C10", "T2", "T-Ablation", "T-Probe", "T-Prompt")
METHOD_ROWS = ("fedpft", "fedpft_con")
_TABLE_SEED = ("runs over one table seed at laptop (each run takes minutes, and the main table's runs are pinned), "
               "so a claim could not be decided there")
_PROBE = "its linear probe runs over one table seed at laptop; no claim reads it"


def _c(name: str) -> str:
    return f"fedpft.{name}"


def _main() -> TableCoverage:
    return TableCoverage(
        claims=(_c("con_beats_fedpft"), _c("local_vs_fedavg"), _c("fedavg_flat_personalised_drop")),
        compared={"fedavg": (_c("beats_fedavg_every_alpha"), _c("beats_fedavg_every_alpha_phi_matched")),
                  "local": (_c("beats_local_every_alpha"),),
                  **{b: (_c("beats_fedper_fedrep_fedbn"), _c("beats_fedper_fedrep_fedbn_phi_matched"))
                     for b in ("fedper", "fedrep", "fedbn")}},
        left_out={b: _TABLE_SEED for b in ("fedamp", "fedrod", "pfedsd", "pfedgate", "fedcac", "pfedpt")})


TABLES = {
    "T1": TableCoverage(claims=(_c("fedavg_match_gt_origin"), _c("probe_approx_match"),
                                _c("fedpft_origin_approx_match")),
                        compared={"fedavg": (_c("probe_ge_fedavg"),),
                                  **{b: (_c("fedavg_probe_beats_pfl"), _c("fedavg_match_beats_pfl_origin"),
                                         _c("partial_personalisation_gap")) for b in ("fedper", "fedbn", "fedcac")}}),
    "T-C10": _main(),
    "T2": _main(),
    "T-Path": TableCoverage(left_out={b: "the pathological table runs one table seed of five methods; no claim reads it"
                                      for b in ("fedavg", "local", "fedamp", "fedper", "fedrep", "fedbn", "fedrod",
                                                "pfedsd", "pfedgate", "fedcac", "pfedpt")}),
    "T-Ablation": TableCoverage(claims=(_c("prompts_improve_fedavg"), _c("alternation_matters")),
                                own=("I", "II", "III", "IV", "V", "VI", "arXiv-VI", "arXiv-VII")),
    "T-Probe": TableCoverage(compared={"fedavg": (_c("probe_ge_fedavg"), _c("probe_ge_fedavg_phi_matched"))},
                             left_out={b: _PROBE for b in ("fedper", "fedbn", "fedcac", "fedrod", "pfedsd")}),
    "T-Prompt": TableCoverage(claims=(_c("prompts_keep_separability"),), own=("None", "p_κ", "p_ρ")),
    "T9": TableCoverage(claims=(_c("fedavg_linear_beats_fedavg"),)),
    "T10": TableCoverage(claims=(_c("feature_shift_mismatch"), _c("feature_shift_best"))),
    "T11": TableCoverage(claims=(_c("best_with_100_clients"), _c("best_with_100_clients_phi_matched"))),
    "T12": TableCoverage(claims=(_c("best_with_resnet18"), _c("best_with_resnet18_phi_matched"))),
    "T13": TableCoverage(claims=(_c("partial_participation"),)),
    "T15": TableCoverage(claims=(_c("communication_overhead"),)),
    "T14": TableCoverage(claims=(_c("time_per_round"),)),
}
