"""FedPFT's tables: budgets as the paper gives them."""
import dataclasses

import pytest

from fedrepro.papers import fedpft, setup


@pytest.mark.parametrize("profile", ["smoke", "laptop", "paper"])
def test_two_stage_gets_each_stage_as_long_as_the_joint_run(profile):
    """ICLR App. G: 1000 rounds of contrastive learning, then 1000 of classification, against
    FedPFT+Con's 1000 joint rounds; over the claim seeds."""
    rounds = setup("fedpft", profile).train.rounds
    cfgs = fedpft.TABLES["two_stage"].configs(profile)
    by = {}
    for c in cfgs:
        by.setdefault(c.method.name, []).append(c)
    assert {c.train.rounds for c in by["fedpft_con"]} == {rounds}
    assert {c.train.rounds for c in by["fedpft_two_stage"]} == {2 * rounds}
    assert len(by["fedpft_two_stage"]) == len(by["fedpft_con"]) >= (1 if profile == "smoke" else 3)
    two = by["fedpft_two_stage"][0]
    assert two.method.args.get("stage1_rounds") is None  # half of 2 × rounds: the joint run's length


def _seeds_by(cfgs, method):
    """{α: seeds} of ``method``'s runs."""
    out = {}
    for c in cfgs:
        if c.method.name == method:
            out.setdefault(c.data.partition_args["alpha"], set()).add(c.seed)
    return out


@pytest.mark.parametrize("profile", ["laptop", "paper"])
def test_probe_claims_rest_on_the_claim_seeds(profile):
    """fedpft.probe_approx_match reads every method of the probe table, FedPFT+Con included: each
    over the claim seeds at each α, so that the check pairs them by seed."""
    from fedrepro.config import default_seeds

    cfgs = fedpft.TABLES["probe"].configs(profile)
    seeds = set(default_seeds(profile))
    assert len(seeds) >= 3
    for m in ("fedavg", "fedpft", "fedper", "fedbn", "fedcac", "fedpft_con"):
        assert _seeds_by(cfgs, m) == {0.5: seeds, 1.0: seeds}, m


def test_fedavg_linear_claim_rests_on_the_claim_seeds():
    """fedpft.fedavg_linear_beats_fedavg pairs FedAvg+Linear with FedAvg by seed at every α."""
    cfgs = fedpft.TABLES["linear"].configs("laptop")
    both = {0.1: {0, 1, 2}, 0.5: {0, 1, 2}, 1.0: {0, 1, 2}}
    assert _seeds_by(cfgs, "fedavg_linear") == _seeds_by(cfgs, "fedavg") == both


def test_the_planner_knows_every_probe_the_mismatch_notebook_computes():
    """Notebook 02 computes the mismatch probe on every run of the probe table: the plan lists each."""
    from pathlib import Path

    from fedrepro.papers.plan import plan

    root = Path(__file__).resolve().parents[3] / "notebooks"
    p = plan([root / "fedpft" / "02_mismatch_probe.ipynb"], root, "laptop")
    probed = {h for name, h in p.analyses if name == "mismatch_probe"}
    cfgs = fedpft.TABLES["probe"].configs("laptop")
    assert {c.hash() for c in cfgs} <= probed
    assert sum(c.method.name == "fedpft_con" for c in cfgs) == 6
    p5 = plan([root / "fedpft" / "05_ablation.ipynb"], root, "laptop")
    assert {c.hash() for c in fedpft.TABLES["linear"].configs("laptop")} <= set(p5.runs)


@pytest.mark.parametrize("profile", ["laptop", "paper"])
def test_fedrep_trains_the_same_local_epochs_as_every_method(profile):
    """ICLR §4.1: R = 5 local epochs a round for all; FedRep's head + body epochs add up to R."""
    for c in fedpft.TABLES["main_default"].configs(profile, tuned=False):
        if c.method.name == "fedrep":
            args = c.method.args
            assert args["head_epochs"] + args["body_epochs"] == c.train.local_epochs == 5


def test_main_table_claim_rows_rest_on_the_claim_seeds():
    cfgs = fedpft.TABLES["main_default"].configs("laptop")
    for m in ("fedavg", "fedpft", "local", "fedper", "fedbn", "fedrep"):
        assert {c.seed for c in cfgs if c.method.name == m} == {0, 1, 2}, m


@pytest.mark.parametrize("name, ref", [("100_clients", "T11"), ("resnet18", "T12")])
@pytest.mark.parametrize("profile", ["laptop", "paper"])
def test_by_alpha_tables_line_up_with_the_paper(name, ref, profile):
    """ICLR Tables 11 and 12 print α as rows ("Scenarios") and methods as columns: ours beside them
    must use the same rows and columns, so that each of our cells sits beside the paper's."""
    import pandas as pd

    from fedrepro.papers.reference import paper_table

    from fedrepro.papers.fedpft.variants import PHI_MATCHED

    d = fedpft.TABLES[name]
    cfgs = d.configs(profile)
    # The φ-epoch-matched FedPFT row (laptop) is a variant of the table's rows, named by its derive.
    runs = pd.DataFrame([{"method.name": c.method.name, "data.partition_args.alpha": c.data.partition_args["alpha"],
                          "seed": c.seed, "best": 0.5 + 0.01 * c.seed,
                          "setting": PHI_MATCHED if c.method.args.get("r_a", 1) != 1 else None} for c in cfgs])
    shown = d.show(d.derive(runs))
    quoted = paper_table("fedpft", ref)            # methods × α, as stored
    paper_half, ours_half = shown["paper"], shown["ours (best round)"]
    assert list(shown.index) == ["α=0.1", "α=0.5", "α=1.0"]
    assert list(paper_half.columns) == list(quoted.index)   # every method of the paper, as a column
    # ours: the paper's methods, and at laptop the matched row (ours alone: the paper has no such column)
    assert set(ours_half.columns) <= set(paper_half.columns) | {PHI_MATCHED}
    assert (PHI_MATCHED in ours_half.columns) == (profile == "laptop")
    for alpha in sorted({c.data.partition_args["alpha"] for c in cfgs}):
        assert ours_half.loc[f"α={alpha}", "fedpft"] == "51.00 ± 1.00"
    for method in quoted.index:
        for col in quoted.columns:  # "α=0.1", ...
            assert paper_half.loc[col, method] == quoted.loc[method, col]
    if profile == "laptop":   # α = 0.5 only: the other rows show the paper alone
        assert (ours_half.loc["α=0.1"] == "").all()


def test_tsne_figures_run_on_the_papers_setup_and_reuse_planned_runs():
    """ICLR §4.4: 10 clients × 1000 training and 500 test images at the paper profile, Fig. 4's seven
    methods; at laptop every panel but PerClassifier at α = 0.5 is a run other notebooks plan."""
    from pathlib import Path

    from fedrepro.papers.fedpft.notebooks import TSNE_PANELS, tsne_runs
    from fedrepro.papers.plan import plan

    assert list(TSNE_PANELS) == ["FedAvg", "FedCAC", "FedPer", "FedPFT", "FedPFT w/o Alter.",
                                 "FedPFT-PerClassifier", "FedPFT+Con"]
    for c in tsne_runs("paper").values():
        assert c.data.num_clients == 10 and c.data.dataset == "cifar10"
        assert (c.data.partition_args["train_per_client"], c.data.partition_args["test_per_client"]) == (1000, 500)
    root = Path(__file__).resolve().parents[3] / "notebooks"
    others = plan([p for p in sorted((root / "fedpft").glob("*.ipynb")) if p.stem != "08_tsne"], root, "laptop")
    fresh = [name for name, c in tsne_runs("laptop").items() if c.hash() not in others.runs]
    assert fresh == ["FedPFT-PerClassifier"]
    mine = plan([root / "fedpft" / "08_tsne.ipynb"], root, "laptop")
    assert {c.hash() for c in tsne_runs("laptop").values()} == set(mine.runs)


def test_ablation_has_the_arxiv_only_rows_beside_their_quote():
    """arXiv Table 3's VI and VII, which ICLR Table 4 drops, run as rows of the ablation table."""
    from fedrepro.papers.reference import paper_table

    cfgs = fedpft.TABLES["ablation"].configs("laptop")
    args = [c.method.args for c in cfgs if c.method.name == "fedpft_con"]
    assert {"use_prompts": False, "con_prompts": "none", "alternate": False} in args
    assert {"con_prompts": "kappa", "alternate": False} in args
    assert {"arXiv-VI", "arXiv-VII"} <= set(paper_table("fedpft", "T-Ablation").index)
    assert {"arXiv-VI", "arXiv-VII"} <= set(fedpft.TABLES["ablation"]._row_order("laptop"))


def test_the_tables_that_probe_the_final_models_train_the_full_budget():
    """The laptop runs stop when flat from round 25; the stop watches the accuracy curve, not what a
    probe of the final model measures, so the probed tables (and the attention figure's claim) train
    all 50 rounds: the runs of the same configs without the rule, hash for hash."""
    from fedrepro.papers.fedpft.notebooks import attention_runs

    assert setup("fedpft", "laptop").train.stop_when_flat
    probed = {name for name, t in fedpft.TABLES.items() if t.final_models}
    assert probed == {"probe", "linear_probe", "prompt_effect", "feature_shift"}
    for name in probed:
        cfgs = fedpft.TABLES[name].configs("laptop")
        assert cfgs and not any(c.train.stop_when_flat for c in cfgs)
        stopped = dataclasses.replace(fedpft.TABLES[name], final_models=False).configs("laptop")
        assert all(c.train.stop_when_flat for c in stopped)
        assert [c.full_budget().hash() for c in stopped] == [c.hash() for c in cfgs]
        assert not {c.hash() for c in stopped} & {c.hash() for c in cfgs}
    assert not any(c.train.stop_when_flat for c in attention_runs("laptop").values())
    assert all(c.train.stop_when_flat for c in fedpft.TABLES["main_default"].configs("laptop"))


@pytest.mark.parametrize("profile", ["laptop", "paper"])
def test_linear_table_runs_both_fedavg_linear_schedules_over_the_claim_seeds(profile):
    """FedAvg+Linear's schedule is ours (the paper gives none): the table runs it jointly (the claim's
    row) and alternating, each named, both over FedAvg's seeds; the paper's number sits beside the
    joint row."""
    from fedrepro.config import default_seeds
    from fedrepro.papers.fedpft.variants import LINEAR_SCHEDULES

    table = fedpft.TABLES["linear"]
    cfgs = [c for c in table.configs(profile) if c.method.name == "fedavg_linear"]
    seeds = set(default_seeds(profile))
    by = {}
    for c in cfgs:
        by.setdefault(c.method.args["alternate"], set()).add((c.data.partition_args["alpha"], c.seed))
    fedavg = {(c.data.partition_args["alpha"], c.seed) for c in table.configs(profile) if c.method.name == "fedavg"}
    assert set(by) == {False, True} and by[False] == by[True] == fedavg
    assert {s for _, s in fedavg} == seeds
    assert set(LINEAR_SCHEDULES.values()) == {False, True}
    ref = table.paper_numbers()
    assert "fedavg_linear (joint, ours)" in ref.index and "fedavg_linear" not in ref.index


PHI_TABLES = ("main_default", "linear_probe", "100_clients", "resnet18")


@pytest.mark.parametrize("profile", ["smoke", "laptop"])
@pytest.mark.parametrize("name", PHI_TABLES)
def test_the_phi_matched_row_trains_phi_as_many_epochs_as_fedper(name, profile):
    """Issue 54 (audit finding 7): beside the paper's schedule, whose φ trains R_a = 1 epoch a round,
    the tables the main comparisons read run FedPFT with φ given FedPer's epochs a round (read off
    each method's schedule, as the likely causes read them), at every α and seed the paper's row
    runs; the paper's (4, 1) row is unchanged."""
    from fedrepro.papers.diagnose import extractor_epochs
    from fedrepro.papers.fedpft.variants import PHI_MATCHED_R_F

    cfgs = fedpft.TABLES[name].configs(profile)
    phi = lambda c: extractor_epochs(c, c.train.rounds)  # noqa: E731
    paper_row = [c for c in cfgs if c.method.name == "fedpft" and not c.method.args]
    matched = [c for c in cfgs if c.method.name == "fedpft" and c.method.args]
    fedper = {phi(c) for c in cfgs if c.method.name == "fedper"}
    assert paper_row and matched and len(fedper) == 1
    assert {phi(c) for c in matched} == fedper
    assert {phi(c) for c in paper_row} == {c.train.rounds for c in paper_row}  # 1 epoch a round: the gap
    assert {c.method.args["r_f"] for c in matched} == {PHI_MATCHED_R_F}  # the paper's prompt phase, kept
    assert not any(c.method.args.get("alternate") is False for c in matched)  # and the alternation
    at = lambda cs: {(c.data.partition_args["alpha"], c.seed) for c in cs}  # noqa: E731
    assert at(matched) == at(paper_row)


@pytest.mark.parametrize("name", PHI_TABLES)
def test_the_paper_profile_runs_the_papers_schedule_alone(name):
    """The paper's 1000 rounds are the regime its tables speak of: no matched row there (left_open)."""
    cfgs = fedpft.TABLES[name].configs("paper", tuned=False)
    assert {str(c.method.args) for c in cfgs if c.method.name == "fedpft"} == {"{}"}


def test_the_matched_rows_are_named_apart_from_the_papers_schedule():
    """The derive names the matched runs by their label in method.name, after every other row, so that
    a claim, a table cell or a bar that reads fedpft reads the paper's schedule alone."""
    import pandas as pd

    from fedrepro.papers.fedpft.tables import phi_matched_labels
    from fedrepro.papers.fedpft.variants import PHI_MATCHED

    runs = pd.DataFrame({"method.name": ["fedpft", "fedpft", "fedavg"], "setting": [PHI_MATCHED, None, None],
                         "best": [0.9, 0.8, 0.7]})
    named = phi_matched_labels(runs)
    assert list(named["method.name"]) == ["fedpft", "fedavg", PHI_MATCHED]
    assert list(named["best"]) == [0.8, 0.7, 0.9]
    shown = fedpft.TABLES["main_default"].ours(named.assign(**{"data.partition_args.alpha": 0.5, "seed": 0}))
    assert {"fedpft", PHI_MATCHED} <= set(shown.index)


@pytest.mark.parametrize("profile", ["smoke", "laptop"])
def test_the_r_f_table_runs_the_main_tables_baselines_as_its_ceiling(profile):
    """fedpft.rf_sweep_rises reads its room off the best baseline at the sweep's α: the main table's own
    configs (trained once), over the sweep's seeds."""
    from fedrepro.papers.fedpft.variants import RF_ALPHA, RF_CEILING_BASELINES

    cfgs = fedpft.TABLES["r_f"].configs(profile)
    beside = [c for c in cfgs if c.method.name != "fedpft"]
    assert {c.method.name for c in beside} == set(RF_CEILING_BASELINES)
    assert {c.data.partition_args["alpha"] for c in cfgs} == {RF_ALPHA}
    assert {c.hash() for c in beside} <= {c.hash() for c in fedpft.TABLES["main_default"].configs(profile)}
    assert {c.seed for c in beside} == {c.seed for c in cfgs if c.method.name == "fedpft"}
    # the paper profile searches the main rows' rates, which this table does not: no ceiling rows there
    assert {c.method.name for c in fedpft.TABLES["r_f"].configs("paper")} == {"fedpft"}
