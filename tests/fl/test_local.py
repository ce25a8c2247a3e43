"""fl.local: macro-F1 over the classes present."""
from __future__ import annotations

import math

import pytest
import torch

from fedrepro.fl.local import macro_f1


def test_macro_f1_over_present_classes_matches_a_hand_count():
    y = torch.tensor([0, 0, 1, 1, 1, 3])
    p = torch.tensor([0, 1, 1, 1, 2, 3])
    # class 0: tp 1, true 2, pred 1 -> 2/3; class 1: tp 2, true 3, pred 3 -> 2/3; class 3: 1.
    # Class 2 is absent from y: not averaged, though predicting it cost class 1 its recall.
    assert macro_f1(y, p) == pytest.approx((2 / 3 + 2 / 3 + 1) / 3)
    assert macro_f1(y, y) == 1.0
    assert math.isnan(macro_f1(torch.tensor([], dtype=torch.long), torch.tensor([], dtype=torch.long)))


def test_macro_f1_matches_scikit_learn_over_the_classes_present():
    from sklearn.metrics import f1_score

    g = torch.Generator().manual_seed(0)
    for n in (2, 5, 10):
        y = torch.randint(0, n, (97,), generator=g)
        p = torch.randint(0, n + 1, (97,), generator=g)  # may predict a class absent from y
        present = sorted(set(y.tolist()))
        want = f1_score(y.numpy(), p.numpy(), labels=present, average="macro", zero_division=0)
        assert macro_f1(y, p) == pytest.approx(want, abs=1e-12)
