"""The tour notebook's claims report PASS, FAIL and NOT RUN on the numbers."""
import pandas as pd
from support import claim_table

import fedrepro.claims  # noqa: F401  (registers every paper's claims)
from fedrepro.papers.verdicts import evaluate_claims

A = "data.partition_args.alpha"


def test_tour_claims_report_pass_fail_and_missing():
    t = pd.concat([claim_table([0.9, 0.9], [0.6, 0.6], 0.1), claim_table([0.7, 0.7], [0.8, 0.8], 10.0)])
    out = evaluate_claims(t, paper="tour").set_index("claim_id")
    assert out.loc["tour.local_beats_fedavg_skewed", "verdict"] == "PASS"
    assert out.loc["tour.fedavg_beats_local_iid", "verdict"] == "PASS"
    flipped = pd.concat([claim_table([0.6, 0.6], [0.9, 0.9], 0.1), claim_table([0.9, 0.9], [0.7, 0.7], 10.0)])
    out = evaluate_claims(flipped, paper="tour").set_index("claim_id")
    assert (out["verdict"] == "FAIL").all()
    only_skewed = claim_table([0.9], [0.6], 0.1)
    out = evaluate_claims(only_skewed, paper="tour").set_index("claim_id")
    assert out.loc["tour.fedavg_beats_local_iid", "verdict"] == "NOT RUN"
