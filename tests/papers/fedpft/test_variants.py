"""FedPFT's variants (datasets, partitions, models) and its Table 4 ablation settings."""
import pytest

from fedrepro.errors import ConfigError
from fedrepro.methods import METHODS
from fedrepro.papers import setup, variants
from fedrepro.papers.fedpft.variants import ABLATION_SETTINGS


def test_fedpft_variants_follow_the_spec():
    """FedPFT (ICLR) §4.1, App. D.1, I and J: ResNet-10 for C100/Tiny (200 test images for Tiny), 2 classes
    per client for pathological C10, one domain per client for feature shift, 100 clients, ResNet-18."""
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


def test_ablation_settings_parse_and_map_table4(tiny):
    assert {"I", "II", "III", "IV", "V", "VI"} <= set(ABLATION_SETTINGS)
    for key, s in ABLATION_SETTINGS.items():
        METHODS.get(s["method"]).parse_params(s["args"])
    assert ABLATION_SETTINGS["III"] == {"method": "fedpft", "args": {}}
    assert ABLATION_SETTINGS["V"] == {"method": "fedpft_con", "args": {}}
    assert ABLATION_SETTINGS["II"]["args"]["alternate"] is False
    assert ABLATION_SETTINGS["VI"]["args"]["alternate"] is False
