"""The claim machinery: compare, select, and saved claims collected (unchecked ones NOT RUN)."""
import pandas as pd
import pytest
from support import claim_table

import fedrepro.claims  # noqa: F401  (registers every paper's claims)
from fedrepro.claims import MissingResults, compare, evaluate_claims, select

A = "data.partition_args.alpha"


def test_compare_passes_and_fails_on_the_numbers():
    t = claim_table([0.9, 0.8], [0.5, 0.6], 0.1)
    ok, ev = compare(t, {"method.name": "local"}, {"method.name": "fedavg"}, margin=0.05)
    assert ok and "gap +30.00" in ev and "2/2" in ev
    ok, _ = compare(t, {"method.name": "local"}, {"method.name": "fedavg"}, margin=0.35)
    assert not ok


def test_select_raises_on_missing_rows():
    with pytest.raises(MissingResults):
        select(claim_table([0.9], [0.6], 0.1), {"method.name": "fedprox"}, "best")


def test_saved_claims_are_collected_and_unchecked_ones_are_not_run(tmp_path, monkeypatch):
    import fedrepro.claims.core as claims_mod

    monkeypatch.setattr(claims_mod, "claims_dir", lambda profile: tmp_path)
    t = pd.concat([claim_table([0.9, 0.9], [0.6, 0.6], 0.1)])
    out = evaluate_claims(t, paper="tour")
    claims_mod.save_claims(out, "00_tour", "smoke")
    collected = claims_mod.collect_claims("smoke").set_index("claim_id")
    assert collected.loc["tour.local_beats_fedavg_skewed", "verdict"] == "PASS"
    assert collected.loc["tour.local_beats_fedavg_skewed", "notebook"] == "00_tour"
    assert collected.loc["tour.fedavg_beats_local_iid", "verdict"] == "NOT RUN"
    (tmp_path / "00_tour.json").unlink()
    assert (claims_mod.collect_claims("smoke")["verdict"] == "NOT RUN").all()
