"""PEP-FedPT's iNaturalist tables (Table 2's and Table 13's iNat columns): the runs they name at each
profile, the paper's numbers beside them, and Worst Acc as the minimum mean accuracy over the last
rounds (App. A.3.2's footnote)."""
from __future__ import annotations

import math

import pandas as pd

from fedrepro.papers import paper
from fedrepro.papers.pep_fedpt import tables
from fedrepro.papers.pep_fedpt.tables import LATE_WORST, late_worst, with_late_worst


def test_worst_acc_is_the_minimum_mean_over_the_last_half_of_the_rounds():
    acc = [0.1] * 250 + [0.6, 0.5] + [0.7] * 248  # rounds 1-500; the late minimum is round 252's
    rounds = pd.DataFrame({"round": range(1, 501), "acc_mean": acc})
    assert late_worst(rounds) == 0.5
    # Rounds not evaluated (NaN) are skipped; a 10-round run reads its last 5.
    short = pd.DataFrame({"round": range(1, 11), "acc_mean": [0.0] * 5 + [0.4, math.nan, 0.3, 0.5, 0.6]})
    assert late_worst(short) == 0.3
    assert math.isnan(late_worst(pd.DataFrame({"round": [1], "acc_mean": [math.nan]})))


def test_the_table_derives_worst_acc_from_each_runs_rounds(monkeypatch):
    stored = {"a": pd.DataFrame({"round": [1, 2, 3, 4], "acc_mean": [0.1, 0.5, 0.4, 0.6]})}
    monkeypatch.setattr(tables, "RunResult", lambda p: type("R", (), {"rounds": stored[p]})())
    out = with_late_worst(pd.DataFrame({"path": ["a"], "final": [0.6]}))
    assert out[LATE_WORST].tolist() == [0.4] and out["final"].tolist() == [0.6]


def test_the_paper_profile_runs_the_users_and_the_small_profiles_add_no_run():
    t = paper("pep_fedpt").TABLES
    for name, stand_in, held in (("inaturalist", "label_pathological", 0), ("heldout_inaturalist", "heldout", 102)):
        cfgs = t[name].configs("paper", tuned=False)
        assert {(c.data.dataset, c.data.partition, c.data.num_clients, c.data.holdout_clients) for c in cfgs} == \
            {("inaturalist", "by_user", 1018, held)}
        for profile in ("smoke", "laptop"):
            ours = {c.hash() for c in t[name].configs(profile, tuned=False)}
            assert ours <= {c.hash() for c in t[stand_in].configs(profile, tuned=False)}
    assert {"pep_fedpt", "pep_fedpt_no_cp", "fedvpt"} <= {c.method.name if c.method.name != "pep_fedpt" or
                                                           c.method.args.get("use_prior", True) else "pep_fedpt_no_cp"
                                                           for c in t["inaturalist"].configs("paper", tuned=False)}
    assert list(t["inaturalist"].paper_numbers().columns) == ["iNat Mean", "iNat Worst"]
    assert list(t["heldout_inaturalist"].paper_numbers().columns) == ["iNat Participating", "iNat Testing"]
    assert t["inaturalist"].paper_numbers().loc["pep_fedpt"].tolist() == [63.48, 57.61]
