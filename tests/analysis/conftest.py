"""Two tiny finished runs (FedAvg and FedPer, on a BN model) that the analysis tests read and never
change; trained once for the whole folder."""
import pytest
from support import BN_CNN, tiny_config

import fedrepro

# BN model: the probe must use running statistics (eval mode), like the run's own evaluation.
TRAIN = {"train.rounds": 3, "train.local_epochs": 2}


@pytest.fixture(scope="package")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("analysis")
    return {name: fedrepro.run(tiny_config(root, **BN_CNN, **TRAIN, **{"method.name": name}))
            for name in ("fedavg", "fedper")}
