"""fl.device: train.device = auto picks the GPU when there is one, else the CPU."""
import torch

import fedrepro


def test_device_auto_runs_on_cpu_here(tiny):
    res = fedrepro.run(tiny(**{"train.rounds": 1}))
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert res.meta["device"].startswith(expected)
