"""A client without test data has no score: its per-client rows hold NaN (stored empty), in
``res.clients``, ``final_clients()`` and ``fedrepro show``, so their means are those of the clients
that were scored."""
from __future__ import annotations

import json
import math

import pandas as pd
import pytest

import fedrepro
from fedrepro.runs.catalog import read_run
from fedrepro.app.cli import main

NO_TEST = {"data.dataset_args.test_per_class": 2, "data.partition_args.alpha": 0.1, "seed": 2, "train.rounds": 1}


@pytest.fixture
def untested(tiny):
    with pytest.warns(UserWarning, match="without test data"):
        return fedrepro.run(tiny(**NO_TEST))


def test_rows_of_clients_without_test_data_hold_nan(untested):
    last = untested.final_clients()
    empty = last[last["n_test"] == 0]
    assert len(empty) == 2
    assert empty[["acc", "loss", "f1"]].isna().all().all()
    scored = last[last["n_test"] > 0]
    assert last["acc"].mean() == pytest.approx(scored["acc"].mean())  # NaN rows are skipped, not 0%
    assert last["acc"].mean() == pytest.approx(untested.rounds.iloc[-1]["acc_mean"])
    stored = [json.loads(line) for line in (untested.path / "clients.jsonl").read_text().splitlines()]
    assert all(r["acc"] is None and r["loss"] is None for r in stored if r["n_test"] == 0)


def test_show_leaves_them_out_of_its_client_summary(untested, capsys):
    assert main(["show", str(untested.path)]) == 0
    out = capsys.readouterr().out
    block = out.split("per client:")[1]
    mean = float(block.split("accuracy % mean ")[1].split(",")[0])
    assert mean == pytest.approx(100 * untested.rounds.iloc[-1]["acc_mean"], abs=0.01)
    assert read_run(untested.path).clients.query("n_test == 0")["acc"].isna().all()


def test_runs_stored_with_zero_scores_read_as_nan():
    # Runs stored before the rows were written empty hold 0.0 for such clients.
    from fedrepro.runs.columns import blank_untested

    old = pd.DataFrame({"round": [1, 1], "client": [0, 1], "acc": [0.5, 0.0], "loss": [1.0, 0.0],
                        "n_test": [10, 0]})
    new = blank_untested(old)
    assert new["acc"].tolist()[0] == 0.5 and math.isnan(new["acc"].tolist()[1]) and math.isnan(new["loss"][1])
    assert new["acc"].mean() == 0.5
