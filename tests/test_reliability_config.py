"""A config means one thing: equal values hash equally whether written as an int or a float, YAML
keys are given once, and a section is a mapping whatever else is set."""
from __future__ import annotations

import dataclasses
import typing

import pytest

from fedrepro.app.cli import main
from fedrepro.config import RunConfig, check_seeds, make_config, parse_cli_sets
from fedrepro.errors import ConfigError
from fedrepro.methods import METHODS
from fedrepro.params import declared_types

_SECTIONS = {name: tp for name, tp in declared_types(RunConfig).items() if dataclasses.is_dataclass(tp)}


def _numeric_fields(cls) -> list[tuple[str, type]]:
    """(name, int or float) of each field declared ``int``, ``float`` or either ``| None``."""
    out = []
    for name, tp in declared_types(cls).items():
        kinds = [a for a in (typing.get_args(tp) or (tp,)) if a is not type(None)]
        if len(kinds) == 1 and kinds[0] in (int, float):
            out.append((name, kinds[0]))
    return out


def _first_valid(make, base: type):
    """An integral value the field accepts (0, 1, 2, 3, 5, 10 or 100), written in its declared type."""
    for v in (1, 0, 2, 3, 5, 10, 100):
        try:
            return v, make(base(v))
        except ConfigError:
            continue
    return None, None


def _pairs():
    """(dotted key, overrides that hold it) for every numeric field of the config and of every
    method's parameters."""
    cases = [(name, {}) for name, _ in _numeric_fields(RunConfig)]
    for section, cls in _SECTIONS.items():
        cases += [(f"{section}.{name}", {}) for name, _ in _numeric_fields(cls)]
    for method in METHODS.names():
        cases += [(f"method.args.{name}", {"method.name": method})
                  for name, _ in _numeric_fields(METHODS.get(method).Params)]
    cases += [("model.args.width", {}), ("data.partition_args.alpha", {}),
              ("data.partition_args.train_per_client", {})]
    return cases


def _types(key: str, base_overrides: dict) -> type:
    parts = key.split(".")
    if parts[0] == "method":
        return dict(_numeric_fields(METHODS.get(base_overrides["method.name"]).Params))[parts[-1]]
    if key == "model.args.width" or key.endswith("train_per_client"):
        return int
    if key.endswith("alpha"):
        return float
    cls = _SECTIONS.get(parts[0], RunConfig)
    return dict(_numeric_fields(cls))[parts[-1]]


@pytest.mark.parametrize("key, base", _pairs(), ids=lambda x: x if isinstance(x, str) else "")
def test_every_numeric_field_hashes_equally_as_int_and_as_float(key, base):
    declared = _types(key, base)

    def make(value):
        return make_config("smoke", overrides={**base, key: value})

    value, canonical = _first_valid(make, declared)
    if canonical is None:
        pytest.skip(f"{key} accepts none of the small integral values")
    if declared is int:
        # A float for a count is an error that names the key, never a second run folder.
        with pytest.raises(ConfigError, match=key.rsplit(".", 1)[-1]):
            make(float(value))
        return
    written_other_way = make(int(value))
    assert written_other_way.hash() == canonical.hash(), key
    # ... and the config holds the declared type, so config.json says the same thing too
    assert written_other_way.to_dict() == canonical.to_dict()
    stored = written_other_way.to_dict()
    for part in key.split("."):
        stored = stored[part]
    assert type(stored) is declared, (key, type(stored))


def test_the_issue_examples_share_one_run_folder():
    assert make_config("smoke", train__weight_decay=0).hash() == make_config("smoke", train__weight_decay=0.0).hash()
    assert make_config("smoke", train__participation=1).hash() == make_config("smoke", train__participation=1.0).hash()


def test_a_config_built_directly_hashes_like_one_from_make_config():
    from fedrepro.config import TrainConfig

    direct = RunConfig(profile="laptop", train=TrainConfig(weight_decay=0, participation=1))
    assert direct.hash() == make_config("laptop").hash()


def test_a_float_for_an_int_field_is_still_an_error():
    with pytest.raises(ConfigError, match="train.rounds"):
        make_config("smoke", train__rounds=2.0)
    with pytest.raises(ConfigError, match="seed"):
        make_config("smoke", seed=True)


def test_canonical_hash_is_pinned():
    # Configs written the canonical way keep the hashes existing run folders are keyed by.
    cfg = make_config("smoke", train__weight_decay=0.0, train__participation=1.0)
    assert cfg.hash() == make_config("smoke").hash()
    assert dataclasses.asdict(cfg.train)["weight_decay"] == 0.0


# --------------------------------------------------------------------------------------------
# YAML: every key once


@pytest.mark.parametrize("text, key, line", [
    ("train:\n  rounds: 3\nseed: 1\ntrain:\n  lr: 0.1\n", "train", 4),        # a repeated section
    ("train:\n  rounds: 3\n  rounds: 4\n", "rounds", 3),                        # a repeated key
    ("data:\n  partition_args:\n    alpha: 1\n    alpha: 2\n", "alpha", 4),    # inside an args dict
    ("seed: 1\nseed: 2\n", "seed", 2),
])
def test_yaml_duplicate_keys_are_rejected_with_file_and_line(tmp_path, text, key, line):
    f = tmp_path / "dup.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError) as e:
        make_config("smoke", yaml_path=f)
    msg = str(e.value)
    assert str(f) in msg and f"line {line}" in msg and repr(key) in msg and "\n" not in msg


def test_duplicate_keys_in_a_set_value_are_rejected():
    with pytest.raises(ConfigError, match="duplicate key 'mu'"):
        parse_cli_sets(["method.args={mu: 1, mu: 2}"])


def test_yaml_without_duplicates_still_loads(tmp_path):
    f = tmp_path / "ok.yaml"
    f.write_text("train:\n  rounds: 3\nseed: 1\n")
    assert make_config("smoke", yaml_path=f).train.rounds == 3


# --------------------------------------------------------------------------------------------
# A section is a mapping


@pytest.mark.parametrize("section", ["train", "data", "model", "method", "data.partition_args",
                                     "data.dataset_args", "model.args", "method.args"])
@pytest.mark.parametrize("value", ["5", "[1, 2]", "text"])
def test_a_section_of_the_wrong_shape_is_an_error_whatever_else_is_set(tmp_path, capsys, section, value):
    f = tmp_path / "c.yaml"
    top, _, sub = section.partition(".")
    f.write_text(f"{top}:\n  {sub}: {value}\n" if sub else f"{top}: {value}\n")
    later = {"train": "train.rounds=7", "data": "data.num_clients=3", "model": "model.name=mlp",
             "method": "method.name=fedavg"}[top]
    rc = main(["run", "--profile", "smoke", "--dry-run", "--config", str(f), "--set", later])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and section in err and "mapping" in err and str(f) in err and "\n" not in err


def test_the_issue_example_train_5_then_rounds_7(tmp_path, capsys):
    f = tmp_path / "c.yaml"
    f.write_text("train: 5\n")
    rc = main(["run", "--profile", "smoke", "--dry-run", "--config", str(f), "--set", "train.rounds=7"])
    assert rc == 2 and "train" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="section"):
        make_config("smoke", overrides={"train": 5})


def test_run_takes_a_yaml_path_and_names_any_other_kind_of_config(tmp_path):
    import fedrepro

    with pytest.raises(ConfigError, match=r"run\(cfg=42\); valid: a RunConfig, a mapping"):
        fedrepro.run(42)
    with pytest.raises(ConfigError, match="config file .*missing.yaml' does not exist"):
        fedrepro.run(str(tmp_path / "missing.yaml"))
    path = tmp_path / "c.yaml"
    path.write_text(f"runs_dir: {tmp_path / 'runs'}\ntrain:\n  rounds: 1\n")
    res = fedrepro.run(path, profile="smoke", force_progress=False)
    assert res.config.train.rounds == 1 and res.config.profile == "smoke"
    assert res.config == make_config("smoke", yaml_path=path)


@pytest.mark.parametrize("key, base", [(k, b) for k, b in _pairs() if _types(k, b) is int],
                         ids=lambda x: x if isinstance(x, str) else "")
def test_every_integer_field_refuses_a_value_past_64_bits_by_name(key, base):
    """Counts and seeds end up in int64 tensors, arrays and seed words: 2**63 would overflow there (a
    seed did, deep in the data pipeline, and a model width in torch.empty), so the config refuses it
    where it is set, in a nested mapping (model.args, partition_args) too."""
    with pytest.raises(ConfigError, match=key.rsplit(".", 1)[-1]):
        make_config("smoke", overrides={**base, key: 2 ** 63})
    with pytest.raises(ConfigError, match="seeds"):
        check_seeds([0, 2 ** 63])


@pytest.mark.parametrize("key, base", [(k, b) for k, b in _pairs()
                                       if _types(k, b) is float],
                         ids=lambda x: x if isinstance(x, str) else "")
def test_every_float_field_refuses_a_value_past_float32_by_name(key, base):
    """Rates and weights multiply float32 tensors: 1e300 made torch's SGD raise mid-run, and an int
    too large for a float raised OverflowError in the config; both are refused by name."""
    for value in (1e300, 10 ** 400):
        with pytest.raises(ConfigError, match=key.rsplit(".", 1)[-1]):
            make_config("smoke", overrides={**base, key: value})
