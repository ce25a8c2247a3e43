"""The paper profile, line by line (issue 15): what the papers' setups build at the paper profile,
checked without training, and the smoke and laptop configs left exactly as they were."""
from __future__ import annotations

import hashlib
import json

import pytest

from fedrepro.papers import paper, setup

# Keys of smoke and laptop configs before the paper-profile work (its first commit's parent): the
# config hash without the package version, so that a version bump does not count as a change. The
# laptop pFedCSPC keys changed once since, on purpose: its runs take τ_p from setup.TAU_P.
PINNED = {
    "setup:fedpft:default:smoke": "3f8f9b7b804ab846",
    "setup:fedpft:cifar100:smoke": "3f8f9b7b804ab846",
    "setup:fedpft:pathological:smoke": "bb37f86562db345d",
    "setup:fedpft:resnet18:smoke": "a8fba47fd7ed2665",
    # pFedCSPC's smoke runs calibrate for 5 server epochs with 2 K-means restarts since the pin (a
    # smoke check in minutes; earlier f53cbd2ef111fb71, 54d84d0332592700 for β = 0.1).
    "setup:pfedcspc:default:smoke": "0769460e3f48ddba",
    "setup:pfedcspc:cifar100:smoke": "0769460e3f48ddba",
    "setup:pfedcspc:beta0.1:smoke": "d98c4a8523520cf0",
    # FedPFT's main table, its linear-probe table and its r_f table gained rows (issue 54): the φ-epoch-
    # matched FedPFT row (variants.PHI_MATCHED) in the first two, the main table's α = 0.1 baselines beside
    # the R_f sweep (its ceiling) in the third. Without those rows the keys are the earlier pin's
    # (787dd48fd7df0c3e, a8134a7d02753dee, c6d97695881f3189 at smoke; 5f97a0d5eb3194a3, 9aaf5fb051c23021,
    # e9526438e34500c6 at laptop): every other row is as it was.
    "table:fedpft:main_default:smoke": "80e0102e888ec4b2",
    # The ablation gained arXiv rows VI-VII (FedPFT (arXiv) §4.3) after the pin; its other rows are unchanged.
    "table:fedpft:ablation:smoke": "0067c27ade11f582",
    "table:fedpft:r_f:smoke": "031b97520f321629",
    "table:pfedcspc:main_default:smoke": "bda227219ba5ee10",
    # Table VI gained its FedASAM pair; without those rows the table's keys are the earlier pin's
    # (9a64ea933aa3481a at smoke, 1d49de107ad3804c at laptop).
    "table:pfedcspc:orthogonality:smoke": "7de001827d6f142a",
    "table:pfedcspc:rounds_beta0.1:smoke": "c304c073e0186884",
    # FedPFT's laptop runs train 50 rounds since the pin, ResNet-18 and 100 clients included (its
    # setup's docstring says why; the earlier keys were 1058d637a0c44239, f45ae13ede439aad,
    # 3fdd8dba85fdc8dc, fcdf98d2818b260d, ccd0d09234531aa3, 99b597486ad81934), and since then 25
    # rounds, then on until flat up to 50; the tables that probe the final models (linear_probe,
    # prompt_effect, feature_shift) keep the 50 fixed rounds and their keys (the setups' and the
    # other FedPFT tables' keys at 50 fixed rounds: cd273df8e1894f2a, cd273df8e1894f2a,
    # af2399bc1f876219, cda7ab74cbdcccc5, 93528717ef4290d9, 81cffefe4e842a14, 2eea8901fb79ec23,
    # eb00a05504fe043f, b454929aeeeb3749, 4eaa2e8ba5a695ba, 8d57fcab46202701, 26f65291fb81649a,
    # 9f7264894e8bebb3).
    "setup:fedpft:default:laptop": "efd15bdb42c3f835",
    "setup:fedpft:cifar100:laptop": "efd15bdb42c3f835",
    "setup:fedpft:pathological:laptop": "8e5f95a47bfe8def",
    "setup:fedpft:resnet18:laptop": "7009f149bb154776",
    # pFedCSPC's laptop runs train 40 rounds since the pin (its setup's docstring says why).
    "setup:pfedcspc:default:laptop": "621cacb4ef3f544d",
    "setup:pfedcspc:cifar100:laptop": "621cacb4ef3f544d",
    "setup:pfedcspc:beta0.1:laptop": "85e06ed4c207d5e0",
    "table:fedpft:main_default:laptop": "6dcc9986ddd34c17",
    "table:fedpft:ablation:laptop": "45840cfe1a16095a",
    "table:fedpft:r_f:laptop": "065b93d741fc310c",
    "table:pfedcspc:main_default:laptop": "53c3adbf5d0ff358",
    # Table VI and Table VII (β = 0.1) run their claim rows over the claim seeds since the pin.
    "table:pfedcspc:orthogonality:laptop": "6800553295af3c85",  # with the FedASAM pair, as at smoke
    "table:pfedcspc:rounds_beta0.1:laptop": "91138456221e4bee",
    # The tables that run the paper's dataset columns at the paper profile (test_paper_datasets.py):
    # their smoke and laptop runs before the columns were added.
    # FedAvg+Linear runs under both schedules, each named (issue 54); with its rows as before (no
    # method.args, the alternating schedule only) the keys are the earlier pin's (827f7261223f2e2b
    # at smoke, c2cdb8371ad8fa3b at laptop).
    "table:fedpft:linear:smoke": "f6487e1ae6cac523",
    "table:fedpft:linear:laptop": "d6ad597fd396467f",
    "table:fedpft:linear_probe:smoke": "fcf5e93e2cc1d8a5",  # with the matched row (issue 54), as above
    "table:fedpft:linear_probe:laptop": "7bcb95f7a1c064b5",
    "table:fedpft:prompt_effect:smoke": "362e6a321deefd68",
    "table:fedpft:prompt_effect:laptop": "04947dcf4be5225d",
    "table:fedpft:pathological:smoke": "26061a707b299d44",
    "table:fedpft:pathological:laptop": "cbefe7c5240e20bf",
    "table:fedpft:feature_shift:smoke": "c19137c8f92bbcbf",
    "table:fedpft:feature_shift:laptop": "79c98e18c859a843",
    "table:fedpft:partial_participation:smoke": "95e911fca0653dcf",
    "table:fedpft:partial_participation:laptop": "1edb668a334b4dba",
    "table:fedpft:n_kappa:smoke": "749c7313c9bf9ab4",
    "table:fedpft:n_kappa:laptop": "338d21e56b07cb6d",
    "table:fedpft:n_rho:smoke": "e88cd4dd08b26115",
    "table:fedpft:n_rho:laptop": "f904fe1e8a446111",
    "table:fedpft:time:smoke": "8d02e2e1067abd06",
    "table:fedpft:time:laptop": "f94f860d8ba3e5b9",
    "table:pfedcspc:ablation_global:smoke": "d138b5862096f6ce",
    "table:pfedcspc:ablation_global:laptop": "cd66bd02419ef2fc",
    "table:pfedcspc:ablation_personal:smoke": "e3355a754006c1bc",
    "table:pfedcspc:ablation_personal:laptop": "503aeb993d5cd75b",
    "table:pfedcspc:rounds_default:smoke": "ea93c9fc10c0df84",
    "table:pfedcspc:rounds_default:laptop": "e4c1037a688e0d88",
}


def _key(cfg) -> str:
    d = cfg.hashed_dict()
    d.pop("fedrepro_version")
    return hashlib.sha256(json.dumps(d, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()[:16]


@pytest.mark.parametrize("case", sorted(PINNED))
def test_smoke_and_laptop_configs_keep_their_hashes(case):
    kind, name, what, profile = case.split(":")
    if kind == "setup":
        got = _key(setup(name, profile, what))
    else:
        keys = sorted(_key(c) for c in paper(name).TABLES[what].configs(profile, tuned=False))
        got = hashlib.sha256(",".join(keys).encode()).hexdigest()[:16]
    assert got == PINNED[case]


@pytest.mark.parametrize("variant, stem", [("cifar100", "cifar"), ("tiny_imagenet", "conv3_s2"),
                                           ("vireo172", "conv7_s2")])
def test_pfedcspc_resnet18_stem_per_dataset(variant, stem):
    cfg = setup("pfedcspc", "paper", variant)
    assert cfg.model.name == "resnet18" and cfg.model.args["stem"] == stem


def test_fedpft_resnets_keep_the_imagenet_stem_its_sizes_imply():
    # FedPFT (ICLR) Table 15's φ sizes fit the ImageNet stem (fedrepro.models.resnet).
    for variant in ("default", "cifar100", "tiny_imagenet", "resnet18", "feature_shift"):
        assert setup("fedpft", "paper", variant).model.args.get("stem", "imagenet") == "imagenet"


@pytest.mark.parametrize("variant, classes, side", [("cifar100", 100, 32), ("tiny_imagenet", 200, 64)])
def test_pfedcspc_resnet_variants_give_every_method_the_projection_head(variant, classes, side):
    import torch

    from fedrepro.models import create_model
    from fedrepro.methods.pfedcspc import CSPCNet
    from fedrepro.papers.pfedcspc import TABLES

    configs = TABLES[f"main_{variant}"].configs("paper", tuned=False)
    assert len({c.method.name for c in configs}) > 5
    # Every method of the table, pFedCSPC and the baselines, trains the same model.
    assert {json.dumps(c.model.args, sort_keys=True) for c in configs} == \
        {json.dumps(configs[0].model.args, sort_keys=True)}
    args = configs[0].model.args
    assert args["projection_dim"] == 256
    model = create_model("resnet18", classes, image_size=side, seed=0, **{**args, "width": 4}).eval()
    assert model.feature_dim == 256 and model.features.projection[0].in_features == 32
    with torch.no_grad():
        assert model(torch.zeros(2, 3, side, side)).shape == (2, classes)
    net = CSPCNet(model, proj_dim=7, num_classes=classes)  # the model's own H wins over proj_dim
    assert net.proj is model.features.projection and net.feature_dim == 256


@pytest.mark.parametrize("variant, augment", [("default", "crop_flip_reflect"), ("beta0.1", "crop_flip_reflect"),
                                              ("cifar100", "crop_flip"), ("tiny_imagenet", "crop_flip"),
                                              ("vireo172", "flip")])
def test_pfedcspc_paper_profile_augments_as_its_code_does(variant, augment):
    assert setup("pfedcspc", "paper", variant).train.augment == augment
    for profile in ("smoke", "laptop"):
        assert setup("pfedcspc", profile, variant).train.augment == "none"


def test_fedpft_trains_without_augmentation_at_every_profile():
    # FedPFT states no training augmentation (ICLR §4.1, App. D) and has no public code.
    for profile in ("smoke", "laptop", "paper"):
        assert setup("fedpft", profile).train.augment == "none"


def test_fedamp_schedule_stays_finite_positive_and_stable_over_the_paper_run():
    from fedrepro.methods import METHODS

    runs = [c for c in paper("fedpft").TABLES["main_default"].configs("paper",
                                                                      tuned=False) if c.method.name == "fedamp"]
    assert runs and all(c.train.rounds == 1000 for c in runs)
    for cfg in runs:
        p = METHODS.get("fedamp").parse_params(cfg.method.args)
        t = cfg.train
        alphas = [p.alpha_at(r, t.lr) for r in range(t.rounds + 1)]  # the server forms round r + 1's clouds
        stiff = [t.lr * p.lam / a for a in alphas]
        assert all(a > 0 and a == a and a != float("inf") for a in alphas)
        # One SGD step of the proximal term never overshoots, far inside 2(1 + momentum).
        assert max(stiff) <= 1.0 < 2 * (1 + t.momentum)
        assert alphas[0] == p.alpha_k and alphas[-1] == pytest.approx(p.lam * t.lr)
    # Without the floor the same schedule leaves the stable range at round 180 and overflows λ/α_k.
    bare = METHODS.get("fedamp").parse_params({})
    lr, beta = runs[0].train.lr, runs[0].train.momentum
    unstable = [r for r in range(1000) if lr * bare.lam / bare.alpha_at(r) >= 2 * (1 + beta)]
    assert unstable[0] == 180
    assert bare.alpha_at(999) < 1e-28


def test_fedamp_floor_is_off_at_laptop_and_smoke():
    for profile in ("smoke", "laptop"):
        runs = [c for c in paper("fedpft").TABLES["main_default"].configs(profile, tuned=False)
                if c.method.name == "fedamp"]
        assert runs and all("alpha_floor" not in c.method.args for c in runs)


@pytest.mark.parametrize("table", ["main_default", "main_cifar100", "main_tiny_imagenet"])
def test_fedpft_paper_main_tables_search_every_rows_lr_on_validation_with_one_budget(table):
    from collections import Counter

    from fedrepro.execute.tuning import TUNING_SEED
    from fedrepro.papers.fedpft.tables import LR_GRID

    t = paper("fedpft").TABLES[table]
    rows = t.configs("paper", tuned=False)
    searches = t.search_configs("paper")
    alpha = lambda c: c.data.partition_args["alpha"]  # noqa: E731
    assert {c.data.validation for c in searches} == {0.2} and {c.data.validation for c in rows} == {0.0}
    # Every (method, α) is searched over the whole grid, at one seed: the same budget for each.
    searched = Counter((c.method.name, alpha(c)) for c in searches)
    assert set(searched.values()) == {len(LR_GRID)} and {c.seed for c in searches} == {TUNING_SEED}
    assert set(searched) == {(c.method.name, alpha(c)) for c in rows} and ("fedpft", 0.5) in searched
    for key in searched:
        assert {c.train.lr for c in searches if (c.method.name, alpha(c)) == key} == set(LR_GRID)
    # The search runs differ from the rows only in the split, the seed and the rate.
    assert {(c.train.rounds, c.model.name) for c in searches} == {(c.train.rounds, c.model.name) for c in rows}


def test_fedpft_laptop_main_table_has_no_lr_search():
    t = paper("fedpft").TABLES["main_default"]
    configs = t.configs("laptop")
    assert {c.train.lr for c in configs} == {0.05} and {c.data.validation for c in configs} == {0.0}
    assert t.search_configs("laptop") == []


def test_fedpft_ablation_runs_on_cifar100_at_the_paper_profile():
    configs = paper("fedpft").TABLES["ablation"].configs("paper")
    assert {(c.data.dataset, c.model.name) for c in configs} == {("cifar100", "resnet10")}
