"""pFedCSPC's PMI analyses on a finished run."""
from __future__ import annotations

from support import BN_CNN

import fedrepro

CSPC = {"method.name": "pfedcspc", **BN_CNN,
        "method.args": {"server_epochs": 5, "proj_dim": 16, "clusters": 2, "n_repeat": 3}}


def test_pmi_analyses_on_a_finished_run(tiny):
    from fedrepro.claims import evaluate_claims
    from fedrepro.papers.pfedcspc.pmi import pmi_finetune, pmi_start, pmi_start_table

    table = fedrepro.run_grid(tiny(**{**CSPC, "train.rounds": 2}), seeds=[0], progress=False)
    start = pmi_start(table["path"][0])
    assert len(start) == 4 and start[["pmi_init_acc", "global_init_acc"]].stack().between(0, 1).all()
    curves = pmi_finetune(table["path"][0], epochs=2)
    assert set(curves["init"]) == {"pmi", "global"} and curves["epoch"].max() == 2
    summary = pmi_start_table(table)
    verdict = evaluate_claims(summary, ids=["pfedcspc.pmi_starts_better"])["verdict"].item()
    assert verdict == "INCONCLUSIVE"  # one seed: no spread to put an interval on
