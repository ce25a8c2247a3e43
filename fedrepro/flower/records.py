"""Method states (``dict[str, Tensor | ...]``) to Flower records and back, bit for bit, without pickle.

A state travels as two records under one name: an ``ArrayRecord`` of its plain tensors (NumPy's
``.npy`` bytes, which Flower reads with ``allow_pickle=False``) and a ``ConfigRecord`` with the key
order, the shapes (an ``Array`` sent over the wire returns a 0-d tensor as 1-d), the strides of
tensors not laid out contiguously (channels_last weights: a convolution may pick another kernel,
and so round differently, for another layout) and everything else as data, never as code: a JSON
description (``rest``) of the non-plain entries (Parameters, tensors that need grad, bfloat16,
nested lists, tuples and dicts, numbers, strings, None), whose tensors point at entries ``t.<i>`` of
raw element bytes.

Why not ``torch.save``: a record comes from a peer (a SuperNode's reply, the SuperLink's task), and
unpickling it would let that peer run code in this process (issue 53). Decoding here only reads JSON
and bytes; a value of a type this format does not know is refused when it is encoded, and a record
that does not parse is a one-line :class:`~fedrepro.errors.FederationError` naming it.
"""
from __future__ import annotations

import json
import math
import struct
from typing import Any

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict

from ..errors import FederationError, FedreproError

# The format of the ``.meta`` record; a record of another format (e.g. the pickled blob of
# earlier versions) is refused, not guessed at.
FORMAT = "fedrepro-state/2"

# torch dtypes whose NumPy counterpart holds the same bits: plain tensors of these go in the ArrayRecord.
_NUMPY_DTYPES = {torch.float64, torch.float32, torch.float16, torch.int64, torch.int32, torch.int16,
                 torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128}
# Every dtype a tensor in ``rest`` may have, by name; its raw bytes are its elements in row-major
# order (bfloat16 travels as its 16-bit patterns, as the unsigned integers of the same width would).
_RAW_DTYPES = {str(d).removeprefix("torch."): d for d in
               (*_NUMPY_DTYPES, torch.bfloat16, torch.uint16, torch.uint32, torch.uint64)}
_SCALARS = (type(None), bool, int, str)
_KINDS = "tensors (torch.Tensor, nn.Parameter), None, bool, int, float, str, and lists, tuples and dicts of them"


def _plain(v: Any) -> bool:
    return type(v) is torch.Tensor and not v.requires_grad and v.dtype in _NUMPY_DTYPES


def _dense_strides(shape, strides) -> bool:
    """Whether ``strides`` lay out ``shape`` without gaps or overlaps (a permutation of the
    contiguous layout, such as channels_last). Only such a layout is kept: an expanded tensor
    (stride 0) cannot be copied into, and odd strides from a peer could ask for huge storage."""
    size = 1
    for n, s in sorted(((n, s) for n, s in zip(shape, strides) if n != 1), key=lambda p: p[1]):
        if s != size:
            return False
        size *= n
    return True


def _layout(t: torch.Tensor) -> list[int] | None:
    """The strides to restore ``t`` with, or None when it is contiguous (or not densely laid out)."""
    if t.is_contiguous() or not _dense_strides(t.shape, t.stride()):
        return None
    return list(t.stride())


def _raw(t: torch.Tensor) -> bytes:
    flat = t.detach().cpu().contiguous().reshape(-1)
    return flat.view(torch.uint8).numpy().tobytes()


class _Encoder:
    """The JSON description of a value and the raw bytes of its tensors (``t.<i>``)."""

    def __init__(self, record: str):
        self.record = record
        self.blobs: dict[str, bytes] = {}

    def refuse(self, v: Any, where: str) -> FederationError:
        return FederationError(f"state {self.record!r} holds a {type(v).__module__}.{type(v).__qualname__} at "
                               f"{where}; a Flower record carries only {_KINDS}")

    def __call__(self, v: Any, where: str) -> Any:
        if type(v) in _SCALARS:
            return v
        if type(v) is float:  # its IEEE bits: exact for -0.0, inf and every NaN
            return {"float": struct.pack("<d", v).hex()}
        if type(v) is list:
            return [self(x, f"{where}[{i}]") for i, x in enumerate(v)]
        if type(v) is tuple:
            return {"tuple": [self(x, f"{where}[{i}]") for i, x in enumerate(v)]}
        if type(v) is dict:
            for k in v:
                if type(k) not in _SCALARS:
                    raise self.refuse(k, f"a key of {where}")
            return {"dict": [[k, self(x, f"{where}[{k!r}]")] for k, x in v.items()]}
        if type(v) in (torch.Tensor, torch.nn.Parameter):
            name = str(v.dtype).removeprefix("torch.")
            if name not in _RAW_DTYPES:
                raise FederationError(f"state {self.record!r} holds a {v.dtype} tensor at {where}; a Flower record "
                                      f"carries the dtypes {', '.join(sorted(_RAW_DTYPES))}")
            key = f"t.{len(self.blobs)}"
            self.blobs[key] = _raw(v)
            return {"tensor": {"data": key, "dtype": name, "shape": list(v.shape), "strides": _layout(v),
                               "requires_grad": bool(v.requires_grad),
                               "parameter": type(v) is torch.nn.Parameter}}
        raise self.refuse(v, where)


def put_state(rd: RecordDict, name: str, state: dict[str, Any]) -> None:
    """Store ``state`` in ``rd`` under ``name`` (two records: ``name`` and ``name + ".meta"``); a
    FederationError naming the entry when it holds a type a record cannot carry."""
    enc = _Encoder(name)
    arrays, shapes, strides, rest = {}, {}, {}, {}
    for k, v in state.items():
        if type(k) is not str:
            raise enc.refuse(k, "a top-level key")
        if _plain(v):
            cpu = v.detach().cpu()
            arrays[k] = Array(np.ascontiguousarray(cpu.numpy()))
            shapes[k] = list(cpu.shape)  # a 0-d tensor comes back 1-d from an Array
            if (layout := _layout(cpu)) is not None:
                strides[k] = layout
        else:
            rest[k] = enc(v, repr(k))
    rd[name] = ArrayRecord(arrays)
    rd[name + ".meta"] = ConfigRecord({"format": FORMAT, "keys": json.dumps(list(state.keys())),
                                       "shapes": json.dumps(shapes), "strides": json.dumps(strides),
                                       "rest": json.dumps(rest, allow_nan=False), **enc.blobs})


def has_state(rd: RecordDict, name: str) -> bool:
    return name in rd and name + ".meta" in rd


# Decoding: everything below reads data a peer sent, so every field is checked for its type.

def _ints(v: Any, what: str) -> list[int]:
    if type(v) is not list or not all(type(n) is int and n >= 0 for n in v):
        raise ValueError(f"{what} is not a list of non-negative integers")
    return v


def _tensor(shape: list[int], strides: list[int] | None, flat: torch.Tensor, device, what: str) -> torch.Tensor:
    if math.prod(shape) != flat.numel():
        raise ValueError(f"{what} has {flat.numel()} elements, not the {math.prod(shape)} of shape {shape}")
    t = flat.reshape(shape)
    if strides is not None:
        _ints(strides, f"the strides of {what}")
        if len(strides) != len(shape) or not _dense_strides(shape, strides):
            raise ValueError(f"the strides {strides} of {what} do not lay out shape {shape} densely")
        t = torch.empty_strided(t.shape, strides, dtype=t.dtype).copy_(t)
    return t.to(device)


class _Decoder:
    def __init__(self, meta: ConfigRecord, device):
        self.meta, self.device = meta, device

    def __call__(self, v: Any, where: str) -> Any:
        if type(v) in _SCALARS:
            return v
        if type(v) is list:
            return [self(x, where) for x in v]
        if type(v) is not dict or len(v) != 1:
            raise ValueError(f"{where}: {type(v).__name__} is not a value of this format")
        (tag, body), = v.items()
        if tag == "float" and type(body) is str and len(body) == 16:
            return struct.unpack("<d", bytes.fromhex(body))[0]
        if tag == "tuple" and type(body) is list:
            return tuple(self(x, where) for x in body)
        if tag == "dict" and type(body) is list:
            out = {}
            for pair in body:
                if type(pair) is not list or len(pair) != 2 or type(pair[0]) not in _SCALARS:
                    raise ValueError(f"{where}: a dict entry is not a [key, value] pair")
                out[pair[0]] = self(pair[1], where)
            return out
        if tag == "tensor" and type(body) is dict:
            return self.tensor(body, where)
        raise ValueError(f"{where}: unknown entry {tag!r}")

    def tensor(self, spec: dict, where: str) -> torch.Tensor:
        dtype = _RAW_DTYPES.get(spec.get("dtype")) if type(spec.get("dtype")) is str else None
        if dtype is None:
            raise ValueError(f"{where}: dtype {spec.get('dtype')!r}; valid: {', '.join(sorted(_RAW_DTYPES))}")
        key = spec.get("data")
        raw = self.meta.get(key) if type(key) is str and key.startswith("t.") else None
        if not isinstance(raw, bytes):
            raise ValueError(f"{where}: no tensor bytes {key!r}")
        shape = _ints(spec.get("shape"), f"{where}: the shape")
        size = dtype.itemsize
        if len(raw) != math.prod(shape) * size:
            raise ValueError(f"{where}: {len(raw)} bytes for a {spec['dtype']} tensor of shape {shape}")
        flat = torch.frombuffer(bytearray(raw), dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
        t = _tensor(shape, spec.get("strides"), flat.view(dtype), self.device, where)
        grad = spec.get("requires_grad")
        if type(grad) is not bool or type(spec.get("parameter")) is not bool:
            raise ValueError(f"{where}: requires_grad and parameter must be true or false")
        if spec["parameter"]:
            return torch.nn.Parameter(t, requires_grad=grad)
        return t.requires_grad_(grad) if grad else t


def get_state(rd: RecordDict, name: str, device: torch.device | str = "cpu") -> dict[str, Any]:
    """The state stored by :func:`put_state`, its tensors on ``device``, keys in their original
    order; a one-line FederationError naming the record when it is missing or malformed."""
    try:
        return _get_state(rd, name, device)
    except FedreproError:
        raise
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError, RecursionError,
            RuntimeError, struct.error) as e:
        why = " ".join(str(e).split()) or type(e).__name__
        raise FederationError(f"record {name!r} is not a valid fedrepro state ({why}); refused") from None


def _get_state(rd: RecordDict, name: str, device) -> dict[str, Any]:
    if name not in rd.array_records or name + ".meta" not in rd.config_records:
        raise ValueError(f"the records {name!r} and {name + '.meta'!r} are not both in the message")
    arrays = rd.array_records[name]
    meta = rd.config_records[name + ".meta"]
    if meta.get("format") != FORMAT:
        raise ValueError(f"format {meta.get('format')!r}, not {FORMAT!r}: a peer running another fedrepro version?")
    fields = {}
    for field in ("keys", "shapes", "strides", "rest"):
        if not isinstance(meta.get(field), str):
            raise ValueError(f"its {field!r} entry is not JSON text")
        fields[field] = json.loads(meta[field])
    keys, shapes, strides, rest = fields["keys"], fields["shapes"], fields["strides"], fields["rest"]
    if (type(keys) is not list or not all(type(k) is str for k in keys) or len(set(keys)) != len(keys)
            or not all(type(f) is dict for f in (shapes, strides, rest))):
        raise ValueError("its keys, shapes, strides or rest have the wrong JSON types")
    decode = _Decoder(meta, device)
    out: dict[str, Any] = {}
    for k in keys:
        if k in arrays:
            arr = arrays[k].numpy()  # np.load(allow_pickle=False): object arrays are refused
            if arr.dtype.hasobject or arr.dtype.fields is not None:
                raise ValueError(f"array {k!r} has dtype {arr.dtype}")
            flat = torch.from_numpy(np.array(arr, copy=True)).reshape(-1)
            if flat.dtype not in _NUMPY_DTYPES:
                raise ValueError(f"array {k!r} has dtype {flat.dtype}")
            out[k] = _tensor(_ints(shapes.get(k), f"the shape of {k!r}"), strides.get(k), flat, device, repr(k))
        elif k in rest:
            out[k] = decode(rest[k], repr(k))
        else:
            raise ValueError(f"entry {k!r} is in neither its arrays nor its rest")
    return out


def drop_state(rd: RecordDict, name: str) -> None:
    for key in (name, name + ".meta"):
        if key in rd:
            del rd[key]
