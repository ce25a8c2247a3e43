"""Grad-CAM: the map sits where the evidence for the class is, and the model is left as found."""
import torch
from torch import nn

from fedrepro.analysis.gradcam import grad_cam


class SumNet(nn.Module):
    """One conv channel; class 0's logit is the channel's sum, class 1's its negative."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 1, 1, bias=False)
        with torch.no_grad():
            self.conv.weight.fill_(1.0)

    def forward(self, x):
        s = torch.relu(self.conv(x)).sum((1, 2, 3))
        return torch.stack([s, -s], 1)


def test_grad_cam_points_at_the_evidence():
    model = SumNet().train()
    x = torch.zeros(2, 1, 8, 8)
    x[:, :, :3, :3] = torch.rand(2, 1, 3, 3, generator=torch.Generator().manual_seed(0)) + 0.1
    cam, logits = grad_cam(model, x)  # target: the predicted class, 0
    assert cam.shape == (2, 8, 8) and float(cam.min()) >= 0
    # The activation is zero outside the top-left block, so is the map; the peak is scaled to 1.
    assert torch.all(cam[:, 3:, :] == 0) and torch.all(cam[:, :, 3:] == 0)
    assert torch.allclose(cam.flatten(1).max(1).values, torch.ones(2))
    assert torch.allclose(cam[0, :3, :3], x[0, 0, :3, :3] / x[0, 0, :3, :3].max())
    assert torch.allclose(logits, model(x))
    assert model.training  # restored
    # Class 1's evidence is negative everywhere: ReLU leaves an all-zero map, not NaN.
    against, _ = grad_cam(model, x, target=torch.ones(2, dtype=torch.long))
    assert torch.all(against == 0)
