"""The paper profile's rehearsal: the cut of its configs, the REHEARSAL verdict, the flag's checks
and the cost table (fedrepro/config.py, fedrepro/claims/core.py, fedrepro/app/rehearsal.py)."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import torch
from support import bench_module

from fedrepro.app import rehearsal
from fedrepro.app.cli import main
from fedrepro.app.reproduce import reproduce, selected
from fedrepro.claims.core import REHEARSAL, Claim, exceeds
from fedrepro.config import (ENV_REHEARSE, REHEARSAL_CLIENTS, REHEARSAL_ROUNDS, REHEARSAL_TEST_IMAGES,
                             REHEARSAL_TRAIN_BATCHES, default_seeds, make_config)
from fedrepro.errors import ConfigError, CorruptCacheError
from fedrepro.fl.client_data import ClientData
from fedrepro.papers import setup, table_seeds


@pytest.fixture
def rehearsing(monkeypatch):
    monkeypatch.setenv(ENV_REHEARSE, "1")


def test_a_rehearsal_is_the_paper_config_cut_and_recorded(monkeypatch):
    monkeypatch.delenv(ENV_REHEARSE, raising=False)
    real = setup("pep_fedpt", "paper")
    monkeypatch.setenv(ENV_REHEARSE, "1")
    cut = setup("pep_fedpt", "paper")
    assert (cut.train.rounds, cut.train.local_epochs, cut.train.max_local_batches) == (REHEARSAL_ROUNDS, 1, 1)
    assert cut.data.max_test_per_client == REHEARSAL_TEST_IMAGES
    # 5 of 100 clients a round is the paper's own count, below the rehearsal's cap: kept.
    assert cut.train.participation == real.train.participation == 0.05
    assert cut.rehearsal["paper"] == {"rounds": real.train.rounds, "local_epochs": real.train.local_epochs,
                                      "participation": 0.05, "max_train": None}
    # Everything else is the paper's: the model, the clients, the data shape.
    assert (cut.model, cut.data.num_clients, cut.data.dataset) == (real.model, real.data.num_clients, real.data.dataset)
    assert cut.data.dataset_args == real.data.dataset_args  # 224 px
    # CIFAR-100 shared among 100 clients: at most two batches of images a client drawn before the split.
    assert real.data.max_train is None and cut.data.max_train == 100 * REHEARSAL_TRAIN_BATCHES * 32
    assert cut.rehearsal["paper"]["max_train"] is None
    assert cut.hash() != real.hash()
    assert "rehearsal" not in real.hashed_dict()  # a real run keeps the key it always had


def test_cutting_twice_is_cutting_once_and_a_later_layer_is_recorded(rehearsing):
    cfg = setup("fedpft", "paper")
    assert cfg.train.participation == REHEARSAL_CLIENTS / cfg.data.num_clients
    assert cfg.rehearsal["paper"]["participation"] == 1.0
    assert cfg.replace(seed=cfg.seed).hash() == cfg.hash()
    longer = cfg.replace(**{"train.rounds": 300})
    assert longer.train.rounds == REHEARSAL_ROUNDS and longer.rehearsal["paper"]["rounds"] == 300
    # More clients after the cut: the paper's participation stays recorded, the cut follows.
    more = cfg.replace(**{"data.num_clients": 100})
    assert more.rehearsal["paper"]["participation"] == 1.0
    assert more.train.participation == REHEARSAL_CLIENTS / 100


def test_each_clients_training_split_is_cut_to_two_batches_and_the_papers_size_recorded(rehearsing):
    """FedPFT's 500 images a client (fixed_dirichlet) become two batches of B = 100; a later batch size
    or split size is cut in its turn, cutting twice is cutting once, and a split the cut leaves alone
    (few-shot) gets the paper's sizes back. FedOTP's CIFAR-100 clients encode 64 images, not 500."""
    cfg = setup("fedpft", "paper")
    cap = REHEARSAL_TRAIN_BATCHES * cfg.train.batch_size
    assert cfg.data.partition_args["train_per_client"] == cap == 200
    assert cfg.rehearsal["paper"]["train_per_client"] == 500 and rehearsal.train_per_client(cfg) == 500
    assert make_config("paper", overrides=cfg.to_dict()).hash() == cfg.hash()
    smaller = cfg.replace(**{"train.batch_size": 10})
    assert smaller.data.partition_args["train_per_client"] == 20
    assert smaller.rehearsal["paper"]["train_per_client"] == 500
    more = cfg.replace(**{"data.partition_args.train_per_client": 1000})
    assert more.data.partition_args["train_per_client"] == 200 and more.rehearsal["paper"]["train_per_client"] == 1000
    # A layer that sets the cut's own value sets the paper's (as for the schedule).
    same = cfg.replace(**{"data.partition_args.train_per_client": 200})
    assert same.rehearsal["paper"]["train_per_client"] == 200
    shots = cfg.replace(**{"data.partition": "pathological",
                           "data.partition_args": {"classes_per_client": 2, "shots": 4}})
    assert "train_per_client" not in shots.data.partition_args and "train_per_client" not in shots.rehearsal["paper"]
    pfedcspc = setup("pfedcspc", "paper")  # CIFAR-10 shared among 10 clients, B = 64
    assert pfedcspc.data.max_train == 10 * REHEARSAL_TRAIN_BATCHES * 64
    back = pfedcspc.replace(**{"data.partition": "pathological", "data.partition_args": {"classes_per_client": 2,
                                                                                         "shots": 4}})
    assert back.data.max_train is None and "max_train" not in back.rehearsal["paper"]
    otp = setup("fedotp", "paper", "dirichlet")  # CIFAR-100, B = 32
    assert otp.model.args["arch"] == "ViT-B-16" and otp.data.partition_args["train_per_client"] == 64


def test_a_rehearsed_search_trains_one_rate_at_one_seed(rehearsing, monkeypatch):
    """A learning-rate search of a rehearsal trains the paper's rate (where the grid holds it), else the
    grid's rate nearest the setup's own, at the first tuning seed; a real search trains its grid."""
    from fedrepro.execute.tuning import LrSearch

    cfg = setup("fedpft", "paper").replace(**{"train.lr": 0.04})
    search = LrSearch(grid=(0.1, 0.01, 0.05), repeats=3)
    assert [(c.train.lr, c.seed) for c in search.full_configs(cfg)] == [(0.05, 1000)]
    assert [c.train.lr for c in LrSearch(grid=(0.1, 0.01, 0.05), paper_rate=0.01).full_configs(cfg)] == [0.01]
    # With successive halving: one short run (standing for half the paper's rounds) and one full run.
    halving = LrSearch(grid=(0.1, 0.01, 0.05), halving=0.5)
    short, full = halving.short_configs(cfg), halving.full_configs(cfg)
    assert [c.rehearsal["paper"]["rounds"] for c in short + full] == [500, 1000]
    assert {c.train.rounds for c in short + full} == {REHEARSAL_ROUNDS}
    monkeypatch.delenv(ENV_REHEARSE)
    real = setup("fedpft", "paper")
    assert len(search.full_configs(real)) == 9


def test_only_the_paper_profile_is_rehearsed_and_with_one_seed(rehearsing):
    assert not make_config("laptop").rehearsal
    assert default_seeds("paper") == table_seeds("paper") == [0]
    assert default_seeds("laptop") == [0, 1, 2]


def test_one_local_step_reads_one_batch_of_the_training_split():
    n = 30
    data = ClientData(0, torch.zeros(n, 1, 4, 4, dtype=torch.uint8), torch.zeros(n, dtype=torch.long),
                      torch.zeros(0, 1, 4, 4, dtype=torch.uint8), torch.zeros(0, dtype=torch.long),
                      torch.zeros(1, 1, 1, 1), torch.ones(1, 1, 1, 1), max_batches=1)
    assert [len(y) for _, y in data.train_batches(8, torch.Generator().manual_seed(0))] == [8]
    assert [len(y) for _, y in data.eval_train_batches(8)] == [8]
    data.max_batches = None
    assert [len(y) for _, y in data.train_batches(8, torch.Generator().manual_seed(0))] == [8, 8, 8, 6]


def _claim() -> Claim:
    return Claim("test.rehearsal", "tour", "Table 0", "a beats b",
                 check=lambda r: (exceeds("a-b", r["gap"].tolist(), r["seed"].tolist()), "gaps"))


def test_a_claim_on_rehearsal_runs_is_marked_rehearsal_never_pass_or_fail(monkeypatch):
    monkeypatch.delenv(ENV_REHEARSE, raising=False)
    rows = pd.DataFrame({"seed": [0, 1, 2], "gap": [5.0, 6.0, 7.0]})
    assert _claim().evaluate(rows).verdict == "PASS"
    got = _claim().evaluate(rows.assign(rehearsal=True))
    assert got.verdict == REHEARSAL and "mean nothing" in got.evidence


def test_a_claim_reads_the_rehearsal_off_its_stored_runs(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_REHEARSE, raising=False)
    real, cut = tmp_path / "real", tmp_path / "cut"
    for folder, mark in ((real, {}), (cut, {"paper": {"rounds": 5}, "cut": {"rounds": 2}})):
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps({"config": {"rehearsal": mark}}))
    rows = pd.DataFrame({"seed": [0, 1, 2], "gap": [5.0, 6.0, 7.0]})
    assert _claim().evaluate(rows.assign(path=str(real))).verdict == "PASS"
    assert _claim().evaluate(rows.assign(path=[str(real), str(cut), str(real)])).verdict == REHEARSAL


def test_rehearse_is_refused_with_another_profile(capsys):
    with pytest.raises(ConfigError, match="--rehearse rehearses the paper profile"):
        reproduce("laptop", rehearse=True)
    assert main(["reproduce", "--profile", "smoke", "--rehearse"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--profile paper" in err[0]


def test_only_takes_a_comma_separated_list():
    from pathlib import Path

    assert selected(Path("fedpft/15_time.ipynb"), "pep_fedpt/05,fedpft/15")
    assert not selected(Path("fedpft/16_communication.ipynb"), "pep_fedpt/05,fedpft/15")
    assert selected(Path("00_tour.ipynb"), None)


@pytest.mark.parametrize("only, chosen", [
    ("00_", ["00_tour.ipynb"]),  # met anywhere in a path, it also chose fedpft/11_100_clients
    ("fedpft/1", ["fedpft/11_100_clients.ipynb", "fedpft/17_convergence.ipynb"]),
    ("convergence", ["fedpft/17_convergence.ipynb", "pfedcspc/09_convergence.ipynb"]),
    ("fedotp", ["fedotp/01_label_shift.ipynb"]),
    ("tour,100_clients", ["00_tour.ipynb", "fedpft/11_100_clients.ipynb"]),
    ("clients", []),  # not a beginning
])
def test_only_selects_notebooks_whose_path_or_a_name_begins_with_a_part(only, chosen):
    from pathlib import Path

    paths = ["00_tour.ipynb", "fedpft/11_100_clients.ipynb", "fedpft/17_convergence.ipynb",
             "pfedcspc/09_convergence.ipynb", "fedotp/01_label_shift.ipynb"]
    assert [p for p in paths if selected(Path(p), only)] == chosen


def test_client_steps_multiply_out_the_papers_schedule(rehearsing):
    cfg = setup("fedpft", "paper")  # 40 clients x 500 images, all taking part, B = 100
    paper = cfg.rehearsal["paper"]
    assert rehearsal.client_steps(cfg) == paper["rounds"] * 40 * paper["local_epochs"] * 5
    pep = setup("pep_fedpt", "paper")  # CIFAR-100 over 100 clients, 5 a round, B = 32
    assert rehearsal.train_per_client(pep) == 500
    assert rehearsal.client_steps(pep) == pep.rehearsal["paper"]["rounds"] * 5 * pep.rehearsal["paper"][
        "local_epochs"] * 16
    steps = {rehearsal.model_label(cfg): {"step_s": 0.5, "runs": 1}}
    assert rehearsal.predicted_seconds(cfg, steps) == rehearsal.client_steps(cfg) * 0.5
    assert rehearsal.predicted_seconds(pep, steps) is None  # ViT-B/16 not measured
    table = rehearsal.cost_table({"fedpft/x.ipynb": [cfg.hash(), pep.hash()]}, {cfg.hash(): cfg, pep.hash(): pep},
                                 steps)
    assert table[0]["unknown"] == 1
    assert table[0]["cpu_hours"] == round(rehearsal.client_steps(cfg) * 0.5 / 3600, 2)
    lines = "\n".join(rehearsal.cost_lines({"cpu": "a CPU", "cores": 2, "step_times": steps, "notebooks": table},
                                           lambda nb: nb.startswith("fedpft/")))
    assert "| `fedpft/x.ipynb` | 2 |" in lines and "1 runs not costed" in lines and "not measured" in lines


def test_gpu_step_times_give_a_gpu_column_that_a_cpu_rehearsal_keeps(rehearsing, tmp_path):
    cfg = setup("fedpft", "paper")
    label = rehearsal.model_label(cfg)
    cpu, gpu = {label: {"step_s": 0.5, "runs": 1}}, {"device": "a card", "step_times": {label: {"step_s": 0.01}}}
    table = rehearsal.cost_table({"fedpft/x.ipynb": [cfg.hash()]}, {cfg.hash(): cfg}, cpu, gpu)
    assert table[0]["gpu_hours"] == round(rehearsal.client_steps(cfg) * 0.01 / 3600, 2) and not table[0]["gpu_unknown"]
    path = rehearsal.cost_path(tmp_path)
    rehearsal.write_cost(path, cpu, table, {"cores": 2}, gpu)
    assert rehearsal.gpu_section(rehearsal.read_cost(path)) == gpu  # what a later rehearsal on a CPU passes on
    lines = "\n".join(rehearsal.cost_lines(rehearsal.load_cost(tmp_path), lambda nb: True))
    assert "GPU-hours on a card" in lines and f"| {table[0]['gpu_hours']:,.1f} |" in lines
    rehearsal.write_cost(path, cpu, rehearsal.cost_table({}, {}, cpu), {"cores": 2})
    assert rehearsal.gpu_section(rehearsal.read_cost(path)) is None
    assert rehearsal.gpu_section(rehearsal.read_cost(tmp_path / "none.json")) is None  # no cost file


def test_the_committed_gpu_step_times_read_as_a_gpu_section_and_a_bad_file_is_named(tmp_path):
    from fedrepro.env.host import repo_root

    gpu = rehearsal.read_gpu_steps(repo_root() / "bench" / "gpu_h100.json")
    assert "H100" in gpu["device"] and all(float(t["step_s"]) > 0 for t in gpu["step_times"].values())
    bad = tmp_path / "steps.json"
    bad.write_text(json.dumps({"device": "a card"}))  # no step_times
    with pytest.raises(CorruptCacheError, match="step_times") as err:
        rehearsal.read_gpu_steps(bad)
    assert str(bad) in str(err.value) and "\n" not in str(err.value)
    assert rehearsal.read_cost(tmp_path / "none.json") is None


def test_a_datasets_training_size_comes_from_its_real_shape(rehearsing):
    """A split that names no per-client size is costed from the real dataset's training images for
    the run's domains and classes (DomainNet, Office-Caltech10: not in TRAIN_SIZES)."""
    from fedrepro.data import rehearsal_shape

    cfg = setup("fedotp", "paper", "feature_shift:domainnet")
    assert not cfg.data.partition_args.get("train_per_client") and not cfg.data.partition_args.get("shots")
    full = rehearsal_shape(cfg.data.dataset, **cfg.data.dataset_args).full_train
    assert rehearsal.train_per_client(cfg) == full // cfg.data.num_clients > 0


def test_a_step_is_the_last_rounds_training_time_over_its_clients(tmp_path):
    rows = [{"round": 1, "n_sampled": 10, "time_train_s": 9.0}, {"round": 2, "n_sampled": 10, "time_train_s": 3.0}]
    (tmp_path / "rounds.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    assert rehearsal.step_seconds(None, tmp_path) == pytest.approx(0.3)
    (tmp_path / "rounds.jsonl").write_text(json.dumps(rows[0]))
    assert rehearsal.step_seconds(None, tmp_path) is None


def test_the_paper_profiles_pages_show_the_rehearsals_cost_and_rehearsal_verdicts(tmp_path, monkeypatch):
    from fedrepro.app.results_page import write_pages
    from fedrepro.claims.core import save_claims
    from fedrepro.papers.verdicts import registered

    monkeypatch.setenv("FEDREPRO_OUTPUT", str(tmp_path))
    c = registered().get("fedotp.beats_promptfl_pathological")
    row = {"claim_id": c.id, "paper": c.paper, "source": c.source, "statement": c.statement, "verdict": REHEARSAL,
           "interval": "", "evidence": "rehearsal runs, the numbers mean nothing"}
    save_claims(pd.DataFrame([row]), "fedotp_01_label_shift", "paper")
    save_claims(pd.DataFrame([{**row, "verdict": "INCONCLUSIVE"}]), "fedotp_01_label_shift", "laptop")
    # Before any rehearsal: the committed table, on every profile's pages (GPU-hours on the H100).
    for profile in ("paper", "laptop"):
        page = write_pages(profile, tmp_path)["fedotp"].read_text()
        assert "## Cost at paper scale" in page and "NVIDIA H100" in page
        assert "measured by bench/rehearsal_steps.py (bench/rehearsal_steps_xeon.json)" in page
        # three seeds of 55 rows: the 45 before issue 55, the equal-budget CoOp and unscaled pFedPrompt rows
        assert "| `fedotp/01_label_shift.ipynb` | 165 |" in page
    page = write_pages("paper", tmp_path)["fedotp"].read_text()
    assert "1 REHEARSAL" in page
    monkeypatch.setattr(rehearsal, "COMMITTED_COST", Path("no_such_cost.json"))
    assert "No rehearsal has run" in write_pages("paper", tmp_path)["fedotp"].read_text()
    assert "## Cost at paper scale" not in write_pages("laptop", tmp_path)["fedotp"].read_text()
    steps = {"CLIP RN50": {"step_s": 2.0, "runs": 3}}
    table = [{"notebook": "fedotp/01_label_shift.ipynb", "runs": 45, "client_steps": 9000, "models": ["CLIP RN50"],
              "cpu_hours": 5.0, "unknown": 0, "gpu_hours": None},
             {"notebook": "fedpft/15_time.ipynb", "runs": 6, "client_steps": 10, "models": ["ResNet-10"],
              "cpu_hours": 1.0, "unknown": 0, "gpu_hours": None}]
    rehearsal.write_cost(rehearsal.cost_path(tmp_path), steps, table, {"cores": 2})
    page = write_pages("paper", tmp_path)["fedotp"].read_text()
    assert "| `fedotp/01_label_shift.ipynb` | 45 | 9,000 | CLIP RN50 | 5.0 | not measured |" in page
    assert "fedpft/15_time" not in page and "CLIP RN50 2.00 s (3 runs)" in page


def test_clip_weights_may_name_a_folder_with_one_file_per_architecture(tmp_path, monkeypatch):
    from fedrepro.models import clip_model

    monkeypatch.setenv(clip_model.ENV_CLIP_WEIGHTS, str(tmp_path))
    seen = []
    monkeypatch.setattr(clip_model, "_cached_backbone", lambda arch, weights, source: seen.append(weights))
    clip_model.clip_backbone("RN50")
    clip_model.clip_backbone("ViT-B-16")
    assert seen == [str(tmp_path / "RN50.pt"), str(tmp_path / "ViT-B-16.pt")]


@pytest.mark.rehearsal
def test_the_ci_subset_rehearses_end_to_end(tmp_path, monkeypatch):
    """The CI subset (FedPFT's and pFedCSPC's cheapest notebooks) at the paper profile on the full-size
    models, rendered; its claims are REHEARSAL (or NOT RUN), never PASS or FAIL; the step times and
    the cost file are written."""
    from fedrepro.claims.core import claims_dir, recorded_claims
    from tests.rehearsal_data import write_shaped_data

    monkeypatch.setenv("FEDREPRO_OUTPUT", str(tmp_path / "out"))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    for var in ("FEDREPRO_RUNS", "FEDREPRO_FIGURES", "FEDREPRO_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    data = write_shaped_data(tmp_path / "data")
    report = reproduce("paper", only=",".join(rehearsal.CI_SUBSET), rehearse=True, rehearsal_data=str(data))
    assert sorted(nb["notebook"].removesuffix(".ipynb") for nb in report["notebooks"]) == sorted(rehearsal.CI_SUBSET)
    assert not report["unplanned_runs"]
    verdicts = {c["verdict"] for c in recorded_claims(claims_dir("paper", tmp_path / "out" / "rehearsal")).values()}
    assert verdicts and verdicts <= {REHEARSAL, "NOT RUN"}
    assert report["rehearsal"]["step_times"]  # the runs' models, timed
    cost = rehearsal.load_cost(tmp_path / "out")
    assert {r["notebook"] for r in cost["notebooks"]} >= {"fedpft/15_time.ipynb", "pfedcspc/08_gradcam.ipynb"}


def test_the_rehearsal_pass_is_costed_run_by_run_and_each_run_once(monkeypatch):
    """bench/rehearsal_steps.py --rehearsal-cost: (steps + fine-tuning steps) x step_s + setup_s per run."""
    monkeypatch.delenv(ENV_REHEARSE, raising=False)
    bench = bench_module("rehearsal_steps")
    # 6 candidates (8 clients, 2 held out) at half participation: 3 a round; rounds 2 and 3 evaluated.
    cfg = make_config("smoke", train__rounds=3, train__participation=0.5, train__local_epochs=2,
                      train__max_local_batches=2, train__eval_every=2, train__eval_finetune_epochs=1,
                      train__global_eval=True, data__num_clients=8, data__holdout_clients=2,
                      data__max_test_per_client=4)
    assert bench.run_counts(cfg) == {"client_steps": 3 * 3 * 2 * 2, "finetune_steps": 2 * 8 * 1 * 2,
                                     "test_images": 2 * 8 * 4 * 2}
    steps = {rehearsal.model_label(cfg): {"step_s": 500.0, "setup_s": 7.0}}
    one = (36 + 32) * 500.0 + 7.0
    assert bench.run_seconds(cfg, steps) == one
    assert bench.run_seconds(cfg, {}) is None  # its model not timed
    with pytest.raises(ValueError, match="not a rehearsal config"):
        bench.run_counts(cfg.replace(**{"train.max_local_batches": None}))
    # Two notebooks share run a; b is a second run; c waits for a learning-rate search.
    a, b, c = cfg, cfg.replace(seed=1), cfg.replace(seed=2)
    cost = bench.pass_cost({"p/1.ipynb": ["a", "b"], "p/2.ipynb": ["a"], "00_tour.ipynb": ["b"]}, {"a": a, "b": b},
                           steps, {"c": c}, workers=2)
    assert [r["cpu_s"] for r in cost["notebooks"]] == [2 * one, one, one]
    assert cost["papers"]["p"]["runs"] == 2 and cost["papers"]["tour"]["runs"] == 1
    assert cost["total"]["runs"] == 3 and cost["total"]["client_steps"] == 3 * 36
    assert cost["total"]["cpu_hours"] == round(3 * one / 3600, 2) and cost["after_searches"]["cpu_s"] == one
    assert cost["total"]["wall_hours"] == round(1.5 * one / 3600, 2)  # 3 runs on 2 workers
    assert bench.pass_cost({}, {"a": a}, steps, workers=2)["total"]["wall_hours"] == round(one / 3600, 2)  # one run


def test_the_step_bench_times_a_client_met_again_apart_from_its_first_update(tmp_path):
    """bench/rehearsal_steps.py times each client's first update and one client's second, so a method
    that does per-client work once (a CLIP method's encoding) shows it as first_s above again_s."""
    from support import tiny_config

    result = bench_module("rehearsal_steps").time_steps(tiny_config(tmp_path), 3)
    assert result["steps_timed"] == 2 and result["again_s"] > 0 and result["first_s"] > 0
    assert result["step_s"] > 0 and result["model_input"] == 8 and result["on_gpu"] in (False, True)


def test_the_committed_cost_table_costs_todays_paper_plan():
    """bench/paper_cost.json, which every profile's pages print, has a row for each notebook that the
    paper profile trains, with the runs today's plan gives it (every seed, the tuned rows beside their
    searches): a changed setup must refresh it
    (bench/rehearsal_steps.py --only none --cpu-json ... --gpu-json ... --out bench/paper_cost.json)."""
    from fedrepro.app.reproduce import numbered_notebooks
    from fedrepro.env.host import repo_root

    readers, _ = rehearsal.paper_profile_runs(numbered_notebooks(repo_root()), repo_root() / "notebooks")
    planned = {nb: len(h) for nb, h in readers.items() if h}
    committed = {r["notebook"]: r["runs"] for r in rehearsal.committed_cost()["notebooks"]}
    assert committed == planned


def test_a_layer_that_sets_the_cut_value_records_it_as_the_papers(monkeypatch):
    """FedOTP trains CIFAR-100 with E = 1, the value the cut sets too: the rehearsal still records the
    paper's E = 1 (not the profile's default before the layer), so its cost multiplies out E = 1."""
    from fedrepro.config import ENV_REHEARSE, make_config

    monkeypatch.setenv(ENV_REHEARSE, "1")
    base = make_config("paper")
    assert base.rehearsal["paper"]["local_epochs"] != 1 or base.train.local_epochs == 1
    cfg = base.replace(**{"train.local_epochs": 1, "train.rounds": 150})
    assert cfg.rehearsal["paper"]["local_epochs"] == 1 and cfg.rehearsal["paper"]["rounds"] == 150
    assert cfg.train.local_epochs == 1 and cfg.train.rounds == 2
    # Rebuilding a cut config from its own dict (its record beside it) keeps the paper's values.
    again = base.replace(**{"train.local_epochs": 7}).to_dict()
    assert make_config("paper", overrides=again).rehearsal["paper"]["local_epochs"] == 7


def test_the_cost_table_counts_every_seed_the_paper_profile_trains(monkeypatch):
    """A rehearsal trains one seed of each row; the paper profile trains three, so the table costs
    three runs for each rehearsed one (PEP-FedPT's privacy notebook: 2 rehearsal runs, 6 paper runs)."""
    from fedrepro.config import ENV_REHEARSE
    from fedrepro.env.host import repo_root
    from fedrepro.papers.plan import plan

    monkeypatch.setenv(ENV_REHEARSE, "1")
    nb = repo_root() / "notebooks" / "pep_fedpt" / "06_privacy.ipynb"
    cut = plan([nb], nb.parent.parent, "paper")
    readers, runs = rehearsal.paper_profile_runs([nb], nb.parent.parent)
    assert len(readers["pep_fedpt/06_privacy.ipynb"]) == 3 * len(cut.readers["pep_fedpt/06_privacy.ipynb"])
    assert all(not c.rehearsal and c.train.rounds > 2 for c in runs.values())


# Representative runs (issue 57, fedrepro.runs.represent): rehearsal configs of one path key train once.

def _rehearsal_of(cfg):
    """``cfg`` (a tiny test config) as a rehearsal: its record set, so that it is cut (2 rounds, one
    local step...) as a paper-profile rehearsal is."""
    from fedrepro.config import from_dict

    return from_dict({**cfg.to_dict(), "rehearsal": {"paper": {}, "cut": {}}})


def test_the_path_key_ignores_seeds_and_rates_and_keeps_what_changes_the_code_or_shapes(rehearsing):
    from fedrepro.runs.represent import path_key

    cfg = setup("pfedcspc", "paper")
    key = path_key(cfg)
    same = cfg.replace(**{"seed": 7, "data.partition_seed": 3, "train.lr": 0.123, "train.momentum": 0.5,
                          "data.partition_args.alpha": 9.0, "method.args.tau_p": 0.02})
    assert same.hash() != cfg.hash() and path_key(same) == key
    assert path_key(setup("pfedcspc", "paper", train__rounds=50)) == key  # the paper's schedule: the record only
    for change in ({"method.args.n_repeat": 3}, {"method.args.pa": False}, {"train.participation": 0.5},
                   {"data.num_clients": 20}, {"data.holdout_clients": 2}, {"data.validation": 0.2},
                   {"train.momentum": 0.0}):  # a zero weight may switch a term off
        assert path_key(cfg.replace(**change)) != key, change


def test_a_stand_in_is_its_own_run_folder_copied_from_its_representative(tiny, monkeypatch):
    """The first rehearsal run of a path key trains and is named in the index; a run of the same key
    (another seed, rate and α) is stored without training: its own config and hash, its own data's
    partition (so its model can be rebuilt for analysis), the representative's rounds and state,
    checked in full, and loaded by fedrepro.run as any stored run."""
    import fedrepro
    from fedrepro.runs import represent, train
    from fedrepro.runs.store import RunResult

    rep = _rehearsal_of(tiny())
    stand_in = rep.replace(**{"seed": 3, "train.lr": 0.01, "data.partition_args.alpha": 1.0})
    assert stand_in.hash() != rep.hash() and represent.path_key(stand_in) == represent.path_key(rep)
    trained = fedrepro.run(rep)
    store = fedrepro.RunStore(rep.runs_dir)
    assert represent.index_file(store, rep).is_file()

    def no_training(*args, **kwargs):
        raise AssertionError("a stand-in trained")

    monkeypatch.setattr(train, "_build_and_train", no_training)
    copy = fedrepro.run(stand_in)
    assert copy.path == store.path(stand_in)
    checked = RunResult(copy.path).verify(deep=True)
    assert checked.config.hash() == checked.summary["config_hash"] == stand_in.hash()
    assert checked.meta[represent.REPRESENTED_BY] == rep.hash() and checked.summary["seed"] == 3
    assert checked.meta["partition_hash"] != trained.meta["partition_hash"]  # its own seed's and α's
    assert checked.rounds.equals(trained.rounds)
    assert checked.final_state()["shared"].keys() == trained.final_state()["shared"].keys()
    _, clients, _ = train.restore(checked)  # its partition rebuilt from its config matches what it stores
    assert len(clients) == stand_in.data.num_clients
    assert fedrepro.run(stand_in).path == copy.path  # now a stored run, read back as one
    # The cost table times the run that trained, not its copy again.
    assert rehearsal.step_times([rep, stand_in])["mlp"]["runs"] == 1


def test_a_real_run_is_never_copied(tiny):
    """Without a rehearsal record a config of the same path key trains, even where an index names a
    stored run of its key; and a real run is never named in one."""
    import fedrepro
    from fedrepro.runs import represent

    first, second = tiny(), tiny(seed=3)
    fedrepro.run(first)
    store = fedrepro.RunStore(first.runs_dir)
    assert not (store.root / represent.INDEX).exists()
    index = represent.index_file(store, first)
    index.parent.mkdir()
    index.write_text(json.dumps({"run": first.hash()}))
    res = fedrepro.run(second)
    assert represent.REPRESENTED_BY not in res.meta and res.summary["seed"] == 3
    assert represent.representatives({c.hash(): c for c in (first, second)}, lambda c: False) == {}


def test_a_crash_before_a_copy_is_published_leaves_no_folder(tiny, monkeypatch):
    import os

    import fedrepro
    from fedrepro.runs import store as store_module

    rep = _rehearsal_of(tiny())
    stand_in = rep.replace(seed=3)
    fedrepro.run(rep)
    store = fedrepro.RunStore(rep.runs_dir)
    rename = os.rename

    def crash(src, dst):
        if str(dst) == str(store.path(stand_in)):
            raise KeyboardInterrupt  # the process stops between writing the copy and publishing it
        return rename(src, dst)

    monkeypatch.setattr(store_module.os, "rename", crash)
    with pytest.raises(KeyboardInterrupt):
        fedrepro.run(stand_in)
    assert not store.path(stand_in).exists() and not list(store.root.glob(f".{stand_in.hash()}.*"))
    monkeypatch.setattr(store_module.os, "rename", rename)
    assert fedrepro.run(stand_in).meta["rehearsal_represented_by"] == rep.hash()


def test_a_rehearsal_pass_trains_the_first_run_of_each_path_key_and_the_others_wait_for_it(tiny):
    """fedrepro reproduce's schedule: in each path key's group of runs to train the first by hash
    trains; where the index names a stored run of the key, every run of the group is a copy of it."""
    import fedrepro
    from fedrepro.runs.represent import representatives

    base = _rehearsal_of(tiny())
    group = {c.hash(): c for c in (base, base.replace(seed=1), base.replace(**{"train.lr": 0.2}))}
    apart = base.replace(**{"data.num_clients": 5})  # another path: trains itself
    first, *others = sorted(group)
    assert representatives({**group, apart.hash(): apart}, lambda c: False) == {first: others}
    stored = base.replace(seed=9)
    fedrepro.run(stored)
    assert representatives(group, lambda c: False) == {stored.hash(): sorted(group)}
    assert representatives(group, lambda c: True) == {first: others}  # a stale representative is none


def test_the_rehearsal_plan_says_how_many_runs_train_and_how_many_are_copied(rehearsing, tmp_path, monkeypatch,
                                                                              capsys):
    """--plan counts the copies without training: FedPFT's 09_attention plans 3 runs of one path key."""
    from fedrepro.app.reproduce import _reproduce

    monkeypatch.setenv("FEDREPRO_OUTPUT", str(tmp_path))
    report = _reproduce("paper", "fedpft/09_attention", "python3", 1, True, False, None)
    copies = sum(map(len, report["rehearsal_representatives"].values()))
    assert report["to_train"] == report["runs"] == 3 and copies == 2
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("[reproduce] rehearsal:"))
    assert f"{report['runs']} planned runs" in line and f"{report['runs'] - copies} distinct paths trained" in line
    assert not list(tmp_path.glob("runs/*"))  # nothing trained
