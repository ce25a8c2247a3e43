"""Bounds declared once, next to each default, and checked in one place.

A config section or a method's ``Params`` dataclass declares each field with :func:`hp`::

    @dataclass
    class FedProxParams:
        mu: float = hp(0.01, ge=0)                      # a number >= 0
        mode: str = hp("eval", choices=("eval", "train"))
        epochs: int | None = hp(None, ge=1)             # null or an integer >= 1

:func:`check_fields` then checks every declared field against its annotation (``int``, ``float``,
``bool``, ``str``, optionally ``| None``) and bounds, and raises a :class:`~fedrepro.errors.ConfigError`
naming the key and what would be valid. Checks that relate two fields stay in the dataclass's own
``validate()``, which runs after the field checks.

A function's own arguments (a partitioner's ``min_size``, a dataset's ``image_size``) are checked
by :func:`check_value`, with the same bounds and the same wording as a field.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import numbers
import reprlib
import typing
from typing import Any, Callable, Sequence

from .errors import ConfigError

_META = "fedrepro.bounds"


@dataclasses.dataclass(frozen=True)
class Bounds:
    """What a field accepts, beyond its annotated type."""

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    choices: tuple | None = None
    # A predicate and its description, for values no bound describes (a list of layer indices...).
    check: Callable[[Any], bool] | None = None
    valid: str | None = None


def hp(default: Any = dataclasses.MISSING, *, ge: float | None = None, gt: float | None = None,
       le: float | None = None, lt: float | None = None, choices: Sequence | None = None,
       check: Callable[[Any], bool] | None = None, valid: str | None = None,
       factory: Callable[[], Any] | None = None) -> Any:
    """A dataclass field with its default and its bounds (``factory`` for mutable defaults)."""
    if (check is None) != (valid is None):
        raise ValueError("hp(check=...) needs valid=... to describe what passes, and vice versa")
    meta = {_META: Bounds(ge, gt, le, lt, None if choices is None else tuple(choices), check, valid)}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


INT64 = 2 ** 63  # integers are stored as int64: |x| < 2**63
FLOAT32_MAX = 3.4028234663852886e38  # the largest float32 (torch.finfo(torch.float32).max)


def _num(x: float) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def _kind(tp: Any) -> tuple[type | None, bool]:
    """(base type, accepts None) of an annotation such as ``float``, ``int | None``, ``str``."""
    args = typing.get_args(tp)
    if args:
        nullable = type(None) in args
        rest = [a for a in args if a is not type(None)]
        return (rest[0] if len(rest) == 1 and isinstance(rest[0], type) else None), nullable
    return (tp if isinstance(tp, type) else None), False


def describe(base: type | None, b: Bounds, nullable: bool) -> str:
    """The ``valid: ...`` text of a field, e.g. ``"an integer >= 1"`` or ``"null or a number in (0, 1]"``."""
    if b.valid is not None:
        text = b.valid
    elif b.choices is not None:
        text = ", ".join(str(c) for c in b.choices)
    elif base is bool:
        text = "true or false"
    else:
        noun = ("an integer" if base is int else "a number" if base in (int, float)
                else f"a {getattr(base, '__name__', 'value')}")
        low = (">=", b.ge) if b.ge is not None else (">", b.gt) if b.gt is not None else None
        high = ("<=", b.le) if b.le is not None else ("<", b.lt) if b.lt is not None else None
        if low and high:
            text = (f"{noun} in {'[' if low[0] == '>=' else '('}{_num(low[1])}, "
                    f"{_num(high[1])}{']' if high[0] == '<=' else ')'}")
        elif low or high:
            op, x = low or high
            text = f"{noun} {op} {_num(x)}"
        else:
            text = noun
    return f"null or {text}" if nullable and not text.startswith("null") else text


def _ok(value: Any, base: type | None, b: Bounds) -> bool:
    if b.check is not None:
        return bool(b.check(value))
    if b.choices is not None:
        return any(value == c and type(value) is type(c) for c in b.choices)
    if base is bool:
        return isinstance(value, bool)
    if base is int:
        if not isinstance(value, int) or isinstance(value, bool):
            return False
    elif base is float:
        if not isinstance(value, (int, float)) or isinstance(value, bool) or (
                isinstance(value, float) and not math.isfinite(value)):
            return False
    elif base is str:
        return isinstance(value, str)
    elif base is not None and not isinstance(value, base):
        return False
    return ((b.ge is None or value >= b.ge) and (b.gt is None or value > b.gt)
            and (b.le is None or value <= b.le) and (b.lt is None or value < b.lt))


def _check(label: str, value: Any, annotation: Any, b: Bounds, error: type[Exception] = ConfigError) -> None:
    """Raise ``error`` naming ``label`` and what is valid unless ``value`` fits ``annotation`` and ``b``."""
    base, nullable = _kind(annotation)
    if value is None and nullable:
        return
    if not _ok(value, base, b):
        raise error(f"invalid {label}={value!r}; valid: {describe(base, b, nullable)}")
    past = _past_range(value, base)
    if past is not None:
        raise error(f"invalid {label}={value!r}; valid: {describe(base, b, nullable)} {past}")


def check_value(name: str, value: Any, annotation: Any, *, ge: float | None = None, gt: float | None = None,
                le: float | None = None, lt: float | None = None, choices: Sequence | None = None,
                check: Callable[[Any], bool] | None = None, valid: str | None = None,
                error: type[Exception] = ConfigError) -> Any:
    """Check a function's argument as :func:`check_fields` checks an :func:`hp` field annotated
    ``annotation`` with these bounds, in the same words; returns it.

    ``check_value("min_size", min_size, int, ge=0)`` raises ``invalid min_size=-1; valid: an integer
    >= 0``. An integer of another integral type (numpy's, from array arithmetic) passes as ``int`` and
    comes back as one. ``error`` is the exception raised (a subclass of ``ValueError`` where a caller's
    own error type says more, e.g. a partition's).
    """
    if (check is None) != (valid is None):
        raise ValueError("check_value(check=...) needs valid=... to describe what passes, and vice versa")
    b = Bounds(ge, gt, le, lt, None if choices is None else tuple(choices), check, valid)
    if _kind(annotation)[0] is int and isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = int(value)
    _check(name, value, annotation, b, error)
    return value


def _past_range(value: Any, base: type | None) -> str | None:
    """Where the number ``value``, read as ``base``, lies past what the tensors it ends up in hold,
    what it must be instead (the end of a "valid:" text); else None. Every integer ends up in a
    64-bit tensor, array or seed word, and every float (a rate or a weight) multiplies float32
    tensors, which torch cannot convert a larger one to."""
    if base is int and isinstance(value, int) and not -INT64 <= value < INT64:
        return "that fits in 64 bits (below 2**63)"
    if base is float and isinstance(value, (int, float)) and abs(value) > FLOAT32_MAX:
        return f"within float32's range (at most {FLOAT32_MAX:.4g} in size)"
    return None


def _unusable(value: Any, path: str = "") -> tuple[str, Any, str] | None:
    """``(where, value, what is valid)`` of the first number inside ``value`` (nested lists and dicts)
    that no field takes, else None: NaN or infinity (each number is a weight, a rate or a size), an
    integer past 64 bits or a float past float32's range (they overflow in the tensors and seed
    words they end up in)."""
    if isinstance(value, float):
        if not math.isfinite(value):
            return path, value, "a finite number (NaN and infinity are not accepted)"
        past = _past_range(value, float)
        return None if past is None else (path, value, f"a number {past}")
    if isinstance(value, int) and not isinstance(value, bool):
        past = _past_range(value, int)
        return None if past is None else (path, value, f"an integer {past}")
    if isinstance(value, dict):
        items = ((f".{k}", v) for k, v in value.items())
    elif isinstance(value, (list, tuple)):
        items = ((f"[{i}]", v) for i, v in enumerate(value))
    else:
        return None
    for sub, v in items:
        found = _unusable(v, path + sub)
        if found is not None:
            return found
    return None


def check_fields(obj: Any, prefix: str = "") -> None:
    """Check every :func:`hp` field of the dataclass instance ``obj``, then its ``validate()``.

    ``prefix`` is the key's path in the config (``"train."``, ``"method.args."``), so the error names
    the key a user would write.
    """
    hints = _hints(type(obj))
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        b = f.metadata.get(_META)
        # Every field, bounds or not, refuses NaN (it passes no comparison); a nested number (model.args,
        # partition_args) has no bounds of its own, so its size is checked here too.
        nested = b is None or isinstance(value, (dict, list, tuple))
        bad = _unusable(value) if nested or (isinstance(value, float) and not math.isfinite(value)) else None
        if bad is not None:
            where, x, valid = bad
            raise ConfigError(f"invalid {prefix}{f.name}{where}={reprlib.repr(x)}; valid: {valid}")
        if b is not None:
            _check(prefix + f.name, value, hints.get(f.name), b)
    validate = getattr(obj, "validate", None)
    if validate is not None:
        validate()


def bounds_of(cls: type) -> dict[str, str]:
    """``{field: what it accepts}`` for a dataclass type: the table a user reads in the docs."""
    hints = _hints(cls)
    out = {}
    for f in dataclasses.fields(cls):
        b = f.metadata.get(_META)
        if b is not None:
            base, nullable = _kind(hints.get(f.name))
            out[f.name] = describe(base, b, nullable)
    return out


def normalise(value: Any, tp: Any) -> Any:
    """``value`` as the declared type ``tp`` when it is an int given for a float field (``0`` ->
    ``0.0``), so that equal values hash equally and one experiment keys one run folder. Anything
    else is returned as is, for :func:`check_fields` to judge: a float for an int field stays an
    error (``rounds=1e2`` is more likely a slip than a count)."""
    base, _ = _kind(tp)
    if base is float and isinstance(value, int) and not isinstance(value, bool) and abs(value) <= FLOAT32_MAX:
        return float(value)
    return value  # an int too large for a float stays one, for check_fields to refuse by name


@functools.lru_cache(maxsize=None)
def _cached_hints(obj: Any) -> dict[str, Any]:
    return typing.get_type_hints(obj)


def _hints(obj: Any) -> dict[str, Any]:
    """``typing.get_type_hints(obj)``, resolved once per class or function: resolving evaluates every
    string annotation anew, and a config is checked and normalised many times (planning a smoke pass
    builds thousands of configs). A copy, so that no caller changes what the next one reads."""
    try:
        return dict(_cached_hints(obj))
    except TypeError as e:  # an unhashable object: resolve it each time
        if "unhashable" not in str(e):
            raise
        return typing.get_type_hints(obj)


def declared_types(obj: Any) -> dict[str, Any]:
    """``{name: annotation}`` of a dataclass type or a function's parameters ({} when unreadable)."""
    try:
        return _hints(obj)
    except Exception:  # noqa: BLE001  (an annotation that does not resolve declares nothing usable)
        return {}


def normalise_values(values: Any, types: dict[str, Any]) -> Any:
    """A copy of the mapping ``values`` with each entry :func:`normalise`-d to ``types[name]``
    (entries without a declared type, and anything that is not a mapping, are left as they are)."""
    if not isinstance(values, dict):
        return values
    return {k: normalise(v, types[k]) if k in types else v for k, v in values.items()}


def is_float_for_int(value: Any, tp: Any) -> bool:
    """Whether ``value`` is a float given where ``tp`` declares an integer (``width=8.0``)."""
    base, _ = _kind(tp)
    return base is int and isinstance(value, float)
