"""How far FedPFT's laptop setup is from flat: FedAvg and FedPFT at every α, seed 0, trained for
60 rounds, read at cuts of 20-60 rounds (the first 20 rounds equal the 20-round runs: nothing in a
run depends on its round budget).

    FEDREPRO_OUTPUT=/tmp/pilot .venv/bin/python bench/fedpft_rounds_pilot.py > bench/fedpft_rounds_pilot.txt

"noise" is the standard error of last_change from round-to-round noise and "flat" (1/0) the
flatness rule of fedrepro.analysis.by_round (|last_change| < max(0.5, 2 × noise)).

One seed: it says which runs still move and how the FedPFT − FedAvg gap moves with the budget, as
evidence for the laptop profile's round budget, not as a claim."""
import pandas as pd

import fedrepro
from fedrepro.analysis.by_round import at_round, judge
from fedrepro.papers import setup

CUTS = (20, 30, 40, 50, 60)

if __name__ == "__main__":
    base = setup("fedpft", "laptop").replace(**{"train.rounds": max(CUTS)})
    grid = fedrepro.run_grid(base, {"method.name": ["fedavg", "fedpft"], "data.partition_args.alpha": [0.1, 0.5, 1.0]},
                             seeds=[0], progress=False)
    rows = []
    for r in CUTS:
        for _, x in at_round(grid, r).iterrows():
            change, noise, flat = judge(fedrepro.RunResult(x["path"]).rounds["acc_mean"].dropna().to_numpy()[:r])
            rows.append({"round": r, "method": x["method.name"], "alpha": x["data.partition_args.alpha"],
                         "best": 100 * x["best"], "final": 100 * x["final"],
                         "last_change": 100 * change, "noise": 100 * noise, "flat": int(flat)})
    df = pd.DataFrame(rows)
    pd.set_option("display.width", 160)
    for value in ("best", "final", "last_change", "noise", "flat"):
        print(f"{value} (mean client accuracy, points) by round budget:")
        print(df.pivot_table(index=["alpha", "method"], columns="round", values=value).round(2), "\n")
    gap = df.pivot_table(index=["alpha", "round"], columns="method", values="best")
    print("FedPFT − FedAvg, best round:")
    print((gap["fedpft"] - gap["fedavg"]).unstack("round").round(2))
