"""pFedCSPC's PMI analyses on a finished run."""
from __future__ import annotations

from support import BN_CNN

import fedrepro

CSPC = {"method.name": "pfedcspc", **BN_CNN,
        "method.args": {"server_epochs": 5, "proj_dim": 16, "clusters": 2, "n_repeat": 3}}


def test_pmi_analyses_on_a_finished_run(tiny):
    from fedrepro.papers.verdicts import evaluate_claims
    from fedrepro.papers.pfedcspc.pmi import pmi_finetune, pmi_start, pmi_start_table

    table = fedrepro.run_grid(tiny(**{**CSPC, "train.rounds": 2}), seeds=[0], progress=False)
    start = pmi_start(table["path"][0])
    assert len(start) == 4 and start[["pmi_init_acc", "global_init_acc"]].stack().between(0, 1).all()
    curves = pmi_finetune(table["path"][0], epochs=2)
    assert set(curves["init"]) == {"pmi", "global"} and curves["epoch"].max() == 2
    summary = pmi_start_table(table)
    assert -1 <= summary["weight_fit_corr"].item() <= 1 and 1 <= summary["pmi_effective_sources"].item() <= 4
    verdict = evaluate_claims(summary, ids=["pfedcspc.pmi_starts_better"])["verdict"].item()
    assert verdict == "INCONCLUSIVE"  # one seed: no spread to put an interval on


def test_tau_p_rule_picks_a_winner_only_beyond_noise_else_the_neutral_tau_p():
    import math

    import pandas as pd
    import pytest

    from fedrepro.papers.pfedcspc.pmi import select_tau_p

    def table(per_client: dict, n_images: int = 40) -> tuple[pd.DataFrame, callable]:
        # per_client: τ_p -> one list of per-client I_local per seed; a run's score is their mean
        rows = [{"method.args.tau_p": tau, "seed": 1000 + s, "final_i_local_mean": float(pd.Series(v).mean()),
                 "_units": v} for tau, seeds in per_client.items() for s, v in enumerate(seeds)]
        return pd.DataFrame(rows), lambda row: (pd.Series(row["_units"], dtype=float), n_images)

    clear = {1.0: [[0.60, 0.62, 0.61, 0.63]] * 3, 0.1: [[0.70, 0.71, 0.72, 0.70]] * 3}
    t, units = table(clear)
    d = select_tau_p(t, units_of=units)
    assert d.rate == 0.1 and d.best == 0.1 and d.margin > d.se and d.seeds == (1000, 1001, 1002)
    noisy = {1.0: [[0.60, 0.80, 0.50, 0.70]] * 3, 0.1: [[0.75, 0.55, 0.70, 0.64]] * 3}
    t, units = table(noisy)
    d = select_tau_p(t, units_of=units)
    assert d.best == 0.1 and d.rate == 1.0 and "neutral" in d.rule  # within noise: the neutral τ_p
    t, units = table(clear, n_images=30)  # 90 < 100 validation images: nothing is decided
    assert select_tau_p(t, units_of=units).rate == 1.0
    t, units = table({1.0: [[0.6, 0.6]] * 3, 0.1: [[0.6, 0.6]] * 3})
    assert select_tau_p(t, units_of=units).rate == 1.0  # a tie: the neutral, least selective τ_p
    t, units = table({1.0: [[0.5, 0.5]] * 2, 0.1: [[0.9, 0.9], []]})
    t.loc[3, "final_i_local_mean"] = math.nan  # a diverged run scores 0
    assert select_tau_p(t, units_of=units).best == 1.0
    with pytest.raises(ValueError, match="final_i_local_mean"):
        select_tau_p(t.drop(columns="final_i_local_mean"), units_of=units)


def test_tau_p_validation_runs_never_read_the_test_split():
    from fedrepro.papers.pfedcspc import TABLES
    from fedrepro.papers.pfedcspc.tables import tau_p_grid

    for profile in ("smoke", "laptop", "paper"):
        val = TABLES["pmi_tau_p_validation"].configs(profile)
        test = TABLES["pmi_tau_p"].configs(profile)
        assert {c.data.validation for c in val} == {0.2} and {c.data.validation for c in test} == {0.0}
        assert sorted({c.method.args["tau_p"] for c in val}) == sorted(tau_p_grid(profile))
        # Same candidates on both splits, so the pick's test-split runs are planned; the choice runs at
        # the tuning seeds, which no claim reads, as many of them as the claims have.
        assert {c.method.args.get("tau_p", 1.0) for c in val} == {c.method.args.get("tau_p", 1.0) for c in test}
        assert not {c.seed for c in val} & {c.seed for c in test}
        assert len({c.seed for c in val}) == len({c.seed for c in test})
        assert len(tau_p_grid(profile)) >= 2 and len({c.seed for c in test}) == len(fedrepro.default_seeds(profile))


def test_calibration_view_shows_the_same_round_before_and_after_on_two_clients(tiny):
    from fedrepro.papers.pfedcspc.calibration import calibration_view

    table = fedrepro.run_grid(tiny(**{**CSPC, "train.rounds": 2, "train.global_eval": True}), seeds=[0], progress=False)
    v = calibration_view(table["path"][0], per_class=5, seed=0)
    assert v.round == 2 and len(set(v.clients)) == 2 and v.classes[0] < v.classes[1]
    assert set(v.stage) == {"before", "after"} and set(v.labels) <= set(v.classes)
    assert len(v.feats) == 4 * (len(v.labels) // 4) and 0 <= v.acc_before <= 1 and 0 <= v.acc_after <= 1


def test_calibration_runs_are_planned_and_reuse_the_main_run_at_laptop():
    from fedrepro.papers.pfedcspc import TABLES
    from fedrepro.papers.pfedcspc.notebooks import NOTEBOOKS, calibration_runs

    runs = calibration_runs("laptop")
    assert runs["round 1"].train.rounds == 1
    late = min(25, TABLES["main_default"].configs("laptop", tuned=False)[0].train.rounds)
    assert runs[f"round {late}"].train.rounds == late
    assert calibration_runs("paper")["round 25"].train.rounds == 25
    planned = {c.hash() for need in NOTEBOOKS["06_tsne"] for c in need.configs("pfedcspc", "laptop")}
    assert {c.hash() for c in runs.values()} <= planned


def test_weight_stats_tell_weights_that_follow_labels_from_weights_that_rank_heads():
    import torch

    from fedrepro.papers.pfedcspc.pmi import weight_stats

    gen = torch.Generator().manual_seed(0)
    sim = torch.rand(6, 6, generator=gen, dtype=torch.float64)
    sim = (sim + sim.T) / 2
    # Weights that are the label similarity: r = 1; every column has its own mix, so a small share.
    follows = weight_stats(sim.clone(), sim)
    assert abs(follows["weight_label_corr"] - 1) < 1e-12 and follows["weight_source_share"] < 0.6
    # Weights that depend only on the source client k' (one column, one value): the share is 1.
    ranks = weight_stats(torch.arange(6, dtype=torch.float64).expand(6, -1).clone(), sim)
    assert abs(ranks["weight_source_share"] - 1) < 1e-12


def test_each_profile_runs_pfedcspc_at_its_recorded_tau_p():
    """The laptop runs use the τ_p its validation sweep picked (setup.TAU_P); a profile that has not
    run the sweep keeps the method's default; the τ_p grid holds every recorded pick."""
    from fedrepro.methods.pfedcspc import PFedCSPCParams
    from fedrepro.papers.pfedcspc.pmi import setup_tau_p
    from fedrepro.papers.pfedcspc.setup import TAU_P
    from fedrepro.papers.pfedcspc.tables import tau_p_grid

    assert setup_tau_p("laptop") == TAU_P["laptop"] == 0.1
    assert setup_tau_p("paper") == setup_tau_p("smoke") == PFedCSPCParams().tau_p
    for profile, tau in TAU_P.items():
        assert tau in tau_p_grid(profile)


def _fit_and_weights(seed: int, n: int = 8, tau: float = 0.1):
    """A random fit matrix (model j's accuracy on client i's test split) and the weights Eq. 4 would
    give if the prototype loss tracked it: softmax over j of −(1 − fit)/τ."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    fit = torch.rand(n, n, generator=gen, dtype=torch.float64)
    return fit, torch.softmax(-(1 - fit) / tau, dim=1)


def test_weight_fit_stats_reward_weights_that_rank_models_by_fit_and_nothing_else():
    import torch

    from fedrepro.papers.pfedcspc.pmi import weight_fit_stats

    fit, w = _fit_and_weights(0)
    assert weight_fit_stats(w, fit)["weight_fit_corr"] == pytest_approx(1.0)
    # The diagonal is left out: a model's own client does not count, however it is weighted.
    w2 = w.clone()
    w2.fill_diagonal_(0.9)
    assert weight_fit_stats(w2, fit)["weight_fit_corr"] == pytest_approx(1.0)
    # Weights that rank the models the other way round, random weights, and each client's weights
    # handed to another client (rows rolled) do not follow the fit.
    assert weight_fit_stats(torch.softmax((1 - fit) / 0.1, dim=1), fit)["weight_fit_corr"] == pytest_approx(-1.0)
    rand = torch.rand(8, 8, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    assert abs(weight_fit_stats(rand, fit)["weight_fit_corr"]) < 0.3
    assert abs(weight_fit_stats(w.roll(1, dims=0), fit)["weight_fit_corr"]) < 0.3


def test_pmi_weights_follow_fit_claim_fails_on_random_or_swapped_weights():
    """The claim (pfedcspc.pmi_weights_follow_fit) on three seeds' measures: PASS where the weights
    follow the fit, not where they are random or each client's are another's."""
    import pandas as pd
    import torch

    from fedrepro.papers.pfedcspc.pmi import weight_fit_stats
    from fedrepro.papers.verdicts import evaluate_claims

    def verdict(make) -> str:
        rows = []
        for s in range(3):
            fit, w = _fit_and_weights(s)
            rows.append({"seed": s, "weight_fit_corr": weight_fit_stats(make(w, s), fit)["weight_fit_corr"]})
        return evaluate_claims(pd.DataFrame(rows), ids=["pfedcspc.pmi_weights_follow_fit"])["verdict"].item()

    assert verdict(lambda w, s: w) == "PASS"
    random = lambda w, s: torch.rand(8, 8, generator=torch.Generator().manual_seed(10 + s), dtype=torch.float64)  # noqa: E731
    assert verdict(random) in ("FAIL", "INCONCLUSIVE")
    assert verdict(lambda w, s: w.roll(1, dims=0)) in ("FAIL", "INCONCLUSIVE")


def test_weight_spread_counts_the_clients_the_weights_draw_on():
    import torch

    from fedrepro.papers.pfedcspc.pmi import weight_spread

    uniform = weight_spread(torch.full((5, 5), 0.2, dtype=torch.float64))
    assert uniform["pmi_effective_sources"] == pytest_approx(5.0) and uniform["pmi_self_weight"] == pytest_approx(0.2)
    one = weight_spread(torch.eye(5, dtype=torch.float64))
    assert one["pmi_effective_sources"] == pytest_approx(1.0) and one["pmi_max_weight"] == pytest_approx(1.0)
    half = weight_spread(torch.tensor([[0.5, 0.5, 0.0], [0.0, 0.5, 0.5], [0.5, 0.0, 0.5]], dtype=torch.float64))
    assert half["pmi_effective_sources"] == pytest_approx(2.0)


def pytest_approx(v):
    import pytest

    return pytest.approx(v, abs=1e-9)
