"""PEP-FedPT's table rows as named config overrides: the paper's methods under the row keys of
:mod:`.reference`, its ablation settings, and our control.

Every row is a whole method configuration, so one run fills every table that shows it (FedVPT is
Table 1's baseline and Tables 4 and 9's "Only Shared"; PEP-FedPT is in almost every table).
"""
from __future__ import annotations

M, ARGS = "method.name", "method.args"

# Table 1-3's methods, in the paper's row order, under the row keys of the quoted tables.
BASELINES = ("head_tuning", "fedvpt", "fedvpt_d", "fedpr", "sgpt", "pfedpg", "p_pt")
METHODS = (*BASELINES, "pep_fedpt")
# Not in the paper: FedVPT scored with the client's label prior added to its logits (log δ_k at
# inference). Beside PEP-FedPT it shows how much of the gain the label set alone explains.
CONTROL = "fedvpt_prior (ours)"
# Not in the paper: PEP-FedPT whose CCMP mix is the client's prior alone (no cls-prototype similarity),
# with the same prompts, prototypes and budget. Beside PEP-FedPT it isolates what the similarity term
# adds beyond the label set.
PRIOR_MIX = "pep_fedpt_prior_mix (ours)"


def row(name: str) -> dict:
    """The config overrides of a row key (a method, an ablation setting or the control)."""
    if name in METHODS:
        return {M: name}
    return dict(SETTINGS[name])


SETTINGS = {
    CONTROL: {M: "fedvpt", ARGS: {"prior_logits": "log"}},
    PRIOR_MIX: {M: "pep_fedpt", ARGS: {"similarity": False}},
    # Tables 5 and 8: "Shared + CCMP Without CP", a plain softmax over every class.
    "pep_fedpt_no_cp": {M: "pep_fedpt", ARGS: {"use_prior": False}},
    # Table 7: class-level Laplace noise on the uploaded prototypes, ε = 0.2 (App. A.4.1).
    "pep_fedpt_dp": {M: "pep_fedpt", ARGS: {"dp_epsilon": 0.2}},
    # Table 12: CCMP at the first, middle (the default) and late blocks.
    "ccmp first": {M: "pep_fedpt", ARGS: {"ccmp_position": "first"}},
    "ccmp middle": {M: "pep_fedpt"},
    "ccmp late": {M: "pep_fedpt", ARGS: {"ccmp_position": "late"}},
}


def rows(*names: str) -> dict[str, dict]:
    return {n: row(n) for n in names}
