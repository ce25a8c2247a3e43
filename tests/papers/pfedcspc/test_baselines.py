"""pFedCSPC's baselines: local fine-tuning changes a global baseline's Local score, not its training."""
from __future__ import annotations

import pytest

import fedrepro


@pytest.mark.parametrize("method", ["moon", "fedntd"])
def test_local_finetuning_leaves_a_global_baselines_training_as_it_is(tiny, method):
    """Notebook 04 reuses notebook 01's runs of Table II's baselines, which score their Local after
    fine-tuning: the per-round global accuracy must be the plain config's."""
    from fedrepro.papers.pfedcspc import GLOBAL_BASELINES, with_local_finetune

    assert method in GLOBAL_BASELINES
    base = tiny(**{"method.name": method, "train.global_eval": True, "train.rounds": 2})
    plain, tuned = fedrepro.run(base), fedrepro.run(with_local_finetune(base, "laptop"))
    assert tuned.config.train.eval_finetune_epochs == base.train.local_epochs and plain.path != tuned.path
    assert plain.rounds["global_acc"].tolist() == tuned.rounds["global_acc"].tolist()
    assert plain.rounds["train_loss"].tolist() == tuned.rounds["train_loss"].tolist()
    assert plain.rounds["acc_mean"].tolist() != tuned.rounds["acc_mean"].tolist()  # the Local score is not
    assert with_local_finetune(base, "paper").train.eval_finetune_epochs == base.train.local_epochs


@pytest.mark.parametrize("profile", ["smoke", "laptop", "paper"])
def test_global_baselines_fine_tune_as_long_as_pfedcspc_trains_locally(profile):
    """Table II's Local column: a global baseline's fine-tuning gets pFedCSPC's E local epochs."""
    from fedrepro.papers import pfedcspc, setup

    e = setup("pfedcspc", profile).train.local_epochs
    cfgs = pfedcspc.TABLES["main_default"].configs(profile, tuned=False)  # the rows, before the lr search
    tuned = [c for c in cfgs if c.method.name in pfedcspc.GLOBAL_BASELINES]
    assert tuned and all(c.train.eval_finetune_epochs == e for c in tuned)
    assert all(c.method.args["ft_epochs"] == e for c in cfgs if c.method.name == "fedavg_ft")
