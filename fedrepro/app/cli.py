"""Command line: ``fedrepro run``, ``list``, ``describe``, ``runs``, ``show``, ``reproduce``, ``results``,
``verify``, ``pretrain``.

The CLI and the Python API take the same names: ``--set train.rounds=5`` is ``train__rounds=5``.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import sys
from pathlib import Path

from ..errors import ConfigError, FedreproError, TrainingDivergedError
from ..version import VERSION as __version__
from ..execute import make_executor
from .describe import find, format_entry
from ..config import make_config, parse_cli_sets
from ..env import settings
from ..env.host import PACKAGE_PARENT
from ..env.lifetime import children_end_with_me
from ..runs import tensorboard
from .reproduce import reproduce
from .archive_pass import archive_pass
from .compare import write_report
from .results_page import write_pages
from .verify import choose, format_report, parse_where, verify, verify_archive
from ..pretrain import run_pretrainer
from .describe import format_list
from ..runs.catalog import partition_key
from ..runs.columns import percent
from ..runs.catalog import display_path
from ..runs.store import RunStore
from ..runs.catalog import list_runs, run_rounds, write_csv
from .cli_runs import format_runs
from ..runs.catalog import read_run, resolve_run
from .cli_runs import format_show
from ..runs.catalog import runs_root
from ..runs.store import default_runs_dir

# Exit codes: 0 success; 2 an error (bad input, corrupt store, busy run); 3 the run diverged (its
# rounds before the divergence are stored, so scripts must not mistake it for a result).
EXIT_ERROR = 2
EXIT_DIVERGED = 3
# What a shell reports for a process that SIGPIPE ended (128 + 13), e.g. ``fedrepro runs | head``.
EXIT_BROKEN_PIPE = 141

_DESCRIPTION = "Reproducible personalised and prompt-based federated learning: run configs, find stored runs."
_EPILOG = """examples:
  fedrepro run --profile smoke --method fedper        train one config (or reuse its stored run)
  fedrepro run --method fedprox --dry-run             print the resolved config and its run folder
  fedrepro list methods -v                            every method: description, paper, parameters
  fedrepro describe fedpft                            one method (or dataset, partition, model)
  fedrepro runs --method fedavg --where data.partition_args.alpha=0.1
  fedrepro runs --status interrupted --csv runs.csv   export a selection (--per-round: one row per round)
  fedrepro show 42c2d5ee                              one run: config, versions, rounds, clients
  fedrepro reproduce --profile laptop                 every notebook's runs, then the notebooks

`fedrepro COMMAND --help` describes a command's flags; docs/cli.md shows each command's output."""


def _list(what: str) -> list[str]:
    from ..methods import list_methods
    from ..data import list_datasets
    from ..data.partition import list_partitions
    from ..models import list_models

    return {"methods": list_methods, "datasets": list_datasets, "partitions": list_partitions,
            "models": list_models}[what]()


# --ray-* flag -> the ray executor's option it sets (fedrepro.execute.RayExecutor).
_RAY_FLAGS = {"ray_address": "address", "cpus_per_run": "num_cpus", "gpus_per_run": "num_gpus",
              "max_retries": "max_retries"}


def _executor_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("where runs train (docs/scale-out-ray.md)")
    g.add_argument("--executor", choices=["local", "ray"], default="local",
                   help="local: worker processes on this machine (default); ray: tasks on a Ray cluster, each run "
                        "stored here exactly as a local run (same folder, hash and files)")
    g.add_argument("--ray-address", default=None, metavar="ADDR",
                   help="the cluster to use with --executor ray: 'auto' (the cluster this machine joined with "
                        "`ray start`), HOST:PORT of its head node; default: a Ray instance on this machine")
    g.add_argument("--cpus-per-run", type=float, default=None, metavar="N",
                   help="CPUs Ray reserves for each run (default: the run's config threads, which it trains at)")
    g.add_argument("--gpus-per-run", type=float, default=None, metavar="N",
                   help="GPUs Ray reserves for each run (default 0: CPU only; 0.5 puts two runs on one GPU)")
    g.add_argument("--max-retries", type=int, default=None, metavar="N",
                   help="how often Ray retries a run whose worker or node died, from its newest checkpoint "
                        "(default 3)")


def _tensorboard_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tensorboard", default=None, metavar="DIR",
                   help="write each trained run's per-round metrics to DIR/<method>-<dataset>-s<seed>-<hash>/ for "
                        "`tensorboard --logdir DIR` (default: $FEDREPRO_TENSORBOARD, else off); reused runs write "
                        "nothing (docs/outputs.md)")


def _executor(args: argparse.Namespace):
    given = {opt: getattr(args, flag) for flag, opt in _RAY_FLAGS.items() if getattr(args, flag) is not None}
    if args.executor != "ray" and given:
        flags = ", ".join("--" + f.replace("_", "-") for f, o in _RAY_FLAGS.items() if o in given)
        raise ConfigError(f"{flags} apply to --executor ray only (got --executor {args.executor})")
    return make_executor(args.executor, **given)


def main(argv: list[str] | None = None) -> int:
    """The ``fedrepro`` command; returns its exit code. Output cut short by a closed pipe
    (``fedrepro runs | head``) ends quietly, as other command-line tools do."""
    try:
        return _main(argv)
    except BrokenPipeError:
        # Python would report the broken pipe again when it flushes stdout at exit: point stdout at
        # /dev/null first (the recipe of Python's signal documentation).
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fedrepro", description=_DESCRIPTION, epilog=_EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=version_text(),
                        help="print the installed version, the git commit of this checkout and the torch version")
    sub = parser.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    p_run = sub.add_parser("run", help="run one config (reused if already finished)")
    p_run.add_argument("--profile", default=None, help="smoke | laptop (default) | paper")
    p_run.add_argument("--config", default=None, metavar="FILE", help="YAML file of overrides")
    p_run.add_argument("--method", default=None, help="shortcut for --set method.name=... (`fedrepro list methods`)")
    p_run.add_argument("--dataset", default=None, help="shortcut for --set data.dataset=... (`fedrepro list datasets`)")
    p_run.add_argument("--seed", type=int, default=None, help="shortcut for --set seed=... (default 0)")
    p_run.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                       help="override, e.g. --set train.rounds=5 --set data.partition_args.alpha=0.1")
    p_run.add_argument("--engine", choices=["inprocess", "flower"], default="inprocess",
                       help="who trains a run that is not stored yet: this process (default) or Flower's simulation "
                            "engine (Ray backend); same numbers, same store (docs/scale-out-flower.md)")
    p_run.add_argument("--nodes", type=int, default=None,
                       help="--engine flower: virtual SuperNodes (default: one per client)")
    p_run.add_argument("--cpus", type=int, default=None, help="--engine flower: CPUs Ray may use (default: all)")
    p_run.add_argument("--ray-address", default=None,
                       help="--engine flower: run on this Ray cluster (`ray start --head` prints it) instead of a "
                            "local Ray instance")
    p_run.add_argument("--dry-run", action="store_true",
                       help="print the resolved config (the method's arguments with their defaults), its hash and "
                            "its run folder, and whether that run is stored; train nothing")
    p_run.add_argument("--json", action="store_true",
                       help="print the run's whole summary as JSON (fractions, unrounded) instead of the short text")
    p_run.add_argument("--on-busy", choices=["wait", "reuse", "error"], default="wait",
                       help="when another process is writing this run: wait for it (then reuse or resume it; "
                            "default), reuse its result without ever training here, or stop with an error")
    p_run.add_argument("--on-stale", choices=["retrain", "keep", "error"], default=None,
                       help="when the stored run was trained by other code than today's: train it anew (the "
                            "default; the old folder moves to <runs>/.stale/), reuse it, or stop with an error "
                            "(default: $FEDREPRO_STALE, else retrain)")
    _tensorboard_flag(p_run)

    p_list = sub.add_parser("list", help="list registered names (-v: with description, paper and parameters)")
    p_list.add_argument("what", choices=["methods", "datasets", "partitions", "models"], help="which registry")
    p_list.add_argument("-v", "--verbose", action="store_true",
                        help="each name with a one-line description, the paper it comes from and its parameters "
                             "with their defaults")
    _add_catalog_commands(sub)

    p_rep = sub.add_parser("reproduce", help="train every numbered notebook's runs in one pool, then render the "
                                             "notebooks with papermill")
    p_rep.add_argument("--profile", default="laptop", help="smoke | laptop (default) | paper")
    p_rep.add_argument("--only", default=None,
                       help="run only the notebooks whose path, or a folder or file name (with or without its "
                            "number), begins with this text, e.g. fedpft/13_, fedotp, 00_, convergence "
                            "(comma-separated: any of them)")
    p_rep.add_argument("--rehearse", action="store_true",
                       help="with --profile paper: every notebook on the papers' full-size models (random weights), "
                            "2 rounds of one local step, a sample of clients, one seed; verdicts REHEARSAL; "
                            "writes the predicted cost of the paper profile (docs/speed.md)")
    p_rep.add_argument("--workers", type=int, default=None,
                       help="processes that train runs and render notebooks "
                            "(default: the cores over the runs' threads)")
    p_rep.add_argument("--plan", "--dry-run", dest="plan", action="store_true",
                       help="list what each notebook reads and what is left to train, and predict the pass's CPU "
                            "time (docs/speed.md); train and render nothing (--dry-run, as for run)")
    p_rep.add_argument("--no-render", dest="render", action="store_false",
                       help="train what the notebooks read and render none (make test-notebooks: nbval then "
                            "executes them on the stored runs)")
    p_rep.add_argument("--predict", action="store_true",
                       help="with the plan, the pass's predicted CPU time, calibrated on bench/timings.json "
                            "(plans every run again: minutes at the laptop profile); trains nothing")
    p_rep.add_argument("--timings", default=None, metavar="FILE",
                       help="the pass report that --predict calibrates on instead of bench/timings.json "
                            "(a timings.json that reproduce wrote); implies --predict")
    _executor_flags(p_rep)
    _tensorboard_flag(p_rep)

    p_res = sub.add_parser("results", help="write the results pages of a profile (docs/results/<profile>/index.md and "
                                           "one <paper>.md per paper) from the claims and timings that reproduce "
                                           "stored")
    p_res.add_argument("--profile", default="laptop", help="smoke | laptop (default) | paper")
    p_res.add_argument("--timings", default=None, metavar="FILE",
                       help="the pass's timings.json (default: the one `fedrepro reproduce` left for this profile)")

    p_arc = sub.add_parser("archive", help="write the reference archive (results/<profile>/<paper>.jsonl.gz) of the "
                                           "runs the last pass's notebooks read (docs/outputs.md)")
    p_arc.add_argument("--profile", default="laptop", help="smoke | laptop (default) | paper")
    p_arc.add_argument("--only", default=None, help="the notebooks whose runs to archive, as reproduce --only")
    p_arc.add_argument("--partial", action="store_true",
                       help="the pass has not finished: archive every finished run of the one paper --only names, "
                            "marked partial, for the next machine to continue (FEDREPRO_ARCHIVE=resume fedrepro "
                            "reproduce --only PAPER; docs/outputs.md)")

    p_cmp = sub.add_parser("compare", help="compare this store's runs and the notebooks' verdicts with the reference "
                                           "archive (results/<profile>/) and write the reproduction report "
                                           "(docs/results/<profile>/reproduction.md)")
    p_cmp.add_argument("--profile", default="laptop", help="smoke | laptop (default) | paper")

    p_ver = sub.add_parser("verify", help="train stored runs again in fresh processes and compare every metric "
                                          "(identical, equal up to rounding, or different)")
    p_ver.add_argument("--runs-dir", default=None, help="the runs folder (default: $FEDREPRO_RUNS, else runs/)")
    p_ver.add_argument("--where", action="append", default=[], metavar="KEY=VALUE",
                       help="only runs whose config has this value, e.g. --where method.name=fedavg (repeatable)")
    p_ver.add_argument("-n", type=int, default=None, help="verify this many of the matching runs, drawn at random")
    p_ver.add_argument("--seed", type=int, default=0, help="the seed of that draw (default 0)")
    p_ver.add_argument("--workers", type=int, default=1, help="processes that train them (default 1)")
    p_ver.add_argument("--sample", type=int, default=None, metavar="N",
                       help="instead of the store: retrain N runs of the reference archive (results/<profile>/), "
                            "drawn in turn from every paper and method, and compare them with it")
    p_ver.add_argument("--profile", default="laptop", help="with --sample: the archive's profile (default laptop)")

    p_pre = sub.add_parser("pretrain", help="regenerate a committed backbone checkpoint (vit | clip | clip_patch)")
    p_pre.add_argument("what", choices=["vit", "clip", "clip_patch"],
                       help="vit: the glyph-pretrained tiny ViT; clip: the CLIP stand-in; clip_patch: the CLIP "
                            "stand-in with an attention-pool head and a patch term (docs/backbones.md)")
    p_pre.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                       help="override a pretraining config field, e.g. --set steps=100 --set out=/tmp/vit.pt")

    args = parser.parse_args(argv)
    try:
        if getattr(args, "tensorboard", None) is not None:

            # A missing package or an unwritable folder stops here, before anything trains.
            tensorboard.check(Path(args.tensorboard).expanduser(), "--tensorboard")
            settings.configure(tensorboard=args.tensorboard)
        if args.cmd == "list":
            if args.verbose:

                print(format_list(args.what, verbose=True))
            else:
                print("\n".join(_list(args.what)))
            return 0
        if args.cmd in _CATALOG_COMMANDS:
            return _CATALOG_COMMANDS[args.cmd](args)
        if args.cmd == "reproduce":

            if args.workers is not None and args.workers < 1:
                raise ConfigError(f"--workers={args.workers}; valid: a positive integer")
            predict = args.predict or args.timings is not None
            with children_end_with_me():  # SIGTERM, Ctrl-C: no worker, papermill or kernel goes on
                reproduce(args.profile, only=args.only, workers=args.workers, plan_only=args.plan or predict,
                          executor=_executor(args), rehearse=args.rehearse, predict=predict, render=args.render,
                          timings=args.timings)
            return 0
        if args.cmd == "results":

            for path in write_pages(args.profile, timings=Path(args.timings) if args.timings else None).values():
                print(f"written: {path}")
            return 0
        if args.cmd == "archive":
            for paper, path in archive_pass(args.profile, args.only, partial=args.partial).items():
                print(f"written: {path} ({path.stat().st_size / 1e6:.2f} MB)")
            return 0
        if args.cmd == "compare":
            path = write_report(args.profile)
            print(f"written: {path}" if path else
                  f"no reference archive for profile {args.profile}: nothing to compare")
            return 0
        if args.cmd == "verify":

            if args.workers < 1:
                raise ConfigError(f"--workers={args.workers}; valid: a positive integer")
            if args.sample is not None and (args.where or args.n is not None or args.runs_dir):
                raise ConfigError("--sample draws from the reference archive; valid: without --where, -n and "
                                  "--runs-dir")
            runs_dir = Path(args.runs_dir) if args.runs_dir else default_runs_dir()
            with children_end_with_me():
                results = verify_archive(args.profile, args.sample, args.seed, workers=args.workers) \
                    if args.sample is not None else \
                    verify(choose(runs_dir, parse_where(args.where), args.n, args.seed), workers=args.workers)
            print(format_report(results))
            return 0 if all(v.outcome in ("identical", "rounding") for v in results) else EXIT_ERROR
        if args.cmd == "pretrain":

            print(f"checkpoint: {run_pretrainer(args.what, args.sets)}")
            return 0
        from ..execute.run import run

        sets = parse_cli_sets(args.sets)
        for key, value in (("method.name", args.method), ("data.dataset", args.dataset), ("seed", args.seed)):
            if value is not None:
                sets[key] = value
        cfg = make_config(args.profile, overrides=sets, yaml_path=args.config)
        if args.dry_run:
            from ..fl.device import resolve_device

            resolve_device(cfg.device)  # a device the machine lacks is refused here too, as `run` refuses it
            print(_dry_run_text(cfg))
            return 0
        options = {k: v for k, v in (("nodes", args.nodes), ("cpus", args.cpus), ("ray_address", args.ray_address))
                   if v is not None}
        if options and args.engine != "flower":
            raise ConfigError(f"--nodes, --cpus and --ray-address are options of --engine flower, not --engine "
                              f"{args.engine}")
        for name, value in options.items():
            if isinstance(value, int) and value < 1:
                raise ConfigError(f"--{name}={value}; valid: a positive integer")
        with _show_reuse():
            res = run(cfg, on_busy=args.on_busy, on_stale=args.on_stale, engine=args.engine, engine_options=options)
        print(json.dumps(res.summary, indent=2) if args.json else _summary_text(res))
        print(f"results: {display_path(res.path)}")
        if "diverged_round" in res.summary:
            print(f"fedrepro: error: the run diverged at round {res.summary['diverged_round']}: "
                  f"{res.summary.get('diverged', '')}\nthe rounds before it are stored in {res.path}", file=sys.stderr)
            return EXIT_DIVERGED
        return 0
    except TrainingDivergedError as e:
        print(f"fedrepro: error: {e}", file=sys.stderr)
        return EXIT_DIVERGED
    except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM (lifetime.Terminated): its children are ended
        signum = getattr(e, "signum", signal.SIGINT)
        print(f"fedrepro: stopped by {signal.Signals(signum).name}; what finished is stored, and running the "
              "command again resumes the rest", file=sys.stderr)
        return 128 + signum
    except FedreproError as e:
        print(f"fedrepro: error: {e}", file=sys.stderr)
        return EXIT_ERROR


# --------------------------------------------------------------------------------------------
# fedrepro --version, run's output


def version_text() -> str:
    """``fedrepro 0.1.0 (git 12fb22739, clean) · python 3.11.7 · torch 2.14.1``: the installed
    package's version, and the commit when the package runs from a git checkout. torch's version is
    read from its installed metadata, without importing it."""
    import platform
    from importlib import metadata


    try:
        version = metadata.version("fedrepro")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        version = __version__
    try:
        torch_version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch_version = "not installed"
    return f"fedrepro {version}{_git_text()} · python {platform.python_version()} · torch {torch_version}"


def _git_text() -> str:
    import subprocess

    repo = PACKAGE_PARENT
    if not (repo / ".git").exists():
        return ""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short=10", "HEAD"], cwd=repo, capture_output=True,
                                text=True, timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "fedrepro"], cwd=repo, capture_output=True,
                               text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
    return f" (git {commit}{', uncommitted changes in fedrepro/' if dirty else ''})" if commit else ""


@contextlib.contextmanager
def _show_reuse():
    """Show the library's INFO messages ("reused runs/<hash>") on stderr while ``fedrepro run``
    runs. A notebook keeps the logging default (WARNING), so reading 200 stored runs prints nothing."""
    log = logging.getLogger("fedrepro")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    level = log.level
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.setLevel(level)


def _summary_text(res) -> str:
    """A finished run's main numbers, accuracies in % (``--json`` prints the whole summary)."""
    s, cfg = res.summary, res.config
    key = partition_key(cfg.data.partition_args)
    lines = [f"{cfg.method.name} on {cfg.data.dataset} ({cfg.data.partition}{' ' + key if key else ''}, "
             f"{cfg.data.num_clients} clients), seed {cfg.seed}, {cfg.profile} profile: {s['rounds']} "
             f"round{'s' if s['rounds'] != 1 else ''}",
             f"  mean client accuracy: best {percent(s.get('best_acc_mean'))}% (round {s.get('best_round')}), "
             f"final {percent(s.get('final_acc_mean'))}%",
             f"  sample-weighted:      best {percent(s.get('best_acc_weighted'))}%, "
             f"final {percent(s.get('final_acc_weighted'))}%"]
    if s.get("final_global_acc") is not None or s.get("best_global_acc") is not None:
        lines.append(f"  global model:         best {percent(s.get('best_global_acc'))}%, "
                     f"final {percent(s.get('final_global_acc'))}%")
    if isinstance(s.get("time_train_s"), (int, float)):
        lines.append(f"  training time:        {s['time_train_s']:.1f} s")
    return "\n".join(lines)


def _dry_run_text(cfg) -> str:
    """The resolved config with the method's arguments filled in from its defaults (the hash, which
    leaves defaults out, is the same either way), the run folder and whether it is stored."""
    from ..methods import METHODS
    import dataclasses

    import yaml


    d = cfg.to_dict()
    d["method"]["args"] = dataclasses.asdict(METHODS.get(cfg.method.name).parse_params(cfg.method.args))
    store = RunStore(cfg.runs_dir)
    folder = store.path(cfg)
    try:
        state = {"missing": "not stored: `fedrepro run` would train it",
                 "partial": "started, unfinished: `fedrepro run` would resume it from its checkpoint",
                 "done": "finished: `fedrepro run` would reuse it"}[store.status(cfg)]
    except FedreproError as e:
        state = f"unreadable ({e})"
    return yaml.safe_dump(d, sort_keys=False) + f"# hash: {cfg.hash()}\n# run folder: {display_path(folder)} ({state})"


# --------------------------------------------------------------------------------------------
# fedrepro describe, runs, show


def _add_catalog_commands(sub) -> None:
    p = sub.add_parser("describe", help="what a method, dataset, partition or model is: description, paper, "
                                        "parameters with defaults")
    p.add_argument("name", help="a registered name, e.g. fedpft, fashion_mnist, dirichlet, resnet8")
    p.add_argument("--usage", action="store_true",
                   help="also list the reproduced papers' tables that run it (builds every table's configs: "
                        "a few seconds)")

    filters = argparse.ArgumentParser(add_help=False)
    g = filters.add_argument_group("which runs")
    g.add_argument("--runs-dir", default=None, metavar="DIR",
                   help="the runs folder (default: $FEDREPRO_RUNS, else runs/)")
    g.add_argument("--method", default=None, help="only these methods (comma-separated), e.g. fedavg,fedper")
    g.add_argument("--dataset", default=None, help="only these datasets (comma-separated)")
    g.add_argument("--status", default=None,
                   help="only these statuses (comma-separated): finished, diverged, running, interrupted, damaged")
    g.add_argument("--profile", default=None, help="only these profiles (comma-separated): smoke, laptop, paper")
    g.add_argument("--where", action="append", default=[], metavar="KEY=VALUE",
                   help="only runs whose stored config has this value (dotted key, YAML value; repeatable), "
                        "e.g. --where data.partition_args.alpha=0.1 --where train.rounds=40")

    p = sub.add_parser("runs", parents=[filters], help="a table of the stored runs (filters; --csv exports them)",
                       description="A table of the stored runs: hash, method, dataset, partition, seed, profile, "
                                   "status, rounds done/total, best and final mean client accuracy (%). Reads only "
                                   "small JSON files, so it stays fast with thousands of runs.")
    p.add_argument("--sort", default="method,dataset,partition,partition_key,seed", metavar="COLUMNS",
                   help="comma-separated columns to sort by (best, final and rounds stand for best_acc_mean, "
                        "final_acc_mean and rounds_done); '-' before one sorts it descending, written --sort=-best; "
                        "default: method,dataset,partition,partition_key,seed")
    p.add_argument("--csv", default=None, metavar="FILE",
                   help="write the selection to FILE as CSV (accuracies as fractions; '-' for stdout) instead of "
                        "printing the table")
    p.add_argument("--per-round", action="store_true",
                   help="with --csv: one row per (run, round) with every per-round metric, not one row per run")
    p.add_argument("--config-columns", action="store_true",
                   help="with --csv: add every config value as a cfg.<dotted key> column")

    p = sub.add_parser("show", help="one stored run: its config, seed, versions, status, per-round metrics and a "
                                    "per-client summary")
    p.add_argument("run", help="the run's hash, or a unique prefix of it (as `fedrepro runs` prints), or its folder")
    p.add_argument("--runs-dir", default=None, metavar="DIR",
                   help="the runs folder (default: $FEDREPRO_RUNS, else runs/)")
    p.add_argument("--all-rounds", action="store_true", help="print every round (default: at most 20, spread out)")
    p.add_argument("--clients", action="store_true",
                   help="print every client's last-round scores (default: a summary and the 5 lowest)")


def _describe(args) -> int:
    print("\n\n".join(format_entry(e) for e in find(args.name, usage=args.usage)))
    return 0


def _runs(args) -> int:
    if (args.per_round or args.config_columns) and not args.csv:
        raise ConfigError("--per-round and --config-columns shape the CSV export; add --csv FILE")
    # The listing shows the config values that tell apart runs whose other columns are equal.
    table = list_runs(args.runs_dir, method=args.method, dataset=args.dataset, status=args.status,
                      profile=args.profile, where=args.where, sort=args.sort,
                      config_columns=args.config_columns or not args.csv)
    if not args.csv:
        print(format_runs(table, runs_root(args.runs_dir)))
        return 0
    out = run_rounds(table) if args.per_round else table
    if args.csv == "-":
        out.to_csv(sys.stdout, index=False)
    else:
        path = write_csv(out, args.csv)
        print(f"written: {path} ({len(out)} rows: {len(table)} runs{', one row per round' if args.per_round else ''})")
    return 0


def _show(args) -> int:
    print(format_show(read_run(resolve_run(args.run, args.runs_dir)), all_rounds=args.all_rounds,
                      all_clients=args.clients))
    return 0


_CATALOG_COMMANDS = {"describe": _describe, "runs": _runs, "show": _show}


if __name__ == "__main__":
    raise SystemExit(main())
