"""PEP-FedPT's setups: every profile × variant resolves, the paper profile is the paper's protocol,
and the laptop never federates on data the frozen stand-in was pretrained on."""
import pytest

from fedrepro.data.glyphs import HELDOUT_FONTS, PRETRAIN_FONTS
from fedrepro.data.subsets import DOMAINNET_TEN
from fedrepro.fl.engine import sample_clients
from fedrepro.data.splits import FASHION_MNIST_FEDERATED, FASHION_MNIST_PRETRAIN
from fedrepro.papers import PAPERS, paper, setup, variants
from fedrepro.papers.pep_fedpt.setup import ENV_VIT_B16_WEIGHTS

PROFILES = ("smoke", "laptop", "paper")


def test_registered_with_title_and_tables():
    assert "pep_fedpt" in PAPERS
    mod = paper("pep_fedpt")
    assert mod.TITLE.startswith("PEP-FedPT")
    assert {"label_pathological", "label_dirichlet", "label_tiny_imagenet", "label_tiny_imagenet_dirichlet",
            "feature_shift", "inaturalist", "heldout",
            "heldout_feature_shift", "heldout_inaturalist", "n_shared", "fedvpt_prompts",
            "position", "dp"} == set(mod.TABLES)
    assert {"pathological", "dirichlet", "feature_shift", "heldout"} <= set(variants("pep_fedpt"))


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("variant", variants("pep_fedpt"))
def test_every_profile_and_variant_resolves(profile, variant):
    cfg = setup("pep_fedpt", profile, variant, method__name="fedavg")
    assert cfg.profile == profile and cfg.method.name == "fedavg"
    assert cfg.model.name == ("vit_b16" if profile == "paper" else "tiny_vit")
    assert cfg.train.momentum == 0.9  # PEP-FedPT (arXiv) App. A.3.2
    # One lr of 0.1 for prompts and head at paper (App. A.3.2); the small profiles' own (setup.layers).
    lrs = (0.1, None) if profile == "paper" else (0.01, 1.0)
    assert (cfg.train.lr, cfg.train.prompt_lr) == lrs
    if variant == "heldout":  # 10% (the laptop holds out 4 of 20, so the score is not one client's)
        expected = 4 if profile == "laptop" else max(1, cfg.data.num_clients // 10)
        assert cfg.data.holdout_clients == expected
    if variant == "dirichlet":
        assert (cfg.data.partition, cfg.data.partition_args["alpha"]) == ("dirichlet", 0.3)


def test_unknown_variant_is_named():
    from fedrepro.errors import ConfigError

    with pytest.raises(ConfigError, match="heldout"):
        setup("pep_fedpt", "laptop", "nope")


@pytest.mark.parametrize("profile", ["smoke", "laptop"])
@pytest.mark.parametrize("variant", variants("pep_fedpt"))
def test_small_profiles_federate_only_on_data_the_backbone_never_saw(profile, variant):
    """docs/backbones.md: the glyph-pretrained stand-in saw Fashion-MNIST train [0, 30000) and the
    pretraining fonts; the federated experiments get train [30000, 60000) and the held-out fonts."""
    cfg = setup("pep_fedpt", profile, variant)
    assert cfg.model.args == {"weights": "glyphs"}
    if cfg.data.dataset == "glyphs":
        assert cfg.data.dataset_args.get("fonts", "heldout") == "heldout"
        assert not set(HELDOUT_FONTS) & set(PRETRAIN_FONTS)
    elif cfg.data.dataset == "fashion_mnist_domains":
        assert cfg.data.dataset_args["half"] == "federated"
    else:
        assert cfg.data.dataset == "fashion_mnist_federated"


@pytest.mark.parametrize("variant", variants("pep_fedpt"))
def test_laptop_clients_have_100_test_images_so_one_image_is_at_most_a_point(variant):
    d = setup("pep_fedpt", "laptop", variant).data
    assert d.max_test / d.num_clients >= 100


def test_the_federated_half_is_the_one_left_by_pretraining():
    assert FASHION_MNIST_FEDERATED == range(30000, 60000) and FASHION_MNIST_PRETRAIN == range(30000)


def test_paper_profile_is_the_papers_protocol(monkeypatch):
    """PEP-FedPT (arXiv) §5.1 and App. A.3.2: ViT-B/16 IN-21k, CIFAR-100, 100 clients, 5 per round,
    100 rounds, 5 local epochs, pathological 10 classes per client, SGD lr 0.1 momentum 0.9."""
    monkeypatch.setenv(ENV_VIT_B16_WEIGHTS, "/models/vit_b16_in21k.safetensors")
    cfg = setup("pep_fedpt", "paper")
    d, t = cfg.data, cfg.train
    assert (d.dataset, d.num_clients, d.partition, d.partition_args) == \
        ("cifar100", 100, "pathological", {"classes_per_client": 10})
    assert (cfg.model.name, cfg.model.args) == ("vit_b16", {"weights": "/models/vit_b16_in21k.safetensors"})
    assert (t.rounds, t.local_epochs, t.participation, t.lr, t.momentum) == (100, 5, 0.05, 0.1, 0.9)
    assert round(t.participation * d.num_clients) == 5
    tiny = setup("pep_fedpt", "paper", "tiny_imagenet")
    assert (tiny.data.dataset, tiny.data.num_clients, round(tiny.train.participation * 200)) == ("tiny_imagenet",
                                                                                                 200, 5)
    held = setup("pep_fedpt", "paper", "heldout")
    assert (held.data.num_clients - held.data.holdout_clients, held.data.holdout_clients) == (90, 10)
    # §5.1's 5 clients a round, drawn from the 90 that train.
    assert len(sample_clients(0, 0, range(90), held.train.participation)) == 5
    tiny_dir = setup("pep_fedpt", "paper", "tiny_imagenet_dirichlet")
    assert (tiny_dir.data.dataset, tiny_dir.data.num_clients, tiny_dir.data.partition,
            tiny_dir.data.partition_args["alpha"]) == ("tiny_imagenet", 200, "dirichlet", 0.3)
    assert (cfg.data.dataset_args, tiny.data.dataset_args) == ({"image_size": 224}, {"image_size": 224})
    for variant in ("feature_shift", "heldout_feature_shift"):  # §5.1: pFedPG's ten DomainNet classes
        dn = setup("pep_fedpt", "paper", variant)
        assert dn.data.dataset_args == {"image_size": 224, "classes": list(DOMAINNET_TEN)}
        training = dn.data.num_clients - dn.data.holdout_clients
        assert len(sample_clients(0, 0, range(training), dn.train.participation)) == 6
    dn = setup("pep_fedpt", "paper", "feature_shift")
    assert (dn.data.dataset, dn.data.num_clients, dn.data.partition_args["clients_per_domain"]) == ("domainnet", 60, 10)
    assert (dn.train.rounds, round(dn.train.participation * 60)) == (50, 6)
    # §5 and App. A.3.2: iNaturalist one client per user of at least 16 training images, 500 rounds of E = 2;
    # 10 clients a round is our reading of "a very low participation rate"; App. A.4.7: 102 held out.
    for variant, held, training in (("inaturalist", 0, 1018), ("heldout_inaturalist", 102, 916)):
        inat = setup("pep_fedpt", "paper", variant)
        d = inat.data
        assert (d.dataset, d.dataset_args, d.partition, d.partition_args, d.num_clients, d.holdout_clients) == \
            ("inaturalist", {"image_size": 224}, "by_user", {"min_train": 16}, 1018, held)
        assert (inat.train.rounds, inat.train.local_epochs) == (500, 2)
        assert len(sample_clients(0, 0, range(training), inat.train.participation)) == 10


def test_paper_weights_unset_is_visible_in_the_config(monkeypatch):
    monkeypatch.delenv(ENV_VIT_B16_WEIGHTS, raising=False)
    assert ENV_VIT_B16_WEIGHTS in setup("pep_fedpt", "paper").model.args["weights"]
