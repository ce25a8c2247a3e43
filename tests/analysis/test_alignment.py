"""The cross-client feature alignment ratio, and the pFedCSPC claim that reads it."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest


def test_alignment_ratio_and_its_claim():
    from fedrepro.analysis.alignment import alignment_ratio
    from fedrepro.papers.verdicts import evaluate_claims

    rng = np.random.default_rng(0)
    y, cid = np.tile([0, 1], 20), np.repeat(np.arange(4), 10)
    centre = np.array([[1.0, 0, 0], [0, 1.0, 0]])
    aligned = centre[y] + 0.05 * rng.standard_normal((40, 3))
    drift = aligned + 0.8 * rng.standard_normal((4, 3))[cid]  # each client shifts all its features
    assert alignment_ratio(aligned, y, cid) < 0.2 < alignment_ratio(drift, y, cid)
    assert alignment_ratio(3 * aligned, y, cid) == pytest.approx(alignment_ratio(aligned, y, cid))
    with pytest.raises(ValueError, match="two clients"):
        alignment_ratio(aligned, y, np.zeros(40))  # one client: no cross-client pair
    t = pd.DataFrame({"model": ["FedAvg", "pFedCSPC"] * 3, "seed": [0, 0, 1, 1, 2, 2],
                      "alignment_ratio": [0.6, 0.4, 0.5, 0.35, 0.55, 0.4]})
    assert evaluate_claims(t, ids=["pfedcspc.features_align"])["verdict"].item() == "PASS"
    t["alignment_ratio"] = [0.4, 0.6, 0.35, 0.5, 0.4, 0.55]
    assert evaluate_claims(t, ids=["pfedcspc.features_align"])["verdict"].item() == "FAIL"
