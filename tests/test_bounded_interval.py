"""An interval of a bounded quantity stays in its range (issue 58: a share's interval read
[+86.93, +106.40]%), and cutting it changes no verdict for a bound inside the range."""
from __future__ import annotations

import itertools

import pytest

from fedrepro.claims.core import below, exceeds, near_zero, read_interval
from fedrepro.errors import ConfigError

SHARE = (0.0, 1.0)
# The laptop pass's per-seed shares of pep_fedpt.soft_weights_peak_on_true_class, whose t interval
# is [+86.93, +106.40]%, and others near either end of the range.
CASES = [(1.0, 0.9, 1.0), (0.9, 0.95, 1.0), (0.05, 0.0, 0.1), (0.0, 0.0, 0.3), (0.4, 0.6, 0.5), (1.0, 1.0, 1.0)]


@pytest.mark.parametrize("values", CASES)
def test_a_share_interval_never_leaves_zero_to_one_hundred_percent(values):
    test = exceeds("share of classes peaking on the true class", values, (0, 1, 2), 0.8, unit="%", limits=SHARE)
    _, low, high = test.interval
    assert SHARE[0] <= low <= high <= SHARE[1]
    read = read_interval(test.interval_text)  # what the pages show
    assert read is not None and 0.0 <= read[0] <= read[1] <= 100.0


def test_the_laptop_case_is_cut_and_says_so():
    test = exceeds("share", (1.0, 0.9, 1.0), (0, 1, 2), 0.8, unit="%", limits=SHARE)
    assert test.cut and test.interval_text == "+96.67% [+86.93, +100.00], required > +80.00%"
    assert "interval cut to the quantity's range [+0.00, +100.00]" in test.text()
    unbounded = exceeds("share", (1.0, 0.9, 1.0), (0, 1, 2), 0.8, unit="%")
    assert not unbounded.cut and "+106.40" in unbounded.interval_text and "cut" not in unbounded.text()


@pytest.mark.parametrize("values, bound", list(itertools.product(CASES, (0.05, 0.5, 0.8, 0.95))))
def test_cutting_to_the_range_changes_no_verdict_for_a_bound_strictly_inside_it(values, bound):
    for make in (exceeds, below):
        cut, whole = (make("share", values, (0, 1, 2), bound, unit="%", limits=lim) for lim in (SHARE, None))
        assert cut.verdict == whole.verdict
    cut, whole = (near_zero("share", values, (0, 1, 2), bound, unit="%", limits=lim) for lim in (SHARE, None))
    assert cut.verdict == whole.verdict


@pytest.mark.parametrize("limits", [(1.0, 0.0), (0.0,), "0-1"])
def test_bad_limits_get_a_one_line_error(limits):
    with pytest.raises(ConfigError, match="limits"):
        exceeds("share", (0.5, 0.6), (0, 1), 0.1, limits=limits)


def test_a_share_required_above_its_whole_range_fails():
    # No share exceeds 100%: the cut interval says FAIL where the whole one straddled the bound.
    assert exceeds("share", (1.0, 0.9, 1.0), (0, 1, 2), 1.0, unit="%").verdict == "INCONCLUSIVE"
    assert exceeds("share", (1.0, 0.9, 1.0), (0, 1, 2), 1.0, unit="%", limits=SHARE).verdict == "FAIL"


def test_the_effect_said_once_keeps_the_cut_interval_and_its_sign():
    from fedrepro.claims.core import effect_once

    test = exceeds("share of classes peaking on the true class", (1.0, 0.9, 1.0), (0, 1, 2), 0.8, unit="%",
                   limits=SHARE)
    assert effect_once(test.words, test.interval_text) == (
        "share of classes peaking on the true class: 96.67% [+86.93, +100.00]; required: more than 80.00%")
