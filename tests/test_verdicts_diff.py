"""bench/verdicts_diff.py puts two sets of recorded claims side by side and counts the verdicts that moved."""
from __future__ import annotations

import json
from pathlib import Path

from support import bench_module


def _record(folder: Path, name: str, verdicts: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    claims = [{"claim_id": cid, "verdict": v, "effect": f"{cid} {v}", "interval": ""} for cid, v in verdicts.items()]
    (folder / f"{name}.json").write_text(json.dumps({"claims": claims, "commit": "abc"}))


def test_it_lists_the_claims_in_both_and_counts_the_changes(tmp_path, capsys):
    before, after = tmp_path / "before", tmp_path / "after"
    _record(before, "fedpft_03_main", {"fedpft.a": "PASS", "fedpft.b": "FAIL", "fedpft.gone": "PASS"})
    _record(after, "fedpft_03_main", {"fedpft.a": "PASS", "fedpft.b": "INCONCLUSIVE", "fedpft.new": "FAIL"})
    _record(after, "pfedcspc_01_x", {"pfedcspc.c": "PASS"})  # another paper's record: left out by --only
    out = tmp_path / "rows.json"
    assert bench_module("verdicts_diff").main([str(before), str(after), "--only", "fedpft_", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "| `fedpft.b` | FAIL | INCONCLUSIVE **(changed)** |" in text and "| `fedpft.a` | PASS | PASS |" in text
    assert "1 of 2 verdicts changed; in one set only: fedpft.gone, fedpft.new" in text and "pfedcspc" not in text
    assert [r["claim"] for r in json.loads(out.read_text()) if r["changed"]] == ["fedpft.b"]
