"""Grad-CAM (Selvaraju et al., ICCV 2017) for any model with a convolutional layer: which pixels a
class score depends on. pFedCSPC uses it for its PMI case study (TNNLS §V-E2, Fig. 9) and its
error analysis (§V-E3, Fig. 11, right).

``grad_cam(model, x, target)``: for each image, the channel weights are the spatial mean of the
target logit's gradient w.r.t. the chosen layer's output; the map is ReLU(Σ_k w_k A_k), upsampled
bilinearly to the image size and scaled to [0, 1] per image (all-zero maps stay 0). The default
layer is the model's *last* ``nn.Conv2d`` (its output, before any pooling), the usual choice.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..errors import ConfigError


def last_conv(model: nn.Module) -> nn.Module:
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    if not convs:
        raise ConfigError(f"{type(model).__name__} has no nn.Conv2d layer; Grad-CAM needs a convolutional map")
    return convs[-1]


def grad_cam(model: nn.Module, x: Tensor, target: Tensor | None = None,
             layer: nn.Module | None = None) -> tuple[Tensor, Tensor]:
    """``(maps [B, H, W] in [0, 1], logits [B, C])`` for ``target`` classes (default: the predicted
    ones). The model is put in eval mode and left as it was found."""
    layer = layer or last_conv(model)
    store: dict[str, Tensor] = {}

    def hook(_mod, _inp, out):
        out.retain_grad()
        store["a"] = out

    handle = layer.register_forward_hook(hook)
    was = model.training
    model.eval()
    try:
        with torch.enable_grad():
            x = x.detach().requires_grad_(False)
            logits = model(x)
            cls = logits.argmax(1) if target is None else target.to(logits.device)
            model.zero_grad(set_to_none=True)
            logits.gather(1, cls.view(-1, 1)).sum().backward()
        a, g = store["a"], store["a"].grad
        weights = g.mean(dim=(2, 3), keepdim=True)
        cam = F.relu((weights * a).sum(1, keepdim=True))
        cam = F.interpolate(cam, size=x.shape[-2:], mode="bilinear", align_corners=False)[:, 0]
        peak = cam.flatten(1).max(1).values.view(-1, 1, 1)
        cam = torch.where(peak > 0, cam / peak.clamp_min(1e-12), torch.zeros_like(cam))
    finally:
        handle.remove()
        model.train(was)
        model.zero_grad(set_to_none=True)
    return cam.detach(), logits.detach()
