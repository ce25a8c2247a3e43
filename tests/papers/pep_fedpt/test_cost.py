"""Table 6's costs come from real runs: rounds to the target, measured time, and one real upload."""
import pandas as pd

import fedrepro
from fedrepro.papers.pep_fedpt.cost import cost_table, upload_size

VIT = {"model.name": "tiny_vit", "model.args": {"dim": 16, "depth": 4, "heads": 2}, "train.rounds": 3}


def test_upload_counts_what_a_client_sends(tiny):
    d, c = 16, 4
    vpt = fedrepro.run(tiny(**VIT, **{"method.name": "fedvpt"}))
    assert upload_size(vpt.path) == 1 * d + c * d + c  # P_S, head weight and bias
    pep = fedrepro.run(tiny(**VIT, **{"method.name": "pep_fedpt", "method.args": {"ccmp_blocks": [1, 2]}}))
    # P_S, one P_C bank, head, and the prototypes of both CCMP blocks; which classes they cover goes
    # as c presence bytes, not floating-point counts.
    assert upload_size(pep.path) == d + c * d + c * d + c + 2 * c * d


def test_cost_table_reads_rounds_and_time_up_to_the_target(tiny):
    runs = []
    for name in ("fedvpt", "head_tuning"):
        res = fedrepro.run(tiny(**VIT, **{"method.name": name}))
        runs.append({"row": name, "seed": 0, "best": res.summary["best_acc_mean"], "path": str(res.path)})
    runs = pd.DataFrame(runs)
    table, target = cost_table(runs, ["fedvpt", "head_tuning"])
    assert target == runs.loc[0, "best"]  # FedVPT's best, the paper's rule
    vpt = fedrepro.runs.store.RunResult(runs.loc[0, "path"]).rounds
    r = int(vpt[vpt["acc_mean"] >= target]["round"].iloc[0])
    assert table.loc["fedvpt", "rounds"] == r and table.loc["fedvpt", "reached"] == "1/1"
    assert table.loc["fedvpt", "train_s"] == vpt[vpt["round"] <= r]["time_train_s"].sum()
    unreachable, _ = cost_table(runs, ["fedvpt"], target=2.0)
    assert unreachable["rounds"].isna().all() and unreachable.loc["fedvpt", "reached"] == "0/1"
