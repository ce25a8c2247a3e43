"""FedPFT's tables: budgets as the paper gives them."""
import pytest

from fedrepro.papers import fedpft, setup


@pytest.mark.parametrize("profile", ["smoke", "laptop", "paper"])
def test_two_stage_gets_each_stage_as_long_as_the_joint_run(profile):
    """ICLR App. G: 1000 rounds of contrastive learning, then 1000 of classification, against
    FedPFT+Con's 1000 joint rounds; over the claim seeds."""
    rounds = setup("fedpft", profile).train.rounds
    cfgs = fedpft.TABLES["two_stage"].configs(profile)
    by = {}
    for c in cfgs:
        by.setdefault(c.method.name, []).append(c)
    assert {c.train.rounds for c in by["fedpft_con"]} == {rounds}
    assert {c.train.rounds for c in by["fedpft_two_stage"]} == {2 * rounds}
    assert len(by["fedpft_two_stage"]) == len(by["fedpft_con"]) >= (1 if profile == "smoke" else 3)
    two = by["fedpft_two_stage"][0]
    assert two.method.args.get("stage1_rounds") is None  # half of 2 × rounds: the joint run's length


def test_probe_claims_rest_on_the_claim_seeds():
    cfgs = fedpft.TABLES["probe"].configs("laptop")
    for m in ("fedavg", "fedpft", "fedper", "fedbn", "fedcac"):
        assert len({c.seed for c in cfgs if c.method.name == m}) >= 3, m


@pytest.mark.parametrize("profile", ["laptop", "paper"])
def test_fedrep_trains_the_same_local_epochs_as_every_method(profile):
    """ICLR §4.1: R = 5 local epochs a round for all; FedRep's head + body epochs add up to R."""
    for c in fedpft.TABLES["main_default"].configs(profile):
        if c.method.name == "fedrep":
            args = c.method.args
            assert args["head_epochs"] + args["body_epochs"] == c.train.local_epochs == 5


def test_main_table_claim_rows_rest_on_the_claim_seeds():
    cfgs = fedpft.TABLES["main_default"].configs("laptop")
    for m in ("fedavg", "fedpft", "local", "fedper", "fedbn", "fedrep"):
        assert {c.seed for c in cfgs if c.method.name == m} == {0, 1, 2}, m
