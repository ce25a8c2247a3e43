import json

import pytest

from fedrepro.app.cli import main


def test_list_commands(capsys):
    for what, expect in (("methods", "fedavg"), ("datasets", "fashion_mnist"), ("partitions", "dirichlet"),
                         ("models", "resnet8")):
        assert main(["list", what]) == 0
        assert expect in capsys.readouterr().out.split()


def test_dry_run_prints_resolved_config(capsys, tmp_path):
    assert main(["run", "--profile", "smoke", "--method", "fedper", "--set", "train.rounds=3", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "name: fedper" in out and "rounds: 3" in out and "# hash:" in out
    # the method's arguments with their defaults, and where the run would be stored
    assert main(["run", "--profile", "smoke", "--method", "fedprox", "--set", f"runs_dir={tmp_path}",
                 "--dry-run"]) == 0
    out = capsys.readouterr().out
    h = out.split("# hash: ")[1].split()[0]
    assert "    mu: 0.01" in out and f"# run folder: {tmp_path / h} (not stored" in out


def test_run_synthetic(tmp_path, capsys):
    args = ["run", "--profile", "smoke", "--dataset", "synthetic", "--set", "model.name=mlp",
            "--set", "data.partition=dirichlet", "--set", "data.partition_args={alpha: 1.0, min_size: 5}",
            "--set", "train.rounds=1", "--set", f"runs_dir={tmp_path}", "--set", "progress=false"]
    assert main(args + ["--json"]) == 0
    out = capsys.readouterr().out
    summary = json.loads(out[: out.rindex("}") + 1])
    assert 0 <= summary["final_acc_mean"] <= 1 and "results:" in out
    # without --json: accuracies in %, rounded for reading
    assert main(args) == 0
    out = capsys.readouterr().out
    assert f"final {100 * summary['final_acc_mean']:.2f}%" in out


@pytest.mark.parametrize("args, needle", [
    (["run", "--method", "nope", "--dry-run"], "nope"),
    (["run", "--set", "data.partition_args.alpha=0", "--dry-run"], "alpha"),
    (["run", "--set", "train.rounds", "--dry-run"], "key=value"),
])
def test_cli_errors_are_clear_and_exit_2(capsys, args, needle):
    assert main(args) == 2
    assert needle in capsys.readouterr().err
