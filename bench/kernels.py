"""Kernel-level options for the laptop profile's training step, each against the plain path.

The step: ResNet-8 at width 16 (the laptop model), batch 50, 1×28×28 images, 10 classes, SGD with
momentum, forward + backward + step, on the CPU. Each option is timed in this one process,
alternating with the plain path, ``--repeats`` times; the table gives images/s (median) and the
ratio to plain. "2 processes × 1 thread" runs two plain steps in two processes at once and counts
both, against one process at 2 threads: the choice the pool makes.

bfloat16 autocast (``torch.autocast("cpu", torch.bfloat16)`` around the forward and the loss; the
weights, gradients and SGD update stay float32) is measured for the laptop's two kinds of model: the
ResNet-8 step above, alone and with channels_last, and the laptop's ViT (``tiny_vit``, the PEP-FedPT
stand-in: 1×28×28, patch 4, dim 96, depth 6, batch 10, every weight trained). These are options to
measure, not adopted: autocast changes every number of a run, so adopting it would be a hashed config
option, and whether the CPU has bfloat16 instructions (AVX512-BF16, AMX) decides whether it is faster.

    .venv/bin/python bench/kernels.py [--seconds 3] [--repeats 3] [--json bench/kernels.json] [--only bf16]
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import statistics
import tempfile
import time

import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

from fedrepro.models import create_model

BATCH, SIZE, CLASSES, CLIENTS = 50, 28, 10, 20


VIT_BATCH = 10  # the laptop ViT setups' batch (pep_fedpt)
MODELS = {"resnet8": {"width": 16}, "tiny_vit": {}}  # the laptop profile's conv model and its ViT


def _model(channels_last: bool = False, name: str = "resnet8") -> torch.nn.Module:
    m = create_model(name, CLASSES, in_channels=1, image_size=SIZE, seed=0, **MODELS[name]).train()
    return m.to(memory_format=torch.channels_last) if channels_last else m


def _data(n: int = 1, batch: int = BATCH):
    g = torch.Generator().manual_seed(0)
    return torch.randn(n, batch, 1, SIZE, SIZE, generator=g), torch.randint(0, CLASSES, (n, batch), generator=g)


def _timed(step, seconds: float, images_per_step: int) -> float:
    step()  # warm-up
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        step()
        n += 1
    return n * images_per_step / (time.perf_counter() - t0)


def plain_step(channels_last: bool = False, compiled: bool = False, bf16: bool = False, model: str = "resnet8"):
    """One training step of ``model`` (the laptop's ResNet-8 or ViT); ``bf16``: forward and loss under
    bfloat16 autocast (float32 weights, gradients and update)."""
    net = _model(channels_last, model)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    x, y = _data(batch=BATCH if model == "resnet8" else VIT_BATCH)
    x = x[0].contiguous(memory_format=torch.channels_last) if channels_last else x[0]
    fwd = torch.compile(net) if compiled else net

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = F.cross_entropy(fwd(x), y[0])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


# The bfloat16 options, each against its model's plain step (name -> (make, images per step, threads)).
BF16_OPTIONS = {
    "resnet8 bf16 autocast": (lambda: plain_step(bf16=True), BATCH, 1),
    "resnet8 bf16 autocast + channels_last": (lambda: plain_step(channels_last=True, bf16=True), BATCH, 1),
    "tiny_vit plain": (lambda: plain_step(model="tiny_vit"), VIT_BATCH, 1),
    "tiny_vit bf16 autocast": (lambda: plain_step(model="tiny_vit", bf16=True), VIT_BATCH, 1),
}
BF16_BASELINE = {"resnet8 bf16 autocast": "plain (1 thread)", "resnet8 bf16 autocast + channels_last": "channels_last",
                 "tiny_vit bf16 autocast": "tiny_vit plain"}


def vmap_step():
    """One SGD step on each of 20 clients' own copies of the model at once (torch.func)."""
    model = _model()
    # BatchNorm's running statistics cannot be written inside vmap: train-mode batch statistics
    # stay, the running buffers are dropped (a small saving the plain path does not get).
    torch.func.replace_all_batch_norm_modules_(model)
    params = {k: v.detach().unsqueeze(0).repeat(CLIENTS, *[1] * v.dim()) for k, v in model.named_parameters()}
    buffers = {k: v.unsqueeze(0).repeat(CLIENTS, *[1] * v.dim()) for k, v in model.named_buffers()}
    mom = {k: torch.zeros_like(v) for k, v in params.items()}
    x, y = _data(CLIENTS)

    def loss_fn(p, b, xb, yb):
        return F.cross_entropy(functional_call(model, (p, b), (xb,)), yb)

    g = vmap(grad(loss_fn), in_dims=(0, 0, 0, 0), randomness="different")

    def step():
        grads = g(params, buffers, x, y)
        with torch.no_grad():
            for k in params:
                mom[k].mul_(0.9).add_(grads[k])
                params[k].sub_(mom[k], alpha=0.01)

    return step


def sequential_clients_step():
    """The same work as :func:`vmap_step` one client after another (what the engine does)."""
    models = [_model() for _ in range(CLIENTS)]
    opts = [torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9) for m in models]
    x, y = _data(CLIENTS)

    def step():
        for i, (m, o) in enumerate(zip(models, opts)):
            loss = F.cross_entropy(m(x[i]), y[i])
            o.zero_grad(set_to_none=True)
            loss.backward()
            o.step()

    return step


def _proc(seconds: float, q) -> None:
    torch.set_num_threads(1)
    q.put(_timed(plain_step(), seconds, BATCH))


def two_processes(seconds: float) -> float:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    ps = [ctx.Process(target=_proc, args=(seconds, q)) for _ in range(2)]
    for p in ps:
        p.start()
    total = q.get() + q.get()
    for p in ps:
        p.join()
    return total


def compile_cold_seconds(cache_dir: str) -> float:
    """Seconds to the first compiled step in a fresh process with an empty (then warm) cache."""
    code = ("import time,torch,torch.nn.functional as F;t=time.perf_counter();"
            "from bench.kernels import plain_step;s=plain_step(compiled=True);s();"
            "print(time.perf_counter()-t)")
    import subprocess
    import sys

    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache_dir, "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    return float(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", default="bench/kernels.json")
    ap.add_argument("--only", choices=("all", "bf16"), default="all",
                    help="bf16: the bfloat16 options and their baselines only (no compile, vmap or processes)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    options = {
        "plain (1 thread)": (plain_step, BATCH, 1),
        "channels_last": (lambda: plain_step(channels_last=True), BATCH, 1),
        "torch.compile": (lambda: plain_step(compiled=True), BATCH, 1),
        "2 threads, one process": (plain_step, BATCH, 2),
        "20 clients one by one": (sequential_clients_step, BATCH * CLIENTS, 1),
        "20 clients, torch.func.vmap": (vmap_step, BATCH * CLIENTS, 1),
        **BF16_OPTIONS,
    }
    if args.only == "bf16":
        return bf16_only(options, args)
    steps = {}
    for name, (make, _, threads) in options.items():
        torch.set_num_threads(threads)
        steps[name] = make()
    rates: dict[str, list[float]] = {k: [] for k in options}
    rates["2 processes × 1 thread"] = []
    for _ in range(args.repeats):  # alternate, so that machine noise hits every option alike
        for name, (_, images, threads) in options.items():
            torch.set_num_threads(threads)
            rates[name].append(_timed(steps[name], args.seconds, images))
        torch.set_num_threads(1)
        rates["2 processes × 1 thread"].append(two_processes(args.seconds))
    med = {k: statistics.median(v) for k, v in rates.items()}
    with tempfile.TemporaryDirectory() as cache:
        cold = compile_cold_seconds(cache)
        warm = compile_cold_seconds(cache)
    baseline = {"20 clients, torch.func.vmap": "20 clients one by one",
                "2 processes × 1 thread": "2 threads, one process", **BF16_BASELINE}
    table = {k: {"images_per_s": round(v), "vs": baseline.get(k, "plain (1 thread)"),
                 "ratio": round(v / med[baseline.get(k, "plain (1 thread)")], 3)} for k, v in med.items()}
    result = {"step": "ResNet-8 width 16, batch 50, 1x28x28, SGD momentum, forward+backward+step, CPU",
              "platform": platform.platform(), "torch": torch.__version__, "cpu_count": os.cpu_count(),
              "seconds_per_timing": args.seconds, "repeats": args.repeats, "options": table, "raw": rates,
              "compile_first_step_s": {"empty_cache": round(cold, 1), "warm_cache": round(warm, 1)}}
    print(json.dumps({k: result[k] for k in ("options", "compile_first_step_s")}, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return result


def cpu_bf16_flags() -> list[str]:
    """The CPU's bfloat16 instruction flags (Linux): without them autocast emulates bfloat16."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return []
    return sorted(f for f in flags if "bf16" in f)


def bf16_only(options: dict, args) -> dict:
    """The bfloat16 options and their baselines, alternating (``--only bf16``); printed, and written
    to ``--json`` with ``.bf16`` before its suffix so the full table's file stays."""
    names = [*BF16_OPTIONS, *{b for b in BF16_BASELINE.values() if b not in BF16_OPTIONS}]
    steps = {k: options[k][0]() for k in names}
    rates: dict[str, list[float]] = {k: [] for k in names}
    for _ in range(args.repeats):
        for k in names:
            rates[k].append(_timed(steps[k], args.seconds, options[k][1]))
    med = {k: statistics.median(v) for k, v in rates.items()}
    vs = {k: BF16_BASELINE.get(k, k) for k in med}
    table = {k: {"images_per_s": round(v), "vs": vs[k], "ratio": round(v / med[vs[k]], 3)} for k, v in med.items()}
    result = {"platform": platform.platform(), "torch": torch.__version__, "cpu_count": os.cpu_count(),
              "cpu_bf16_flags": cpu_bf16_flags(),
              "seconds_per_timing": args.seconds, "repeats": args.repeats, "options": table, "raw": rates}
    print(json.dumps(table, indent=2))
    if args.json:
        root, ext = os.path.splitext(args.json)
        with open(f"{root}.bf16{ext}", "w") as f:
            json.dump(result, f, indent=2)
    return result


if __name__ == "__main__":
    main()
