"""A grid of 12 smoke runs on a Ray cluster against the local executor: the same runs, stored the same.

The grid (FedAvg, FedPer and FedBN × 4 seeds at the smoke profile) is trained twice into two
fresh stores: by the local executor (worker processes here) and by the ray executor, on a Ray
instance of ``--cpus`` CPUs started for the occasion or on the cluster at ``--address``. Then each
run's two folders are compared file by file (:func:`fedrepro.app.verify.file_differences`: bit for bit
but for timings, when and with which allocator it ran) and the wall times printed.

    PYTHONPATH=$PWD .venv/bin/python bench/ray_grid.py [--address auto] [--cpus 2] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

import fedrepro
from fedrepro.execute import LocalExecutor, RayExecutor
from fedrepro.env.host import cpu_model
from fedrepro.app.verify import file_differences

GRID = {"method.name": ["fedavg", "fedper", "fedbn"]}
SEEDS = [0, 1, 2, 3]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--address", default=None, help="a running cluster ('auto', HOST:PORT); default: start one here")
    ap.add_argument("--cpus", type=int, default=2, help="CPUs of the Ray instance started here (default 2)")
    ap.add_argument("--workers", type=int, default=2, help="the local executor's worker processes (default 2)")
    ap.add_argument("--json", default=None, help="also write the result here")
    args = ap.parse_args()
    import ray

    if args.address is None:
        ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False)
    else:
        ray.init(address=args.address, log_to_driver=False)
    nodes = [n for n in ray.nodes() if n["Alive"]]
    cluster = f"{len(nodes)} node(s), {int(ray.cluster_resources().get('CPU', 0))} CPUs"
    try:
        with tempfile.TemporaryDirectory(prefix="fedrepro-ray-grid-") as tmp:
            tables, seconds = {}, {}
            for name, executor in (("local", LocalExecutor(workers=args.workers)), ("ray", RayExecutor())):
                base = fedrepro.make_config("smoke", runs_dir=str(Path(tmp) / name), progress=False)
                t0 = time.perf_counter()
                tables[name] = fedrepro.run_grid(base, GRID, seeds=SEEDS, executor=executor)
                seconds[name] = time.perf_counter() - t0
            diffs = {Path(a).name: file_differences(Path(a), Path(b))
                     for a, b in zip(tables["local"]["path"], tables["ray"]["path"])}
            keep = [c for c in tables["local"] if c not in ("path", "time_train_s")]
            same_table = tables["local"][keep].equals(tables["ray"][keep])
    finally:
        ray.shutdown()
    same = sum(not d for d in diffs.values())
    result = {"runs": len(diffs), "identical_runs": same, "tables_equal": bool(same_table),
              "differences": {k: v for k, v in diffs.items() if v},
              "wall_s": {k: round(v, 1) for k, v in seconds.items()}, "ray_cluster": cluster,
              "local_workers": args.workers, "cpu": cpu_model(), "python": platform.python_version(),
              "ray": ray.__version__}
    print(tables["ray"][["method.name", "seed", "best", "final"]].to_string(index=False))
    print(f"{same}/{len(diffs)} runs stored identically by both executors (timings aside); result tables "
          f"{'equal' if same_table else 'DIFFERENT'}; wall: local {seconds['local']:.1f} s "
          f"({args.workers} workers), ray {seconds['ray']:.1f} s ({cluster})")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    if same != len(diffs) or not same_table:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
