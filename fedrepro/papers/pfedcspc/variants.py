"""pFedCSPC's ablation rows (pFedCSPC (TNNLS) Tables IV and V) as method configs."""
from __future__ import annotations

from typing import Any


# Tables IV and V's rows (pFedCSPC (TNNLS) §V-C) as method overrides. "Base" is FedAvg; every other
# row is pFedCSPC with switches. TPG = one class-mean prototype per client (FedProto's), CPM =
# clustered prototypes, CA = the cross-client weighted contrastive loss, PA = prototype
# augmentation + triplet loss, PTA = local alignment, KP = knowledge-based prediction. Table IV
# scores the global model, so PMI does not enter it (it only changes the clients' starting point:
# it is left on, as in the full method).
_OFF = {"kp": False, "align": False, "pa": False}
ABLATION_GLOBAL: dict[str, dict[str, Any]] = {
    "Base": {"method": "fedavg", "args": {}},
    "+TPG+CA": {"method": "pfedcspc", "args": {**_OFF, "prototypes": "tpg"}},
    "+CPM+CA": {"method": "pfedcspc", "args": {**_OFF}},
    "+PTA+CPM+CA": {"method": "pfedcspc", "args": {**_OFF, "align": True}},
    "+PTA+CPM+CA+KP": {"method": "pfedcspc", "args": {**_OFF, "align": True, "kp": True}},
    "+TPG+PA+CA": {"method": "pfedcspc", "args": {**_OFF, "pa": True, "prototypes": "tpg"}},
    "+CPM+PA+CA": {"method": "pfedcspc", "args": {**_OFF, "pa": True}},
    "+PTA+CPM+PA+CA": {"method": "pfedcspc", "args": {**_OFF, "pa": True, "align": True}},
    "+PTA+CPM+PA+CA+KP": {"method": "pfedcspc", "args": {}},
}
# Table V: I_local of the personalisation chain, from FedAvg's global model and from FedCSPC's
# calibrated one. "+FT_CE" is the client's model after local CE training from the global model;
# "+PMI" starts that training from the PMI encoder; "+Align" adds PTA's loss.
_NO_CAL = {"calibrate": False, "kp": False, "ca": False, "pa": False}
ABLATION_PERSONAL: dict[str, dict[str, Any]] = {
    "FedAvg": {"method": "fedavg", "args": {}},
    "FedAvg+FT_CE": {"method": "pfedcspc", "args": {**_NO_CAL, "pmi": False, "align": False}},
    "FedAvg+PMI+FT_CE": {"method": "pfedcspc", "args": {**_NO_CAL, "align": False}},
    "FedAvg+PMI+FT_CE+Align": {"method": "pfedcspc", "args": {**_NO_CAL}},
    "FedCSPC": {"method": "pfedcspc", "args": {"pmi": False, "align": False, "personal_eval": False}},
    "FedCSPC+FT_CE": {"method": "pfedcspc", "args": {"pmi": False, "align": False}},
    "FedCSPC+PMI+FT_CE": {"method": "pfedcspc", "args": {"align": False}},
    "FedCSPC+PMI+FT_CE+Align": {"method": "pfedcspc", "args": {}},
}


def setting_overrides(spec: dict[str, Any]) -> dict[str, Any]:
    """A row of :data:`ABLATION_GLOBAL` / :data:`ABLATION_PERSONAL` as dotted config overrides.

    Dotted ``method.args.<key>`` entries change only the named switches, so a setup's own method
    arguments (e.g. the laptop profile's ``server_epochs``) stay; a row that names another method
    (``"Base"`` = FedAvg) starts from that method's defaults."""
    return {"method.name": spec["method"], **{f"method.args.{k}": v for k, v in spec["args"].items()}}


def setting_of(cfg, rows: dict[str, dict[str, Any]]) -> str:
    """The name of the row of ``rows`` (:data:`ABLATION_GLOBAL` or :data:`ABLATION_PERSONAL`) that
    ``cfg`` runs: its method, and every switch the rows set at the row's value (the method's default
    where the row sets none), whatever else the config sets (a profile's ``server_epochs``, τ_p)."""
    from ...methods.pfedcspc import PFedCSPCParams

    defaults = PFedCSPCParams()
    switches = {k for spec in rows.values() for k in spec["args"]}
    args = cfg.method.args
    for name, spec in rows.items():
        if spec["method"] == cfg.method.name and all(
                args.get(k, getattr(defaults, k)) == spec["args"].get(k, getattr(defaults, k)) for k in switches
                if spec["method"] == "pfedcspc"):
            return name
    raise ValueError(f"setting_of: {cfg.method.name}({dict(args)}) is none of the rows {', '.join(rows)}")
