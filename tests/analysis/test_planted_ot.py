"""The planted-patch γ experiment (FedOTP (CVPR 2024) Fig. A4 on ground truth): at γ = 1 the object
mass is exactly the object fraction, and it rises as γ falls."""
import numpy as np
import pytest
import torch

from fedrepro.analysis.planted_ot import (
    PlantedOTConfig,
    PlantedPrompts,
    evaluate_planted,
    planted_ot_experiment,
    train_planted,
)
from fedrepro.data.planted import PlantedConfig, make_planted
from fedrepro.errors import ConfigError

SMALL = PlantedOTConfig(task=PlantedConfig(num_classes=4, num_clients=3, num_patches=25, dim=16,
                                           train_per_client=16, test_per_client=16),
                        rounds=3, batch_size=16)


@pytest.fixture(scope="module")
def table():
    return planted_ot_experiment(seeds=(0,), gammas=(1.0, 0.8, 0.5), config=SMALL)


def test_tidy_columns(table):
    assert list(table[["seed", "gamma"]].itertuples(index=False, name=None)) == [(0, 1.0), (0, 0.8), (0, 0.5)]
    assert {"object_mass", "object_mass_global", "object_mass_local", "object_mass_solver", "object_fraction",
            "mass_ceiling", "acc", "local_style_cos", "global_style_cos"} <= set(table.columns)
    assert table.acc.between(0, 1).all()


def test_object_mass_at_gamma_one_is_the_object_fraction(table):
    rho = SMALL.task.num_objects / SMALL.task.num_patches
    one = table[table.gamma == 1.0].iloc[0]
    assert one.object_fraction == pytest.approx(rho)
    assert abs(one.object_mass - rho) < 1e-5


def test_object_fraction_at_gamma_one_holds_for_any_vectors():
    task = make_planted(SMALL.task)
    gen = torch.Generator().manual_seed(3)
    tc = SMALL.task
    rand = PlantedPrompts(torch.randn(tc.num_classes, tc.dim, generator=gen),
                          torch.randn(tc.num_clients, tc.num_classes, tc.dim, generator=gen))
    out = evaluate_planted(task, rand, 1.0, SMALL)
    assert abs(out["object_mass"] - tc.num_objects / tc.num_patches) < 1e-5


def test_object_mass_rises_as_gamma_falls(table):
    mass = table.sort_values("gamma", ascending=False).object_mass.to_numpy()
    assert np.all(np.diff(mass) > 0)
    assert mass[-1] > table.object_fraction.iloc[0] + 0.05
    assert (table.object_mass <= table.mass_ceiling + 1e-9).all()
    assert table.acc.max() > 0.5  # the vectors learnt the classes (chance is 0.25)


def test_deterministic_and_paired():
    task = make_planted(SMALL.task)
    a = train_planted(task, 0.8, SMALL, seed=1)
    b = train_planted(task, 0.8, SMALL, seed=1)
    assert torch.equal(a.global_, b.global_) and torch.equal(a.local, b.local)
    assert torch.allclose(a.global_.norm(dim=-1), torch.ones(SMALL.task.num_classes))


def test_bad_input():
    with pytest.raises(ConfigError, match="gammas"):
        planted_ot_experiment(seeds=(0,), gammas=(0.0,), config=SMALL)
    with pytest.raises(ConfigError, match="rounds"):
        PlantedOTConfig(rounds=0)
    with pytest.raises(ConfigError, match="split"):
        planted_ot_experiment(seeds=(0,), gammas=(1.0,), config=SMALL, split="val")


def test_planted_plan_maps_hold_gamma_and_favour_objects():
    from fedrepro.analysis.planted_ot import planted_plan_maps, plot_planted_maps

    cfg = PlantedOTConfig(task=PlantedConfig(num_clients=2, train_per_client=16, test_per_client=8), rounds=2)
    maps = planted_plan_maps(seed=0, gammas=(1.0, 0.5), num_images=3, config=cfg)
    assert maps["mask"].shape == (3, 7, 7) and set(maps["plans"]) == {1.0, 0.5}
    for gamma, plan in maps["plans"].items():
        assert torch.allclose(plan.sum((1, 2)), torch.full((3,), gamma), atol=1e-5)
    obj = maps["mask"]
    half = maps["plans"][0.5]
    assert float(half[obj].mean()) > float(half[~obj].mean())  # the plan keeps the objects
    from fedrepro.env.figure_check import check

    assert check(plot_planted_maps(maps)) == []  # the object dots named in a legend
