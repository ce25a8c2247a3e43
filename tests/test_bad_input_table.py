"""Bad input, table-driven, over the CLI and the Python API: each case is a clean error (no
traceback, the parameter named) and writes nothing to the runs folder."""
from __future__ import annotations

import math

import pytest
import torch
from support import poison_fedavg

import fedrepro
from fedrepro.app.cli import EXIT_DIVERGED, main
from fedrepro.errors import FedreproError

FILES = {
    "tab.yaml": b"train:\n\trounds: 3\n",
    "indent.yaml": b"train:\n  rounds: 3\n lr: 0.1\n",
    "binary.yaml": b"\x00\xff\xfe\x01binary",
    "control.yaml": b"train:\n  rounds: \x07\n",
    "list.yaml": b"- 1\n- 2\n",
    "empty_list.yaml": b"[]\n",
    "empty_string.yaml": b"''\n",
}
NO_SUCH_GPU = f"cuda:{torch.cuda.device_count() + 7}"  # a device index this machine does not have


@pytest.fixture
def inputs(tmp_path):
    for name, data in FILES.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "a_file").write_text("not a folder")
    return tmp_path


def _base(runs):
    return ["run", "--profile", "smoke", "--dataset", "synthetic", "--set", "model.name=mlp",
            "--set", "data.partition=dirichlet", "--set", "data.partition_args={alpha: 1.0, min_size: 5}",
            "--set", "train.rounds=1", "--set", f"runs_dir={runs}", "--set", "progress=false"]


# (extra CLI arguments, with {d} for the inputs folder; text the error must contain)
CLI_CASES = [
    (["--config", "{d}/tab.yaml"], "tab.yaml"),
    (["--config", "{d}/indent.yaml"], "indent.yaml"),
    (["--config", "{d}/binary.yaml"], "binary.yaml"),
    (["--config", "{d}/control.yaml"], "control.yaml"),
    (["--config", "{d}/list.yaml"], "list.yaml"),
    (["--config", "{d}/empty_list.yaml"], "empty_list.yaml"),  # falsy, yet not a mapping
    (["--config", "{d}/empty_string.yaml"], "empty_string.yaml"),
    (["--config", "{d}/missing.yaml"], "missing.yaml"),
    (["--config", "{d}"], "config file"),
    (["--set", "x=[1,"], "--set x="),
    (["--set", "train.rounds={{a: [}}"], "train.rounds"),
    (["--set", "=3"], "no key"),
    (["--set", "method.args=5"], "method.args"),
    (["--set", "method.name={{a: 1}}"], "method.name"),
    (["--set", "method.name=fedprox", "--set", "method.args.mu=.nan"], "method.args.mu"),
    (["--set", "method.name=pfedcspc", "--set", "method.args.align_weights=[1, 1, .inf]"], "align_weights"),
    (["--set", "train.lr=.inf"], "train.lr"),
    (["--set", "train.lr=-1e-3"], "train.lr"),
    (["--set", "train.rounds=1e2"], "train.rounds"),
    (["--set", "model.args.feature_dim=.nan"], "model.args.feature_dim"),
    (["--set", "data.partition_args.alpha=.nan"], "alpha"),
    (["--set", "data.dataset_args.image_size=.nan"], "data.dataset_args.image_size"),
    (["--set", f"device={NO_SUCH_GPU}"], "device"),
    (["--set", "device=tpu"], "device"),
    (["--set", "runs_dir={d}/a_file"], "runs_dir"),
    (["--set", "runs_dir={d}/a_file/runs"], "runs_dir"),
    (["--on-busy", "later"], "on-busy"),
]


@pytest.mark.parametrize("extra, needle", CLI_CASES, ids=[" ".join(c[0]) for c in CLI_CASES])
def test_cli_bad_input_is_a_clean_error_and_writes_nothing(inputs, capsys, extra, needle):
    runs = inputs / "runs"
    args = _base(runs) + [a.format(d=inputs) for a in extra]
    with _exits_cleanly() as code:
        code.append(main(args))
    err = capsys.readouterr().err
    assert code[0] != 0, err
    assert needle in err and "Traceback" not in err, err
    assert not runs.exists() or not any(runs.iterdir())
    assert (inputs / "a_file").read_text() == "not a folder"


class _exits_cleanly:
    """``main`` returns an exit code; argparse's own errors exit through SystemExit (also clean)."""

    def __enter__(self):
        self.code: list[int] = []
        return self.code

    def __exit__(self, typ, exc, tb):
        if typ is SystemExit:
            self.code.append(exc.code)
            return True
        return False


def test_scientific_notation_is_a_number(capsys):
    assert main(["run", "--set", "train.lr=1e-3", "--set", "train.momentum=5E-1", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "lr: 0.001" in out and "momentum: 0.5" in out


# (overrides for fedrepro.run on the tiny config, with "{d}" for the inputs folder; needle)
API_CASES = [
    ({"method.args": 5}, "method.args"),
    ({"method.name": {"a": 1}}, "method.name"),
    ({"method.name": "fedprox", "method.args": {"mu": math.nan}}, "method.args.mu"),
    ({"train.momentum": math.inf}, "train.momentum"),
    ({"train.lr": "1e-3x"}, "train.lr"),
    ({"model.args.feature_dim": math.nan}, "model.args.feature_dim"),
    ({"data.partition_args.min_size": math.inf}, "min_size"),
    ({"device": NO_SUCH_GPU}, "device"),
    ({"runs_dir": "{d}/a_file"}, "runs_dir"),
    ({"runs_dir": "{d}/a_file/runs"}, "runs_dir"),
    ({"runs_dir": 5}, "runs_dir"),
    ({"on_busy": "later"}, "on_busy"),
]


@pytest.mark.parametrize("overrides, needle", API_CASES, ids=[str(c[0]) for c in API_CASES])
def test_api_bad_input_is_a_clean_error_and_writes_nothing(inputs, tiny, overrides, needle):
    overrides = {k: v.format(d=inputs) if isinstance(v, str) else v for k, v in overrides.items()}
    on_busy = overrides.pop("on_busy", "wait")
    cfg = tiny()
    with pytest.raises(FedreproError, match=needle.replace(".", r"\.")):
        fedrepro.run(cfg, on_busy=on_busy, **overrides)
    runs = inputs / "runs"
    assert not runs.exists() or not any(runs.iterdir())
    assert (inputs / "a_file").read_text() == "not a folder"


def test_yaml_file_errors_name_the_file_through_the_api(inputs):
    for name in ("tab.yaml", "indent.yaml", "binary.yaml"):
        with pytest.raises(fedrepro.errors.ConfigError, match=name):
            fedrepro.make_config("smoke", yaml_path=inputs / name)


def test_a_diverged_run_exits_non_zero_and_keeps_its_rounds(tmp_path, capsys, monkeypatch):
    restore = poison_fedavg(monkeypatch)
    args = _base(tmp_path / "runs")[:-6] + ["--set", "train.rounds=3", "--set", f"runs_dir={tmp_path / 'runs'}",
                                            "--set", "progress=false"]
    assert main(args) == EXIT_DIVERGED
    err = capsys.readouterr().err
    assert "diverged at round 2" in err and "Traceback" not in err
    restore()
    assert main(args) == EXIT_DIVERGED  # the stored diverged run is reused, and still reported
    (path,) = [p for p in (tmp_path / "runs").iterdir() if not p.name.startswith(".")]
    res = fedrepro.RunResult(path)
    assert res.summary["diverged_round"] == 2 and len(res.rounds) == 1
