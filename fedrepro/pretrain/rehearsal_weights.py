"""Full-size backbones with seeded random weights, saved in their official layouts, for the paper
profile's rehearsal (``fedrepro reproduce --profile paper --rehearse``).

No real weights can be downloaded here, but the paper profile reads ViT-B/16 IN-21k (PEP-FedPT §5.1)
and CLIP ViT-B/16 and RN50 (FedOTP §5.1) from local files. The rehearsal writes random weights in
the layout those files have (timm's state dict for ViT-B/16; OpenAI's fp16 state dict with open_clip
key names for CLIP) and points the user-facing weights settings at them, so a rehearsal takes the
path a user with the real files takes: the same loaders, the same shapes, the same cost per step.
ResNet-10 and ResNet-18 (FedPFT) train from scratch and need no file.

Files are written once per folder and seed (a ``done.json`` beside them says which), each by an
atomic rename, so an interrupted write leaves no half file behind.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from ..env.atomic import atomic_write_bytes
from ..env.jsonfiles import MAX_INPUT_BYTES, RefusedFile, loads, read_plain_file
from ..errors import ConfigError

# The files, relative to the folder: the ViT-B/16 file named as timm names its IN-21k checkpoint,
# and one CLIP file per architecture in the folder that $FEDREPRO_CLIP_WEIGHTS may name.
VIT_B16_FILE = "vit_base_patch16_224.orig_in21k.pth"
CLIP_FOLDER = "clip"
CLIP_ARCHS = ("ViT-B-16", "RN50")


def _save(state: dict, path: Path) -> None:
    import torch

    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    torch.save(state, tmp)
    os.replace(tmp, path)


def _done(path: Path) -> object:
    """What ``done.json`` says was written, or None when it is missing or unreadable (cut short by a
    crash or an edit): the weights are then written again, over whatever is there."""
    try:
        # Bounded, never a link, a FIFO or a device, and no RecursionError: the folder lies in the
        # output root, which whoever shares it can write (docs/reliability.md, "Threat model").
        return loads(read_plain_file(path, MAX_INPUT_BYTES))
    except (OSError, ValueError, RefusedFile):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return None


def write_rehearsal_weights(folder: str | Path, seed: int = 0) -> dict[str, Path]:
    """Write (once) the random full-size weights under ``folder``; returns their paths:
    ``{"vit_b16": file, "clip": folder of <arch>.pt files}``."""
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ConfigError(f"seed={seed!r}; valid: an integer >= 0")
    folder = Path(folder)
    paths = {"vit_b16": folder / VIT_B16_FILE, "clip": folder / CLIP_FOLDER}
    done = folder / "done.json"
    record = {"seed": seed, "files": [VIT_B16_FILE, *(f"{CLIP_FOLDER}/{a}.pt" for a in CLIP_ARCHS)]}
    if _done(done) == record and all((folder / f).is_file() for f in record["files"]):
        return paths
    from ..models import create_model
    from ..models.clip import build_paper_clip

    paths["clip"].mkdir(parents=True, exist_ok=True)
    vit = create_model("vit_b16", 10, image_size=224, seed=seed)
    _save(vit.features.vit.state_dict(), paths["vit_b16"])  # timm's layout, as the IN-21k file has it
    del vit
    for i, arch in enumerate(CLIP_ARCHS):
        clip = build_paper_clip(arch, "openai", seed=seed + i)
        # OpenAI ships fp16 weights; load_clip reads them back to fp32.
        _save({k: v.half() for k, v in clip.model.state_dict().items()}, paths["clip"] / f"{arch}.pt")
        del clip
    # A new file renamed into place: a link planted as done.json is replaced, never written through.
    atomic_write_bytes(done, json.dumps(record).encode(), fix="point FEDREPRO_OUTPUT elsewhere")
    return paths
