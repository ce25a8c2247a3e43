"""Fashion-MNIST domains: disjoint and faithful styles, determinism, style subsets, missing data."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch

import fedrepro.data.fashion_mnist as fm
from fedrepro.data import load_dataset
from fedrepro.analysis.ot_maps import garment_patches
from fedrepro.data.fashion_mnist_domains import GARMENT_INK, STYLES, garment_mask, render
from fedrepro.errors import ConfigError, DataNotFoundError

from .fmnist_files import DEBIAN, write_fake_fmnist

pytestmark = pytest.mark.usefixtures("_isolated")


def test_fashion_mnist_domains_disjoint_and_faithful(tmp_path: Path) -> None:
    arrays = write_fake_fmnist(tmp_path / "fashion_mnist", n_train=90, n_test=30)
    ds = load_dataset("fashion_mnist_domains", root=tmp_path)
    src = torch.from_numpy(arrays["train-images-idx3-ubyte"])
    assert ds.domains == list(STYLES) and ds.num_domains == 6
    assert ds.train_x.shape == (90, 3, 28, 28) and ds.test_x.shape == (30, 3, 28, 28)
    assert ds.train_x.dtype == torch.uint8 and ds.train_domain.dtype == torch.int64
    # sample i is source image i in exactly one style: domains partition the source set
    assert ds.train_y.tolist() == arrays["train-labels-idx1-ubyte"].tolist()
    assert torch.bincount(ds.train_domain, minlength=6).tolist() == [15] * 6
    assert torch.bincount(ds.test_domain, minlength=6).tolist() == [5] * 6
    for d, style in enumerate(ds.domains):
        m = ds.train_domain == d
        x, s = ds.train_x[m], src[m][:, None].expand(-1, 3, -1, -1)
        if style == "original":
            assert torch.equal(x, s)
        elif style == "inverted":
            assert torch.equal(x, 255 - s)
        elif style == "rotated":
            assert torch.equal(x, torch.rot90(s, 1, dims=(2, 3)))
        elif style == "edges":
            assert torch.equal(x[:, 0], x[:, 1]) and int(x.flatten(1).amax(1).min()) == 255
        else:  # tinted / noisy really are colour images, differing from the source
            assert not torch.equal(x[:, 0], x[:, 1]) and not torch.equal(x, s)


def test_fashion_mnist_domains_deterministic(tmp_path: Path) -> None:
    write_fake_fmnist(tmp_path / "fashion_mnist", n_train=60, n_test=24)
    a = load_dataset("fashion_mnist_domains", root=tmp_path, seed=5)
    b = load_dataset("fashion_mnist_domains", root=tmp_path, seed=5)
    c = load_dataset("fashion_mnist_domains", root=tmp_path, seed=6)
    for f in ("train_x", "test_x", "train_domain", "test_domain", "train_y"):
        assert torch.equal(getattr(a, f), getattr(b, f)), f
    assert not torch.equal(a.train_domain, c.train_domain)
    assert not torch.equal(a.train_x, c.train_x)


def test_fashion_mnist_domains_style_subset(tmp_path: Path) -> None:
    write_fake_fmnist(tmp_path / "fashion_mnist", n_train=40, n_test=20)
    ds = load_dataset("fashion_mnist_domains", root=tmp_path, styles=["edges", "original"])
    assert ds.domains == ["edges", "original"]
    assert torch.bincount(ds.train_domain).tolist() == [20, 20]
    for bad in (["original", "original"], [], "original"):
        with pytest.raises(ConfigError, match="styles"):
            load_dataset("fashion_mnist_domains", root=tmp_path, styles=bad)


def test_fashion_mnist_domains_missing_data(tmp_path: Path) -> None:
    with pytest.raises(DataNotFoundError, match="fashion_mnist"):
        load_dataset("fashion_mnist_domains", root=tmp_path)


@pytest.mark.skipif(not (DEBIAN / "train-images-idx3-ubyte.gz").exists(), reason="dataset-fashion-mnist not installed")
def test_real_fashion_mnist_domains(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fm, "DEBIAN_DIR", DEBIAN)
    ds = load_dataset("fashion_mnist_domains", root=tmp_path)
    assert ds.train_x.shape == (60000, 3, 28, 28) and ds.test_x.shape == (10000, 3, 28, 28)
    assert torch.bincount(ds.train_domain).tolist() == [10000] * 6
    assert torch.bincount(ds.train_y).tolist() == [6000] * 10
    # styles really differ: mean brightness per domain is not all the same
    means = [ds.train_x[ds.train_domain == d].float().mean().item() for d in range(6)]
    assert max(means) - min(means) > 20


def test_fashion_mnist_domains_federated_half(tmp_path: Path) -> None:
    # The federated half needs the real 60,000-image training split: a fake of that size, cheap in
    # a single style, checks the cut and that every kept image is a federated one.
    arrays = write_fake_fmnist(tmp_path / "fashion_mnist", n_train=60000, n_test=20)
    ds = load_dataset("fashion_mnist_domains", root=tmp_path, styles=["original"], half="federated")
    src = torch.from_numpy(arrays["train-images-idx3-ubyte"])
    assert ds.train_x.shape[0] == 30000 and ds.test_x.shape[0] == 20
    assert torch.equal(ds.train_x[:, 0], src[30000:])
    with pytest.raises(ConfigError, match="^invalid half='pretrain'; valid: null or federated$"):
        load_dataset("fashion_mnist_domains", root=tmp_path, styles=["original"], half="pretrain")


def test_fashion_mnist_domains_federated_half_needs_the_full_split(tmp_path: Path) -> None:
    write_fake_fmnist(tmp_path / "fashion_mnist", n_train=90, n_test=30)
    with pytest.raises(ConfigError, match="60000"):
        load_dataset("fashion_mnist_domains", root=tmp_path, half="federated")


def test_fashion_mnist_domains_rendering_is_cached_and_identical(tmp_path: Path) -> None:
    write_fake_fmnist(tmp_path / "fashion_mnist", n_train=60, n_test=24)
    first = load_dataset("fashion_mnist_domains", root=tmp_path, seed=3)
    files = list((tmp_path / "cache" / "fashion_mnist_domains").glob("*.pt"))
    assert len(files) == 1
    again = load_dataset("fashion_mnist_domains", root=tmp_path, seed=3)
    for f in ("train_x", "test_x", "train_domain", "test_domain"):
        assert torch.equal(getattr(first, f), getattr(again, f)), f
    load_dataset("fashion_mnist_domains", root=tmp_path, seed=4)  # other args: another entry
    assert len(list(files[0].parent.glob("*.pt"))) == 2
    files[0].write_bytes(b"not a tensor file")
    # An unreadable cache is rendered again (a warning names it), never an error nor trained on.
    with pytest.warns(UserWarning, match=re.escape(str(files[0])) + ".*rebuilding it"):
        rebuilt = load_dataset("fashion_mnist_domains", root=tmp_path, seed=3)
    assert torch.equal(rebuilt.train_x, first.train_x)


def _garments(n: int) -> torch.Tensor:
    """Fashion-MNIST-like grey images [n, 1, 28, 28]: a bright upright blob of varying ink on black."""
    yy, xx = torch.meshgrid(torch.arange(28), torch.arange(28), indexing="ij")
    blob = ((yy - 14) / 11) ** 2 + ((xx - 14) / 8) ** 2 <= 1
    level = torch.randint(120, 256, (n, 1, 1, 1), generator=torch.Generator().manual_seed(0))
    return (blob * level).to(torch.uint8)


def _rngs(seed: int):
    return [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(2)]


def test_cluttered_renderings_carry_their_garment_mask() -> None:
    x = _garments(60)
    styles = ["original", "rotated", "noisy"]
    img, dom = render(x, styles, *_rngs(0), clutter=0.4)
    again, _ = render(x, styles, *_rngs(0), clutter=0.4)
    other, _ = render(x, styles, *_rngs(1), clutter=0.4)
    plain, _ = render(x, styles, *_rngs(0))
    assert torch.equal(img, again) and not torch.equal(img, other)  # seeded and deterministic
    assert img.shape == (60, 3, 28, 28) and img.dtype == torch.uint8
    mask = garment_mask(img)
    assert mask.shape == (60, 28, 28) and mask.dtype == torch.bool
    # The garment is drawn opaque where its mask is, rotated with the rotated style's canvas.
    for d in (0, 1):
        assert int(img[dom == d][:, 0][mask[dom == d]].min()) >= round(255 * GARMENT_INK) - 1
    # Most of each canvas is clutter: inked, and no garment's patches.
    patches = garment_patches(img, 7)
    assert 0.1 < patches.float().mean() < 0.5
    original = img[dom == 0][:, 0].float()
    assert original[~mask[dom == 0]].mean() > 20  # clutter, not the black ground
    # clutter 0 is the plain rendering, random stream and all
    assert torch.equal(render(x, styles, *_rngs(0), clutter=0.0)[0], plain) and not torch.equal(img, plain)


def test_clutter_is_a_checked_option_of_the_loader(tmp_path: Path) -> None:
    write_fake_fmnist(tmp_path / "fashion_mnist", n_train=40, n_test=20)
    plain = load_dataset("fashion_mnist_domains", root=tmp_path, styles=["original", "noisy"])
    a = load_dataset("fashion_mnist_domains", root=tmp_path, styles=["original", "noisy"], clutter=0.4)
    b = load_dataset("fashion_mnist_domains", root=tmp_path, styles=["original", "noisy"], clutter=0.4)
    assert torch.equal(a.train_x, b.train_x) and torch.equal(a.test_x, b.test_x)
    assert not torch.equal(a.train_x, plain.train_x)
    assert torch.equal(a.train_y, plain.train_y) and torch.equal(a.train_domain, plain.train_domain)
    assert garment_mask(a.test_x).shape == (20, 28, 28)
    for bad in (1.0, -0.1):
        with pytest.raises(ConfigError, match="clutter"):
            load_dataset("fashion_mnist_domains", root=tmp_path, clutter=bad)
