"""PEP-FedPT's tables: the runs that fill them and the quoted numbers they sit beside.

Rows are named settings (:mod:`.variants`), labelled in the ``row`` column under the quoted tables'
row keys. Rows a claim reads run over the claim seeds (3 at laptop and paper); the other rows over
the table seeds (1 at laptop, marked ¹ in the tables; 3 at paper). Scores are the final round's
(PEP-FedPT reports the model after the last round), mean and worst client accuracy.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import pandas as pd

from .. import setup as paper_setup
from ...config import RunConfig
from ...errors import ConfigError
from ...execute.tuning import LrSearch, TuningPending
from ...methods.pep_fedpt import PEPFedPTParams, ccmp_blocks
from ...models.vit import VIT_B16, ViTShape
from ...runs.store import RunResult
from ..tables import Rows, TableDef
from .variants import (BASELINES, CONTROL, PPT_PAPER_RATE, PRIOR_MIX, at_paper_rate, baseline_rows,
                       position_rows, ppt_rows, row, rows)

# The learning rates at the small profiles, chosen on validation data (a fifth of each client's
# training images) of the pathological split at the tuning seed, which no claim reads, with the
# same search for every method: first the head's rate (train.lr) at the setup's prompt rate, then
# the prompts' (train.prompt_lr) at the head rate chosen (Head-tuning has no prompts). One search
# per method, whichever table or variant its row is in. Two rates rather than the paper's one
# because on the stand-in a prompt's gradient is far smaller than the head's (setup.py). Smoke
# searches FedVPT and PEP-FedPT at two rates each, to exercise the mechanism. A row pinned at the
# paper's one rate (variants.PPT_PAPER_RATE) is not searched: it shows the method as the paper ran it.
LR_GRID = {"laptop": (0.003, 0.01, 0.03), "smoke": (0.01, 0.03)}
PROMPT_LR_GRID = {"laptop": (0.1, 1.0, 10.0), "smoke": (1.0, 10.0)}
SMOKE_SEARCHED = ("fedvpt", "pep_fedpt")
NO_PROMPTS = ("head_tuning",)


@dataclass(frozen=True)
class CoordinateSearch:
    """Two :class:`~fedrepro.execute.tuning.LrSearch` in turn on each row: ``first`` from the row's
    config, then ``then`` from the row at ``first``'s choice (so ``then``'s runs are named only once
    ``first``'s are stored: :class:`~fedrepro.execute.tuning.TuningPending` until then)."""

    first: LrSearch
    then: LrSearch

    def searched(self, cfg: RunConfig) -> bool:
        return self.first.searched(cfg) or self.then.searched(cfg)

    @property
    def stages(self) -> tuple[LrSearch, LrSearch]:
        """``first``, then ``then``: each row goes through both in turn."""
        return self.first, self.then

    def search_configs(self, cfg: RunConfig) -> list[RunConfig]:
        out = self.first.search_configs(cfg)
        try:
            mid = self.first.choose(cfg)
        except TuningPending:
            return out
        return out + self.then.search_configs(mid)

    def choose(self, cfg: RunConfig) -> RunConfig:
        return self.then.choose(self.first.choose(cfg))

    def table(self, cfgs: Sequence[RunConfig], label: Callable[[RunConfig], str]) -> pd.DataFrame:
        """Each searched row's validation scores at every rate of both stages, and the rates chosen."""
        first = self.first.table(cfgs, label)
        then = self.then.table([self.first.choose(c) for c in cfgs], label)
        return first.join(then, how="outer") if not first.empty else then


def searches(profile: str) -> bool:
    """Whether the rows' rates are searched at ``profile`` (the small profiles; not the paper's)."""
    return profile in LR_GRID


def lr_search(profile: str) -> CoordinateSearch | None:
    """``train.lr``, then ``train.prompt_lr``, of every row (:data:`LR_GRID`, :data:`PROMPT_LR_GRID`)
    but those pinned at the paper's rate (:func:`~.variants.at_paper_rate`); the paper profile keeps
    the paper's one rate of 0.1 (None)."""
    if profile not in LR_GRID:
        return None
    # At the laptop profile the rows train until flat from 30 rounds: LrSearch searches them at those
    # 30 fixed rounds, so their first 30 rounds are its runs' rounds.
    start = paper_setup("pep_fedpt", profile, "pathological")
    smoke = profile == "smoke"

    def searched(cfg: RunConfig) -> bool:
        return (cfg.method.name in SMOKE_SEARCHED if smoke else True) and not at_paper_rate(cfg)

    def has_prompts(cfg: RunConfig) -> bool:
        return searched(cfg) and cfg.method.name not in NO_PROMPTS

    def method_on(cfg: RunConfig) -> RunConfig:
        return start.replace(**{"method.name": cfg.method.name})

    def method_at_lr(cfg: RunConfig) -> RunConfig:
        return start.replace(**{"method.name": cfg.method.name, "train.lr": cfg.train.lr})

    head = LrSearch(grid=LR_GRID[profile], validation=0.2, metric="final_acc_mean", key="train.lr",
                    applies=searched, on=method_on)
    prompts = LrSearch(grid=PROMPT_LR_GRID[profile], validation=0.2, metric="final_acc_mean", key="train.prompt_lr",
                       applies=has_prompts, on=method_at_lr)
    return CoordinateSearch(head, prompts)


ROW = "row"
# The rows the claims read, over the claim seeds.
PATH_CLAIM_ROWS = ("fedvpt", "pep_fedpt")


def _thin(profile: str, rows: tuple[str, ...], laptop: tuple[str, ...]) -> tuple[str, ...]:
    """At the laptop profile the rows no claim reads are thinned to fit the 15-minute budget (the
    paper profile runs them all)."""
    return tuple(r for r in rows if r in laptop) if profile == "laptop" else rows


def _path_rows(profile: str) -> list[Rows]:
    # Every baseline row is a claim's: PEP-FedPT against each of Table 1's baselines (P-PT at the
    # paper's rate and, where rows are searched, tuned: variants.ppt_rows), and our prior-only control;
    # the prior-only mix (ours) over the table seeds, as context.
    others = tuple(b for b in BASELINES if b not in ("fedvpt", "p_pt"))
    return [Rows(variants=rows(*PATH_CLAIM_ROWS, "pep_fedpt_no_cp", *others, *ppt_rows(searches(profile)), CONTROL)),
            Rows(variants=rows(PRIOR_MIX), seeds="table")]


def _dir_rows(profile: str) -> list[Rows]:
    # PEP-FedPT, FedVPT and the prior-only mix are claims' rows; every other baseline and both
    # prior-only controls sit beside them over the table seeds (P-PT as variants.baseline_rows: tuned
    # where rows are searched; no claim reads P-PT here, so its paper's-rate row is not run at laptop).
    others = (*baseline_rows(tuple(b for b in BASELINES if b != "fedvpt"), searches(profile)), "pep_fedpt_no_cp",
              CONTROL)
    return [Rows(variants=rows(*PATH_CLAIM_ROWS, PRIOR_MIX)), Rows(variants=rows(*others), seeds="table")]


def _tiny_dir_rows(profile: str) -> list[Rows]:
    return [Rows(variants={**rows("fedvpt"), "pep_fedpt": {**row("pep_fedpt"), "method.args": {"n_shared": 5}}}),
            *_dir_rows(profile)[1:]]


def _heldout_rows(profile: str) -> list[Rows]:
    # FedVPT runs the claim seeds too: a global method's own drop is the reference for how much
    # harder the held-out clients are at this scale. P-PT at the paper's rate and, where rows are
    # searched, tuned: the claims read the first, those marked "(ours)" the second.
    others = _thin(profile, tuple(b for b in BASELINES if b not in ("p_pt", "fedvpt")), ("pfedpg",))
    return [Rows(variants=rows(*ppt_rows(searches(profile)), "pep_fedpt", "fedvpt")),
            Rows(variants=rows(*others), seeds="table")]


def _feature_rows(profile: str) -> list[Rows]:
    # Every baseline, PEP-FedPT and both prior-only controls (with a near-uniform prior these show
    # what the prototypes add under a style shift). P-PT as variants.baseline_rows.
    return [Rows(variants=rows(*baseline_rows(BASELINES, searches(profile)), "pep_fedpt", CONTROL, PRIOR_MIX),
                 seeds="table")]


def _n_shared_rows(profile: str) -> list[Rows]:
    n_shared = [1] if profile == "laptop" else [1, 5, 10]  # laptop: the Dirichlet table's run only
    return [Rows({"method.args.n_shared": n_shared}, variants=rows("pep_fedpt"), seeds="table")]



def _prompts_rows(profile: str) -> list[Rows]:
    """Table 11: FedVPT with 1 and |C| shallow prompts (|C| = 100 at paper, 10 at laptop and smoke)."""
    many = 100 if profile == "paper" else 10
    return [Rows(variants={ONE_PROMPT: row("fedvpt"), MANY_PROMPTS: {**row("fedvpt"),
                                                                     "method.args": {"n_prompts": many}},
                           "pep_fedpt": row("pep_fedpt")})]


ONE_PROMPT, MANY_PROMPTS = "fedvpt (1 prompt)", "fedvpt (|C| prompts)"


def _rename_rows(names: dict):
    """A quoted table whose index is a setting (Tables 11, 12) under our row names."""
    return lambda ref: ref.rename(index=names).loc[[names[k] for k in names if k in ref.index]]


# The stand-in's blocks: tiny_vit's default shape, which the small profiles' setups keep (they set no
# depth; tests/papers/pep_fedpt/test_rows.py checks it against the built model).
STAND_IN_DEPTH = ViTShape().depth


def model_depth(cfg: RunConfig) -> int:
    """The number of transformer blocks of ``cfg``'s ViT, read off its config without building it:
    ViT-B/16's 12, or the stand-in's ``depth`` (``tiny_vit``'s default shape unless its args set one)."""
    if cfg.model.name == "vit_b16":
        return VIT_B16.depth
    if cfg.model.name == "tiny_vit":
        return int(cfg.model.args.get("depth", ViTShape().depth))
    raise ConfigError(f"invalid model.name={cfg.model.name!r} for PEP-FedPT's CCMP position; valid: tiny_vit, vit_b16")


def _position_rows(profile: str) -> list[Rows]:
    # Table 12's arms on the profile's ViT (variants.position_arms): the paper's three-block arms on
    # ViT-B/16, one block each on the 6-block stand-in, where the three-block arms would overlap.
    depth = model_depth(paper_setup("pep_fedpt", profile, "pathological"))
    late = [] if profile == "laptop" else [Rows(variants=position_rows(depth, "ccmp late"), seeds="table")]
    return [Rows(variants=position_rows(depth, "ccmp first", "ccmp middle")), *late]


CCMP_BLOCKS = "ccmp_blocks"


def run_ccmp_blocks(cfg: RunConfig) -> tuple[int, ...]:
    """The 0-indexed CCMP blocks a PEP-FedPT run places its CCMP at (its method's own rule)."""
    return tuple(ccmp_blocks(PEPFedPTParams(**cfg.method.args), model_depth(cfg)))


def with_ccmp_blocks(table: pd.DataFrame) -> pd.DataFrame:
    """A results table with :data:`CCMP_BLOCKS`: each run's 0-indexed CCMP blocks ("1" or "4,5,6"),
    read off its stored config, so that the position claim can name and check its arms."""
    return table.assign(**{CCMP_BLOCKS: [",".join(map(str, run_ccmp_blocks(RunResult(p).config)))
                                         for p in table["path"]]})


def _dp_rows(profile: str) -> list[Rows]:
    return [Rows(variants=rows("pep_fedpt", "pep_fedpt_dp"))]


# Table 2's iNaturalist "Worst Acc" (footnote to App. A.3.2): "the minimum accuracy of the final 250
# rounds" (of 500), since the worst client scores 0 under every method. Our reading: the minimum of
# the round's mean client accuracy over the evaluated rounds among the last LATE_FRACTION of the
# run's rounds (250 of the paper profile's 500; the same share of a shorter run). Our engine scores every
# client each evaluated round, not only the round's few participants, so our round-to-round spread,
# and with it the gap between this minimum and the final mean, is likely smaller than the paper's.
LATE_FRACTION = 0.5
LATE_WORST = "final_worst_late"


def late_worst(rounds: pd.DataFrame, fraction: float = LATE_FRACTION) -> float:
    """The minimum of ``acc_mean`` over a run's evaluated rounds among the last ``fraction`` of its
    rounds (NaN for a run with none evaluated)."""
    scored = rounds.dropna(subset=["acc_mean"])
    if scored.empty:
        return float("nan")
    last = scored["round"].max()
    keep = scored["round"] > last - max(1, round(fraction * last))
    return float(scored.loc[keep, "acc_mean"].min())


def with_late_worst(table: pd.DataFrame) -> pd.DataFrame:
    """A results table with :data:`LATE_WORST`, read off each run's stored rounds."""
    return table.assign(**{LATE_WORST: [late_worst(RunResult(p).rounds) for p in table["path"]]})


def _path(c: str) -> bool:
    return c.startswith("C100 Path")


def _dir(c: str) -> bool:
    return c.startswith("C100 Dir")


def _paper_ppt(ref: pd.DataFrame) -> pd.DataFrame:
    """A quoted table with the paper's P-PT beside our P-PT at the paper's rate (the paper's own
    setting), not beside our tuned one."""
    return ref.rename(index={"p_pt": PPT_PAPER_RATE})


def _table(name, title, rows_fn, setup, reference=None, ref_columns=None, **kw) -> TableDef:
    kw.setdefault("reference_view", _paper_ppt)
    return TableDef("pep_fedpt", name, title, rows_fn, index=ROW, setup=setup, variant_col=ROW, metric="final",
                    reference=reference, reference_columns=ref_columns, tune=lr_search, **kw)


TABLES = {
    # Table 1 (and Tables 4, 5, 9's rows on the same runs): pathological and Dir(0.3) label skew.
    "label_pathological": _table("label_pathological", "Label heterogeneity, pathological (Tables 1, 4, 5)",
                                 _path_rows, "pathological", "T1", _path),
    "label_dirichlet": _table("label_dirichlet", "Label heterogeneity, Dir(0.3) (Tables 1, 4, 5)",
                              _dir_rows, "dirichlet", "T1", _dir),
    # Table 1's Tiny-ImageNet pathological columns: the paper profile only (the small profiles keep
    # Fashion-MNIST, so there it is the pathological table's runs again).
    "label_tiny_imagenet": _table("label_tiny_imagenet", "Label heterogeneity, Tiny-ImageNet pathological (Table 1)",
                                  _path_rows, "tiny_imagenet", "T1", lambda c: c.startswith("Tiny Path")),
    # Table 1's Tiny-ImageNet Dir(0.3) columns, likewise paper-only. App. A.3.2 sets n_S = 5 for
    # this split alone: PEP-FedPT's row runs with 5 shared prompts.
    "label_tiny_imagenet_dirichlet": _table("label_tiny_imagenet_dirichlet",
                                            "Label heterogeneity, Tiny-ImageNet Dir(0.3) (Table 1)", _tiny_dir_rows,
                                            "tiny_imagenet_dirichlet", "T1", lambda c: c.startswith("Tiny Dir")),
    # Table 2: feature shift, one domain per client.
    "feature_shift": _table("feature_shift", "Feature heterogeneity (Table 2)", _feature_rows, "feature_shift",
                            "T2", lambda c: c.startswith(("DN Mean", "DN Worst"))),
    # Table 2's iNaturalist columns: one client per user (the paper profile's; the small profiles keep
    # Fashion-MNIST, so there it is the pathological table's runs again). Its rows are the
    # pathological table's, so its runs fill Table 8's and 9's iNaturalist cells too ("Without CP" is
    # pep_fedpt_no_cp, "Only Shared" FedVPT). Mean Acc is "final"; Worst Acc is LATE_WORST.
    "inaturalist": _table("inaturalist", "iNaturalist (Tables 2, 8, 9)", _path_rows, "inaturalist", "T2",
                          lambda c: c.startswith("iNat"), derive=with_late_worst),
    # Table 3: 10% of the clients held out, pathological split.
    "heldout": _table("heldout", "Held-out clients (Table 3)", _heldout_rows, "heldout", "T3",
                      lambda c: c.startswith("C100")),
    # Table 13's DomainNet columns: one client per domain held out (the paper profile's; notebook
    # 03 runs it there only).
    "heldout_feature_shift": _table("heldout_feature_shift", "Held-out clients under feature shift (Table 13)",
                                    _heldout_rows, "heldout_feature_shift", "T13", lambda c: c.startswith("DN")),
    # Table 13's iNaturalist columns: 102 of the 1018 users held out (App. A.4.7; the paper profile's,
    # the heldout table's runs at the small profiles).
    "heldout_inaturalist": _table("heldout_inaturalist", "Held-out clients on iNaturalist (Table 13)",
                                  _heldout_rows, "heldout_inaturalist", "T13", lambda c: c.startswith("iNat")),
    # Table 10: the number of shared prompts n_S, under Dir(0.3).
    "n_shared": _table("n_shared", "Shared prompts n_S (Table 10)", _n_shared_rows, "dirichlet", "T10",
                       columns="method.args.n_shared", label=lambda n: f"n_S={n}",
                       reference_view=lambda ref: ref.loc[["cifar100"]].rename(index={"cifar100": "pep_fedpt"})),
    # Table 11: FedVPT with |C| generic prompts, pathological.
    "fedvpt_prompts": _table("fedvpt_prompts", "FedVPT with |C| prompts (Table 11)", _prompts_rows,
                             "pathological", "T11", reference_view=_rename_rows({"1": ONE_PROMPT,
                                                                                 "100": MANY_PROMPTS})),
    # Table 12: where CCMP goes, pathological.
    "position": _table("position", "CCMP position (Table 12)", _position_rows, "pathological", "T12",
                       reference_view=_rename_rows({"1,2,3": "ccmp first", "5,6,7": "ccmp middle",
                                                    "8,9,10": "ccmp late"}), derive=with_ccmp_blocks),
    # Table 7: Laplace noise on the prototypes, pathological.
    "dp": _table("dp", "Differential privacy on prototypes (Table 7)", _dp_rows, "pathological", "T7",
                 _path),
}


def label_results(profile: str, progress: bool = True, **kw) -> pd.DataFrame:
    """Table 1's two splits in one results table, with a ``split`` column (the label-skew claims
    compare them)."""
    parts = [TABLES[f"label_{s}"].run(profile, progress=progress, **kw).assign(split=s)
             for s in ("pathological", "dirichlet")]
    return pd.concat(parts, ignore_index=True)
