"""``make bench``: the engine against a bare PyTorch loop, one worker against the pool, and memory.

The workload is the laptop profile's own: its model (ResNet-8 at width 16), 20 clients of a
Dirichlet(0.1) partition with 250 / 100 images each, FedAvg with batch 50, one local epoch, and
every client evaluated every round, at the run's own thread count (1).

- **Engine / bare loop.** The engine runs FedAvg through :func:`fedrepro.fl.engine.simulate`, with
  what a stored run pays per round (a checkpoint to disk, per-client metrics). The bare loop does
  the same SGD steps by hand: load the global weights into one model, a fresh SGD per client and
  round, the sample-weighted average, then every client's test split. The two alternate in one
  process, in back-to-back pairs whose order alternates too (engine first in every other pair),
  after one warm-up of each, so that machine noise and cache state hit both alike. Each pair gives
  a ratio, in wall time and in the process's CPU time (which counts the checkpoint thread and
  not other processes' interference); the estimate is the mean of the pairs' ratios with its 90%
  Student's t interval, and the target is met when the whole interval is at or below it.
- **Allocator.** The engine's FedAvg in child processes on glibc's malloc and on the allocator
  that ``fedrepro reproduce`` preloads (:mod:`fedrepro.env.allocator`), alternating; the ratio of
  their median times.
- **One worker / pool.** The same set of short runs, trained by one worker process and by the
  pool's ``cores`` workers (each a 1-thread run, as ``fedrepro reproduce`` trains them), and by one
  process at 2 threads (what a notebook cell did before runs fixed their thread count); images
  trained per second of wall time. The three alternate too.
- **Peak memory** of this process and of the largest worker.

Everything runs on the allocator that ``fedrepro reproduce`` preloads into its workers: ``make bench``
re-executes itself with it (``FEDREPRO_ALLOCATOR=system`` measures glibc's malloc instead).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from ..env import allocator
from ..config import RunConfig, make_config
from ..runs.pipeline import build_clients, make_method, prepare_data
from ..env.host import cpu_cores, cpu_model
from ..fl.device import resolve_device, torch_threads
from ..fl.engine import simulate
from ..fl.seeding import derive_seed, torch_gen
from ..models import create_model
from ..runs.store import CheckpointWriter, RunStore
from ..execute.local import run_pool
from ..claims.core import t_interval


def bench_config(rounds: int, seed: int = 0, **overrides) -> RunConfig:
    """The laptop profile's run at Dirichlet 0.1 (20 clients × 250 / 100 images), FedAvg."""
    return make_config("laptop", overrides={"data": {"partition_args": {"alpha": 0.1}},
                                            "train": {"rounds": rounds, "eval_every": 1},
                                            "method": {"name": "fedavg"}, "progress": False, **overrides},
                       seed=seed)


class _Clock:
    """Wall and process CPU seconds of a block."""

    def __init__(self, device: torch.device):
        self.device = device

    def __enter__(self) -> "_Clock":
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc) -> None:
        _sync(self.device)
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu


def bare_loop(cfg: RunConfig, clients, num_classes: int, in_channels: int, image_size: int,
              device: torch.device) -> tuple[float, float]:
    """FedAvg by hand, the same steps as the engine's; returns (wall, CPU) seconds."""
    with _Clock(device) as clock:
        bare_fedavg(cfg, clients, num_classes, in_channels, image_size, device)
    return clock.wall, clock.cpu


def bare_fedavg(cfg: RunConfig, clients, num_classes: int, in_channels: int, image_size: int,
                device: torch.device) -> dict[str, torch.Tensor]:
    """The bare loop's FedAvg; returns the final global weights. It draws the engine's initial
    model and per-(round, client) shuffles and averages in float64 like the engine, so the two end
    on the same weights bit for bit (``tests/test_bench.py``): the ratio compares the same work."""
    t = cfg.train
    model = create_model(cfg.model.name, num_classes=num_classes, in_channels=in_channels, image_size=image_size,
                         seed=derive_seed(cfg.seed, "init"), **cfg.model.args).to(device)
    if cfg.memory_format == "channels_last":  # as the engine's methods build it
        model = model.to(memory_format=torch.channels_last)
    global_sd = {k: v.clone() for k, v in model.state_dict().items()}
    total = sum(c.num_train for c in clients)
    for rnd in range(t.rounds):
        avg = {k: torch.zeros(v.shape, dtype=torch.float64, device=device) for k, v in global_sd.items()}
        for c in clients:
            model.load_state_dict(global_sd)
            model.train()
            opt = torch.optim.SGD(model.parameters(), lr=t.lr, momentum=t.momentum, weight_decay=t.weight_decay)
            gen = torch_gen(cfg.seed, "client", rnd, c.cid)
            for _ in range(t.local_epochs):
                order = torch.randperm(c.num_train, generator=gen).to(device)
                for s in range(0, c.num_train, t.batch_size):
                    idx = order[s:s + t.batch_size]
                    loss = F.cross_entropy(model(c.normalize(c.train_x[idx])), c.train_y[idx])
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    opt.step()
            for k, v in model.state_dict().items():
                avg[k].add_(v, alpha=c.num_train / total)
        global_sd = {k: (a if v.is_floating_point() else a.round()).to(v.dtype)
                     for (k, a), v in zip(avg.items(), global_sd.values())}
        model.load_state_dict(global_sd)
        model.eval()
        with torch.no_grad():
            for c in clients:
                for s in range(0, c.num_test, 500):
                    float((model(c.normalize(c.test_x[s:s + 500])).argmax(1) == c.test_y[s:s + 500]).float().mean())
    return global_sd


def engine_loop(cfg: RunConfig, clients, method) -> tuple[float, float]:
    """The same FedAvg through the engine, checkpointing every round as a stored run does (through
    the run's background :class:`~fedrepro.runs.store.CheckpointWriter`, waited for at the end)."""
    device = method.ctx.device if hasattr(method, "ctx") else torch.device("cpu")
    with tempfile.TemporaryDirectory() as tmp, _Clock(device) as clock:
        with CheckpointWriter(Path(tmp)) as writer:
            simulate(method, clients, seed=cfg.seed, rounds=cfg.train.rounds, eval_every=1,
                     checkpoint=lambda state: writer.save({"state": state.__dict__}), progress=False)
    return clock.wall, clock.cpu


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def pool_throughput(cfgs: list[RunConfig], workers: int) -> float:
    """Images trained per second of wall time when ``workers`` processes train ``cfgs`` (a fresh
    runs folder, so every run trains)."""
    with tempfile.TemporaryDirectory() as tmp:
        runs = [c.replace(runs_dir=tmp) for c in cfgs]
        start = time.perf_counter()
        report = run_pool(runs, workers=workers, progress=False)
        wall = time.perf_counter() - start
        if report.failed:
            raise RuntimeError(f"bench runs failed: {report.failed}")
        if any(RunStore(tmp).status(c) != "done" for c in runs):
            raise RuntimeError("a bench run did not finish")
    return sum(_train_images(c) * c.train.rounds for c in runs) / wall


def _engine_seconds(rounds: int, repeats: int) -> list[float]:
    """The engine's FedAvg ``repeats`` times in this process (after a warm-up); seconds each."""
    cfg = bench_config(rounds)
    device = resolve_device("auto")
    with torch_threads(cfg.threads):
        ds, part = prepare_data(cfg)
        clients = build_clients(ds, part, device)
        engine_loop(cfg, clients, make_method(cfg, ds, device))
        return [engine_loop(cfg, clients, make_method(cfg, ds, device))[0] for _ in range(repeats)]


def allocator_ratio(rounds: int, pairs: int) -> dict:
    """Median engine time on glibc's malloc over that on the preloaded allocator, each measured in
    fresh child processes that alternate."""
    lib = allocator.library()
    if lib is None:
        return {"preloaded": None, "note": "no tcmalloc or jemalloc installed; see fedrepro.env.allocator"}
    cmd = [sys.executable, "-m", "fedrepro.app.bench", "--rounds", str(rounds), "--engine-seconds", "3"]
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    times: dict[str, list[float]] = {"system": [], "preloaded": []}
    for i in range(pairs):
        for side in (("system", "preloaded") if i % 2 else ("preloaded", "system")):
            child_env = env if side == "system" else allocator.child_env(env)
            out = subprocess.run(cmd, env=child_env, capture_output=True, text=True, check=True).stdout
            times[side].append(statistics.median(json.loads(out.strip().splitlines()[-1])))
    return {"preloaded": lib, "system_s": times["system"], "preloaded_s": times["preloaded"],
            "speedup": statistics.median(times["system"]) / statistics.median(times["preloaded"])}


TARGET = 1.05  # engine / bare loop


def _ratios(engine: list[float], bare: list[float], target: float) -> dict:
    """The pairs' ratios: their mean with its 90% t interval, and whether the whole interval is at
    or below ``target`` (``met``), above it (``missed``) or straddles it (``inconclusive``)."""
    pairs = [e / b for e, b in zip(engine, bare)]
    mean, low, high = t_interval(pairs)
    verdict = "met" if high <= target else "missed" if low > target else "inconclusive"
    return {"pairs": pairs, "mean": mean, "interval_90": [low, high], "median_of_pairs": statistics.median(pairs),
            "ratio_of_medians": statistics.median(engine) / statistics.median(bare), "target": verdict}


def _train_images(cfg: RunConfig) -> int:
    pa = cfg.data.partition_args
    return cfg.data.num_clients * pa["train_per_client"] * cfg.train.local_epochs


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="rounds per engine / bare-loop timing")
    ap.add_argument("--repeats", type=int, default=30, help="alternating engine / bare-loop pairs")
    ap.add_argument("--pool-runs", type=int, default=4, help="runs per throughput timing")
    ap.add_argument("--pool-rounds", type=int, default=3)
    ap.add_argument("--pool-repeats", type=int, default=2)
    ap.add_argument("--allocator-repeats", type=int, default=6, help="alternating system / preloaded pairs")
    ap.add_argument("--out", default="bench/results.json")
    ap.add_argument("--engine-seconds", type=int, metavar="REPEATS", help=argparse.SUPPRESS)  # a child's job
    args = ap.parse_args(argv)
    if args.engine_seconds:
        print(json.dumps(_engine_seconds(args.rounds, args.engine_seconds)))
        return {}
    lib = allocator.library()
    if lib is not None and allocator.in_use() == "system" and not os.environ.get("_FEDREPRO_BENCH_EXEC"):
        # On the allocator the pool's workers train with; the flag stops a loop if preloading fails.
        env = {**allocator.child_env(), "_FEDREPRO_BENCH_EXEC": "1"}
        os.execve(sys.executable, [sys.executable, "-m", "fedrepro.app.bench",
                                   *(sys.argv[1:] if argv is None else argv)],
                  env)

    device = resolve_device("auto")
    cfg = bench_config(args.rounds)
    with torch_threads(cfg.threads):
        ds, part = prepare_data(cfg)
        clients = build_clients(ds, part, device)
        shape = (ds.num_classes, ds.in_channels, ds.image_size)
        bare_loop(cfg, clients, *shape, device)  # warm-up of each side: allocator, kernels, imports
        engine_loop(cfg, clients, make_method(cfg, ds, device))
        bare, engine = [], []
        for i in range(args.repeats):
            if i % 2:
                engine.append(engine_loop(cfg, clients, make_method(cfg, ds, device)))
                bare.append(bare_loop(cfg, clients, *shape, device))
            else:
                bare.append(bare_loop(cfg, clients, *shape, device))
                engine.append(engine_loop(cfg, clients, make_method(cfg, ds, device)))
    images_round = sum(c.num_train for c in clients) * cfg.train.local_epochs

    alloc = allocator_ratio(args.rounds, args.allocator_repeats)

    cores = cpu_cores()
    pool_cfgs = [bench_config(args.pool_rounds, seed=s) for s in range(args.pool_runs)]
    two_thread = [c.replace(threads=2) for c in pool_cfgs]
    one, pooled, one_2t = [], [], []
    for _ in range(args.pool_repeats):
        one.append(pool_throughput(pool_cfgs, 1))
        pooled.append(pool_throughput(pool_cfgs, cores))
        one_2t.append(pool_throughput(two_thread, 1))

    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    result = {
        "workload": "laptop profile: ResNet-8 width 16, FedAvg, 20 clients Dirichlet(0.1) x 250/100 images, "
                    "batch 50, 1 local epoch, every client evaluated every round",
        "device": str(device), "cores": cores, "cpu": cpu_model(), "threads_per_run": cfg.threads,
        "platform": platform.platform(), "allocator_of_this_process": allocator.in_use(),
        "torch": torch.__version__,
        "engine_vs_bare": {
            "rounds": args.rounds, "pairs": args.repeats,
            "bare_s": [w for w, _ in bare], "engine_s": [w for w, _ in engine],
            "bare_cpu_s": [c for _, c in bare], "engine_cpu_s": [c for _, c in engine],
            # Each pair ran back to back, so its ratio shares the machine's state. On a shared VM
            # single timings vary by ±10%, so the estimate is the mean of the pairs' ratios with its
            # interval; the median of the pairs and the ratio of medians are given beside it.
            "wall": _ratios([w for w, _ in engine], [w for w, _ in bare], TARGET),
            "cpu": _ratios([c for _, c in engine], [c for _, c in bare], TARGET),
            "bare_images_per_s": images_round * args.rounds / statistics.median(w for w, _ in bare),
            "engine_images_per_s": images_round * args.rounds / statistics.median(w for w, _ in engine),
            "target_ratio": TARGET,
        },
        "allocator": alloc,
        "pool": {
            "runs": args.pool_runs, "rounds": args.pool_rounds,
            "one_worker_1_thread_images_per_s": one, "pool_images_per_s": pooled,
            "one_worker_2_threads_images_per_s": one_2t, "pool_workers": cores,
            "pool_vs_one_worker": statistics.median(pooled) / statistics.median(one),
            "pool_vs_one_2_thread_process": statistics.median(pooled) / statistics.median(one_2t),
        },
        "peak_rss_mib": {"this_process": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                         "largest_worker": children},
        "peak_cuda_mib": torch.cuda.max_memory_allocated() / 2**20 if device.type == "cuda" else None,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    print(f"written: {out}")
    return result


if __name__ == "__main__":
    main()
