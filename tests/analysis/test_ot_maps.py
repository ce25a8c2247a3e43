"""FedOTP (CVPR 2024) Figs. 2 and A4 on a trained run: map shapes, the plan's marginals at each γ,
complementary columns at γ = 1, the foreground mass and the figure."""
import matplotlib
import pytest
import torch

import fedrepro
from fedrepro.analysis.ot_maps import (
    converged_plan,
    foreground_mask,
    foreground_mass,
    mass_on,
    plan_maps,
    plot_plan_maps,
    run_foreground_mass,
    run_plan_maps,
)
from fedrepro.errors import ConfigError
from fedrepro.runs.train import restore

matplotlib.use("Agg")

GAMMAS = (1.0, 0.8, 0.5)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A two-round FedOTP run on the stand-in CLIP (disjoint class pairs, 4 shots): ~3 s."""
    return fedrepro.run(
        profile="laptop", runs_dir=str(tmp_path_factory.mktemp("fedotp") / "runs"), progress=False,
        method__name="fedotp", model__name="clip", model__args={"arch": "standin"},
        data__dataset="fashion_mnist_federated", data__partition="pathological",
        data__partition_args={"classes_per_client": 2, "shots": 4}, data__num_clients=4, data__max_train=None,
        data__max_test=80, train__rounds=2, train__local_epochs=1, train__batch_size=8, train__lr=0.01,
        train__eval_every=2)


@pytest.fixture(scope="module")
def restored(run):
    return restore(run, device="cpu")


@pytest.fixture(scope="module")
def maps(run):
    return run_plan_maps(run, client=1, gammas=GAMMAS, num_images=3)


def test_shapes_and_names(maps):
    assert maps.prompts == ("global", "local")
    assert maps.similarity.shape == (3, 2, 7, 7)
    assert maps.plans.shape == (len(GAMMAS), 3, 2, 7, 7)
    assert maps.images.shape[0] == 3 and maps.images.dtype == torch.uint8
    assert maps.client == 1 and maps.trained_gamma == 0.8
    assert maps.similarity.abs().max() <= 1 + 1e-6


def test_marginals_at_each_gamma(maps):
    m = maps.num_patches
    for g, plan in zip(GAMMAS, maps.plans):
        # the prompt side is an equality: each column carries γ/N, the image γ in all
        assert torch.allclose(plan.sum((-2, -1)), torch.full((3, 2), g / 2, dtype=plan.dtype), atol=1e-9)
        # the patch side an inequality: no patch carries more than 1/M
        assert plan.sum(1).max() <= 1 / m + 1e-9


def test_gamma_one_columns_are_complementary(maps):
    # at γ = 1 every patch is fully transported: global + local = 1/M on every patch
    both = maps.plans[0].sum(1)
    assert torch.allclose(both, torch.full_like(both, 1 / maps.num_patches), atol=1e-9)
    # and below 1 some patches are left out
    assert maps.plans[-1].sum(1).min() < 0.5 / maps.num_patches


def test_indices_pick_images(run, restored, maps):
    method, clients, state = restored
    again = plan_maps(method, state["shared"], state["client_states"][1], clients[1], gammas=GAMMAS, indices=[2, 0])
    assert torch.equal(again.images, maps.images[[2, 0]])
    assert torch.allclose(again.plans, maps.plans[:, [2, 0]])


def test_foreground_mass(run):
    df = run_foreground_mass(run, gammas=GAMMAS)
    assert len(df) == 4 * len(GAMMAS)
    assert {"client", "gamma", "foreground_mass", "foreground_mass_global", "foreground_mass_local",
            "foreground_fraction", "mass_ceiling", "n_images"} <= set(df.columns)
    one = df[df.gamma == 1.0]
    # at γ = 1 each patch carries 1/M, so the mass on the foreground is the foreground's share of patches
    assert (one.foreground_mass - one.foreground_fraction).abs().max() < 1e-6
    assert (df.foreground_mass <= df.mass_ceiling + 1e-9).all()
    assert df.foreground_mass.between(0, 1).all()


def test_foreground_mask_and_mass_on():
    img = torch.zeros(1, 1, 28, 28, dtype=torch.uint8)
    img[..., :8, :8] = 255  # the top-left 2x2 patches of a 7x7 grid
    mask = foreground_mask(img, 7)
    assert mask.shape == (1, 49) and mask.sum() == 4 and mask.view(7, 7)[:2, :2].all()
    plan = torch.full((1, 49, 2), 1 / 98, dtype=torch.float64)
    total, cols = mass_on(plan, mask)
    assert total.item() == pytest.approx(4 / 49) and cols.shape == (1, 2)


def test_converged_plan_matches_the_balanced_plan_at_gamma_one():
    sim = torch.rand(6, 49, 2, generator=torch.Generator().manual_seed(0)) * 0.9
    plan = converged_plan(sim, 1.0, 0.1)
    assert torch.allclose(plan.sum(-1), torch.full((6, 49), 1 / 49, dtype=torch.float64), atol=1e-9)
    assert torch.allclose(plan.sum(-2), torch.full((6, 2), 0.5, dtype=torch.float64), atol=1e-12)


def test_plot(maps):
    import matplotlib.pyplot as plt

    from fedrepro.env.figure_check import assert_clean

    fig = plot_plan_maps(maps, max_images=2)
    assert len(fig.axes) == 2 * (1 + 2 + len(GAMMAS) * 2) + 1  # and the colourbar
    assert "share of the patch's mass" in fig.axes[-1].get_ylabel()
    assert_clean(fig)  # titles of 8 pt or more, among others
    plt.close(fig)


def test_distinct_classes_picks_each_class_in_turn(restored):
    method, clients, state = restored
    c = clients[1]
    m = plan_maps(method, state["shared"], state["client_states"][c.cid], c, gammas=(1.0,), num_images=4,
                  distinct_classes=True)
    labels = m.labels.tolist()
    classes = list(dict.fromkeys(c.test_y.tolist()))
    assert len(classes) == 2  # the fixture's two classes per client
    assert labels[:2] == classes and labels[2:] == classes  # a, b, a, b: never one class four times
    first = plan_maps(method, state["shared"], state["client_states"][c.cid], c, gammas=(1.0,), num_images=4)
    assert first.labels.tolist() == c.test_y[:4].tolist()  # the default stays the first images


def test_bad_input(restored, maps):
    method, clients, state = restored
    with pytest.raises(ConfigError, match="gammas"):
        plan_maps(method, state["shared"], state["client_states"][0], clients[0], gammas=(1.2,))
    with pytest.raises(ConfigError, match="indices"):
        plan_maps(method, state["shared"], state["client_states"][0], clients[0], indices=[10_000])
    with pytest.raises(ConfigError, match="FedOTP"):
        foreground_mass(object(), {}, [], clients)


def test_foreground_mass_on_cluttered_images_reads_the_garment_mask(tmp_path):
    """A two-round FedOTP run on cluttered images (data.dataset_args.clutter > 0): the mass is scored on
    each image's garment mask, not on inked patches, which the clutter is too."""
    run = fedrepro.run(
        profile="laptop", runs_dir=str(tmp_path / "runs"), progress=False,
        method__name="fedotp", model__name="clip", model__args={"arch": "standin"},
        data__dataset="fashion_mnist_domains",
        data__dataset_args={"styles": ["original", "noisy"], "half": "federated", "clutter": 0.4},
        data__partition="domain_dirichlet", data__partition_args={"clients_per_domain": 1, "alpha": None},
        data__num_clients=2, data__max_train=16, data__max_test=40, train__rounds=2, train__local_epochs=1,
        train__batch_size=8, train__lr=0.01, train__eval_every=2)
    garment = run_foreground_mass(run, gammas=GAMMAS)
    ink = run_foreground_mass(run, gammas=GAMMAS, mask="ink")
    one = garment[garment.gamma == 1.0]
    assert (one.foreground_mass - one.foreground_fraction).abs().max() < 1e-6
    assert garment.foreground_fraction.between(0.1, 0.5).all()  # most patches are clutter
    assert (ink.foreground_fraction > garment.foreground_fraction).all()
    with pytest.raises(ConfigError, match="mask"):
        run_foreground_mass(run, gammas=GAMMAS, mask="box")
