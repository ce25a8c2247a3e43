"""``fedrepro reproduce --profile paper --rehearse``: every notebook at the paper profile, on the
papers' full-size models, with the budgets cut; and what it costs to run them for real.

**The rehearsal.** :func:`rehearsal_env` sets, for the pass and every process it starts:

- ``$FEDREPRO_REHEARSE``: every paper-profile config is a rehearsal
  (:func:`fedrepro.config.rehearse_dict`: two rounds, one local step per client, at most
  ``REHEARSAL_CLIENTS`` clients a round, each client's training split cut to
  ``REHEARSAL_TRAIN_BATCHES`` (two) mini-batches, a few test images per client, one seed, and one
  rate for each learning-rate search (:meth:`fedrepro.execute.tuning.LrSearch.trained_rates`); stored
  under hashes of their own, and its claims' verdicts are REHEARSAL, never PASS or FAIL);
- ``$FEDREPRO_DATA`` = :data:`REHEARSAL_ROOT`: seeded synthetic images of each real dataset's
  shape (:mod:`fedrepro.data.root`);
- the weights settings of the full-size backbones, pointed at random weights in their official
  layouts (:func:`fedrepro.pretrain.rehearsal_weights.write_rehearsal_weights`), so the loaders
  users take are the ones that run;
- an output root of its own (``rehearsal/`` under the output root), so no rehearsal run, claim or
  executed notebook sits beside the paper profile's.

**Representatives** (:mod:`fedrepro.runs.represent`, issue 57). Rehearsal configs that differ
only in their seeds, in the value of a float field (kept as zero or not zero) other than
``train.participation``, or in the paper's schedule they stand for, run the same code on tensors
of the same shapes; integers, booleans, strings and ``None`` stay in their path key. Of each key's
runs one trains, the first by hash in ``fedrepro reproduce``'s pool; the others wait for it and are
stored as run folders of their own (own config, hash, seed and partition), copied from it. On the
plan alone, the 802 planned runs train 522 (280 copies), and with the 143 planned after the
learning-rate searches 617 of 945: ViT-B/16 94 of 94, CLIP RN50 88 of 94, CLIP ViT-B/16 41 of 121,
ResNet-10 99 of 231, ResNet-18 152 of 177, pFedCSPC's CNN 85 of 95, FedPFT's ResNet-8 58 of 133
(docs/paper-profile.md). :func:`step_times` times the runs that trained, not their copies.

**The cost table.** A rehearsal run trains one mini-batch per sampled client in each round, so its
second round's training time over its sampled clients is the time of one client step on its model
(the first round pays the warm-up; for a CLIP method, a client sampled for the first time also
encodes its (cut) split; a PEP-FedPT step also holds CCMP's prototype pass over the client's cut
split, so its step is an upper bound). :func:`step_times` takes the median over
the rehearsal's runs of each model; :func:`predicted_seconds` multiplies it by the client steps of the paper run a
rehearsal stands for (rounds × clients a round × local epochs × mini-batches per client). Summed per
notebook, that is :func:`cost_table`, which the pass writes to :func:`cost_path` under the output
root it was started with, for the paper profile's results pages.
"""
from __future__ import annotations

import contextlib
import math
import os
import statistics
from pathlib import Path
from typing import Iterable, Iterator, Mapping

from ..config import ENV_REHEARSE, RunConfig
from ..errors import ConfigError
from ..env.jsonfiles import NUMBER, ListOf, MapOf, MayLack, Obj, read_json_file
from ..env.settings import (ENV_DATA_ROOT, ENV_FIGURES, ENV_OUTPUT, ENV_REHEARSAL_BUDGET, ENV_RUNS,
                            ENV_VIT_B16_WEIGHTS, REHEARSAL_ROOT, configure, output_path, output_root)
from ..env.host import cpu_model, environ_set, repo_root
from ..papers.plan import plan
from ..pretrain.rehearsal_weights import write_rehearsal_weights

# The output root's folder the rehearsal writes under (its runs, notebooks, claims, weights).
REHEARSAL_FOLDER = "rehearsal"
# MiB of synthetic images per dataset in a rehearsal (fedrepro.data.rehearsal.ENV_BUDGET): enough
# that every paper-profile partition finds images of each class for each client.
REHEARSAL_DATA_MIB = 2048
# The notebooks the CI subset rehearses (tests/test_rehearsal.py): a cheap notebook of each paper
# whose rehearsal fits a CI run on 2 cores (these two: the test took 2 min 22 s under a training pass's
# load, 3.5-4 min under a heavier one, issue 57). FedOTP and PEP-FedPT have none: one run of their
# cheapest notebooks takes longer than CI's 5 minutes on one shared core (docs/paper-profile.md,
# "Where a prompt paper's rehearsal run spends its time"): FedOTP's 08_official_code (10 CLIP RN50
# runs) about 53 min a run, 97% of it CoOp's text encoder over Caltech101's 100 classes; PEP-FedPT's
# 06_privacy (2 ViT-B/16 runs at 224 px) about 27 min a run, the ViT's own compute.
CI_SUBSET = ("fedpft/15_time", "pfedcspc/08_gradcam")
# How a config names its full-size model in the cost table.
FULL_SIZE = {("vit_b16", None): "ViT-B/16", ("clip", "ViT-B-16"): "CLIP ViT-B/16", ("clip", "RN50"): "CLIP RN50",
             ("resnet10", None): "ResNet-10", ("resnet18", None): "ResNet-18"}
# The training-split sizes of the datasets whose paper setups split the whole of it among the
# clients (no train_per_client, no shots): a client's share is the size over the clients.
TRAIN_SIZES = {"cifar10": 50_000, "cifar100": 50_000, "tiny_imagenet": 100_000}


# The image side of the datasets whose loaders take no image_size: a ViT's cost grows with its tokens.
NATIVE_SIZE = {"cifar10": 32, "cifar100": 32, "tiny_imagenet": 64}


def model_label(cfg: RunConfig) -> str:
    """The cost table's name of ``cfg``'s model (``CLIP RN50``, ``ResNet-10``...), else its registry
    name; ViT-B/16 with the side of the images it reads (CLIP resizes every image to 224 itself)."""
    arch = cfg.model.args.get("arch") if cfg.model.name == "clip" else None
    label = FULL_SIZE.get((cfg.model.name, arch), cfg.model.name if arch is None else f"{cfg.model.name} {arch}")
    if cfg.model.name == "vit_b16":
        size = cfg.data.dataset_args.get("image_size") or NATIVE_SIZE.get(cfg.data.dataset)
        label += f" at {size} px" if size else ""
    return label


def weights_env(folder: str) -> dict[str, str]:
    """Write the random full-size weights under ``folder`` (once) and return the settings that point
    the user-facing weights paths at them. Run in a process of its own by :func:`rehearsal_env`."""
    # clip_model loads torch, which the scheduling process of fedrepro reproduce never imports itself.
    from ..models.clip_model import ENV_CLIP_WEIGHTS

    paths = write_rehearsal_weights(folder)
    return {ENV_VIT_B16_WEIGHTS: str(paths["vit_b16"]), ENV_CLIP_WEIGHTS: str(paths["clip"])}


@contextlib.contextmanager
def rehearsal_env(data_root: str | None = None) -> Iterator[Path]:
    """The rehearsal's settings (module doc) while open; yields the output root it writes under.
    ``data_root``: where the data comes from instead of :data:`REHEARSAL_ROOT` (a test's own
    images of the right shapes)."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    root = output_root() / REHEARSAL_FOLDER
    with ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as writer:
        weights = writer.submit(weights_env, str(root / "weights")).result()
    before = configure().output_root
    # The paper profile splits whole datasets among up to a few hundred clients, so each class needs
    # more stand-in images than the data mode's small default budget serves (docs/data.md).
    env = {ENV_REHEARSE: "1", ENV_DATA_ROOT: data_root or REHEARSAL_ROOT, ENV_OUTPUT: str(root),
           ENV_RUNS: None, ENV_FIGURES: None,
           ENV_REHEARSAL_BUDGET: os.environ.get(ENV_REHEARSAL_BUDGET, str(REHEARSAL_DATA_MIB)), **weights}
    with environ_set(env):
        configure(output_root=root)
        try:
            yield root
        finally:
            configure(output_root=before)


def step_seconds(cfg: RunConfig, path: Path) -> float | None:
    """One client step of a stored rehearsal run: its last round's training time over the clients it
    sampled (one mini-batch each); None for a run of one round (its only round pays the warm-up) or
    none stored."""
    from ..runs.store import read_jsonl

    file = path / "rounds.jsonl"
    if not file.is_file():
        return None
    rows = read_jsonl(file)
    if len(rows) < 2 or not rows[-1].get("n_sampled"):
        return None
    return float(rows[-1]["time_train_s"]) / int(rows[-1]["n_sampled"])


def step_times(runs: Iterable[RunConfig]) -> dict[str, dict]:
    """The median time of one client step per model over the stored rehearsal runs among ``runs``
    that trained (a copy holds its representative's times: :mod:`fedrepro.runs.represent`):
    ``{model label: {"step_s": s, "runs": n}}``."""
    from ..runs.represent import represented_by
    from ..runs.store import RunStore

    found: dict[str, list[float]] = {}
    for cfg in runs:
        if not cfg.rehearsal:
            continue
        path = RunStore(cfg.runs_dir).path(cfg)
        s = None if represented_by(path) else step_seconds(cfg, path)
        if s is not None:
            found.setdefault(model_label(cfg), []).append(s)
    return {label: {"step_s": statistics.median(v), "runs": len(v)} for label, v in sorted(found.items())}


def train_per_client(cfg: RunConfig) -> int | None:
    """A client's training images in the paper run ``cfg`` stands for: ``train_per_client``, else
    shots × classes per client (few-shot splits), else the real dataset's training images (for
    ``cfg``'s domains and classes, :func:`fedrepro.data.rehearsal_shape`) over the clients; None
    where none of these is known."""
    # A rehearsal's own split is cut (fedrepro.config.rehearse_dict): the paper's size is in its record.
    paper = cfg.rehearsal.get("paper", {})
    args = {**cfg.data.partition_args, **({"train_per_client": paper["train_per_client"]}
                                          if "train_per_client" in paper else {})}
    if args.get("train_per_client"):
        return int(args["train_per_client"])
    if args.get("shots") and args.get("classes_per_client"):
        return int(args["shots"]) * int(args["classes_per_client"])
    size = TRAIN_SIZES.get(cfg.data.dataset)
    if size is None:
        from ..data import rehearsal_shape  # defers torch, which the scheduling process never loads

        try:
            size = rehearsal_shape(cfg.data.dataset, **cfg.data.dataset_args).full_train
        except ConfigError:  # a dataset the rehearsal data mode does not serve
            return None
    return size // cfg.data.num_clients or None


def client_steps(cfg: RunConfig) -> int | None:
    """The client steps of the paper run the rehearsal ``cfg`` stands for (its ``rehearsal["paper"]``
    schedule; ``cfg``'s own for a real run): rounds × clients a round (as the engine samples them) ×
    local epochs × mini-batches per client; None where a client's split size is not known."""
    n = train_per_client(cfg)
    if n is None:
        return None
    paper = {**{"rounds": cfg.train.rounds, "local_epochs": cfg.train.local_epochs,
                "participation": cfg.train.participation}, **cfg.rehearsal.get("paper", {})}
    from ..fl.engine import clients_per_round  # defers torch, which the scheduling process never loads

    per_round = clients_per_round(cfg.data.num_clients - cfg.data.holdout_clients, paper["participation"])
    return int(paper["rounds"]) * per_round * int(paper["local_epochs"]) * math.ceil(n / cfg.train.batch_size)


def predicted_seconds(cfg: RunConfig, steps: Mapping[str, Mapping]) -> float | None:
    """The training time of the paper run ``cfg`` stands for at ``steps``' time per client step of
    its model; None when its model has no measured step or its client steps are not known."""
    step = steps.get(model_label(cfg))
    n = client_steps(cfg)
    return None if step is None or n is None else n * float(step["step_s"])


def paper_profile_runs(notebooks: Iterable[Path], nb_root: Path) -> tuple[dict[str, list[str]], dict[str, RunConfig]]:
    """What the paper profile trains for each of ``notebooks``, as :func:`cost_table` reads it
    (notebook -> run hashes, hash -> config), made as the paper profile makes it even while a
    rehearsal is set: every seed of each row (a rehearsal trains one), the paper's budgets, and for a
    table that waits for a learning-rate search, the search's runs and the rows it tunes at their
    setup's rates (one run each once tuned). A sequential claim's later seed stages are not in it."""
    readers: dict[str, list[str]] = {}
    runs: dict[str, RunConfig] = {}
    with environ_set({ENV_REHEARSE: None}):
        for path in notebooks:
            one = plan([path], nb_root, "paper")
            rel = str(path.relative_to(nb_root))
            runs.update(one.runs)
            runs.update(one.after_searches)
            readers[rel] = [*one.readers[rel], *one.after_searches]
    return readers, runs


def cost_table(readers: Mapping[str, list[str]], runs: Mapping[str, RunConfig], steps: Mapping[str, Mapping],
               gpu: Mapping | None = None) -> list:
    """Per notebook (``readers``: notebook -> the hashes of its runs, as the plan has them): its
    runs, their client steps at the paper's schedule, the models, and the predicted hours on this
    CPU (``cpu_hours``, with ``unknown`` the runs whose steps or model time are not known) and, where
    ``gpu`` (:func:`gpu_section`) holds step times measured on a GPU, on that GPU (``gpu_hours``,
    ``gpu_unknown``)."""
    rows = []
    gpu_steps = (gpu or {}).get("step_times") or {}
    for notebook, hashes in readers.items():
        cfgs = [runs[h] for h in dict.fromkeys(hashes) if h in runs]
        if not cfgs:
            continue
        row = {"notebook": notebook, "runs": len(cfgs), "client_steps": sum(client_steps(c) or 0 for c in cfgs),
               "models": sorted({model_label(c) for c in cfgs})}
        for key, unknown, times in (("cpu_hours", "unknown", steps), ("gpu_hours", "gpu_unknown", gpu_steps)):
            seconds = [predicted_seconds(c, times) for c in cfgs]
            known = [s for s in seconds if s is not None]
            row[key] = round(sum(known) / 3600, 2) if known else None
            row[unknown] = len(seconds) - len(known)
        rows.append(row)
    return rows


def gpu_section(cost: Mapping | None) -> dict | None:
    """The GPU step times a cost file holds (``cost``, as :func:`read_cost` read it:
    ``{"device": card, "step_times": ...}``), so that a rehearsal on a CPU keeps what a GPU measured;
    None where it holds none, or where there is no cost file."""
    gpu = (cost or {}).get("gpu")
    return gpu if isinstance(gpu, dict) and isinstance(gpu.get("step_times"), dict) else None


def cost_path(root: Path | None = None) -> Path:
    """Where a rehearsal leaves its cost table: beside the paper profile's executed notebooks under
    the output root it was started with (``root``; default the output root now)."""
    return output_path("notebooks", "paper", root) / "rehearsal_cost.json"


def write_cost(path: Path, steps: Mapping[str, Mapping], table: list, report: Mapping,
               gpu: Mapping | None = None) -> None:
    """The cost file: the CPU's step times, the GPU's (``gpu``, :func:`gpu_section`; None: not
    measured) and each notebook's predicted hours on both (:func:`cost_table`)."""
    from ..runs.store import atomic_write_json

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, {"cpu": report.get("cpu") or cpu_model(), "cores": report.get("cores"),
                             "wall_s": report.get("wall_s"), "commit": report.get("commit"),
                             "source": report.get("source"), "gpu": dict(gpu) if gpu else None,
                             "step_times": dict(steps), "notebooks": table})


# Every field the pages read (cost_lines), so that a damaged one is named here and not met as a TypeError there.
STEP_TIMES = MapOf(Obj({"step_s": NUMBER, "runs": MayLack(int)}))
COST_FIELDS = {"cpu": str, "step_times": STEP_TIMES, "notebooks": list, "source": MayLack(str), "cores": MayLack(int),
               "gpu": MayLack(Obj({"device": MayLack(str), "step_times": MayLack(STEP_TIMES)}))}
COST_ROW_FIELDS = {"notebook": str, "runs": NUMBER, "client_steps": MayLack(int), "models": MayLack(ListOf(str)),
                   "cpu_hours": MayLack(NUMBER), "gpu_hours": MayLack(NUMBER), "unknown": MayLack(int),
                   "gpu_unknown": MayLack(int)}


def read_cost(path: Path) -> dict | None:
    """The cost file at ``path``, checked (:data:`COST_FIELDS`); None where there is none."""
    if not path.is_file():
        return None
    return read_json_file(path, "rehearsal cost file", "run `fedrepro reproduce --profile paper --rehearse` again",
                          COST_FIELDS, ("notebooks", COST_ROW_FIELDS))


def load_cost(root: Path | None = None) -> dict | None:
    """The last rehearsal's cost table (:func:`cost_path`); None when no rehearsal has run."""
    return read_cost(cost_path(root))


# The cost table committed with the code (bench/rehearsal_steps.py --cpu-json --gpu-json --out): the
# paper profile's plan costed at step times measured on a quiet CPU and on a GPU, so that every
# profile's results pages can say what a notebook costs at paper scale before anyone rehearses.
COMMITTED_COST = Path("bench") / "paper_cost.json"


def committed_cost() -> dict | None:
    """:data:`COMMITTED_COST` in the repository, checked; None where the package runs without it."""
    return read_cost(repo_root() / COMMITTED_COST)


GPU_STEP_FIELDS = {"device": str, "step_times": STEP_TIMES}


def read_gpu_steps(path: Path) -> dict:
    """Step times a GPU measured (a ``bench/rehearsal_steps.py --json`` written on a GPU, e.g.
    ``bench/gpu_h100.json``), as a cost file's GPU section: ``{"device", "step_times"}``."""
    given = read_json_file(path, "GPU step times", "give a --json that bench/rehearsal_steps.py wrote on a GPU",
                           GPU_STEP_FIELDS)
    return {"device": given["device"], "step_times": given["step_times"]}


def cost_lines(cost: Mapping | None, keep) -> list[str]:
    """The results page's section: each notebook's predicted time at the paper profile (those whose
    path ``keep`` accepts), from the rehearsal's time per client step."""
    lines = ["## Cost at paper scale", ""]
    if cost is None:
        return [*lines, "No rehearsal has run (`fedrepro reproduce --profile paper --rehearse`), so no cost is "
                "predicted.", ""]
    rows = [r for r in cost["notebooks"] if keep(r["notebook"])]
    steps = ", ".join(f"{m} {v['step_s']:.2f} s ({v['runs']} runs)" for m, v in cost["step_times"].items())
    gpu = cost.get("gpu") if isinstance(cost.get("gpu"), dict) else None
    gpu_steps = ", ".join(f"{m} {v['step_s']:.3f} s" for m, v in (gpu or {}).get("step_times", {}).items())
    card = (gpu or {}).get("device", "a GPU")
    lines += [f"Predicted training time of each notebook at the paper profile: its runs' client steps at the paper's "
              f"schedule (rounds × clients a round × local epochs × mini-batches) times the time of one client step "
              f"on its model, measured by {cost.get('source') or 'the rehearsal'} on {cost['cpu']} "
              f"({cost.get('cores')} cores; where other jobs shared them, the times are upper bounds): "
              f"{steps or 'none measured'}. "
              + ("A CLIP step was timed on a client's first update, which also encodes the client's training split "
                 "through the frozen image encoder once (`fedrepro.models.clip_cache`), so the CLIP rows are upper "
                 "bounds. " if any(m.startswith("CLIP") for m in cost["step_times"]) else "")
              + (f"GPU: one run at a time on {card}, at the steps measured there ({gpu_steps})." if gpu
                 else "GPU: not measured."), "",
              f"| notebook | runs | client steps | models | CPU-hours on this CPU | GPU-hours on {card} |",
              "|---|---|---|---|---|---|"]

    def hours(r: Mapping, key: str, unknown: str) -> str:
        text = "not measured" if r.get(key) is None else f"{r[key]:,.1f}"
        return text + (f" ({r[unknown]} runs not costed)" if r.get(unknown) else "")

    for r in rows:
        lines.append(f"| `{r['notebook']}` | {r['runs']} | {r.get('client_steps', 0):,} | "
                     f"{', '.join(r.get('models', []))} | {hours(r, 'cpu_hours', 'unknown')} | "
                     f"{hours(r, 'gpu_hours', 'gpu_unknown') if gpu else 'not measured'} |")
    cpu_total = sum(r.get("cpu_hours") or 0 for r in rows)
    gpu_total = sum(r.get("gpu_hours") or 0 for r in rows)
    gpu_text = f"{gpu_total:,.1f}" if gpu else "not measured"
    lines += [f"| **all {len(rows)}** | | | | {cpu_total:,.1f} | {gpu_text} |", ""]
    return lines
