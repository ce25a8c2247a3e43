"""What a claim compares, declared beside its check, so that a test can feed the check the null.

A claim's check reads a results table and measures an effect of one side over another: the method's
runs against a control's (FedOTP's rows against PromptFL's), one column of a run against another
(Match against Origin), or an effect the table already holds (a cosine gap, a correlation). Each
:class:`Claim` (``fedrepro.claims.core``) lists these comparisons in ``arms``; each arm knows its
**null**, the table in which the claimed effect is absent:

- :class:`Rows`: the method's rows replaced by the control's (relabelled as the method's), so that
  every per-seed difference is zero; ``shift`` then moves the copied numbers, for claims that
  hold *at* equality ("not worse", "≈", "costs little") and whose null is a gap past their bound;
  :meth:`Rows.swapped` exchanges the two sides;
- :class:`Columns`: the method's column replaced by the control's, in the same rows (``shift``
  likewise);
- :class:`Replaced`: the effect column set to its no-effect value.

A check fed a null must not PASS (``tests/papers/test_every_claim_can_fail.py``): a claim that
passes on its null cannot fail.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np
import pandas as pd


def _mask(results: pd.DataFrame, where: Mapping[str, object]) -> np.ndarray:
    """Rows matching ``where``; a tuple or list value matches any of its values."""
    mask = np.ones(len(results), dtype=bool)
    for k, v in where.items():
        if k not in results.columns:
            raise KeyError(f"arm column {k!r} absent from the results")
        col = results[k]
        mask &= (col.isin(list(v)) if isinstance(v, (tuple, list)) else col == v).to_numpy()
    return mask


def _shifted(rows: pd.DataFrame, shift: Mapping[str, float]) -> pd.DataFrame:
    return rows.assign(**{c: rows[c] + d for c, d in shift.items()})


@dataclass(frozen=True)
class Rows:
    """The method's runs (``method``: a where-mapping, as :func:`fedrepro.claims.core.select` takes)
    against the control's (``control``). ``columns`` maps a method column to the control column it
    is compared with where they differ (FedAvg's Match against FedPer's Origin); ``shift`` moves
    the null's copied numbers (by column). A method value that is a tuple names several settings
    (every R_f of a sweep), each replaced by the control's rows."""

    method: Mapping[str, object]
    control: Mapping[str, object]
    columns: Mapping[str, str] = field(default_factory=dict)
    shift: Mapping[str, float] = field(default_factory=dict)

    def null(self, results: pd.DataFrame) -> pd.DataFrame:
        control = results[_mask(results, self.control)]
        if control.empty:
            raise KeyError(f"no control rows {dict(self.control)}")
        settings = [{}]
        for k, v in self.method.items():
            settings = [{**s, k: x} for s in settings for x in (v if isinstance(v, (tuple, list)) else [v])]
        copies = []
        for s in settings:
            copy = control.assign(**s)
            for mine, theirs in self.columns.items():
                copy[mine] = control[theirs]
            copies.append(_shifted(copy, self.shift))
        return pd.concat([results[~_mask(results, self.method)], *copies], ignore_index=True)

    def swapped(self, results: pd.DataFrame) -> pd.DataFrame | None:
        """The method's rows and the control's exchanged (each relabelled as the other's); None where
        that is not one exchange (a mapping of columns, several method settings, a shift)."""
        if self.columns or self.shift or any(isinstance(v, (tuple, list)) for v in self.method.values()):
            return None
        m, c = _mask(results, self.method), _mask(results, self.control)
        return pd.concat([results[~(m | c)], results[c].assign(**self.method), results[m].assign(**self.control)],
                         ignore_index=True)


@dataclass(frozen=True)
class Columns:
    """Column ``method`` of the rows ``where`` against column ``control`` of the same rows (Match
    against Origin, the calibrated model against the same round's aggregate)."""

    method: str
    control: str
    where: Mapping[str, object] = field(default_factory=dict)
    shift: float = 0.0

    def null(self, results: pd.DataFrame) -> pd.DataFrame:
        out = results.copy()
        m = _mask(out, self.where)
        out.loc[m, self.method] = out.loc[m, self.control] + self.shift
        return out


@dataclass(frozen=True)
class Replaced:
    """An effect the table holds per run (a gap, a correlation), set to ``none(results)``: what the
    table would read with no effect (``what`` says it, for the test's message)."""

    column: str
    none: Callable[[pd.DataFrame], object]
    what: str

    def null(self, results: pd.DataFrame) -> pd.DataFrame:
        return results.assign(**{self.column: self.none(results)})


Arm = Rows | Columns | Replaced
