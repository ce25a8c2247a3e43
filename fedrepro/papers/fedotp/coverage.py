"""FedOTP's quoted tables: the claims that read each, and the comparisons of its main tables (Tables
1-4, the main text's) that no claim makes, with the reason (:mod:`fedrepro.papers.coverage`)."""
from __future__ import annotations

from ..coverage import TableCoverage

MAIN = ("T1", "T2", "T3", "T4")
# FedOTP and the OT variants of Table 4 (FedOTP with similarity averaging or classical OT).
METHOD_ROWS = ("fedotp", "fedotp_average", "fedotp_ot")
_DOMAIN = ("zeroshot_clip", "coop", "promptfl_fedprox")
_T1 = ("zeroshot_clip", "coop", "promptfl_ft", "promptfl_fedprox", "promptfl_fedper", "promptfl_fedamp", "pfedprompt")


def _c(name: str) -> str:
    return f"fedotp.{name}"


# Local CoOp's claims read the official budget; each has a twin on our equal-budget CoOp (ours).
_COOP_EQUAL = "coop_equal_budget"


def _coop(setting: str) -> tuple[str, str]:
    return _c(f"beats_coop_{setting}"), _c(f"beats_{_COOP_EQUAL}_{setting}")


TABLES = {
    "T1": TableCoverage(compared={"promptfl": (_c("beats_promptfl_pathological"),),
                                  **{b: (_c(f"beats_{b}_pathological"),) for b in _T1},
                                  "coop": (*_coop("pathological"), _c("coop_beats_fedotp_pathological"),
                                           _c(f"{_COOP_EQUAL}_beats_fedotp_pathological"))}),
    "T2": TableCoverage(compared={"promptfl": (_c("beats_promptfl_feature_label_shift"),),
                                  **{b: (_c(f"beats_{b}_feature_label_shift"),) for b in _DOMAIN},
                                  "coop": _coop("feature_label_shift")}),
    "T3": TableCoverage(compared={"promptfl": (_c("beats_promptfl_low_alpha"), _c("lead_grows_as_alpha_shrinks")),
                                  **{b: (_c(f"beats_{b}_dirichlet"),) for b in _DOMAIN},
                                  "coop": _coop("dirichlet")}),
    "T4": TableCoverage(claims=(_c("uot_ot_average_order"),)),
    "TA2": TableCoverage(left_out={b: "feature shift alone (appendix): the table runs one seed at laptop and no "
                                      "claim reads it" for b in (*_DOMAIN, "promptfl")}),
    "TA3": TableCoverage(claims=(_c("beats_promptfl_feature_label_shift"),
                                 *(_c(f"beats_{b}_feature_label_shift") for b in _DOMAIN),
                                 _c(f"beats_{_COOP_EQUAL}_feature_label_shift"))),
    "TA4": TableCoverage(claims=(_c("gamma_inverted_u"),)),
    "TA5": TableCoverage(claims=(_c("beats_promptfl_low_alpha"), _c("lead_grows_as_alpha_shrinks"),
                                 *(_c(f"beats_{b}_dirichlet") for b in _DOMAIN), _c(f"beats_{_COOP_EQUAL}_dirichlet"))),
}
