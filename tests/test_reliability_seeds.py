"""Seeds and grid axes are named when they are malformed: a seed given twice would count one run
twice in a claim's paired test, and a lone value or an empty list for a grid axis would silently
run another grid than the one meant."""
from __future__ import annotations

import numpy as np
import pytest

from fedrepro.config import check_seeds
from fedrepro.errors import ConfigError
from fedrepro.execute.grid import grid_points
from fedrepro.execute.run import run_seeds
from fedrepro.papers import paper


@pytest.mark.parametrize("seeds, match", [
    ("01", "seeds='01'"), (5, "seeds=5"), ([0, 0], "seed 0 given twice"), ([1.0], "seeds: 1.0"),
    ([True], "seeds: True"), ([-1], "seeds: -1"), (["1"], "seeds: '1'"), ({0: 1}, "seeds={0: 1}"),
    ([2 ** 63], "seeds: 9223372036854775808"),
])
def test_bad_seeds_are_named(seeds, match):
    with pytest.raises(ConfigError, match=match):
        check_seeds(seeds)


def test_good_seeds_come_back_as_ints():
    assert check_seeds(np.arange(3)) == [0, 1, 2] and check_seeds(range(2)) == [0, 1] and check_seeds(()) == []
    assert all(type(s) is int for s in check_seeds(np.arange(2)))


def test_every_way_to_give_seeds_checks_them(tiny):
    with pytest.raises(ConfigError, match="given twice"):
        run_seeds(tiny(), [3, 3])
    with pytest.raises(ConfigError, match="given twice"):
        paper("fedpft").TABLES["main_default"].configs("smoke", seeds=[0, 0])
    # A table's own seeds (the rows no claim reads) are named as such, a string never split into digits.
    with pytest.raises(ConfigError, match="table_seeds='01'"):
        paper("fedpft").TABLES["main_default"].configs("smoke", table_seeds="01")
    with pytest.raises(ConfigError, match=r"grid\['seed'\]"):
        grid_points({"train.lr": [0.1], "seed": [1, 1]})


@pytest.mark.parametrize("values", [0.1, [], "abc", {"a": 1}])
def test_a_grid_axis_must_be_a_non_empty_list(values):
    with pytest.raises(ConfigError, match=r"grid\['train.lr'\].*a non-empty list of values"):
        grid_points({"train.lr": values})


def test_a_grid_axis_may_be_any_iterable_even_a_generator():
    assert [p for p, _ in grid_points({"train.lr": (x / 10 for x in (1, 2))})] == [{"train.lr": 0.1},
                                                                                   {"train.lr": 0.2}]
