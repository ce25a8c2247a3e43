"""What a trained PEP-FedPT model does inside: its soft weights, its cls tokens per block and its
class prompts.

- :func:`soft_weights_by_class`: the mixing weights s averaged over the test images of each true
  class, at each CCMP block (PEP-FedPT (arXiv) Fig. 8: the bars peak on the true class);
- :func:`cls_tokens`: the cls token entering chosen blocks of the prompted model, for t-SNE
  (Fig. 10: early cls tokens spread, late ones cluster by class);
- :func:`class_prompt_similarity`: how far apart the learned class prompts are (Fig. 7).

Fig. 2's premise (the frozen backbone's cls is class-informative at the middle blocks) is
:mod:`fedrepro.analysis.backbone_quality`'s.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import ConfigError
from ..fl.client_data import ClientData
from .embedding import analysis_generator
from ..methods.pep_fedpt import soft_weights


def _batches(data: ClientData, split: str):
    return data.test_batches(500) if split == "test" else data.eval_train_batches(500)


def _pep(method):
    if getattr(method, "name", "") != "pep_fedpt":
        got = getattr(method, "name", method)
        raise ConfigError(f"this analysis reads PEP-FedPT's soft weights; got method {got!r}")
    return method


@torch.no_grad()
def soft_weights_by_class(method, shared, clients: Sequence[ClientData], split: str = "test",
                          prior: bool = True) -> np.ndarray:
    """[L, C, C]: at CCMP block l, row c is s averaged over every ``split`` image of true class c
    across ``clients`` (each scored with its own prior, as at inference; ``prior=False``: the
    similarity term alone, softmax(cos / τ), without the prior). Rows of absent classes are NaN."""
    method = _pep(method)
    L, C = len(method.blocks), method.num_classes
    sums, counts = torch.zeros(L, C, C, dtype=torch.float64), torch.zeros(C, dtype=torch.float64)
    for data in clients:
        net = method.load(shared, data)
        net.eval()
        batches = _batches(data, split)
        for x, y in batches:
            rec: list[torch.Tensor] = []
            net(x, record=rec)
            lp = net.log_prior if method.p.use_prior and prior else None
            for j, feat in enumerate(rec):
                s = soft_weights(feat, net.mu[j], lp, method.p.tau).double().cpu()
                sums[j].index_add_(0, y.cpu(), s)
            counts += torch.bincount(y.cpu(), minlength=C).double()
    out = sums / counts[None, :, None]
    out[:, counts == 0] = float("nan")
    return out.numpy()


@torch.no_grad()
def cls_tokens(method, shared, clients: Sequence[ClientData], blocks: Sequence[int], split: str = "test",
               max_per_client: int | None = None, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(feats [B, N, d], labels [N], client ids [N]): the cls token entering each of ``blocks`` (an
    index equal to the depth means the final-norm output) in each client's prompted model."""
    method = _pep(method)
    depth = method.net.backbone.depth
    bad = [b for b in blocks if not 0 <= b <= depth]
    if bad:
        raise ConfigError(f"blocks={list(blocks)!r}; valid: indices in [0, {depth}] ({depth} = the output)")
    feats, labels, owners = [], [], []
    for data in clients:
        net = method.load(shared, data)
        net.eval()
        batches = _batches(data, split)
        per, ys = [], []
        for x, y in batches:
            per.append(net.cls_per_block(x)[:, list(blocks)].transpose(0, 1))
            ys.append(y)
        if not per:
            continue
        f, y = torch.cat(per, 1), torch.cat(ys)
        if max_per_client is not None and len(y) > max_per_client:
            keep = torch.randperm(len(y), generator=analysis_generator(seed, "cls-subset", data.cid))[:max_per_client]
            keep = keep.sort().values.to(y.device)
            f, y = f[:, keep], y[keep]
        feats.append(f.float().cpu().numpy())
        labels.append(y.cpu().numpy())
        owners.append(np.full(len(y), data.cid, dtype=np.int64))
    return np.concatenate(feats, 1), np.concatenate(labels).astype(np.int64), np.concatenate(owners)


def class_prompt_similarity(P_C: torch.Tensor) -> np.ndarray:
    """Cosine similarity between the class prompts (Fig. 7's question: do they stay apart?)."""
    p = F.normalize(P_C.reshape(-1, P_C.shape[-1]).float(), dim=-1)
    return (p @ p.T).cpu().numpy()
