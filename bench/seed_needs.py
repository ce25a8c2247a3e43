"""How many seeds each INCONCLUSIVE claim of the committed laptop pages would need, were its mean
effect and per-seed spread to hold.

The pages (``docs/results/laptop/*.md``, written by ``fedrepro results``) print every test a claim
ran as ``name: mean [low, high], required > bound (per seed ...; seeds [...]) → VERDICT``. From the
interval and the seeds this reads each test's per-seed standard deviation (the interval's half width
is t × SD / √n), its distance from the bound in SDs (:meth:`Test.distance_sds`), and then plays the
claim's sequential looks forward: for a maximum of M seeds it builds, at every stage of
:func:`stages` (M), per-seed values with that mean and SD and judges them with the code's own
:class:`Test` at :func:`look_level` (M), the Bonferroni level the claim would be read at. The claim
decides at the first stage where :func:`combined` is PASS or FAIL.

Each INCONCLUSIVE claim gets a recommended ``max_seeds``: the smallest stage maximum at which it
decides, one stage more for margin (the mean and SD of three seeds are rough), capped at the
last stage; none when it would not decide by the last stage. The prediction is a prediction: it
assumes the three seeds' mean and SD are the truth, which they are not.

    .venv/bin/python bench/seed_needs.py [--pages docs/results/laptop] [--json bench/seed_needs.json]

``--min-max M`` asks instead what a uniform rule would do, every claim declaring ``max_seeds`` of at
least M (declared for all claims before a pass, so that no claim's maximum is raised because it came
out undecided): each claim that today stops at 3 seeds is looked at again at 3 seeds at
:func:`look_level` (M), its seeded tests rebuilt from the page as above, and played forward to M.
It lists the verdicts that change at the first look, the predicted verdicts at the end, and the extra
seeds, under the same caveat.

    .venv/bin/python bench/seed_needs.py --min-max 5 --json bench/seed_needs_min5.json
"""
from __future__ import annotations

import argparse
import json
import math
import re
from collections import Counter
from pathlib import Path

from fedrepro.claims.core import (CLAIMS, DEFAULT_MAX_SEEDS, LEVEL, STAGES, combined, look_level, printed_tests,
                                  spread_test, stages)

ROOT = Path(__file__).resolve().parents[1]
SECTION = re.compile(r"^### (?P<id>\S+)\n(?P<body>.*?)(?=^##)", re.S | re.M)
# The largest number of seeds a test's prediction looks for (beyond the last stage: how far off it is).
FAR = 200
# Every seeded test printed in a claim's evidence, as numbers in the page's units, and one as n per-seed
# values with its mean and SD: the claims layer's reader of printed tests, which the pages share.
tests_of = printed_tests
as_test = spread_test


def seeds_to_clear(t: dict, level: float) -> int | None:
    """The fewest seeds at which one look at ``level`` would decide the test (PASS or FAIL)."""
    for n in range(2, FAR + 1):
        if as_test(t, n, level).verdict != "INCONCLUSIVE":
            return n
    return None


def decides(tests: list[dict], max_seeds: int) -> tuple[int, str] | None:
    """``(stage, verdict)`` of the first look that decides the claim at ``max_seeds``, or None."""
    level = look_level(max_seeds)
    for n in stages(max_seeds):
        verdict = combined([as_test(t, n, level) for t in tests])
        if verdict != "INCONCLUSIVE":
            return n, verdict
    return None


def claim_seeds_one_look(tests: list[dict]) -> int | None:
    """The fewest seeds at which one look at :data:`LEVEL` would decide the claim (all its tests)."""
    for n in range(2, FAR + 1):
        if combined([as_test(t, n, LEVEL) for t in tests]) != "INCONCLUSIVE":
            return n
    return None


def recommend(tests: list[dict]) -> dict:
    by_max = {m: decides(tests, m) for m in STAGES[1:]}
    first = next((m for m, d in by_max.items() if d), None)
    if first is None:
        return {"by_max": by_max, "max_seeds": None, "predicted": "INCONCLUSIVE"}
    later = [m for m in STAGES if m > first]
    chosen = later[0] if later and by_max.get(later[0]) else first
    return {"by_max": by_max, "max_seeds": chosen, "predicted": by_max[chosen][1], "decides_at": by_max[chosen][0]}


def page_claims(folder: Path) -> dict[str, dict]:
    claims = {}
    for page in sorted(folder.glob("*.md")):
        if page.stem == "index":
            continue
        for m in SECTION.finditer(page.read_text() + "\n## end"):
            body = m["body"]
            verdict = re.search(r"^- verdict: \*\*(.+?)\*\*", body, re.M)
            evidence = re.search(r"^- evidence: (.*)$", body, re.M)
            if verdict:
                claims[m["id"]] = {"paper": page.stem, "verdict": verdict[1],
                                   "evidence": evidence[1] if evidence else ""}
    return claims


def uniform_rule(pages: dict[str, dict], min_max: int) -> dict:
    """What every claim declaring ``max_seeds`` >= ``min_max`` would do to the claims read at 3 seeds."""
    level = look_level(min_max)
    rows = []
    for cid, c in pages.items():
        declared = CLAIMS.get(cid).max_seeds if cid in CLAIMS else None
        tests = tests_of(c["evidence"])
        if declared is None or declared >= min_max or not tests or any(t["n"] != DEFAULT_MAX_SEEDS for t in tests):
            continue  # already sequential to min_max, gone, exact only, or not read at 3 seeds
        first = combined([as_test(t, t["n"], level) for t in tests])
        end = decides(tests, min_max)
        rows.append({"claim": cid, "paper": c["paper"], "verdict": c["verdict"], "first_look": first,
                     "predicted": end[1] if end else "INCONCLUSIVE", "decides_at": end[0] if end else None,
                     "extra_seeds": (end[0] if end else min_max) - DEFAULT_MAX_SEEDS})
    summary = {"min_max_seeds": min_max, "look_level": round(level, 4), "claims_read_at_3": len(rows),
               "first_look_changes": dict(Counter(f"{r['verdict']} -> {r['first_look']}" for r in rows
                                                  if r["first_look"] != r["verdict"])),
               "decided_today": sum(r["verdict"] != "INCONCLUSIVE" for r in rows),
               "predicted_decided": sum(r["predicted"] != "INCONCLUSIVE" for r in rows),
               "decided_today_predicted_otherwise": [r["claim"] for r in rows if r["verdict"] != "INCONCLUSIVE"
                                                     and r["predicted"] != r["verdict"]],
               "inconclusive_today_predicted_decided": [r["claim"] for r in rows if r["verdict"] == "INCONCLUSIVE"
                                                        and r["predicted"] != "INCONCLUSIVE"],
               "extra_seeds_summed_over_claims": sum(r["extra_seeds"] for r in rows)}
    return {"summary": summary, "claims": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", default=str(ROOT / "docs/results/laptop"))
    ap.add_argument("--json", default=str(ROOT / "bench/seed_needs.json"))
    ap.add_argument("--min-max", type=int, default=None, help="what-if: every claim's max_seeds at least this")
    args = ap.parse_args()

    import fedrepro.papers  # noqa: F401  (registers every paper's claims)
    from fedrepro.papers import PAPERS, paper

    for name in PAPERS:
        paper(name)
    pages = page_claims(Path(args.pages))
    if args.min_max is not None:
        out = uniform_rule(pages, args.min_max)
        Path(args.json).write_text(json.dumps(out, indent=1, default=str) + "\n")
        for r in out["claims"]:
            if r["first_look"] != r["verdict"] or r["predicted"] != r["verdict"]:
                print(f"{r['claim']:46s} {r['verdict']:12s} first look {r['first_look']:12s} → {r['predicted']}")
        print(json.dumps(out["summary"], indent=1))
        return
    rows = []
    for cid, c in pages.items():
        row = {"claim": cid, "paper": c["paper"], "verdict": c["verdict"], "exists_today": cid in CLAIMS,
               "declared_max_seeds": CLAIMS.get(cid).max_seeds if cid in CLAIMS else None}
        if c["verdict"] == "INCONCLUSIVE":
            tests = tests_of(c["evidence"])
            for t in tests:
                test = as_test(t, t["n"], LEVEL)
                t["distance_sds"] = round(test.distance_sds(), 3)
                t["reproduces_page_verdict"] = test.verdict == t["verdict"]
                t["seeds_one_look"] = seeds_to_clear(t, LEVEL)
                t["seeds_at_12_level"] = seeds_to_clear(t, look_level(STAGES[-1]))
            row["tests"] = tests
            row.update(recommend(tests) if tests else {"max_seeds": None, "predicted": "INCONCLUSIVE"})
            row["by_max"] = {str(k): v for k, v in row.get("by_max", {}).items()}
            row["seeds_one_look"] = claim_seeds_one_look(tests) if tests else None
        rows.append(row)
    new = sorted(set(CLAIMS) - set(pages))
    gone = sorted(c for c in pages if c not in CLAIMS)
    inconclusive = [r for r in rows if r["verdict"] == "INCONCLUSIVE"]
    still = [r for r in inconclusive if r["predicted"] == "INCONCLUSIVE"]
    summary = {"claims_on_pages": len(rows), "inconclusive_on_pages": len(inconclusive),
               "predicted_decided": len(inconclusive) - len(still), "predicted_still_inconclusive": len(still),
               "predicted_inconclusive_fraction": round(len(still) / len(rows), 3),
               "claims_today": len(CLAIMS.names()), "new_claims": new, "claims_gone": gone,
               "new_claims_max_seeds": {c: CLAIMS.get(c).max_seeds for c in new},
               # A declared max_seeds that differs from the one recommended here (None: keep 3).
               "declared_differs": [r["claim"] for r in inconclusive
                                    if r["declared_max_seeds"] != (r["max_seeds"] or DEFAULT_MAX_SEEDS)]}
    Path(args.json).write_text(json.dumps({"summary": summary, "claims": rows}, indent=1, default=str) + "\n")
    for r in inconclusive:
        # The undecided test nearest its bound, in per-seed SDs (every test, where each decides at one look
        # but the claim's last look, at its stricter level, does not).
        tests = r.get("tests", [])
        undecided = [t for t in tests if t["verdict"] == "INCONCLUSIVE"] or tests
        d = min((t["distance_sds"] for t in undecided), key=abs, default=math.nan)
        at = f" at {r['decides_at']}" if r.get("decides_at") else ""
        print(f"{r['claim']:46s} nearest {d:+.2f} SD; one look decides at {r['seeds_one_look'] or f'>{FAR}'} seeds; "
              f"max_seeds {r['max_seeds']} → {r['predicted']}{at}")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
