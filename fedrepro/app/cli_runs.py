"""Text for ``fedrepro runs`` and ``fedrepro show``: the run catalog (:mod:`fedrepro.runs.catalog`) as tables.

Accuracies print as percentages with two decimals; the tables and CSV files they come from hold
fractions.
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from ..runs.catalog import STATUSES, StoredRun, display_path
from ..runs.columns import percent

# Widest a text column of the runs table gets before it is cut with "…".
_MAX_WIDTH = {"method": 18, "dataset": 22, "partition": 30}


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _unique_prefixes(hashes: Sequence[str], least: int = 8) -> int:
    """The shortest prefix length (at least ``least``) that keeps every listed hash distinct."""
    n = least
    while n < max((len(h) for h in hashes), default=least) and len({h[:n] for h in hashes}) < len(set(hashes)):
        n += 1
    return n


def _int(v: Any) -> str:
    try:
        return "?" if v is None or (isinstance(v, float) and math.isnan(v)) else str(int(v))
    except (TypeError, ValueError):
        return "?"


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]], right: set[int] = frozenset()) -> str:
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]

    def line(cells: Sequence[str]) -> str:
        cells = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))]
        return "  ".join(cells).rstrip()

    return "\n".join([line(header)] + [line(r) for r in rows])


# The columns a listing shows of every run; runs equal in all of them differ in some config value.
_SHOWN = ("method", "dataset", "partition", "partition_key", "seed", "profile")


def differing_config(table: pd.DataFrame, at_most: int = 4) -> list[str]:
    """The ``cfg.*`` columns (``list_runs(config_columns=True)``) whose values differ between runs
    that the listing's own columns show as equal, so that no two rows look the same: at most
    ``at_most`` of them, the keys that split the most groups first."""
    cfg = [c for c in table.columns if c.startswith("cfg.") and c not in ("cfg.runs_dir", "cfg.progress")]
    shown = [c for c in _SHOWN if c in table.columns]
    if not cfg or len(table) < 2:
        return []
    groups = [g for _, g in table.groupby(shown, dropna=False, sort=False) if len(g) > 1] if shown else [table]
    splits = {c: sum(g[c].astype(str).nunique() > 1 for g in groups) for c in cfg}
    return sorted((c for c in cfg if splits[c]), key=lambda c: (-splits[c], c))[:at_most]


def format_runs(table: pd.DataFrame, runs_dir: str | os.PathLike) -> str:
    """The runs table as text: one line per run, then a count by status."""
    where = display_path(runs_dir)
    if table.empty:
        if not Path(runs_dir).is_dir():
            return f"no runs folder at {where} (--runs-dir or $FEDREPRO_RUNS name another)"
        return f"no stored run matches, in {where}"
    n = _unique_prefixes(list(table["hash"]))
    extra = differing_config(table)
    rows = []
    for r, (_, full) in zip(table.itertuples(index=False), table.iterrows()):
        part = r.partition if not r.partition_key else f"{r.partition} {r.partition_key}"
        rows.append([r.hash[:n], _cut(str(r.method), _MAX_WIDTH["method"]), _cut(str(r.dataset), _MAX_WIDTH["dataset"]),
                     _cut(str(part), _MAX_WIDTH["partition"]), _int(r.seed), str(r.profile), str(r.status),
                     f"{_int(r.rounds_done)}/{_int(r.rounds_total)}", percent(r.best_acc_mean),
                     percent(r.final_acc_mean)] + [_cut(str(full[c]), 16) for c in extra])
    header = ["hash", "method", "dataset", "partition", "seed", "profile", "status", "rounds", "best%", "final%"]
    header += [c[len("cfg."):] for c in extra]
    counts = table["status"].value_counts()
    by_status = ", ".join(f"{counts[s]} {s}" for s in STATUSES if s in counts)
    return (text_table(header, rows, right={4, 7, 8, 9})
            + f"\n{len(table)} run{'s' if len(table) != 1 else ''} ({by_status}) in {where}; "
              "best%/final%: mean client accuracy at the best and the last round")


# --------------------------------------------------------------------------------------------
# fedrepro show

_PERCENT = ("acc_", "f1_", "global_acc", "heldout_acc")
_MAX_ROUND_ROWS = 20


def _cell(col: str, v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if col == "round" or col.startswith("n_"):
        return _int(v)
    if col.startswith(_PERCENT):
        return percent(v)
    if col.startswith("time_"):
        return f"{float(v):.2f}"
    if isinstance(v, float):
        return f"{v:.4f}"
    return str(v)


def _pick_rounds(rounds: pd.DataFrame, best_round: Any, every: bool) -> tuple[pd.DataFrame, bool]:
    if every or len(rounds) <= _MAX_ROUND_ROWS:
        return rounds, False
    idx = sorted(set(int(i) for i in pd.Series(range(len(rounds))).quantile(
        [k / (_MAX_ROUND_ROWS - 2) for k in range(_MAX_ROUND_ROWS - 1)], interpolation="nearest")))
    keep = set(rounds.index[idx]) | set(rounds.index[rounds["round"] == best_round])
    return rounds.loc[sorted(keep)], True


def format_rounds(rounds: pd.DataFrame, best_round: Any = None, every: bool = False) -> str:
    # columns that hold something: not all empty, and no count that is 0 throughout
    cols = [c for c in rounds.columns if rounds[c].notna().any() and c != "time_eval_s"
            and not (c.startswith("n_clients") and (rounds[c].fillna(0) == 0).all())]
    shown, thinned = _pick_rounds(rounds, best_round, every)
    rows = [[_cell(c, v) for c, v in zip(cols, row)] for row in shown[cols].itertuples(index=False)]
    text = text_table(cols, rows, right=set(range(len(cols))))
    if thinned:
        text += f"\n({len(shown)} of {len(rounds)} rounds shown, the best among them; --all-rounds shows every one)"
    return text


def format_clients(clients: pd.DataFrame, every: bool = False) -> str:
    if clients.empty or "round" not in clients:
        return "no per-client rows stored"
    last = clients[clients["round"] == clients["round"].max()]
    if last.empty:  # no row names its round (a file fedrepro did not write)
        return "no per-client rows with a round stored"
    scored = last[pd.to_numeric(last["n_test"], errors="coerce") > 0] if "n_test" in last else last
    # Only the clients with an accuracy: a table whose rows lack one (a file fedrepro did not write)
    # is shown without the summary line's numbers, not as a traceback.
    acc = pd.to_numeric(scored["acc"], errors="coerce").dropna() if "acc" in scored else pd.Series(dtype=float)
    who = (lambda i: _int(scored.loc[i, "client"])) if "client" in scored else (lambda i: "?")
    head = (f"at round {_int(last['round'].iloc[0])}, {len(last)} clients"
            + (f" ({int(last['held_out'].sum())} held out)" if "held_out" in last and last["held_out"].any() else "")
            + (": no client has an accuracy" if acc.empty else
               f": accuracy % mean {percent(acc.mean())}, std {percent(acc.std(ddof=0))}, "
               f"min {percent(acc.min())} (client {who(acc.idxmin())}), "
               f"median {percent(acc.median())}, max {percent(acc.max())} "
               f"(client {who(acc.idxmax())})"))
    cols = [c for c in ("client", "acc", "f1", "loss", "n_test", "held_out") if c in last
            and not (c == "held_out" and not last[c].any())]
    every = every or len(last) <= 5
    key = "client" if every else "acc"
    shown = (last.sort_values(key, key=lambda col: pd.to_numeric(col, errors="coerce")) if key in last else last)
    shown = shown if every else shown.head(5)
    rows = [[_cell("acc_" if c in ("acc", "f1") else c, v) for c, v in zip(cols, row)]
            for row in shown[cols].itertuples(index=False)]
    label = "every client" if every else "the 5 lowest (--clients shows every client)"
    return head + f"\n{label}:\n" + text_table(cols, rows, right=set(range(len(cols))))


def _when(iso: Any) -> str:
    return str(iso).replace("T", " ")[:19] + " UTC" if iso else "-"


def _pct(x: Any) -> str:
    text = percent(x)
    return text if text == "-" else text + "%"


def _flow(v: Any) -> str:
    import yaml

    return yaml.safe_dump(v, default_flow_style=True, width=10**6).strip().removesuffix("...").strip()


def format_config(cfg: dict, width: int = 110) -> list[str]:
    """A config as one wrapped ``key=value`` paragraph per section (scalars first)."""
    import textwrap

    scalars = [f"{k}={_flow(v)}" for k, v in cfg.items() if not isinstance(v, dict)]
    groups = [("", scalars)] + [(f"{k}.", [f"{kk}={_flow(vv)}" for kk, vv in v.items()])
                                for k, v in cfg.items() if isinstance(v, dict)]
    lines = []
    for prefix, items in groups:
        label = f"  {prefix or '(top)':<8}"
        lines += textwrap.wrap("  ".join(items), width=width, initial_indent=label,
                               subsequent_indent=" " * len(label), break_on_hyphens=False) or [label]
    return lines


def format_show(run: StoredRun, all_rounds: bool = False, all_clients: bool = False) -> str:
    r, m, s = run.record, run.meta, run.summary
    part = r["partition"] if not r["partition_key"] else f"{r['partition']} {r['partition_key']}"
    status = r["status"]
    if status == "diverged":
        status += f" at round {s.get('diverged_round')} (the rounds before it are stored; final accuracy is empty)"
    elif status == "interrupted":
        status += " (no summary and no process holds it: `fedrepro run` with this config resumes it)"
    elif status == "running":
        status += " (another process holds its lock)"
    git = m.get("git_commit")
    git_text = f"git {git[:10]}" + (" (uncommitted changes)" if m.get("git_dirty") else "") if git else "git -"
    lines = [
        f"run {r['hash']}  ({display_path(r['path'])})",
        f"  status:    {status}",
        f"  method:    {r['method']}    dataset: {r['dataset']}    partition: {part}    clients: {r['clients']}",
        f"  model:     {r['model']}    seed: {r['seed']}    profile: {r['profile']}",
        f"  rounds:    {_int(r['rounds_done'])}/{_int(r['rounds_total'])}"
        + (" (from its checkpoint)" if run.rounds_from_checkpoint else "")
        + f"    best acc_mean: {_pct(r['best_acc_mean'])}"
        + (f" (round {_int(r['best_round'])})" if _pct(r['best_acc_mean']) != "-" else "")
        + f"    final: {_pct(r['final_acc_mean'])}",
        f"  started:   {_when(m.get('started'))}    finished: {_when(r.get('finished'))}"
        + (f"    train time: {s['time_train_s']:.1f} s" if isinstance(s.get("time_train_s"), (int, float)) else ""),
        f"  versions:  fedrepro {m.get('fedrepro', '?')} · python {m.get('python', '?')} · torch {m.get('torch', '?')}"
        f" · {git_text}",
        f"  machine:   {m.get('device', '?')} · {m.get('cpu', '?')} · {m.get('torch_threads', '?')} thread(s)"
        f" · allocator {m.get('allocator', '?')}",
    ]
    for p in run.problems:
        lines.append(f"  WARNING:   {p}")
    lines += ["", "config (as stored; method.args lists only the arguments set, "
              f"`fedrepro describe {r['method']}` shows the defaults):"]
    lines += format_config(r.get("config") or {})
    lines += ["", "per round (accuracies in %):"]
    lines.append(format_rounds(run.rounds, r.get("best_round"), all_rounds) if not run.rounds.empty
                 else "  no rounds stored yet")
    lines += ["", "per client:", format_clients(run.clients, all_clients)]
    return "\n".join(lines)
