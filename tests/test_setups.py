import pytest

from fedrepro.errors import ConfigError
from fedrepro.papers import setup, variants


def test_fedpft_paper_setup_is_the_papers_protocol():
    """specs/fedpft.md §3.1-3.3: 40 clients × 500/100 on CIFAR-10, ResNet-8, B = 100, R = 5, T = 1000."""
    cfg = setup("fedpft", "paper")
    assert (cfg.data.dataset, cfg.data.num_clients, cfg.data.partition) == ("cifar10", 40, "fixed_dirichlet")
    assert cfg.data.partition_args == {"alpha": 0.5, "train_per_client": 500, "test_per_client": 100}
    assert (cfg.model.name, cfg.model.args) == ("resnet8", {"width": 64})
    t = cfg.train
    assert (t.rounds, t.local_epochs, t.batch_size, t.lr) == (1000, 5, 100, 0.1)


def test_every_profile_resolves_and_overrides_apply():
    for profile in ("smoke", "laptop", "paper"):
        cfg = setup("fedpft", profile, method__name="fedper")
        assert cfg.profile == profile and cfg.method.name == "fedper"
    assert setup("fedpft", "laptop").train.local_epochs == 5  # the same budget as FedPFT's R_f + R_a


def test_unknown_paper():
    with pytest.raises(ConfigError, match="fedpft"):
        setup("fedxyz", "laptop")


def test_fedpft_variants_follow_the_spec():
    """specs/fedpft.md §3.1-3.2: ResNet-10 for C100/Tiny (200 test images for Tiny), 2 classes per
    client for pathological C10, one domain per client for feature shift, 100 clients, ResNet-18."""
    c100 = setup("fedpft", "paper", "cifar100")
    assert (c100.data.dataset, c100.model.name) == ("cifar100", "resnet10")
    assert setup("fedpft", "paper", "tiny_imagenet").data.partition_args["test_per_client"] == 200
    path = setup("fedpft", "laptop", "pathological")
    assert path.data.partition == "pathological" and path.data.partition_args == {"classes_per_client": 2}
    assert path.data.max_train == 10 * 200  # 200 train images per client after the even split
    fs = setup("fedpft", "paper", "feature_shift")
    assert (fs.data.dataset, fs.data.partition, fs.data.num_clients) == ("domainnet", "domain", 6)
    assert fs.data.partition_args == {"train_per_client": 1000, "test_per_client": 500}
    assert setup("fedpft", "laptop", "feature_shift").data.dataset == "fashion_mnist_domains"
    assert setup("fedpft", "paper", "100_clients").data.num_clients == 100
    assert setup("fedpft", "paper", "resnet18").model.name == "resnet18"
    for profile in ("smoke", "laptop", "paper"):
        for v in variants("fedpft"):
            setup("fedpft", profile, v)  # every combination validates
    with pytest.raises(ConfigError, match="pathological"):
        setup("fedpft", "laptop", "patho")
