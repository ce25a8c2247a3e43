"""MoCo views for FedPFT+Con: seeded and shape-preserving."""
import torch
from support import changed

from fedrepro.data.augment import augment


def test_augment_is_seeded_and_shape_preserving():
    x = torch.randn(6, 3, 8, 8)
    mean, std = torch.full((1, 3, 1, 1), 0.5), torch.full((1, 3, 1, 1), 0.25)
    a = augment(x, torch.Generator().manual_seed(1), mean, std)
    assert a.shape == x.shape and torch.equal(a, augment(x, torch.Generator().manual_seed(1), mean, std))
    assert changed(a, augment(x, torch.Generator().manual_seed(2), mean, std))
    assert augment(x[:, :1], torch.Generator().manual_seed(1), mean[:, :1], std[:, :1]).shape == (6, 1, 8, 8)
    ident = augment(x, torch.Generator().manual_seed(1), mean, std, crop_min=1.0, jitter=0.0, gray_p=0.0)
    clipped = ((x * std + mean).clamp(0, 1) - mean) / std  # full crop, no jitter: x or its mirror image
    flipped = [torch.allclose(i, c, atol=1e-5) or torch.allclose(i, c.flip(-1), atol=1e-5)
               for i, c in zip(ident, clipped)]
    assert all(flipped)
