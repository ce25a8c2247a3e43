"""Command line: ``fedrepro run``, ``list``, ``reproduce``, ``results``, ``verify``, ``pretrain``.

The CLI and the Python API take the same names: ``--set train.rounds=5`` is ``train__rounds=5``.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .errors import ConfigError, FedreproError, TrainingDivergedError

# Exit codes: 0 success; 2 an error (bad input, corrupt store, busy run); 3 the run diverged (its
# rounds before the divergence are stored, so scripts must not mistake it for a result).
EXIT_ERROR = 2
EXIT_DIVERGED = 3


def _list(what: str) -> list[str]:
    from .data import list_datasets
    from .data.partition import list_partitions
    from .methods import list_methods
    from .models import list_models

    return {"methods": list_methods, "datasets": list_datasets, "partitions": list_partitions,
            "models": list_models}[what]()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fedrepro", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)

    p_run = sub.add_parser("run", help="run one config (reused if already finished)")
    p_run.add_argument("--profile", default=None, help="smoke | laptop (default) | paper")
    p_run.add_argument("--config", default=None, help="YAML file of overrides")
    p_run.add_argument("--method", default=None, help="shortcut for --set method.name=...")
    p_run.add_argument("--dataset", default=None, help="shortcut for --set data.dataset=...")
    p_run.add_argument("--seed", type=int, default=None)
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
    p_run.add_argument("--dry-run", action="store_true", help="print the resolved config and its hash, run nothing")
    p_run.add_argument("--on-busy", choices=["wait", "reuse", "error"], default="wait",
                       help="when another process is writing this run: wait for it (then reuse or resume it; "
                            "default), reuse its result without ever training here, or stop with an error")
    p_run.add_argument("--on-stale", choices=["retrain", "keep", "error"], default=None,
                       help="when the stored run was trained by other code than today's: train it anew (the "
                            "default; the old folder moves to <runs>/.stale/), reuse it, or stop with an error "
                            "(default: $FEDREPRO_STALE, else retrain)")

    p_list = sub.add_parser("list", help="list registered names")
    p_list.add_argument("what", choices=["methods", "datasets", "partitions", "models"])

    p_rep = sub.add_parser("reproduce", help="train every numbered notebook's runs in one pool, then render the "
                                             "notebooks with papermill")
    p_rep.add_argument("--profile", default="laptop", help="smoke | laptop (default) | paper")
    p_rep.add_argument("--only", default=None, help="run only notebooks whose path contains this text")
    p_rep.add_argument("--workers", type=int, default=None,
                       help="processes that train runs and render notebooks (default: the cores over the runs' threads)")
    p_rep.add_argument("--plan", action="store_true", help="list what each notebook reads and what is left to train; "
                                                           "train and render nothing")

    p_res = sub.add_parser("results", help="write the claims page of a profile (docs/results/claims_<profile>.md) "
                                           "and the README's claims block from the claims and timings that "
                                           "reproduce stored")
    p_res.add_argument("--profile", default="laptop", help="smoke | laptop (default) | paper")
    p_res.add_argument("--out", default=None, help="where to write it (default: docs/results/claims_<profile>.md)")

    p_ver = sub.add_parser("verify", help="train stored runs again in fresh processes and compare every metric "
                                          "(identical, equal up to rounding, or different)")
    p_ver.add_argument("--runs-dir", default=None, help="the runs folder (default: $FEDREPRO_RUNS, else runs/)")
    p_ver.add_argument("--where", action="append", default=[], metavar="KEY=VALUE",
                       help="only runs whose config has this value, e.g. --where method.name=fedavg (repeatable)")
    p_ver.add_argument("-n", type=int, default=None, help="verify this many of the matching runs, drawn at random")
    p_ver.add_argument("--seed", type=int, default=0, help="the seed of that draw (default 0)")
    p_ver.add_argument("--workers", type=int, default=1, help="processes that train them (default 1)")

    p_pre = sub.add_parser("pretrain", help="regenerate a committed backbone checkpoint (vit | clip)")
    p_pre.add_argument("what", choices=["vit", "clip"])
    p_pre.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                       help="override a pretraining config field, e.g. --set steps=100 --set out=/tmp/vit.pt")

    args = parser.parse_args(argv)
    try:
        if args.cmd == "list":
            print("\n".join(_list(args.what)))
            return 0
        if args.cmd == "reproduce":
            from .reproduce import reproduce

            if args.workers is not None and args.workers < 1:
                raise ConfigError(f"--workers={args.workers}; valid: a positive integer")
            reproduce(args.profile, only=args.only, workers=args.workers, plan_only=args.plan)
            return 0
        if args.cmd == "results":
            from .results_page import update_readme, write_claims_page

            print(f"written: {write_claims_page(args.profile, Path(args.out) if args.out else None)}")
            if args.out is None and update_readme(args.profile):
                print("updated: README.md (the claims block)")
            return 0
        if args.cmd == "verify":
            from .store import default_runs_dir
            from .verify import choose, format_report, parse_where, verify

            if args.workers < 1:
                raise ConfigError(f"--workers={args.workers}; valid: a positive integer")
            runs_dir = Path(args.runs_dir) if args.runs_dir else default_runs_dir()
            results = verify(choose(runs_dir, parse_where(args.where), args.n, args.seed), workers=args.workers)
            print(format_report(results))
            return 0 if all(v.outcome != "different" for v in results) else EXIT_ERROR
        if args.cmd == "pretrain":
            from .pretrain import run_pretrainer

            print(f"checkpoint: {run_pretrainer(args.what, args.sets)}")
            return 0
        from .config import make_config, parse_cli_sets
        from .experiment import run

        sets = parse_cli_sets(args.sets)
        for key, value in (("method.name", args.method), ("data.dataset", args.dataset), ("seed", args.seed)):
            if value is not None:
                sets[key] = value
        cfg = make_config(args.profile, overrides=sets, yaml_path=args.config)
        if args.dry_run:
            print(cfg.to_yaml() + f"# hash: {cfg.hash()}")
            return 0
        options = {k: v for k, v in (("nodes", args.nodes), ("cpus", args.cpus), ("ray_address", args.ray_address))
                   if v is not None}
        if options and args.engine != "flower":
            raise ConfigError(f"--nodes, --cpus and --ray-address are options of --engine flower, not --engine "
                              f"{args.engine}")
        for name, value in options.items():
            if isinstance(value, int) and value < 1:
                raise ConfigError(f"--{name}={value}; valid: a positive integer")
        res = run(cfg, on_busy=args.on_busy, on_stale=args.on_stale, engine=args.engine, engine_options=options)
        print(json.dumps(res.summary, indent=2))
        print(f"results: {res.path}")
        if "diverged_round" in res.summary:
            print(f"fedrepro: error: the run diverged at round {res.summary['diverged_round']}: "
                  f"{res.summary.get('diverged', '')}\nthe rounds before it are stored in {res.path}", file=sys.stderr)
            return EXIT_DIVERGED
        return 0
    except TrainingDivergedError as e:
        print(f"fedrepro: error: {e}", file=sys.stderr)
        return EXIT_DIVERGED
    except FedreproError as e:
        print(f"fedrepro: error: {e}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    raise SystemExit(main())
