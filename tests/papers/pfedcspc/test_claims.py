"""pFedCSPC's claims (ablation, personalisation chain, plug-and-play, rounds, PMI, alignment) pass,
fail and stay inconclusive on the numbers, and the claim settings are the ones the claims read."""
from __future__ import annotations

import pandas as pd

from fedrepro.papers.verdicts import evaluate_claims

NAN = float("nan")


def _table(rows):
    # Each run's global model scored 2 points lower before the server calibration.
    return pd.DataFrame([{"setting": s, "seed": seed, "final_global_acc": g, "final_i_local_mean": g,
                          "final_global_acc_before_calibration": g - 0.02}
                         for s, vals in rows.items() for seed, g in enumerate(vals)])


def _verdicts(table, ids):
    return evaluate_claims(table, ids=ids)["verdict"].tolist()


def test_ablation_claims_pass_fail_and_stay_inconclusive_on_the_numbers():
    rows = {"Base": [0.60, 0.61, 0.62], "+TPG+CA": [0.58] * 3, "+CPM+CA": [0.63] * 3, "+PTA+CPM+CA": [0.64] * 3,
            "+PTA+CPM+CA+KP": [0.65] * 3, "+CPM+PA+CA": [0.64] * 3, "+TPG+PA+CA": [0.59] * 3}
    good = _table(rows)
    ids = ["pfedcspc.calibration_raises_global", "pfedcspc.clusters_beat_one_mean", "pfedcspc.ablation_adds_up"]
    assert _verdicts(good, ids) == ["PASS"] * 3
    bad = good.assign(final_global_acc=lambda d: d["final_global_acc"].where(d["setting"] != "+CPM+CA", 0.55))
    assert _verdicts(bad, ids) == ["FAIL"] * 3
    # KP's step: +2, −1, +2 points over three seeds, an interval that straddles 0; the other steps pass.
    res = evaluate_claims(_table({**rows, "+PTA+CPM+CA+KP": [0.66, 0.63, 0.66]}), ids=["pfedcspc.ablation_adds_up"])
    assert res["verdict"].item() == "INCONCLUSIVE"
    assert res["interval"].item().endswith(": +1.00 pts [-1.92, +3.92], required > +0.00 pts")
    chain = _table({"FedAvg": [0.5] * 3, "FedAvg+FT_CE": [0.6] * 3, "FedAvg+PMI+FT_CE": [0.62] * 3,
                    "FedAvg+PMI+FT_CE+Align": [0.61] * 3})
    res = evaluate_claims(chain, ids=["pfedcspc.personalisation_chain"])
    assert res["verdict"].item() == "FAIL" and "[FAIL]" in res["evidence"].item()


def test_calibration_claim_compares_the_same_runs_before_and_after():
    t = _table({"Base": [0.70] * 3, "+CPM+CA": [0.63, 0.64, 0.65]})  # below Base: that is not what it reads
    res = evaluate_claims(t, ids=["pfedcspc.calibration_raises_global"])
    assert res["verdict"].item() == "PASS" and "the same round's aggregate" in res["evidence"].item()
    t["final_global_acc_before_calibration"] += 0.03  # the calibration now costs a point
    assert _verdicts(t, ["pfedcspc.calibration_raises_global"]) == ["FAIL"]


def test_the_claim_settings_are_exactly_what_the_table_iv_claims_read():
    from fedrepro.papers.pfedcspc import ABLATION_GLOBAL
    from fedrepro.papers.pfedcspc.claims import CLAIM_SETTINGS

    assert set(CLAIM_SETTINGS) <= set(ABLATION_GLOBAL)
    ids = ["pfedcspc.calibration_raises_global", "pfedcspc.clusters_beat_one_mean", "pfedcspc.ablation_adds_up"]
    only = _table({k: [0.6 + 0.01 * i] * 3 for i, k in enumerate(ABLATION_GLOBAL) if k in CLAIM_SETTINGS})
    res = evaluate_claims(only, ids=ids)
    assert "NOT RUN" not in res["verdict"].tolist()
    assert "PA: " in res.set_index("claim_id").loc["pfedcspc.ablation_adds_up", "evidence"]  # optional part ran
    assert "TPG+PA+CA" in res.set_index("claim_id").loc["pfedcspc.clusters_beat_one_mean", "evidence"]


def test_plug_and_play_claim_needs_every_base():
    def t6(moon_plus):
        acc = {"fedprox": [0.60, 0.61, 0.62], "fedprox+pfedcspc": [0.65, 0.66, 0.67],
               "moon": [0.61, 0.62, 0.63], "moon+pfedcspc": moon_plus,
               "fedasam": [0.59, 0.60, 0.61], "fedasam+pfedcspc": [0.62, 0.64, 0.63]}
        return pd.DataFrame([{"method": m, "seed": s, "final_global_acc": a}
                             for m, accs in acc.items() for s, a in enumerate(accs)])

    ids = ["pfedcspc.plug_and_play"]
    assert _verdicts(t6([0.64, 0.65, 0.66]), ids) == ["PASS"]
    res = evaluate_claims(t6([0.60, 0.61, 0.62]), ids=ids)
    assert res["verdict"].item() == "FAIL" and "[PASS] fedprox+pfedcspc" in res["evidence"].item()
    assert _verdicts(t6([0.66, 0.60, 0.64]), ids) == ["INCONCLUSIVE"]  # MOON's gain: +5, −2, +1 points


def test_rounds_claims_count_not_reached_as_later_than_any_reached_round():
    ids = ["pfedcspc.fewer_rounds", "pfedcspc.fewer_rounds_beta_0.1"]
    # β = 0.1's claim is sequential (up to 12 seeds, each look at Bonferroni's level): five seeds decide it.
    rounds = {0.5: ([7, 8, 6], [16, 17, 15]), 0.1: ([NAN] * 5, [13, 12, 14, 13, 12])}
    t7 = pd.DataFrame([{"method.name": m, "β": beta, "seed": s, "rounds": x}
                       for beta, pair in rounds.items() for m, xs in zip(("pfedcspc", "fedavg"), pair)
                       for s, x in enumerate(xs)])
    res = evaluate_claims(t7, ids=ids)
    assert res["verdict"].tolist() == ["PASS", "FAIL"]
    assert "not reached" in res["evidence"].iloc[1]
    t7.loc[(t7["β"] == 0.5) & (t7["method.name"] == "pfedcspc"), "rounds"] = [7, 18, 6]  # one seed slower
    assert _verdicts(t7, ids)[0] == "INCONCLUSIVE"
    assert _verdicts(t7.drop(columns="rounds"), ids) == ["NOT RUN"] * 2


def test_cspc_chain_claim_checks_every_stage():
    stages = ("", "+FT_CE", "+PMI+FT_CE", "+PMI+FT_CE+Align")
    rows = {**{f"FedAvg{s}": [0.60 + 0.01 * i] * 3 for i, s in enumerate(stages)},
            **{f"FedCSPC{s}": [0.62 + 0.01 * i] * 3 for i, s in enumerate(stages)}}
    assert _verdicts(_table(rows), ["pfedcspc.cspc_chain_beats_fedavg_chain"]) == ["PASS"]
    rows["FedCSPC+PMI+FT_CE"] = [0.60] * 3  # one stage behind FedAvg's (0.62)
    res = evaluate_claims(_table(rows), ids=["pfedcspc.cspc_chain_beats_fedavg_chain"])
    assert res["verdict"].item() == "FAIL" and "[FAIL] FedCSPC+PMI+FT_CE" in res["evidence"].item()


def test_pmi_claims_read_the_per_run_summary():
    t = pd.DataFrame([{"seed": s, "pmi_init_acc": 0.7, "global_init_acc": 0.6, "pmi_better_share": 0.8,
                       "pmi_first_epoch_loss": 0.9, "global_first_epoch_loss": 1.1, "weight_fit_corr": r}
                      for s, r in enumerate((0.55, 0.5, 0.6))])
    ids = ["pfedcspc.pmi_starts_better", "pfedcspc.pmi_lower_early_loss", "pfedcspc.pmi_weights_follow_fit"]
    assert _verdicts(t, ids) == ["PASS"] * 3
    t["global_init_acc"] = 0.75
    t["pmi_first_epoch_loss"] = 1.2
    t["weight_fit_corr"] = [-0.3, -0.35, -0.25]  # the weights rank the models against their fit
    assert _verdicts(t, ids) == ["FAIL"] * 3
    t["weight_fit_corr"] = [0.9, 0.2, -0.55]  # mean 0.18 over 0, but the seeds disagree
    t["global_init_acc"] = [0.65, 0.72, 0.69]  # PMI's start: +5, −2, +1 points
    assert _verdicts(t, ids[::2]) == ["INCONCLUSIVE"] * 2


def test_features_align_claim_reads_the_alignment_ratio_per_seed():
    def t(ours):
        return pd.DataFrame([{"model": m, "seed": s, "alignment_ratio": x}
                             for m, xs in (("FedAvg", [0.6, 0.5, 0.55]), ("pFedCSPC", ours)) for s, x in enumerate(xs)])

    ids = ["pfedcspc.features_align"]
    assert _verdicts(t([0.4, 0.35, 0.4]), ids) == ["PASS"]
    # The claim is sequential (each look at Bonferroni's level), so three seeds fail it only when they agree.
    assert _verdicts(t([0.75, 0.62, 0.69]), ids) == ["FAIL"]
    assert _verdicts(t([0.4, 0.6, 0.5]), ids) == ["INCONCLUSIVE"]
    assert _verdicts(t([0.4, 0.35, 0.4]).query("seed == 0"), ids) == ["INCONCLUSIVE"]  # one seed cannot tell


def test_pmi_claims_read_one_tau_p_and_name_it():
    import pytest

    t = pd.DataFrame([{"seed": s, "method.args.tau_p": 0.1, "weight_fit_corr": r}
                      for s, r in enumerate((0.55, 0.5, 0.6))])
    res = evaluate_claims(t, ids=["pfedcspc.pmi_weights_follow_fit"])
    assert res["verdict"].item() == "PASS" and "τ_p = 0.1:" in res["evidence"].item()
    mixed = pd.concat([t, t.assign(**{"method.args.tau_p": 1.0})])
    with pytest.raises(ValueError, match="one τ_p"):
        evaluate_claims(mixed, ids=["pfedcspc.pmi_weights_follow_fit"])


def test_plug_and_play_without_the_fedasam_pair_is_not_run():
    rows = [{"method": m, "seed": s, "final_global_acc": 0.6}
            for m in ("fedprox", "fedprox+pfedcspc", "moon", "moon+pfedcspc") for s in range(3)]
    assert _verdicts(pd.DataFrame(rows), ["pfedcspc.plug_and_play"]) == ["NOT RUN"]


def test_more_prototypes_claim_compares_n_repeat_5_with_1_at_the_default_n_aug():
    cid = "pfedcspc.more_prototypes_help"

    def sweep(cells):  # {(n_repeat, n_aug): accuracy at seed 0}, a point higher at each later seed
        return pd.DataFrame([{"method.args.n_repeat": r, "method.args.n_aug": a, "seed": s,
                              "final_global_acc": g + 0.01 * s} for (r, a), g in cells.items() for s in range(3)])

    assert _verdicts(sweep({(5, 5): 0.66, (1, 5): 0.64, (5, 1): 0.10}), [cid]) == ["PASS"]
    assert _verdicts(sweep({(5, 5): 0.62, (1, 5): 0.64, (1, 1): 0.90}), [cid]) == ["FAIL"]
    # Only the n_aug = 5 pair is read: without it there is nothing to judge.
    res = evaluate_claims(sweep({(5, 1): 0.66, (1, 1): 0.64}), ids=[cid])
    assert res["verdict"].item() == "NOT RUN" and "n_aug': 5" in res["evidence"].item()


def test_both_objectives_reads_the_fedavg_row_of_table_ii_for_both_scores():
    # Table II's FedAvg row is the FedAvg-FT run (global model before fine-tuning, and after); the
    # separately tuned FedAvg run of Table III is not what the Global test reads.
    rows = [{"method.name": m, "seed": s, "final_global_acc": g + 0.01 * s, "final_i_local_mean": loc + 0.01 * s}
            for s in range(3) for m, g, loc in (("pfedcspc", 0.78, 0.77), ("fedavg_ft", 0.79, 0.75),
                                                ("fedavg", 0.70, 0.60))]
    res = evaluate_claims(pd.DataFrame(rows), ids=["pfedcspc.both_objectives"])
    assert res["verdict"].item() == "FAIL" and "FedAvg Global 80.00" in res["evidence"].item()
