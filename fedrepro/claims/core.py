"""Claims: a statement from a paper (with its table or section) and a check of it on our results.

A check takes a tidy results table (one row per run: the grid columns, ``seed``, ``best``,
``final``...) and returns pass/fail with the evidence: the numbers it compared and the seeds.
Failing claims are reported as failing; thresholds live in the claim, in plain sight.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

import numpy as np
import pandas as pd

from ..registry import Registry


@dataclass(frozen=True)
class ClaimResult:
    claim_id: str
    paper: str
    source: str
    statement: str
    passed: bool | None  # None: the results needed to check it are missing
    evidence: str


@dataclass(frozen=True)
class Claim:
    id: str
    paper: str
    source: str  # e.g. "Table 2", "§4.3"
    statement: str
    check: Callable[[pd.DataFrame], tuple[bool, str]]

    def evaluate(self, results: pd.DataFrame) -> ClaimResult:
        try:
            passed, evidence = self.check(results)
        except MissingResults as e:
            passed, evidence = None, f"not checked: {e}"
        return ClaimResult(self.id, self.paper, self.source, self.statement, passed, evidence)


class MissingResults(LookupError):
    """The table lacks the rows a claim needs (e.g. a notebook ran a subset)."""


CLAIMS: Registry = Registry("claim")


def register_claim(claim: Claim) -> Claim:
    CLAIMS.register(claim.id)(claim)
    return claim


def registered() -> Registry:
    """The claim registry with every paper's claims in it (each paper package registers its own)."""
    from ..papers import load_all

    load_all()
    return CLAIMS


def claims_for(paper: str) -> list[Claim]:
    reg = registered()
    return [reg.get(n) for n in reg.names() if reg.get(n).paper == paper]


def evaluate_claims(results: pd.DataFrame, paper: str | None = None,
                    ids: Iterable[str] | None = None) -> pd.DataFrame:
    """Evaluate claims (all of a paper's, or the given ids) into a display table."""
    chosen = [registered().get(i) for i in ids] if ids is not None else claims_for(paper or "")
    rows = [c.evaluate(results).__dict__ for c in chosen]
    out = pd.DataFrame(rows, columns=["claim_id", "paper", "source", "statement", "passed", "evidence"])
    out["verdict"] = out["passed"].map({True: "PASS", False: "FAIL", None: "NOT RUN"})
    return out


# ---------------------------------------------------------------------------------------------
# Building blocks for checks

def select(results: pd.DataFrame, where: Mapping[str, object], metric: str) -> pd.Series:
    """Per-seed values of ``metric`` for rows matching ``where``, indexed by seed."""
    mask = np.ones(len(results), dtype=bool)
    for k, v in where.items():
        if k not in results.columns:
            raise MissingResults(f"column {k!r} absent")
        mask &= (results[k] == v).to_numpy()
    rows = results[mask]
    if rows.empty:
        raise MissingResults(f"no runs with {dict(where)}")
    return rows.set_index("seed")[metric].sort_index()


def paired(results: pd.DataFrame, a: Mapping[str, object], b: Mapping[str, object], metric: str,
           metric_b: str | None = None) -> tuple[list, pd.Series, pd.Series]:
    """``(seeds, A, B)``: the per-seed ``metric`` of rows ``a`` and ``metric_b`` (default the same)
    of rows ``b``, restricted to the seeds both sides have, in seed order."""
    va, vb = select(results, a, metric), select(results, b, metric if metric_b is None else metric_b)
    seeds = sorted(set(va.index) & set(vb.index))
    if not seeds:
        raise MissingResults("no seed run for both sides")
    return seeds, va.loc[seeds], vb.loc[seeds]


def paired_gaps(first: pd.DataFrame, second: pd.DataFrame, a: Mapping[str, object], b: Mapping[str, object],
                metric: str) -> tuple[list, np.ndarray, np.ndarray]:
    """``(seeds, gap_first, gap_second)``: the per-seed gap A − B (``metric``) in two settings (e.g. two
    splits or two α), restricted to the seeds both settings have, in seed order. For claims that a
    gap is larger in one setting than in another."""
    s1, a1, b1 = paired(first, a, b, metric)
    s2, a2, b2 = paired(second, a, b, metric)
    seeds = sorted(set(s1) & set(s2))
    if not seeds:
        raise MissingResults("no seed run in both settings")
    g1 = (a1 - b1).loc[seeds].to_numpy()
    g2 = (a2 - b2).loc[seeds].to_numpy()
    return seeds, g1, g2


def gap_larger_in(first: pd.DataFrame, second: pd.DataFrame, a: Mapping[str, object], b: Mapping[str, object],
                  metric: str, names: tuple[str, str], what: str) -> tuple[bool, str]:
    """Pass when the gap A − B is larger in ``first`` than in ``second`` on average and at every seed
    both have (e.g. "the gain shrinks as the split gets milder"); ``names`` label the two settings."""
    seeds, g1, g2 = paired_gaps(first, second, a, b, metric)
    ok = g1.mean() > g2.mean() and bool((g1 > g2).all())
    per1, per2 = (", ".join(f"{100 * v:+.1f}" for v in g) for g in (g1, g2))
    return ok, (f"{what}: {names[0]} {100 * g1.mean():+.2f} pts (per seed {per1}), {names[1]} "
                f"{100 * g2.mean():+.2f} pts (per seed {per2}); required larger at {names[0]} at every seed {seeds}")


def compare(results: pd.DataFrame, a: Mapping[str, object], b: Mapping[str, object], *, metric: str = "best",
            margin: float = 0.0, label_a: str = "A", label_b: str = "B") -> tuple[bool, str]:
    """Pass when mean(A) − mean(B) > ``margin`` over the seeds both have (paired by seed)."""
    seeds, va, vb = paired(results, a, b, metric)
    da, db = va.to_numpy(), vb.to_numpy()
    gap = float(da.mean() - db.mean())
    wins = int((da > db).sum())
    evidence = (f"{label_a} {100 * da.mean():.2f} vs {label_b} {100 * db.mean():.2f} ({metric} acc %, mean over "
                f"seeds {seeds}); gap {100 * gap:+.2f} pts, required > {100 * margin:+.2f}; {label_a} wins "
                f"{wins}/{len(seeds)} seeds")
    return gap > margin, evidence


def compare_each(results: pd.DataFrame, a: Mapping[str, object], b: Mapping[str, object], over: str, *,
                 metric: str = "best", margin: float = 0.0, label_a: str = "A", label_b: str = "B"
                 ) -> tuple[bool, str]:
    """:func:`compare` at every value of column ``over`` present for both sides; passes if all pass."""
    if over not in results.columns:
        raise MissingResults(f"column {over!r} absent")
    verdicts, lines = [], []
    for value in sorted(results[over].dropna().unique()):
        try:
            ok, ev = compare(results, {**a, over: value}, {**b, over: value}, metric=metric, margin=margin,
                             label_a=label_a, label_b=label_b)
        except MissingResults:
            continue
        verdicts.append(ok)
        lines.append(f"[{over}={value}: {'pass' if ok else 'FAIL'}] {ev}")
    if not verdicts:
        raise MissingResults(f"no value of {over} has runs for both sides")
    return all(verdicts), "; ".join(lines)


def within(results: pd.DataFrame, where: Mapping[str, object], col_a: str, col_b: str, tol: float,
           over: str | None = None) -> tuple[bool, str]:
    """Pass when |mean(col_a) − mean(col_b)| ≤ ``tol`` over seeds (at every value of ``over``)."""
    groups = [None] if over is None else sorted(results[over].dropna().unique()) if over in results else []
    if not groups:
        raise MissingResults(f"column {over!r} absent")
    verdicts, lines = [], []
    for value in groups:
        cond = dict(where) if value is None else {**where, over: value}
        try:
            va, vb = select(results, cond, col_a), select(results, cond, col_b)
        except MissingResults:
            continue
        gap = float(va.mean() - vb.mean())
        ok = abs(gap) <= tol
        verdicts.append(ok)
        prefix = "" if value is None else f"[{over}={value}] "
        lines.append(f"{prefix}{col_a} {100 * va.mean():.2f} vs {col_b} {100 * vb.mean():.2f} (seeds "
                     f"{sorted(va.index)}); |gap| {100 * abs(gap):.2f} pts, required ≤ {100 * tol:.2f}")
    if not verdicts:
        raise MissingResults(f"no runs with {dict(where)}")
    return all(verdicts), "; ".join(lines)


def claims_dir(profile: str):
    """``output/<profile>/claims/``: where notebooks leave their claims for the summary notebook."""
    from ..figures import repo_root

    d = repo_root() / "output" / profile / "claims"
    d.mkdir(parents=True, exist_ok=True)
    return d


def save_claims(table: pd.DataFrame, notebook: str, profile: str):
    """Record a notebook's evaluated claims (JSON) so that the summary notebook can collect them."""
    from ..store import atomic_write_json

    path = claims_dir(profile) / f"{notebook}.json"
    rows = table.drop(columns=["passed"]).to_dict(orient="records")
    atomic_write_json(path, {"notebook": notebook, "profile": profile, "claims": rows})
    return path


def collect_claims(profile: str) -> pd.DataFrame:
    """Every claim of every paper, with the verdict recorded by the notebook that checked it.

    Registered claims that no notebook has checked yet at this profile appear as NOT RUN.
    """
    import json

    registered()
    checked = {}
    for f in sorted(claims_dir(profile).glob("*.json")):
        record = json.loads(f.read_text())
        for row in record["claims"]:
            checked[row["claim_id"]] = {**row, "notebook": record["notebook"]}
    rows = []
    for name in CLAIMS.names():
        c = CLAIMS.get(name)
        rows.append(checked.get(name, {"claim_id": c.id, "paper": c.paper, "source": c.source,
                                       "statement": c.statement, "evidence": "no notebook has checked it yet",
                                       "verdict": "NOT RUN", "notebook": None}))
    cols = ["paper", "claim_id", "source", "statement", "verdict", "evidence", "notebook"]
    return pd.DataFrame(rows, columns=cols)


def claims_table_style(table: pd.DataFrame):
    """A pandas Styler that colours verdicts, for notebooks."""
    colours = {"PASS": "background-color: #d4f4dd", "FAIL": "background-color: #f8d7da",
               "NOT RUN": "background-color: #eeeeee"}
    cols = ["claim_id", "source", "statement", "verdict", "evidence"]
    return table[cols].style.map(lambda v: colours.get(v, ""), subset=["verdict"]).hide(axis="index")
