"""Knob checks for config dataclasses: declared types, finiteness and ranges, refused where the
config is made (not steps later). No gym here: the judge cores' configs use it too."""

from __future__ import annotations

import math
import numbers
from dataclasses import fields
from typing import Any


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _is_integer(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


# the annotations a knob's value is checked against (anything else is the family's own to check):
# name -> (accepts, what to say)
_KNOB_TYPES: dict[str, tuple[Any, str]] = {
    "int": (_is_integer, "an integer"),
    "float": (lambda v: _is_number(v) and math.isfinite(v), "a finite number"),
    "bool": (lambda v: isinstance(v, bool), "True or False"),
    "str": (lambda v: isinstance(v, str), "a string"),
    "str | None": (lambda v: v is None or isinstance(v, str), "a string or None"),
    "tuple[int, ...]": (lambda v: isinstance(v, (list, tuple)) and all(_is_integer(x) for x in v),
                        "a list of integers"),
    "dict[str, float]": (lambda v: isinstance(v, dict) and all(isinstance(k, str) and _is_number(x) and math.isfinite(x)
                                                              for k, x in v.items()), "a dict of names to finite numbers"),
    "dict[str, Any]": (lambda v: isinstance(v, dict) and all(isinstance(k, str) for k in v), "a dict with string keys"),
    "dict[str, Any] | None": (lambda v: v is None or (isinstance(v, dict) and all(isinstance(k, str) for k in v)),
                              "a dict with string keys or None"),
}


def check_knobs(config_class: type, values: dict[str, Any]) -> None:
    """Refuse a knob whose value does not fit its declared type, naming the knob, what it takes and
    what it got, where the config is made (not steps later). Numbers must be finite: a NaN or an
    infinite reward weight would reach the trainer as a non-finite reward.

    Examples:
        >>> from dataclasses import dataclass
        >>> @dataclass
        ... class Knobs:
        ...     weight: float = 1.0
        ...     history_size: int = 4
        >>> check_knobs(Knobs, {"weight": float("nan")})
        Traceback (most recent call last):
        ...
        ValueError: Knobs.weight must be a finite number, got nan
        >>> check_knobs(Knobs, {"history_size": "5"})
        Traceback (most recent call last):
        ...
        ValueError: Knobs.history_size must be an integer, got '5'
    """
    declared = {f.name: f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
                for f in fields(config_class)}
    bounds = {f.name: f.metadata["range"] for f in fields(config_class) if "range" in f.metadata}
    for name, value in values.items():
        rule = _KNOB_TYPES.get(str(declared.get(name, "")).replace("typing.", ""))
        if rule is not None and not rule[0](value):
            raise ValueError(f"{config_class.__name__}.{name} must be {rule[1]}, got {value!r:.80}")
        if name in bounds and _is_number(value) and not bounds[name][0] <= value <= bounds[name][1]:
            low, high = bounds[name]
            raise ValueError(f"{config_class.__name__}.{name} must be between {low:,} and {high:,}, got {value:,}")


def knob_range(low: float, high: float) -> dict[str, Any]:
    """A field's metadata that bounds it (``field(default=200, metadata=knob_range(1, 100_000))``):
    :func:`check_knobs` refuses a value outside, so a size that would hang or fill memory fails
    where the config is made."""
    return {"range": (low, high)}
