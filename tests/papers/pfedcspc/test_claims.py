"""pFedCSPC's claims (ablation, personalisation chain, plug-and-play, rounds) pass and fail on the
numbers, and the claim settings are the ones the claims read."""
from __future__ import annotations

import pandas as pd


def _table(rows):
    import pandas as pd

    # Each run's global model scored 2 points lower before the server calibration.
    return pd.DataFrame([{"setting": s, "seed": seed, "final_global_acc": g, "final_i_local_mean": g,
                          "final_global_acc_before_calibration": g - 0.02}
                         for s, vals in rows.items() for seed, g in enumerate(vals)])


def test_ablation_claims_pass_and_fail_on_the_numbers():
    from fedrepro.claims import evaluate_claims

    good = _table({"Base": [0.60, 0.61, 0.62], "+TPG+CA": [0.58] * 3, "+CPM+CA": [0.63] * 3,
                   "+PTA+CPM+CA": [0.64] * 3, "+PTA+CPM+CA+KP": [0.65] * 3, "+CPM+PA+CA": [0.64] * 3,
                   "+TPG+PA+CA": [0.59] * 3})
    ids = ["pfedcspc.calibration_raises_global", "pfedcspc.clusters_beat_one_mean", "pfedcspc.ablation_adds_up"]
    assert evaluate_claims(good, ids=ids)["verdict"].tolist() == ["PASS"] * 3
    bad = good.assign(final_global_acc=lambda d: d["final_global_acc"].where(d["setting"] != "+CPM+CA", 0.55))
    assert evaluate_claims(bad, ids=ids)["verdict"].tolist() == ["FAIL"] * 3
    chain = _table({"FedAvg": [0.5] * 3, "FedAvg+FT_CE": [0.6] * 3, "FedAvg+PMI+FT_CE": [0.62] * 3,
                    "FedAvg+PMI+FT_CE+Align": [0.61] * 3})
    res = evaluate_claims(chain, ids=["pfedcspc.personalisation_chain"])
    assert res["verdict"].item() == "FAIL" and "FAIL" in res["evidence"].item()


def test_calibration_claim_compares_the_same_runs_before_and_after():
    from fedrepro.claims import evaluate_claims

    t = _table({"Base": [0.70] * 3, "+CPM+CA": [0.63, 0.64, 0.65]})  # below Base: that is not what it reads
    res = evaluate_claims(t, ids=["pfedcspc.calibration_raises_global"])
    assert res["verdict"].item() == "PASS" and "the same round's aggregate" in res["evidence"].item()
    t["final_global_acc_before_calibration"] += 0.03  # the calibration now costs a point
    assert evaluate_claims(t, ids=["pfedcspc.calibration_raises_global"])["verdict"].item() == "FAIL"


def test_the_claim_settings_are_exactly_what_the_table_iv_claims_read():
    from fedrepro.claims import evaluate_claims
    from fedrepro.papers.pfedcspc import ABLATION_GLOBAL
    from fedrepro.papers.pfedcspc.claims import CLAIM_SETTINGS

    assert set(CLAIM_SETTINGS) <= set(ABLATION_GLOBAL)
    ids = ["pfedcspc.calibration_raises_global", "pfedcspc.clusters_beat_one_mean", "pfedcspc.ablation_adds_up"]
    only = _table({k: [0.6 + 0.01 * i] * 3 for i, k in enumerate(ABLATION_GLOBAL) if k in CLAIM_SETTINGS})
    res = evaluate_claims(only, ids=ids)
    assert "NOT RUN" not in res["verdict"].tolist()
    assert "PA: " in res.set_index("claim_id").loc["pfedcspc.ablation_adds_up", "evidence"]  # optional part ran
    assert "TPG+PA+CA" in res.set_index("claim_id").loc["pfedcspc.clusters_beat_one_mean", "evidence"]


def test_plug_and_play_and_rounds_claims_pass_and_fail_on_the_numbers():
    from fedrepro.claims import evaluate_claims

    t6 = pd.DataFrame({"method": ["fedprox", "fedprox+pfedcspc", "moon", "moon+pfedcspc"], "seed": 0,
                       "final_global_acc": [0.60, 0.65, 0.61, 0.64]})
    assert evaluate_claims(t6, ids=["pfedcspc.plug_and_play"])["verdict"].item() == "PASS"
    t6.loc[3, "final_global_acc"] = 0.60
    res = evaluate_claims(t6, ids=["pfedcspc.plug_and_play"])
    assert res["verdict"].item() == "FAIL" and "[pass]" in res["evidence"].item()
    ids = ["pfedcspc.fewer_rounds", "pfedcspc.fewer_rounds_beta_0.1"]
    t7 = pd.DataFrame({"method.name": ["pfedcspc", "fedavg"] * 2, "β": [0.5, 0.5, 0.1, 0.1], "seed": 0,
                       "rounds": [7, 16, float("nan"), 13]})
    res = evaluate_claims(t7, ids=ids)
    assert res["verdict"].tolist() == ["PASS", "FAIL"]  # not reached counts as never
    assert "not reached" in res["evidence"].iloc[1]
    assert evaluate_claims(t7.drop(columns="rounds"), ids=ids)["verdict"].tolist() == ["NOT RUN"] * 2


def test_cspc_chain_claim_checks_every_stage():
    from fedrepro.claims import evaluate_claims

    stages = ("", "+FT_CE", "+PMI+FT_CE", "+PMI+FT_CE+Align")
    rows = {**{f"FedAvg{s}": [0.60 + 0.01 * i] * 3 for i, s in enumerate(stages)},
            **{f"FedCSPC{s}": [0.62 + 0.01 * i] * 3 for i, s in enumerate(stages)}}
    assert evaluate_claims(_table(rows), ids=["pfedcspc.cspc_chain_beats_fedavg_chain"])["verdict"].item() == "PASS"
    rows["FedCSPC+PMI+FT_CE"] = [0.60] * 3  # one stage behind FedAvg's (0.62)
    res = evaluate_claims(_table(rows), ids=["pfedcspc.cspc_chain_beats_fedavg_chain"])
    assert res["verdict"].item() == "FAIL" and "[FAIL] FedCSPC+PMI+FT_CE" in res["evidence"].item()


def test_pmi_claims_read_the_per_run_summary():
    from fedrepro.claims import evaluate_claims

    t = pd.DataFrame([{"seed": s, "pmi_init_acc": 0.7, "global_init_acc": 0.6, "pmi_better_share": 0.8,
                       "pmi_first_epoch_loss": 0.9, "global_first_epoch_loss": 1.1, "weight_label_corr": r}
                      for s, r in enumerate((0.5, 0.4, 0.35))])
    ids = ["pfedcspc.pmi_lower_early_loss", "pfedcspc.pmi_weights_follow_labels"]
    assert evaluate_claims(t, ids=ids)["verdict"].tolist() == ["PASS", "PASS"]
    t["weight_label_corr"] = [0.9, 0.2, -0.05]  # mean 0.35, but one seed's weights go against the labels
    t["pmi_first_epoch_loss"] = 1.2
    assert evaluate_claims(t, ids=ids)["verdict"].tolist() == ["FAIL", "FAIL"]
