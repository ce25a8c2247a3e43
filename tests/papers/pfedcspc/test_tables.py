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


def _seeds_by(configs, key) -> dict:
    out: dict = {}
    for c in configs:
        out.setdefault(key(c), set()).add(c.seed)
    return out


def test_claim_rows_of_tables_vi_and_vii_run_over_the_claim_seeds():
    from fedrepro import default_seeds
    from fedrepro.papers import table_seeds
    from fedrepro.papers.pfedcspc import TABLES

    claim, table = set(default_seeds("laptop")), set(table_seeds("laptop"))
    assert len(claim) >= 3
    # plug_and_play reads every row of Table VI.
    seeds = _seeds_by(TABLES["orthogonality"].configs("laptop", tuned=False),
                      lambda c: (c.method.name, c.method.args.get("base")))
    assert len(seeds) == 6 and all(s == claim for s in seeds.values())
    # fewer_rounds reads pFedCSPC and FedAvg; the rest of Table VII stays at the table seeds.
    for v in ("default", "beta0.1"):
        seeds = _seeds_by(TABLES[f"rounds_{v}"].configs("laptop"), lambda c: c.method.name)
        assert seeds.pop("pfedcspc") == claim and seeds.pop("fedavg") == claim
        assert seeds and all(s == table for s in seeds.values())


def test_alignment_runs_are_notebook_01s_claim_runs_at_every_claim_seed():
    from fedrepro import default_seeds
    from fedrepro.papers.pfedcspc import TABLES
    from fedrepro.papers.pfedcspc.notebooks import NOTEBOOKS, alignment_runs

    runs = alignment_runs("laptop")
    assert sorted(runs) == sorted((m, s) for m in ("FedAvg", "pFedCSPC") for s in default_seeds("laptop"))
    main = {c.hash() for c in TABLES["main_default"].configs("laptop", tuned=False)}
    assert {c.hash() for c in runs.values()} <= main  # notebook 01's rows at the setup's rate
    planned = {c.hash() for need in NOTEBOOKS["06_tsne"] for c in need.configs("pfedcspc", "laptop")}
    assert {c.hash() for c in runs.values()} <= planned
