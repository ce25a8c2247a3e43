"""Sequential seeds: the stages, the Bonferroni level of each look, the seeds a claim reads, when the
plan asks for the next stage, and the record that extends a table's claim rows."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from fedrepro.claims.core import (LEVEL, Claim, compare, look_level, next_stage, stage_of, stages)
from fedrepro.errors import ConfigError


def _results(effects) -> pd.DataFrame:
    rows = []
    for s, e in enumerate(effects):
        rows += [{"method.name": "a", "seed": s, "best": 0.5 + e}, {"method.name": "b", "seed": s, "best": 0.5}]
    return pd.DataFrame(rows)


def _claim(max_seeds: int = 3) -> Claim:
    return Claim("test.seq", "tour", "T", "a beats b",
                 lambda r: compare(r, {"method.name": "a"}, {"method.name": "b"}), max_seeds=max_seeds)


def test_stages_and_levels():
    assert stages(3) == (3,) and stages(5) == (3, 5) and stages(10) == (3, 5, 8, 10) and stages(12) == (3, 5, 8, 12)
    assert look_level(3) == LEVEL                                  # one look: today's 90%
    assert look_level(12) == pytest.approx(1 - 0.10 / 4)           # α/4 one-sided per look
    with pytest.raises(ConfigError, match="max_seeds"):
        stages(2)
    with pytest.raises(ConfigError, match="max_seeds"):
        _claim(1)


def test_seeds_read_at_the_largest_stage_reached():
    assert [stage_of(n, 12) for n in (1, 2, 3, 4, 5, 7, 8, 11, 12, 20)] == [1, 2, 3, 3, 5, 5, 8, 8, 12, 12]
    assert stage_of(5, 3) == 3  # a claim that does not opt in reads its 3 seeds whatever the table ran


def test_next_stage_only_for_inconclusive_at_a_stage_below_the_maximum():
    assert next_stage("INCONCLUSIVE", 3, 12) == 5
    assert next_stage("INCONCLUSIVE", 8, 12) == 12
    assert next_stage("INCONCLUSIVE", 12, 12) is None   # at its maximum
    assert next_stage("INCONCLUSIVE", 3, 3) is None     # no stages declared
    assert next_stage("INCONCLUSIVE", 1, 12) is None    # smoke's one seed is not a look
    assert next_stage("PASS", 3, 12) is None and next_stage("FAIL", 5, 12) is None


def test_one_stage_is_todays_interval_and_verdict():
    effects = [0.02, 0.01, 0.03]
    got = _claim(3).evaluate(_results(effects))
    v = np.array(effects)
    half = stats.t.ppf(0.95, 2) * v.std(ddof=1) / np.sqrt(3)
    assert got.verdict == ("PASS" if v.mean() - half > 0 else "INCONCLUSIVE")
    assert f"{100 * (v.mean() - half):+.2f}" in got.interval
    assert got.seeds == (0, 1, 2) and got.max_seeds == 3 and "sequential" not in got.evidence


def test_a_sequential_look_is_wider_and_reads_its_stage():
    # Clears the 90% interval at 3 seeds but not the 97.5% one of a 4-stage claim.
    effects = [0.02, 0.01, 0.03, 0.5, -0.5]
    assert _claim(3).evaluate(_results(effects)).verdict == "PASS"
    seq = _claim(12).evaluate(_results(effects))
    assert seq.verdict == "INCONCLUSIVE" and seq.seeds == (0, 1, 2, 3, 4) and "97.5%" in seq.evidence
    at3 = _claim(12).evaluate(_results(effects + [0.0]))          # 6 seeds: read at stage 5
    assert at3.seeds == (0, 1, 2, 3, 4)


def test_inconclusive_at_its_maximum_says_how_far_from_the_bound():
    got = _claim(5).evaluate(_results([0.02, -0.01, 0.03, 0.0, 0.01]))
    assert got.verdict == "INCONCLUSIVE"
    assert "still INCONCLUSIVE at its maximum of 5 seeds" in got.evidence and "standard deviations" in got.evidence


def test_the_plan_extends_the_tables_an_inconclusive_claim_read(monkeypatch, tmp_path):
    from fedrepro.env.host import repo_root
    from fedrepro.papers import claim_seeds, paper, record_seed_stage, seed_stages
    from fedrepro.papers.plan import seed_stage

    monkeypatch.setenv("FEDREPRO_OUTPUT", str(tmp_path))
    nb_root = Path(repo_root()) / "notebooks"
    nb = nb_root / "pep_fedpt" / "01_label_heterogeneity.ipynb"
    record = {"claim_id": "x", "notebook": "pep_fedpt_01_label_heterogeneity", "verdict": "INCONCLUSIVE",
              "seeds": [0, 1, 2], "max_seeds": 8, "runs": []}
    grow, again = seed_stage([nb], nb_root, "laptop", {"x": record})
    assert grow and set(grow.values()) == {5} and again == ["pep_fedpt/01_label_heterogeneity.ipynb"]
    assert seed_stage([nb], nb_root, "laptop", {"x": {**record, "verdict": "PASS"}}) == ({}, [])
    assert seed_stage([nb], nb_root, "laptop", {"x": {**record, "max_seeds": 3}}) == ({}, [])

    # Recorded, the stage adds seeds 3 and 4 to the table's claim rows, not to its other rows.
    key = next(iter(grow))
    table = paper("pep_fedpt").TABLES[key.split("/", 1)[1]]
    before = {c.seed for c in table.configs("smoke", tuned=False)}
    record_seed_stage("smoke", key, 5)
    assert seed_stages("smoke") == {key: 5} and claim_seeds("smoke", key) == [0, 1, 2, 3, 4]
    record_seed_stage("smoke", key, 3)   # never fewer than recorded
    assert seed_stages("smoke") == {key: 5}
    after = table.configs("smoke", tuned=False)
    assert {c.seed for c in after} == before | {1, 2, 3, 4}
    assert claim_seeds("smoke", "other/table") == [0]


def test_the_plan_extends_runs_a_notebook_builds_under_their_stage(monkeypatch, tmp_path):
    from fedrepro.env.host import repo_root
    from fedrepro.papers import record_seed_stage
    from fedrepro.papers.plan import Need, seed_stage
    from fedrepro.papers.pfedcspc.notebooks import ALIGN_STAGE, alignment_runs

    monkeypatch.setenv("FEDREPRO_OUTPUT", str(tmp_path))
    nb_root = Path(repo_root()) / "notebooks"
    nb = nb_root / "pfedcspc" / "06_tsne.ipynb"
    read = [c.hash() for c in alignment_runs("laptop").values()]
    record = {"claim_id": "pfedcspc.features_align", "notebook": "pfedcspc_06_tsne", "verdict": "INCONCLUSIVE",
              "seeds": [0, 1, 2], "max_seeds": 8, "runs": read}
    assert seed_stage([nb], nb_root, "laptop", {"x": record}) == ({ALIGN_STAGE: 5}, ["pfedcspc/06_tsne.ipynb"])
    # A record that names no run (a check on values derived from the runs) grows them too.
    assert seed_stage([nb], nb_root, "laptop", {"x": {**record, "runs": []}}) == (
        {ALIGN_STAGE: 5}, ["pfedcspc/06_tsne.ipynb"])
    # A claim that read other runs of the notebook does not grow these.
    assert seed_stage([nb], nb_root, "laptop", {"x": {**record, "runs": ["0123456789abcdef"]}}) == ({}, [])
    record_seed_stage("laptop", ALIGN_STAGE, 5)
    assert sorted({seed for (_, seed) in alignment_runs("laptop")}) == [0, 1, 2, 3, 4]
    with pytest.raises(ConfigError, match="stage"):
        Need("label_pathological", stage="pep_fedpt/x")
