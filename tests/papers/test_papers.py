"""fedrepro.papers: a paper's setup resolves at every profile and takes overrides; unknown papers
are named."""
import pytest

from fedrepro.errors import ConfigError
from fedrepro.papers import setup


def test_every_profile_resolves_and_overrides_apply():
    for profile in ("smoke", "laptop", "paper"):
        cfg = setup("fedpft", profile, method__name="fedper")
        assert cfg.profile == profile and cfg.method.name == "fedper"
    assert setup("fedpft", "laptop").train.local_epochs == 5  # the same budget as FedPFT's R_f + R_a


def test_unknown_paper():
    with pytest.raises(ConfigError, match="fedpft"):
        setup("fedxyz", "laptop")
