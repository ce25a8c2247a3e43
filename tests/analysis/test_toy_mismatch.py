"""The toy mismatch illustration: the Match map does not lose accuracy, and it is deterministic."""
from fedrepro.analysis import ProbeConfig
from fedrepro.analysis.toy_mismatch import ToyConfig, plot_toy_mismatch, toy_mismatch


def test_toy_match_map_does_not_lose_accuracy_and_is_deterministic():
    cfg = ToyConfig(rounds=3, per_client=120, test_per_client=60, noise=1.0)
    probe = ProbeConfig(epochs=30)
    a, b = toy_mismatch(cfg, probe), toy_mismatch(cfg, probe)
    for ca, cb in zip(a["clients"], b["clients"]):
        assert (ca["origin"], ca["match"]) == (cb["origin"], cb["match"])
        assert ca["features"].shape == ca["matched"].shape == (60, 2)
    fig = plot_toy_mismatch(a)
    assert len(fig.axes) == 4
