"""Cached probes over a grid of runs."""
import json
from pathlib import Path

import pytest

import fedrepro
from fedrepro.analysis import ProbeConfig
from fedrepro.analysis.grid import linear_probe_grid, probe_grid


def test_probe_grid_adds_columns_and_caches(tiny):
    table = fedrepro.run_grid(tiny(), {"method.name": ["fedavg", "fedper"]}, seeds=[0], progress=False)
    cfg = ProbeConfig(epochs=5)
    out = probe_grid(table, cfg, progress=False)
    assert {"origin", "probe", "match", "mismatch"} <= set(out.columns) and len(out) == 2
    cached = list((fedrepro.RunResult(__import__("pathlib").Path(table["path"][0])).path.parent
                   / "_analysis" / "mismatch_probe").glob("*.json"))
    assert len(cached) == 2
    assert json.loads(cached[0].read_text())["result"]["origin"] >= 0
    again = probe_grid(table, cfg, progress=False)
    assert again[["origin", "probe", "match"]].equals(out[["origin", "probe", "match"]])


def test_linear_probe_grid_on_features_equals_the_mismatch_probe(tiny):
    """The cached linear probe on the classifier input reproduces the mismatch probe's Probe
    (same recipe and seeds); a baseline's "phi" falls back to its features."""
    table = fedrepro.run_grid(tiny(), {"method.name": ["fedavg"]}, seeds=[0], progress=False)
    cfg = ProbeConfig(epochs=5)
    probes = probe_grid(table, cfg, progress=False)
    lin = linear_probe_grid(table, "features", cfg, progress=False)
    assert lin["probe_features"].iloc[0] == pytest.approx(probes["probe"].iloc[0])
    phi = linear_probe_grid(table, "phi", cfg, progress=False)
    assert phi["probe_phi"].iloc[0] == pytest.approx(probes["probe"].iloc[0])
    runs_dir = Path(table["path"][0]).parent
    assert len(list((runs_dir / "_analysis" / "linear_probe_phi").glob("*.json"))) == 1
