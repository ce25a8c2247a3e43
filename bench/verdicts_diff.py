"""Each claim's verdict and effect in two sets of recorded claims, side by side: before and after a
change to how runs train (a speed lever), for docs/speed.md.

    .venv/bin/python bench/verdicts_diff.py BEFORE AFTER [--only fedpft_] [--out F.json]

BEFORE and AFTER are folders of claim records (``<pages>/claims/`` as committed under
docs/results/<profile>/claims, or ``<output root>/output/<profile>/claims`` after a pass). Prints
a Markdown table of every claim in both whose notebook name starts with ``--only``, with verdicts,
effects and intervals, and the count of verdicts that changed. Evidence, not a claim."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def records(folder: Path, only: str) -> dict[str, dict]:
    out = {}
    for path in sorted(Path(folder).glob(f"{only}*.json")):
        rec = json.loads(path.read_text())
        for c in rec.get("claims", []):
            out[c["claim_id"]] = {"notebook": path.stem, "verdict": c.get("verdict"), "effect": c.get("effect", ""),
                                  "interval": c.get("interval", ""), "commit": rec.get("commit")}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--only", default="", help="notebook record names starting with this, e.g. fedpft_")
    ap.add_argument("--out", type=Path, default=None, help="also write the rows as JSON")
    args = ap.parse_args(argv)
    before, after = records(args.before, args.only), records(args.after, args.only)
    rows = [{"claim": cid, "before": before[cid]["verdict"], "after": after[cid]["verdict"],
             "effect before": before[cid]["effect"], "effect after": after[cid]["effect"],
             "changed": before[cid]["verdict"] != after[cid]["verdict"]}
            for cid in sorted(set(before) & set(after))]
    print("| claim | before | after | effect after |\n|---|---|---|---|")
    for r in rows:
        mark = " **(changed)**" if r["changed"] else ""
        print(f"| `{r['claim']}` | {r['before']} | {r['after']}{mark} | {r['effect after']} |")
    only_one = sorted(set(before) ^ set(after))
    print(f"\n{sum(r['changed'] for r in rows)} of {len(rows)} verdicts changed"
          + (f"; in one set only: {', '.join(only_one)}" if only_one else ""))
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
