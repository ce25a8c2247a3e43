"""The FedPFT family (methods/pft.py's shared base: fedpft, fedpft_con, fedavg_linear) learns the
synthetic task on the default MLP config, well above chance."""
import pytest

import fedrepro

from .pft_support import CON_SMALL


@pytest.mark.parametrize("name, args", [("fedpft", {}), ("fedpft_con", CON_SMALL), ("fedavg_linear", {})])
def test_method_learns_on_synthetic(tiny, name, args):
    res = fedrepro.run(tiny(**{"method.name": name, "method.args": args, "train.rounds": 4}))
    assert res.summary["final_acc_mean"] > 0.6, res.summary  # 4 balanced classes: chance is 25%
