"""FedOTP's setups: every profile × variant resolves, the paper profile is the paper's protocol, the
small profiles federate only on images the CLIP stand-in never saw, and every table's rows are
registered methods at the learning rates of the search."""
import pytest

from fedrepro.errors import ConfigError
from fedrepro.methods import METHODS
from fedrepro.papers import PAPERS, paper, setup, variants
from fedrepro.papers.fedotp.tables import SEARCH_VALIDATION, lr_search
from fedrepro.papers.fedotp.variants import (COOP_EQUAL, COOP_SESSION_EPOCHS, LR_GRID, PFEDPROMPT_UNSCALED, SETTINGS,
                                             TRAINED, row)
from fedrepro.papers.fedotp.variants import METHODS as ROWS

PROFILES = ("smoke", "laptop", "paper")


def test_registered_with_title_and_tables():
    assert "fedotp" in PAPERS
    mod = paper("fedotp")
    assert mod.TITLE.startswith("FedOTP")
    assert {"label_shift", "dirichlet", "dirichlet_cifar10", "feature_shift", "feature_shift_cluttered",
            "feature_label_shift", "feature_shift_domainnet", "feature_label_shift_domainnet", "ot_variants",
            "prompt_sets", "gamma", "shots", "curves", "clusters", "vs_coop", "official_code"} == set(mod.TABLES)


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("variant", [v for v in variants("fedotp") if ":" not in v])
def test_every_profile_and_variant_resolves(profile, variant):
    cfg = setup("fedotp", profile, variant, method__name="fedotp")
    assert cfg.model.name == "clip" and cfg.method.name == "fedotp"
    assert (cfg.train.momentum, cfg.train.weight_decay) == (0.9, 5e-4)  # the official code's SGD
    if profile == "paper":
        assert cfg.train.lr == 0.001
        assert cfg.model.args["arch"] == ("RN50" if variant in ("default", "pathological") else "ViT-B-16")
    else:
        assert cfg.model.args == {"arch": "standin_patch"}  # patch tokens that carry the class (issue 55)
    if variant in ("default", "pathological"):
        assert cfg.data.partition == "pathological" and cfg.data.partition_args["shots"] == 4
        clients, k = cfg.data.num_clients, cfg.data.partition_args["classes_per_client"]
        assert clients * k == (100 if profile == "paper" else 10)  # disjoint class blocks (10 × 10 at paper)
    if variant == "dirichlet":
        assert cfg.data.partition_args["alpha"] == 0.3


@pytest.mark.parametrize("dataset", ["original", "noisy", "edges"])
def test_pathological_datasets_at_laptop(dataset):
    cfg = setup("fedotp", "laptop", f"pathological:{dataset}")
    assert cfg.data.dataset_args == {"styles": [dataset], "half": "federated"}
    with pytest.raises(ConfigError, match="styles"):
        setup("fedotp", "laptop", "pathological:dtd")


@pytest.mark.parametrize("profile", ["smoke", "laptop"])
@pytest.mark.parametrize("variant", variants("fedotp"))
def test_small_profiles_federate_only_on_images_the_standin_never_saw(profile, variant):
    if variant.partition(":")[2] in ("food101", "dtd", "caltech101", "flowers102", "oxford_pets"):
        pytest.skip("a paper-profile dataset")
    cfg = setup("fedotp", profile, variant)
    assert cfg.data.dataset == "fashion_mnist_domains" and cfg.data.dataset_args["half"] == "federated"


def test_unknown_variant_is_named():
    with pytest.raises(ConfigError, match="feature_label_shift"):
        setup("fedotp", "laptop", "nope")


def test_rows_are_registered_methods_whose_rate_the_search_chooses():
    search = lr_search("laptop")
    assert search.grid == LR_GRID and lr_search("paper") is None  # the paper profile keeps the official 0.001
    for name in (*ROWS, *SETTINGS):
        r = row(name, "laptop")
        assert r["method.name"] in METHODS.names()
        assert "train.lr" not in r  # no constant: the search's stored result
    # Every trained method's search runs on the noisy pathological split, whatever the row's table.
    base = setup("fedotp", "laptop", "dirichlet").replace(**{"method.name": "coop"})
    assert search.searched(base) and {c.data.partition for c in search.search_configs(base)} == {"pathological"}
    assert set(TRAINED) == {m for m in ROWS if m != "zeroshot_clip"}


@pytest.mark.parametrize("profile", PROFILES)
def test_every_table_resolves(profile):
    mod = paper("fedotp")
    # Untuned: the small profiles' rows wait for the learning-rate search (TuningPending) until it is stored.
    for name, table in mod.TABLES.items():
        assert table.configs(profile, tuned=False), name
    assert len(mod.label_configs(profile, tuned=False)) == \
        len(mod.datasets(profile)) * len(mod.TABLES["label_shift"].configs(profile, tuned=False))


def test_a_pathological_rows_search_runs_at_twice_its_own_shot_count_half_held_out():
    search, shots = lr_search("laptop"), paper("fedotp").TABLES["shots"]
    assert search.validation == SEARCH_VALIDATION == 0.5 and search.seeds == (1000, 1001, 1002)
    assert search.paper_rate == 0.001  # the official code's, which the rule picks within noise
    for cfg in shots.configs("laptop", tuned=False):
        n = cfg.data.partition_args["shots"]
        searched = {c.data.partition_args["shots"] for c in search.search_configs(cfg)}
        assert searched == {2 * n}, n  # a client trains on about the row's images, and as many are held out
    # A Dirichlet row keeps the pathological split's search (4 shots, so 8).
    base = setup("fedotp", "laptop", "dirichlet").replace(**{"method.name": "fedotp"})
    assert {c.data.partition_args["shots"] for c in search.search_configs(base)} == {8}


def test_the_search_of_a_4_shot_row_has_enough_validation_images_to_decide():
    """Issue 55: the search held out 10 images in all, and one image chose FedOTP's rate. Now a 4-shot
    row's search scores at least MIN_VALIDATION_IMAGES, counted on the splits it runs on."""
    from fedrepro.execute.tuning import MIN_VALIDATION_IMAGES
    from fedrepro.runs.pipeline import prepare_data

    search = lr_search("laptop")
    cfg = setup("fedotp", "laptop", "pathological:noisy", method__name="fedotp")
    runs = [c for c in search.full_configs(cfg) if c.train.lr == LR_GRID[0]]
    assert len(runs) == len(search.seeds)
    images = sum(sum(len(t) for t in prepare_data(c)[1].test) for c in runs)
    assert images >= MIN_VALIDATION_IMAGES, images
    # The old search: a fifth of 8 shots at one seed.
    old = runs[0].replace(**{"data.validation": 0.2, "data.partition_args.shots": 4})
    assert sum(len(t) for t in prepare_data(old)[1].test) == 10


def test_coop_and_pfedprompt_rows_search_with_their_own_budget_and_cache():
    search = lr_search("laptop")
    for name, arg in (("coop", "session_epochs"), (COOP_EQUAL, None), ("pfedprompt", None),
                      (PFEDPROMPT_UNSCALED, "cache_scale")):
        cfg = setup("fedotp", "laptop", "pathological").replace(**row(name, "laptop"))
        args = {c.method.args.get(arg) for c in search.search_configs(cfg)} if arg else set()
        assert args == ({cfg.method.args[arg]} if arg else set()), name
    assert row("coop", "laptop")["method.args"] == {"session_epochs": COOP_SESSION_EPOCHS}
    assert row(COOP_EQUAL, "laptop") == {"method.name": "coop"}
    label = paper("fedotp").TABLES["label_shift"].configs("laptop", tuned=False)
    shown = {(c.method.name, c.method.args.get("session_epochs"), c.method.args.get("cache_scale")) for c in label}
    assert {("coop", 10, None), ("coop", None, None), ("pfedprompt", None, None), ("pfedprompt", None, "none")} <= shown
