"""pFedCSPC's table definitions: the ablation table runs its claim rows over the claim seeds."""
from __future__ import annotations

import dataclasses

from support import BN_CNN

CSPC = {"method.name": "pfedcspc", **BN_CNN,
        "method.args": {"server_epochs": 5, "proj_dim": 16, "clusters": 2, "n_repeat": 3}}


def test_ablation_table_runs_claim_rows_over_the_claim_seeds_in_the_rows_order(tiny):
    from fedrepro.papers.pfedcspc import ABLATION_PERSONAL, TABLES
    from fedrepro.papers.pfedcspc.tables import _ablation_rows

    base = tiny(**{**CSPC, "train.rounds": 1, "train.global_eval": True})
    settings = {k: ABLATION_PERSONAL[k] for k in ["FedAvg", "FedAvg+FT_CE", "FedCSPC"]}
    table = dataclasses.replace(TABLES["ablation_personal"], rows=_ablation_rows(settings, lambda p: ["FedCSPC"]),
                                order=tuple(settings))
    t = table.run("smoke", seeds=[0, 1], table_seeds=[0], progress=False, base=base)
    assert list(dict.fromkeys(t["setting"])) == list(settings)
    assert t.groupby("setting", sort=False)["seed"].apply(sorted).to_dict() == \
        {"FedAvg": [0], "FedAvg+FT_CE": [0], "FedCSPC": [0, 1]}
    assert {"final_i_local_mean", "final_hm"} <= set(t.columns)  # derived from the stored rows
