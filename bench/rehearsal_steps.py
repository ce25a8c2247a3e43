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

The cost table committed beside the code (``bench/paper_cost.json``, which every profile's results
pages print): the paper profile's plan at a quiet CPU's and a GPU's measured steps, timing nothing::

    PYTHONPATH=. python bench/rehearsal_steps.py --only none --cpu-json bench/rehearsal_steps_xeon.json \
        --gpu-json bench/gpu_h100.json --out bench/paper_cost.json

``--rehearsal-cost STEPS``: time nothing; predict the wall time of the rehearsal pass itself (``make
rehearse``) from the step times a ``--json`` of this bench holds (``bench/rehearsal_steps_xeon.json``),
per notebook, per paper and in total (:func:`pass_cost`), and write it to ``--json``.

    PYTHONPATH=. python bench/rehearsal_steps.py --rehearsal-cost bench/rehearsal_steps_xeon.json \
        --json bench/rehearsal_pass_xeon.json
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
    # The last client once more: what a client met again costs, where a method keeps per-client work
    # (a CLIP method encodes a client's split once, fedrepro.models.clip_cache, so its first update
    # holds that encoding and step_s is an upper bound of its later steps).
    cid = min(clients_n, len(clients)) - 1
    t = synced()
    method.client_update(state.shared, state.client_states[cid], clients[cid], torch_gen(cfg.seed, "client", 1, cid), 1)
    again_s = synced() - t
    return {"step_s": statistics.median(times[1:] or times), "steps_timed": len(times[1:]), "first_s": times[0],
            "again_s": again_s,
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
    ap.add_argument("--json", default=None, help="write the step times here (with --rehearsal-cost: the pass's cost)")
    ap.add_argument("--rehearsal-cost", default=None, metavar="STEPS", help="time nothing: cost the rehearsal "
                    "pass itself from the step times in this file (a --json of this bench)")
    ap.add_argument("--workers", type=int, default=2, help="with --rehearsal-cost: the pool's workers (wall time)")
    ap.add_argument("--out", default=None, help="the cost file (default: the output root's)")
    ap.add_argument("--cpu-json", default=None, help="take the CPU column's step times from this file (a --json "
                    "this bench wrote on a quiet CPU, e.g. bench/rehearsal_steps_xeon.json) instead of timing them")
    ap.add_argument("--gpu-json", default=None, help="take the GPU column's step times from this file (a --json "
                    "this bench wrote on a GPU, or bench/gpu_h100.json) instead of the cost file's")
    args = ap.parse_args()
    if args.rehearsal_cost:  # times nothing, so needs none of the rehearsal's settings below
        rehearsal_pass(args)
        return

    from fedrepro.app.rehearsal import cost_path, rehearsal_env
    from fedrepro.env.settings import REHEARSAL_ROOT

    out = Path(args.out) if args.out else cost_path()  # the output root's, as the rehearsal pass writes it
    # The rehearsal's own settings: its data budget (the paper's partitions need it), its weights.
    with rehearsal_env(None if args.data == REHEARSAL_ROOT else args.data):
        cost(args, out)


def cost(args, out: Path) -> None:
    """Time each full-size model's client step, then cost the paper-profile plan with the times."""
    from fedrepro.app.rehearsal import (cost_table, gpu_section, model_label, paper_profile_runs, read_cost,
                                        read_gpu_steps, write_cost)
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
    measured = {}
    if args.cpu_json:  # a quiet machine's steps, measured before (e.g. bench/rehearsal_steps_xeon.json)
        given = json.loads(Path(args.cpu_json).read_text())
        cpu_steps = given["step_times"]
        measured = {"cpu": given.get("cpu"), "cores": given.get("cores"),
                    "source": f"bench/rehearsal_steps.py ({args.cpu_json})"}
    # Timed on the rehearsal's runs above; costed on the paper profile's own (every seed of each row).
    table = cost_table(*paper_profile_runs(numbered_notebooks(repo_root()), nb_root), cpu_steps, gpu)
    report = {"cpu": cpu_model(), "cores": cpu_cores(), "plan_s": round(plan_s, 1), "step_times": found,
              "device": sorted({r["device"] for r in found.values()}),
              "load": os.getloadavg()}
    if args.json:
        Path(args.json).write_text(json.dumps({**report, "notebooks": table}, indent=1) + "\n")
    write_cost(out, cpu_steps, table, {"cores": cpu_cores(), **measured}, gpu)
    for row in table:
        print(f"{row['notebook']}: {row['runs']} runs, {row['client_steps']:,} client steps, "
              f"{row['cpu_hours']} CPU-hours ({row['unknown']} not costed), {row['gpu_hours']} GPU-hours "
              f"({row['gpu_unknown']} not costed)")
    print(f"cost written to {out}")


def run_counts(cfg) -> dict:
    """What one rehearsal run ``cfg`` does, as the engine (``fedrepro.fl.engine.simulate``) reads its
    config: ``client_steps``, rounds × clients a round × local epochs × mini-batches a pass (capped
    by ``train.max_local_batches``: one in a rehearsal); ``finetune_steps``, the fine-tuning before
    each client's score (``train.eval_finetune_epochs``: evaluated rounds × every client × epochs ×
    capped mini-batches, ``ModelMethod.evaluate``); ``test_images``, the images scored (evaluated
    rounds × every client (held-out ones included) × ``data.max_test_per_client``, and as many again
    for the global model with ``train.global_eval``; at most: a client's test split may be smaller)."""
    from fedrepro.fl.engine import clients_per_round

    t, d = cfg.train, cfg.data
    if t.max_local_batches is None or d.max_test_per_client is None:
        raise ValueError("not a rehearsal config: its passes over a split are not capped (train.max_local_batches)")
    # The engine evaluates every eval_every rounds and at the last round.
    evals = sum(1 for r in range(1, t.rounds + 1) if r % t.eval_every == 0 or r == t.rounds)
    per_round = clients_per_round(d.num_clients - d.holdout_clients, t.participation)
    return {"client_steps": t.rounds * per_round * t.local_epochs * t.max_local_batches,
            "finetune_steps": evals * d.num_clients * t.eval_finetune_epochs * t.max_local_batches,
            "test_images": evals * d.num_clients * d.max_test_per_client * (2 if t.global_eval else 1)}


def run_seconds(cfg, steps: dict) -> float | None:
    """One rehearsal run's predicted CPU seconds at ``steps``' times of its model (a ``--json`` of this
    bench: ``{label: {"step_s", "setup_s"}}``): its client steps and fine-tuning steps × ``step_s``
    (a fine-tuning step is costed as the method's own step) + ``setup_s`` once (data, clients,
    model); its test images are not costed (no time of theirs is measured). None: model not timed."""
    from fedrepro.app.rehearsal import model_label

    step = steps.get(model_label(cfg))
    if step is None:
        return None
    n = run_counts(cfg)
    # A cost file of a rehearsal pass holds no setup_s: the set-up is not counted then.
    return (n["client_steps"] + n["finetune_steps"]) * float(step["step_s"]) + float(step.get("setup_s", 0.0))


def pass_summary(cfgs, steps: dict) -> dict:
    """Runs ``cfgs`` together (each once): their counts (:func:`run_counts`), models, CPU-hours at
    ``steps`` (:func:`run_seconds`; also in seconds), the longest run's seconds and the runs whose model
    was not timed."""
    from fedrepro.app.rehearsal import model_label

    cfgs = list(cfgs)
    counts = [run_counts(c) for c in cfgs]
    seconds = [run_seconds(c, steps) for c in cfgs]
    known = [s for s in seconds if s is not None]
    return {"runs": len(cfgs), **{k: sum(n[k] for n in counts) for k in ("client_steps", "finetune_steps",
                                                                          "test_images")},
            "models": sorted({model_label(c) for c in cfgs}), "cpu_s": round(sum(known)),
            "cpu_hours": round(sum(known) / 3600, 2), "longest_run_s": round(max(known, default=0.0)),
            "unknown": len(seconds) - len(known)}


def pass_cost(readers: dict, runs: dict, steps: dict, after: dict | None = None, workers: int = 2) -> dict:
    """The rehearsal pass's predicted training time at ``steps``, from its plan (``readers``: notebook ->
    run hashes; ``runs``: hash -> config; ``after``: the rows the learning-rate searches tune, which
    the pass plans and trains once the searches are stored, at their setup's rates, hash -> config):
    per notebook, per paper and in total, each run once in a row and in the total (a run several
    notebooks read trains once); the wall time on ``workers`` is the CPU time over them (one thread
    a run, as the steps were timed; not less than the longest run)."""
    after = after or {}
    papers: dict[str, dict] = {}
    for notebook, hashes in readers.items():  # the top-level notebooks are the tour (plan.notebook_key)
        paper = notebook.split("/")[0] if "/" in notebook else "tour"
        papers.setdefault(paper, {}).update((h, runs[h]) for h in hashes if h in runs)
    total = pass_summary([*runs.values(), *(c for h, c in after.items() if h not in runs)], steps)
    total["wall_hours"] = round(max(total["cpu_s"] / workers, total["longest_run_s"]) / 3600, 2)
    return {"workers": workers, "total": total,
            "after_searches": pass_summary(after.values(), steps),
            "papers": {p: pass_summary(cfgs.values(), steps) for p, cfgs in papers.items()},
            "notebooks": [{"notebook": nb, **pass_summary({h: runs[h] for h in hashes if h in runs}.values(), steps)}
                          for nb, hashes in readers.items()]}


def rehearsal_pass(args) -> None:
    """``--rehearsal-cost``: the rehearsal's plan, as ``reproduce("paper", rehearse=True)`` makes it from
    nothing stored, costed at the step times of ``args.rehearsal_cost`` (:func:`pass_cost`)."""
    from fedrepro.app.reproduce import numbered_notebooks
    from fedrepro.config import ENV_REHEARSE
    from fedrepro.env.host import environ_set, repo_root
    from fedrepro.env.settings import ENV_DATA_ROOT
    from fedrepro.papers.plan import plan

    given = json.loads(Path(args.rehearsal_cost).read_text())
    t0 = time.perf_counter()
    # The settings of rehearsal_env that shape the configs (the cut; FedOTP's image-folder paths under
    # the data root), without writing its random weights: their paths change no run's cost.
    with environ_set({ENV_REHEARSE: "1", ENV_DATA_ROOT: args.data}):
        the_plan = plan(numbered_notebooks(repo_root()), repo_root() / "notebooks", "paper")
    cost = pass_cost(the_plan.readers, the_plan.runs, given["step_times"], the_plan.after_searches, args.workers)
    from fedrepro.config import REHEARSAL_CLIENTS, REHEARSAL_ROUNDS, REHEARSAL_TEST_IMAGES

    report = {
        "what": f"predicted training time of the rehearsal pass (make rehearse: {REHEARSAL_ROUNDS} rounds, one "
                f"local step, at most {REHEARSAL_CLIENTS} clients a round, {REHEARSAL_TEST_IMAGES} test images a "
                f"client) of every notebook, from the step times in {args.rehearsal_cost} ({given.get('cpu')})",
        "note": "per run: (rounds x clients a round x local epochs x mini-batches, capped at 1 + evaluated rounds "
                "x all clients x eval_finetune_epochs) x its model's step_s + its model's setup_s once; summed "
                "over the runs (a run several notebooks read is in each of their rows, once in its paper's row "
                "and once in the total). wall_hours = max(cpu_hours / workers, longest run): one thread a run, "
                "as the steps were timed, the pool balanced. after_searches: the rows the learning-rate searches "
                "tune, trained once the searches are stored (costed at their setup's rates; in the total, not in "
                "the notebook rows). Not included: the test images scored (test_images, an upper bound; no time "
                "of theirs is measured), the cached analyses (analyses), rendering the notebooks, planning "
                "(plan_s here), writing the random weights, starting the workers. CLIP runs are an upper bound: "
                "their step was timed on a client's first update in a process, which encodes its whole training "
                "split with the frozen image encoder (fedrepro.models.clip_cache); a worker keeps those tokens "
                "in memory across rounds and runs, so a client met again costs less.",
        "steps_from": args.rehearsal_cost, "cpu": given.get("cpu"), "cores": given.get("cores"),
        "step_times": {k: {"step_s": v["step_s"], "setup_s": v.get("setup_s")} for k, v in given["step_times"].items()},
        "plan_s": round(time.perf_counter() - t0, 1), "analyses": len(the_plan.analyses),
        "waiting_for_searches": list(the_plan.incomplete), **cost}
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    for paper, row in cost["papers"].items():
        print(f"{paper}: {row['runs']} runs, {row['cpu_hours']:,.1f} CPU-hours ({row['unknown']} not costed)")
    top = sorted(cost["notebooks"], key=lambda r: -r["cpu_hours"])[:5]
    print("largest: " + ", ".join(f"{r['notebook']} {r['cpu_hours']:,.1f}" for r in top))
    t = cost["total"]
    print(f"all: {t['runs']} runs, {t['cpu_hours']:,.1f} CPU-hours, {t['wall_hours']:,.1f} h of wall time on "
          f"{args.workers} workers ({t['unknown']} runs not costed; test images, analyses, renders not included)")


if __name__ == "__main__":
    main()
