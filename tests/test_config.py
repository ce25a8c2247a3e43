"""fedrepro.config: profiles, overrides, YAML and CLI sets, hashing, and errors that name the key."""
from __future__ import annotations

import pytest
import yaml

import fedrepro
from fedrepro.config import make_config, parse_cli_sets, profile_from_env
from fedrepro.errors import ConfigError


def test_profiles_resolve_and_differ():
    smoke, laptop, paper = (make_config(p) for p in ("smoke", "laptop", "paper"))
    assert smoke.train.rounds < laptop.train.rounds < paper.train.rounds
    assert paper.data.dataset == "cifar10" and paper.data.num_clients == 40
    assert len({smoke.hash(), laptop.hash(), paper.hash()}) == 3


def test_default_profile_is_laptop():
    assert make_config().profile == "laptop"


def test_overrides_dotted_nested_and_keyword_agree():
    a = make_config("smoke", overrides={"train.rounds": 7, "data.partition_args.alpha": 0.1})
    b = make_config("smoke", overrides={"train": {"rounds": 7}, "data": {"partition_args": {"alpha": 0.1}}})
    c = make_config("smoke", train__rounds=7, data__partition_args__alpha=0.1)
    assert a == b == c
    assert a.train.rounds == 7 and a.data.partition_args["alpha"] == 0.1
    # overriding one partition arg keeps the profile's others
    assert a.data.partition_args["train_per_client"] == make_config("smoke").data.partition_args["train_per_client"]


def test_yaml_and_cli_sets(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text(yaml.safe_dump({"method": {"name": "fedper"}, "train": {"lr": 0.01}}))
    cfg = make_config("smoke", yaml_path=f, overrides=parse_cli_sets(["train.rounds=4", "seed=3"]))
    assert (cfg.method.name, cfg.train.lr, cfg.train.rounds, cfg.seed) == ("fedper", 0.01, 4, 3)


def test_hash_ignores_device_and_runs_dir_only():
    a = make_config("smoke")
    assert a.hash() == a.replace(device="cpu", runs_dir="/elsewhere", progress=False).hash()
    assert a.hash() != a.replace(seed=1).hash()
    assert a.hash() != a.replace(**{"method.args.mu": 0.1, "method.name": "fedprox"}).hash()


@pytest.mark.parametrize("overrides, needle", [
    ({"train.roundz": 3}, "train.roundz"),
    ({"bogus": 1}, "bogus"),
    ({"train.rounds": 0}, "train.rounds"),
    ({"train.lr": -1}, "train.lr"),
    ({"train.participation": 1.5}, "train.participation"),
    ({"data.partition_args.alpha": 0}, "alpha"),
    ({"data.partition_args.alpha": -0.5}, "alpha"),
    ({"data.holdout_clients": 99}, "holdout_clients"),
    ({"method.name": "fedsomething"}, "fedsomething"),
    ({"data.dataset": "imagenet9k"}, "imagenet9k"),
    ({"model.name": "resnet999"}, "resnet999"),
    ({"method.name": "fedprox", "method.args.mu": -1}, "mu"),
    ({"method.name": "fedprox", "method.args.nu": 1}, "nu"),
    ({"device": "tpu"}, "device"),
    ({"profile": "huge"}, "profile"),
])
def test_invalid_values_name_the_key(overrides, needle):
    with pytest.raises(ConfigError, match=needle):
        make_config("smoke", overrides=overrides)


def test_unknown_method_lists_valid_ones():
    with pytest.raises(ConfigError) as e:
        make_config("smoke", method__name="nope")
    assert "fedavg" in str(e.value) and "fedper" in str(e.value)


def test_unknown_profile():
    with pytest.raises(ConfigError, match="smoke, laptop, paper"):
        make_config("huge")


def test_profile_from_env(monkeypatch):
    monkeypatch.setenv("FEDREPRO_PROFILE", "smoke")
    assert profile_from_env("laptop") == "smoke"
    monkeypatch.setenv("FEDREPRO_PROFILE", "bad")
    with pytest.raises(ConfigError, match="FEDREPRO_PROFILE"):
        profile_from_env()
    monkeypatch.delenv("FEDREPRO_PROFILE")
    assert profile_from_env("paper") == "paper"


def test_an_explicit_profile_wins_over_the_environment_and_says_so(monkeypatch):
    from fedrepro.config import resolve_profile

    monkeypatch.delenv("FEDREPRO_PROFILE", raising=False)
    assert resolve_profile(None) == "laptop"  # nothing set: the default
    assert resolve_profile("paper") == "paper"
    monkeypatch.setenv("FEDREPRO_PROFILE", "smoke")
    assert resolve_profile(None) == "smoke"  # nbval: no parameter, the variable decides
    with pytest.warns(UserWarning,
                      match=r"PROFILE='paper' was given explicitly and wins over FEDREPRO_PROFILE='smoke'"):
        assert resolve_profile("paper") == "paper"  # papermill -p PROFILE paper
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resolve_profile("smoke") == "smoke"  # both agree: nothing to say
    with pytest.raises(ConfigError, match="PROFILE='huge'; valid profiles: smoke, laptop, paper"):
        resolve_profile("huge")


def test_round_trip_through_dict():
    cfg = make_config("smoke", method__name="fedrep", method__args={"head_epochs": 2})
    assert fedrepro.config.from_dict(cfg.to_dict()) == cfg


def test_changing_a_name_drops_its_old_arguments():
    cfg = make_config("smoke", overrides={"data.partition": "pathological",
                                          "data.partition_args.classes_per_client": 2})
    assert cfg.data.partition_args == {"classes_per_client": 2}
    cfg2 = cfg.replace(**{"method.name": "fedprox", "method.args.mu": 0.5}).replace(**{"method.name": "fedavg"})
    assert cfg2.method.args == {}


def test_paper_profile_matches_the_fedpft_protocol():
    """FedPFT (ICLR) §4.1 and App. D.3: 40 clients × 500/100, full-width ResNet-8, B=100, R=5, T=1000, lr 0.1."""
    p = make_config("paper")
    assert p.model.name == "resnet8" and p.model.args == {"width": 64}
    assert p.data.partition_args == {"alpha": 0.5, "train_per_client": 500, "test_per_client": 100}
    t = p.train
    assert (t.rounds, t.local_epochs, t.batch_size, t.lr) == (1000, 5, 100, 0.1)


def test_explicit_default_method_args_hash_like_the_defaults():
    """The run folder is keyed by the *resolved* config: spelling out a default changes nothing,
    a different value (or type) does."""
    base = fedrepro.make_config("smoke", method__name="fedprox")
    assert base.replace(**{"method.args": {"mu": 0.01}}).hash() == base.hash()
    assert base.replace(**{"method.args": {"mu": 0.1}}).hash() != base.hash()
    pft = fedrepro.make_config("smoke", method__name="fedpft")
    assert pft.replace(**{"method.args": {"r_f": 4, "r_a": 1}}).hash() == pft.hash()
    assert pft.replace(**{"method.args": {"r_f": 3}}).hash() != pft.hash()


def test_global_eval_off_keeps_old_config_hashes(tiny):
    cfg = tiny()
    assert "global_eval" not in cfg.hashed_dict()["train"]
    on = cfg.replace(**{"train.global_eval": True})
    assert on.hashed_dict()["train"]["global_eval"] is True and on.hash() != cfg.hash()
    with pytest.raises(ConfigError, match="train.global_eval"):
        cfg.replace(**{"train.global_eval": "yes"})
