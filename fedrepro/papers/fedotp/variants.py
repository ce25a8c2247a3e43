"""FedOTP's table rows as named config overrides: the paper's methods under the row keys of
:mod:`.reference`, its OT variants, our ablations, and the official code's departures.

Every row is a whole method configuration, so one run fills every table that shows it (FedOTP at
γ = 0.8 and 4 shots is Table 1's FedOTP, Table 4's 4-shot UOT, Table A4's γ = 0.8 and Fig. 3's
4-shot point).

At the small profiles each method trains at its own learning rate, the best of {0.001, 0.01, 0.1,
1} on validation data of the noisy pathological split (at the row's shot count) at the tuning seed
(:func:`fedrepro.papers.fedotp.tables.lr_search`; notebook 01 shows the search); the paper profile
keeps the official code's 0.001 for every method.

Local CoOp runs at two budgets: ``coop``, the paper's row, at the official code's (one session of
:data:`COOP_SESSION_EPOCHS` epochs, :mod:`fedrepro.methods.coop`), and ``coop (equal budget, ours)``,
its prompt trained every round as the federated methods' are. pFedPrompt (our reading) runs with its
cache weighed against the CLIP's logit scale (``pfedprompt``, the default) and unscaled
(``pfedprompt (unscaled cache)``), :mod:`fedrepro.methods.pfedprompt`.
"""
from __future__ import annotations

M, ARGS = "method.name", "method.args"

# Table 1's methods, in the paper's row order, under the row keys of the quoted tables.
BASELINES = ("zeroshot_clip", "coop", "promptfl", "promptfl_ft", "promptfl_fedprox", "promptfl_fedper",
             "promptfl_fedamp", "pfedprompt")
METHODS = (*BASELINES, "fedotp")
TRAINED = tuple(m for m in METHODS if m != "zeroshot_clip")
LR_GRID = (0.001, 0.01, 0.1, 1.0)

# The official code's local CoOp: one session of MAX_EPOCH = 10 epochs (configs/trainers/GLP_OT/local.yaml;
# federated_main.py's "local" branch breaks its round loop after the first round).
COOP_SESSION_EPOCHS = 10
COOP_EQUAL = "coop (equal budget, ours)"
PFEDPROMPT_UNSCALED = "pfedprompt (unscaled cache)"
# The methods whose row is more than the method's name: CoOp at the official budget.
METHOD_ROWS = {"coop": {M: "coop", ARGS: {"session_epochs": COOP_SESSION_EPOCHS}}}

# Table 4's variants (and "ours": KL-penalised UOT), and our prompt-set ablations.
SETTINGS = {
    COOP_EQUAL: {M: "coop"},
    PFEDPROMPT_UNSCALED: {M: "pfedprompt", ARGS: {"cache_scale": "none"}},
    "fedotp_average": {M: "fedotp", ARGS: {"ot": "average"}},
    "fedotp_ot": {M: "fedotp", ARGS: {"ot": "ot"}},
    "fedotp_kl_uot (ours)": {M: "fedotp", ARGS: {"ot": "kl_uot"}},
    "fedotp_local_only (ours)": {M: "fedotp", ARGS: {"prompts": "local_only"}},
    "fedotp_global_only (ours)": {M: "fedotp", ARGS: {"prompts": "global_only"}},
    # The official code's behaviour, one departure at a time (fedrepro.methods.clip_prompt).
    "official: class names in set order": {M: "fedotp", ARGS: {"class_order": "set"}},
    "official: images misaligned": {M: "fedotp", ARGS: {"misaligned_images": True}},
    "official: one optimiser for all clients": {M: "fedotp", ARGS: {"optimizer_scope": "shared"}},
    "official: seed 0 unseeded": {M: "fedotp", ARGS: {"seed_zero_unseeded": True}},
    "official: split fixed by seed 2023": {M: "fedotp", "data.partition_seed": 2023},
    "zeroshot_clip, class names in set order": {M: "zeroshot_clip", ARGS: {"class_order": "set"}},
    "promptfl_fedprox, term without gradient": {M: "promptfl_fedprox", ARGS: {"prox_grad": False}},
}
ABLATIONS = ("fedotp_local_only (ours)", "fedotp_global_only (ours)")
OT_VARIANTS = ("fedotp_average", "fedotp_ot", "fedotp")
QUIRKS = tuple(k for k in SETTINGS if k.startswith("official") or k.split(",")[0] in METHODS and "," in k)
# Each baseline's other reading, shown beside it (claims read the first of each pair).
SECOND_READINGS = {"coop": COOP_EQUAL, "pfedprompt": PFEDPROMPT_UNSCALED}


def _method(name: str) -> str:
    return name if name in METHODS else SETTINGS[name][M]


def row(name: str, profile: str) -> dict:
    """The config overrides of a row key (a method, a variant, an ablation or a quirk) at ``profile``."""
    # Its learning rate is the search's (tables.lr_search), not a constant here.
    if name in METHOD_ROWS:
        return {k: dict(v) if isinstance(v, dict) else v for k, v in METHOD_ROWS[name].items()}
    return {M: name} if name in METHODS else dict(SETTINGS[name])


def rows(profile: str, *names: str) -> dict[str, dict]:
    return {n: row(n, profile) for n in names}
