"""One way to declare and check a parameter: option dataclasses declare every field with ``hp(...)``
and check it with ``check_fields``; a function checks its own arguments with ``check_value``. Both
raise the same one-line error, naming the parameter and what is valid."""
from __future__ import annotations

import ast
import dataclasses
import typing
from pathlib import Path

import numpy as np
import pytest

import fedrepro
from fedrepro.analysis.planted_ot import PlantedOTConfig
from fedrepro.data.planted import PlantedConfig
from fedrepro.errors import ConfigError, PartitionError
from fedrepro.execute.local import LocalExecutor
from fedrepro.execute.ray import RayExecutor
from fedrepro.models.clip import StandinArch
from fedrepro.papers.tables import Rows
from fedrepro.params import bounds_of, check_value
from fedrepro.pretrain.clip import PretrainClipConfig
from fedrepro.pretrain.vit import ViTPretrainConfig
from fedrepro.execute.tuning import LrSearch

# The dataclasses a user sets options on; each declares every field with hp and calls check_fields.
OPTION_CLASSES = [LocalExecutor, RayExecutor, StandinArch, PretrainClipConfig, ViTPretrainConfig, PlantedConfig,
                  PlantedOTConfig, LrSearch, Rows]
# Fields without a default.
REQUIRED = {LrSearch: {"grid": (0.1, 0.01)}}
# Dataclasses whose __post_init__ checks by hand, and why they are not option classes.
NOT_OPTIONS = {
    "fedrepro/data/partition.py:Partition": "a computed record: its checks are invariants of the index arrays",
    "fedrepro/data/base.py:ImageDataset": "a loader's output: its checks are tensor dtypes and shapes",
    "fedrepro/papers/plan.py:Need": "its one check relates two fields (exactly one of table= and runs=)",
    "fedrepro/claims/core.py:Test": "a measurement: its one hand check relates two fields (one distinct seed "
                                    "per value)",
    "fedrepro/papers/diagnose.py:Cause": "a computed record, not an option: its checks relate its fields (a cause "
                                         "that blames budget, scale or stand-in names its measurement)",
}
PACKAGE = Path(fedrepro.__file__).parent


def _post_inits():
    """``{"path:Class": __post_init__ node}`` of every dataclass in the package that has one."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any("dataclass" in ast.unparse(d) for d in node.decorator_list):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and item.name == "__post_init__":
                        out[f"{path.relative_to(PACKAGE.parent).as_posix()}:{node.name}"] = item
    return out


def _number_type(tp) -> bool:
    """Whether an annotation is ``int``, ``float`` or one of them ``| None``."""
    args = [a for a in typing.get_args(tp) if a is not type(None)] or [tp]
    return len(args) == 1 and args[0] in (int, float)


def _calls(fn: ast.FunctionDef) -> set[str]:
    return {ast.unparse(n.func) for n in ast.walk(fn) if isinstance(n, ast.Call)}


def test_no_dataclass_checks_its_fields_by_hand():
    """A ``raise`` (or a ``_check...`` helper) in a dataclass's __post_init__ is a hand-written check:
    an option class declares its bounds with hp instead; anything else is listed above with why."""
    hand = [name for name, fn in _post_inits().items()
            if (any(isinstance(n, ast.Raise) for n in ast.walk(fn))
                or any(c.split(".")[-1].startswith(("_check", "check_")) and c not in ("check_fields", "check_value")
                       for c in _calls(fn)))
            and name not in NOT_OPTIONS]
    assert not hand, f"declare these classes' fields with hp(...) and call check_fields (fedrepro.params): {hand}"


def test_every_class_that_calls_check_fields_is_listed_here():
    checked = {name.split(":")[1] for name, fn in _post_inits().items() if "check_fields" in _calls(fn)}
    assert checked == {cls.__name__ for cls in OPTION_CLASSES}


@pytest.mark.parametrize("cls", OPTION_CLASSES, ids=lambda c: c.__name__)
def test_every_field_of_an_option_class_is_declared_with_hp(cls):
    undeclared = [f.name for f in dataclasses.fields(cls) if f.name not in bounds_of(cls)]
    assert not undeclared, f"{cls.__name__}: declare {undeclared} with hp(...) (fedrepro.params)"


@pytest.mark.parametrize("cls", OPTION_CLASSES, ids=lambda c: c.__name__)
def test_an_option_class_rejects_a_bad_number_in_hp_words(cls):
    """Each numeric field, given a string, is rejected with the field's own hp description: no hand
    check with other words runs first."""
    hints = typing.get_type_hints(cls)
    numeric = [name for name in bounds_of(cls) if _number_type(hints[name])]
    if cls is not Rows:
        assert numeric, cls
    for name in numeric:
        with pytest.raises(ConfigError) as e:
            cls(**{**REQUIRED.get(cls, {}), name: "x"})
        assert str(e.value) == f"invalid {name}='x'; valid: {bounds_of(cls)[name]}"


@pytest.mark.parametrize("make, message", [
    (lambda: RayExecutor(num_gpus=-1), "invalid num_gpus=-1; valid: a number >= 0"),
    (lambda: LocalExecutor(workers=0), "invalid workers=0; valid: null or an integer >= 1"),
    (lambda: PlantedConfig(object_fraction=0.0), "invalid object_fraction=0.0; valid: a number in (0, 1]"),
    (lambda: PlantedOTConfig(momentum=1.0), "invalid momentum=1.0; valid: a number in [0, 1)"),
    (lambda: StandinArch(embed_dim=0), "invalid embed_dim=0; valid: an integer >= 1"),
    (lambda: PretrainClipConfig(steps=0), "invalid steps=0; valid: an integer >= 1"),
    (lambda: ViTPretrainConfig(glyphs=0), "invalid glyphs=0; valid: an integer >= 1"),
    (lambda: Rows(seeds="all"), "invalid seeds='all'; valid: claim, table, tuning"),
])
def test_a_bad_option_is_one_line_naming_it_and_what_is_valid(make, message):
    with pytest.raises(ConfigError) as e:
        make()
    assert str(e.value) == message


def test_check_value_words_an_argument_as_check_fields_words_a_field():
    with pytest.raises(ConfigError, match=r"^invalid min_size=-1; valid: an integer >= 0$"):
        check_value("min_size", -1, int, ge=0)
    with pytest.raises(PartitionError, match=r"^invalid k=6; valid: an integer in \[1, 5\]$"):
        check_value("k", 6, int, ge=1, le=5, error=PartitionError)
    with pytest.raises(ConfigError, match=r"^invalid noise=nan; valid: a number >= 0$"):
        check_value("noise", float("nan"), float, ge=0)
    with pytest.raises(ConfigError, match=r"^invalid seed=True; valid: an integer$"):
        check_value("seed", True, int)
    assert check_value("shots", None, int | None, ge=1) is None
    # numpy's integers (array arithmetic) pass as ints and come back as Python ints
    value = check_value("n", np.int64(3), int, ge=0)
    assert value == 3 and type(value) is int
    with pytest.raises(ValueError, match="valid="):
        check_value("n", 3, int, check=lambda v: True)


def test_data_functions_check_their_arguments_with_check_value():
    from fedrepro.data import load_dataset
    from fedrepro.data.partition import make_partition

    y = np.repeat(np.arange(5), 40)
    rng = np.random.default_rng(0)
    with pytest.raises(PartitionError, match=r"^invalid min_size=-1; valid: an integer >= 0$"):
        make_partition("dirichlet", y, y, 4, rng, alpha=0.5, min_size=-1)
    with pytest.raises(PartitionError, match=r"^invalid num_clients=0; valid: an integer >= 1$"):
        make_partition("iid", y, y, 0, rng)
    with pytest.raises(PartitionError, match=r"^invalid alpha=-1\.0; valid: a number > 0 \(inf: no label skew\)$"):
        make_partition("dirichlet", y, y, 4, rng, alpha=-1.0)
    assert make_partition("dirichlet", y, y, np.int64(4), rng, alpha="inf").num_clients == 4
    with pytest.raises(ConfigError, match=r"^invalid image_size=2; valid: an integer >= 4$"):
        load_dataset("synthetic", image_size=2)
    with pytest.raises(ConfigError, match=r"^invalid channels=2; valid: 1, 3$"):
        load_dataset("synthetic", channels=2)
