"""bench/seed_needs.py's uniform-rule replay judges pages' tests at the looser and the stricter level."""
from __future__ import annotations

from support import bench_module

from fedrepro.claims.core import CLAIMS, Test


def test_uniform_rule_makes_a_narrow_pass_wait_and_leaves_a_wide_one():
    from fedrepro.papers import PAPERS, paper

    for name in PAPERS:
        paper(name)
    seed_needs = bench_module("seed_needs")
    narrow = Test("A − B", (1.0, 2.0, 1.5), (0, 1, 2), ">", 0.5)   # 90% lower end +0.66 > 0.5; 95% end +0.26
    wide = Test("A − B", (10.0, 11.0, 10.5), (0, 1, 2), ">", 0.5)
    assert narrow.verdict == wide.verdict == "PASS"
    three = [c for c in CLAIMS.names() if CLAIMS.get(c).max_seeds == 3][:2]
    pages = {three[0]: {"paper": "p", "verdict": "PASS", "evidence": narrow.text()},
             three[1]: {"paper": "p", "verdict": "PASS", "evidence": wide.text()}}
    rows = {r["claim"]: r for r in seed_needs.uniform_rule(pages, 5)["claims"]}
    assert rows[three[0]]["first_look"] == "INCONCLUSIVE" and rows[three[0]]["predicted"] == "PASS"
    assert rows[three[0]]["extra_seeds"] == 2
    assert rows[three[1]]["first_look"] == "PASS" and rows[three[1]]["extra_seeds"] == 0
