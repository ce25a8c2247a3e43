"""pFedCSPC's setting overrides keep the setup's arguments."""
from __future__ import annotations


def test_setting_overrides_keep_the_setups_arguments():
    from fedrepro.papers import setup
    from fedrepro.papers.pfedcspc import ABLATION_GLOBAL, setting_overrides

    base = setup("pfedcspc", "laptop")
    assert base.method.name == "pfedcspc" and base.method.args == {"server_epochs": 20, "tau_p": 0.1}
    tpg = base.replace(**setting_overrides(ABLATION_GLOBAL["+TPG+CA"]))
    assert tpg.method.args["server_epochs"] == 20 and tpg.method.args["prototypes"] == "tpg"
    fedavg = base.replace(**setting_overrides(ABLATION_GLOBAL["Base"]))
    assert fedavg.method.name == "fedavg" and fedavg.method.args == {}
    full = base.replace(**setting_overrides(ABLATION_GLOBAL["+PTA+CPM+PA+CA+KP"]))
    assert full.hash() == base.hash()  # the full method is the setup itself, one run folder
