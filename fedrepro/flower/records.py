"""Method states (``dict[str, Tensor | ...]``) to Flower records and back, bit for bit.

A state travels as two records under one name: an ``ArrayRecord`` of its plain tensors (NumPy's
``.npy`` bytes, exact for every dtype NumPy has) and a ``ConfigRecord`` with the key order, the
shapes (an ``Array`` sent over the wire returns a 0-d tensor as 1-d), the strides of tensors not
laid out contiguously (channels_last weights: a convolution may pick another kernel, and so round
differently, for another layout) and a ``torch.save`` blob of everything else (Parameters, tensors
that need grad, bfloat16, nested lists, numbers, None).
"""
from __future__ import annotations

import io
import json
from typing import Any

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict

# torch dtypes whose NumPy counterpart holds the same bits; others go in the blob.
_NUMPY_DTYPES = {torch.float64, torch.float32, torch.float16, torch.int64, torch.int32, torch.int16,
                 torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128}


def _plain(v: Any) -> bool:
    return type(v) is torch.Tensor and not v.requires_grad and v.dtype in _NUMPY_DTYPES


def _blob(obj: Any) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def _map_tensors(obj: Any, fn) -> Any:
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, dict):
        return {k: _map_tensors(v, fn) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_map_tensors(v, fn) for v in obj)
    return obj


def put_state(rd: RecordDict, name: str, state: dict[str, Any]) -> None:
    """Store ``state`` in ``rd`` under ``name`` (two records: ``name`` and ``name + ".meta"``)."""
    arrays, shapes, strides, rest = {}, {}, {}, {}
    for k, v in state.items():
        if _plain(v):
            cpu = v.detach().cpu()
            arrays[k] = Array(np.ascontiguousarray(cpu.numpy()))
            shapes[k] = list(cpu.shape)  # a 0-d tensor comes back 1-d from an Array
            if not cpu.is_contiguous():
                strides[k] = list(cpu.stride())
        else:
            rest[k] = v
    rd[name] = ArrayRecord(arrays)
    rd[name + ".meta"] = ConfigRecord({"keys": json.dumps(list(state.keys())), "shapes": json.dumps(shapes),
                                       "strides": json.dumps(strides),
                                       "rest": _blob(_map_tensors(rest, lambda t: t.detach().cpu()
                                                                  if not t.requires_grad else t.cpu()))})


def has_state(rd: RecordDict, name: str) -> bool:
    return name in rd and name + ".meta" in rd


def get_state(rd: RecordDict, name: str, device: torch.device | str = "cpu") -> dict[str, Any]:
    """The state stored by :func:`put_state`, its tensors on ``device``, keys in their original order."""
    arrays = rd.array_records[name]
    meta = rd.config_records[name + ".meta"]
    shapes, strides = json.loads(str(meta["shapes"])), json.loads(str(meta["strides"]))
    rest = torch.load(io.BytesIO(bytes(meta["rest"])), map_location="cpu", weights_only=False)
    out: dict[str, Any] = {}
    for k in json.loads(str(meta["keys"])):
        if k in arrays:
            t = torch.from_numpy(np.array(arrays[k].numpy(), copy=True)).reshape(shapes[k])
            if k in strides:
                t = torch.empty_strided(t.shape, strides[k], dtype=t.dtype).copy_(t)
            out[k] = t.to(device)
        else:
            out[k] = _map_tensors(rest[k], lambda t: t.to(device))
    return out


def drop_state(rd: RecordDict, name: str) -> None:
    for key in (name, name + ".meta"):
        if key in rd:
            del rd[key]
