"""Time of one client step on each of the papers' full-size models, as the paper profile's rehearsal
trains it, and the predicted time of every notebook at the paper profile from it.

For each full-size model (``fedrepro.app.rehearsal.model_label``) one rehearsal config of the
paper-profile plan is built (``$FEDREPRO_REHEARSE``): its data from ``--data`` (images of the real
shapes, ``tests/rehearsal_data.py``), its clients and its method, then ``client_update`` of
``--clients`` clients, one mini-batch of the paper's batch size each (the rehearsal's one local
step); the first pays the warm-up and is left out, the median of the rest is the step. The random
full-size weights go through the user-facing weights settings
(``fedrepro.app.rehearsal.weights_env``). A config whose dataset is not under ``--data`` is timed on
Caltech101's image folder at the same image side (``--stand-in``), which the output says.

Then the whole paper-profile plan is costed with those step times (``fedrepro.app.rehearsal.cost_table``)
and written where the results pages read it (``--out``, default the output root's
``output/paper/notebooks/rehearsal_cost.json``).

    PYTHONPATH=. python bench/rehearsal_steps.py --data /tmp/rehearsal-data --json bench/rehearsal_steps.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path


def time_steps(cfg, clients_n: int) -> dict:
    import torch

    from fedrepro.fl.device import resolve_device
    from fedrepro.fl.engine import init_state
    from fedrepro.fl.seeding import torch_gen
    from fedrepro.runs.pipeline import clients_of, make_method, prepare_data

    torch.set_num_threads(cfg.threads)
    device = resolve_device(cfg.device)  # the card where there is one, as the run itself would train
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)  # this model's peak, not the process's

    def synced() -> float:  # a GPU step ends when its kernels do, not when Python returns
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return time.perf_counter()

    t0 = time.perf_counter()
    ds, part = prepare_data(cfg)
    clients = clients_of(cfg, ds, part, device)
    method = make_method(cfg, ds, device)
    state = init_state(method, len(clients), cfg.seed)
    setup_s = synced() - t0
    times = []
    for cid in range(min(clients_n, len(clients))):
        t = synced()
        gen = torch_gen(cfg.seed, "client", 0, cid)
        method.client_update(state.shared, state.client_states[cid], clients[cid], gen, 0)
        times.append(synced() - t)
    return {"step_s": statistics.median(times[1:] or times), "steps_timed": len(times[1:]), "first_s": times[0],
            "setup_s": setup_s, "method": cfg.method.name, "batch_size": cfg.train.batch_size,
            "dataset": cfg.data.dataset, "image_size": int(ds.image_size), "threads": cfg.threads,
            "model_input": model_input(method, ds),
            "device": device_name(device), "on_gpu": device.type == "cuda",
            "peak_gpu_mib": round(torch.cuda.max_memory_allocated(device) / 2**20) if device.type == "cuda" else None}


def model_input(method, ds) -> int:
    """The side of the images the model computes on: a CLIP's own input size (it resizes every image
    itself), else the data's."""
    for m in (getattr(method, "model", None), getattr(method, "clip", None)):
        if m is not None and isinstance(getattr(m, "image_size", None), int):
            return int(m.image_size)
    return int(ds.image_size)


def device_name(device) -> str:
    """The card's name on CUDA (``NVIDIA H100 80GB HBM3``), else the CPU's."""
    import torch

    from fedrepro.env.host import cpu_model

    return torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_model()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="rehearsal:", help="a data root with the paper datasets' shapes (default: "
                    "the rehearsal data mode, which reads no files)")
    ap.add_argument("--clients", type=int, default=3, help="client steps per model (the first is left out)")
    ap.add_argument("--only", default=None, help="only models whose label contains this text")
    ap.add_argument("--json", default=None, help="write the step times here")
    ap.add_argument("--out", default=None, help="the cost file (default: the output root's)")
    ap.add_argument("--gpu-json", default=None, help="take the GPU column's step times from this file (a --json "
                    "this bench wrote on a GPU, or bench/gpu_h100.json) instead of the cost file's")
    args = ap.parse_args()

    from fedrepro.app.rehearsal import cost_path, rehearsal_env
    from fedrepro.env.settings import REHEARSAL_ROOT

    out = Path(args.out) if args.out else cost_path()  # the output root's, as the rehearsal pass writes it
    # The rehearsal's own settings: its data budget (the paper's partitions need it), its weights.
    with rehearsal_env(None if args.data == REHEARSAL_ROOT else args.data):
        cost(args, out)


def cost(args, out: Path) -> None:
    """Time each full-size model's client step, then cost the paper-profile plan with the times."""
    from fedrepro.app.rehearsal import (cost_table, gpu_section, model_label, read_cost, read_gpu_steps,
                                        write_cost)
    from fedrepro.app.reproduce import numbered_notebooks
    from fedrepro.env.host import cpu_cores, cpu_model, repo_root
    from fedrepro.papers.plan import plan

    t0 = time.perf_counter()
    nb_root = repo_root() / "notebooks"
    the_plan = plan(numbered_notebooks(repo_root()), nb_root, "paper")
    plan_s = time.perf_counter() - t0
    by_model: dict[str, list] = {}
    for cfg in the_plan.runs.values():
        by_model.setdefault(model_label(cfg), []).append(cfg)
    found = {}
    for label, cfgs in sorted(by_model.items()):
        if args.only and args.only not in label:
            continue
        cfg = cfgs[0]
        from fedrepro.data.registry import DATASETS  # noqa: F401  (registers the loaders)

        stand_in = None
        try:
            result = time_steps(cfg, args.clients)
        except Exception as e:  # noqa: BLE001  (a dataset not under --data: timed at the same image side)
            size = cfg.data.dataset_args.get("image_size", 32)
            stand_in = {"dataset": "image_folder", "partition": "pathological",
                        "dataset_args": {"path": os.path.join(args.data, "caltech101"), "image_size": size},
                        "partition_args": {"classes_per_client": 10}}
            print(f"{label}: {cfg.data.dataset} not loadable ({type(e).__name__}); timed on Caltech101 at {size} px",
                  flush=True)
            result = time_steps(cfg.replace(data=stand_in), args.clients)
        result["runs"] = len(cfgs)
        result["stand_in_data"] = None if stand_in is None else f"caltech101 image folder at {result['image_size']} px"
        found[label] = result
        if args.json:  # after each model: a pass cut short keeps what it measured
            Path(args.json).write_text(json.dumps({"cpu": cpu_model(), "device": result["device"], "step_times": found},
                                                  indent=1) + "\n")
        print(f"{label}: {result['step_s']:.2f} s a client step ({result['method']}, batch {result['batch_size']}, "
              f"{result['image_size']} px)", flush=True)
    # A GPU's times fill the GPU column and keep the cost file's CPU times; a CPU's the other way.
    before = read_cost(out) or {}
    if any(r.get("on_gpu") for r in found.values()):
        cpu_steps, gpu = before.get("step_times") or {}, {"device": next(iter(found.values()))["device"],
                                                         "step_times": found}
    else:
        cpu_steps, gpu = found or before.get("step_times") or {}, gpu_section(before)
    if args.gpu_json:
        gpu = read_gpu_steps(Path(args.gpu_json))
    table = cost_table(the_plan.readers, the_plan.runs, cpu_steps, gpu)
    report = {"cpu": cpu_model(), "cores": cpu_cores(), "plan_s": round(plan_s, 1), "step_times": found,
              "device": sorted({r["device"] for r in found.values()}),
              "load": os.getloadavg()}
    if args.json:
        Path(args.json).write_text(json.dumps({**report, "notebooks": table}, indent=1) + "\n")
    write_cost(out, cpu_steps, table, {"cores": cpu_cores()}, gpu)
    for row in table:
        print(f"{row['notebook']}: {row['runs']} runs, {row['client_steps']:,} client steps, "
              f"{row['cpu_hours']} CPU-hours ({row['unknown']} not costed), {row['gpu_hours']} GPU-hours "
              f"({row['gpu_unknown']} not costed)")
    print(f"cost written to {out}")


if __name__ == "__main__":
    main()
