"""One validation mechanism for the frozen config dataclasses: a rule per field.

A field declares its rule beside its default, and ``__post_init__`` checks every rule::

    @dataclass(frozen=True)
    class TaskConfig:
        T: int = validated(32, Int(ge=2))  # points per sequence

        def __post_init__(self):
            validate(self)
            ...  # checks that involve several fields stay here

The rule lives in the field's metadata, so ``asdict`` (and every run-cache key built from
it) is unchanged. Every error is a ``ValueError`` whose message starts with the field name.
Numbers are always finite; an ``int`` field refuses bools and floats; a ``float`` field
accepts ints and stores them as floats, so ``lr=1`` and ``lr=1.0`` are one config.
"""
from __future__ import annotations

import dataclasses
import math
import numbers
import reprlib
from dataclasses import dataclass
from typing import Any, Callable

KEY = "toyspt.rule"  # the metadata key a field's rule is stored under
LATER = "toyspt.later"  # metadata: a field named in keys only off its default (validated(later=True))
_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother, _REPR.maxlong = 3, 60, 60, 60


def short_repr(value: Any) -> str:
    """``repr`` bounded in depth and length: safe for error messages about hostile values
    (a 5,000-deep tuple would make ``repr`` raise RecursionError)."""
    return _REPR.repr(value)


class Rule:
    """What a field accepts: ``check`` returns the (normalised) value or raises ValueError."""

    def check(self, name: str, value: Any) -> Any:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError

    def fail(self, name: str, value: Any, why: str = "") -> ValueError:
        return ValueError(f"{name}: expected {self.describe()}, got {short_repr(value)}{why}")

    def wrong_type(self, name: str, value: Any) -> ValueError:
        return self.fail(name, value, f" (a {type(value).__name__})")


@dataclass(frozen=True)
class Number(Rule):
    """A finite number within optional bounds (``ge``/``gt`` below, ``le``/``lt`` above)."""

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    optional: bool = False  # None is allowed too
    kind = "number"  # words of the error message
    article = "a"

    def _bounds(self) -> str:
        parts = [f"{op} {v}" for op, v in ((">=", self.ge), (">", self.gt), ("<=", self.le),
                                           ("<", self.lt)) if v is not None]
        return (" " + " and ".join(parts)) if parts else ""

    def describe(self) -> str:
        text = f"{self.article} {self.kind}{self._bounds()}"
        return text + " or None" if self.optional else text

    def convert(self, value: Any) -> Any:
        raise NotImplementedError

    def check(self, name: str, value: Any) -> Any:
        if value is None and self.optional:
            return None
        v = self.convert(value)
        if v is None:
            raise self.wrong_type(name, value)
        if not math.isfinite(v):
            raise self.fail(name, value)
        if ((self.ge is not None and not v >= self.ge) or (self.gt is not None and not v > self.gt)
                or (self.le is not None and not v <= self.le)
                or (self.lt is not None and not v < self.lt)):
            raise self.fail(name, value)
        return v


@dataclass(frozen=True)
class Int(Number):
    """An integer (Python or numpy); bools and floats are refused."""

    kind = "int"
    article = "an"

    def convert(self, value: Any) -> int | None:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            return None
        return int(value)


@dataclass(frozen=True)
class Float(Number):
    """A finite real number (ints accepted, stored as float); bools and strings are refused."""

    kind = "finite float"
    article = "a"

    def convert(self, value: Any) -> float | None:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return None
        try:
            return float(value)
        except OverflowError:  # an int beyond float range: refused as non-finite
            return math.inf


@dataclass(frozen=True)
class Bool(Rule):
    """True or False (not 0/1)."""

    def describe(self) -> str:
        return "a bool"

    def check(self, name: str, value: Any) -> bool:
        if not isinstance(value, bool):
            raise self.wrong_type(name, value)
        return value


@dataclass(frozen=True)
class Text(Rule):
    """A string; with ``choices``, one of them; with ``optional``, also None."""

    choices: tuple[str, ...] | None = None
    optional: bool = False

    def describe(self) -> str:
        text = f"one of {self.choices}" if self.choices is not None else "a string"
        return text + " or None" if self.optional else text

    def check(self, name: str, value: Any) -> str | None:
        if value is None and self.optional:
            return None
        if not isinstance(value, str):
            raise self.wrong_type(name, value)
        if self.choices is not None and value not in self.choices:
            raise self.fail(name, value)
        return value


@dataclass(frozen=True)
class Tuple(Rule):
    """A tuple whose items all follow ``item``: exactly ``length`` items if given, else at least
    ``min_len``; ``ordered`` = non-decreasing, ``unique`` = no item twice."""

    item: Rule
    length: int | None = None
    min_len: int = 1
    ordered: bool = False
    unique: bool = False

    def describe(self) -> str:
        size = f"{self.length}" if self.length is not None else f"at least {self.min_len}"
        words = [size] + [w for w, on in (("non-decreasing", self.ordered), ("distinct", self.unique))
                          if on]
        return f"a tuple of {' '.join(words)} items, each {self.item.describe()}"

    def check(self, name: str, value: Any) -> tuple:
        if not isinstance(value, tuple):
            raise self.wrong_type(name, value)
        too_few = len(value) < self.min_len
        if (len(value) != self.length) if self.length is not None else too_few:
            raise self.fail(name, value, f" ({len(value)} item{'' if len(value) == 1 else 's'})")
        items = tuple(self.item.check(f"{name}[{i}]", v) for i, v in enumerate(value))
        if self.ordered and any(a > b for a, b in zip(items, items[1:])):
            raise self.fail(name, value, " (out of order)")
        if self.unique:
            dup = next((v for i, v in enumerate(items) if v in items[:i]), None)
            if dup is not None:
                raise self.fail(name, value, f" ({dup!r} appears twice)")
        return items


@dataclass(frozen=True)
class Instance(Rule):
    """An instance of ``cls`` (nested configs validate themselves on construction)."""

    cls: type

    def describe(self) -> str:
        return f"a {self.cls.__name__}"

    def check(self, name: str, value: Any) -> Any:
        if not isinstance(value, self.cls):
            raise self.wrong_type(name, value)
        return value


# ------------------------------------------------------------- bounds from this machine
# Every size field has an upper bound, so a typo such as ``--task.T 1000000000`` is refused by
# name instead of failing at allocation. The bounds come from what this machine can hold:
# 23 GiB of memory shared by its users and 2 cores. One array of a run may hold at most
# MAX_ARRAY_BYTES (2 GiB, a tenth of the machine); per-field bounds keep each factor of the
# largest arrays (data drawn in float64, T x T attention maps, d x d weights) within it, and
# configs check the products (:func:`within_memory`). Finite scales (noise, offsets, amplitudes,
# learning rates) are bounded where training in float32 would overflow: a value of MAX_SCALE,
# squared and summed over a million terms, is 1e18, far below float32's 3.4e38.
MAX_ARRAY_BYTES = 2 << 30  # bytes of the largest single array a config may ask for
MAX_SCALE = 1e6  # largest noise / offset / amplitude / width a task may ask for
MAX_LENGTH = 16384  # longest sequence: one T x T float32 attention map of one head is 1 GiB
MAX_WIDTH = 8192  # widest residual stream / input: a d x d float32 weight is 256 MiB
MAX_COUNT = 10_000_000  # most sequences per split, epochs, batch: beyond any experiment here


def within_memory(what: str, terms: str, values: int, itemsize: int) -> None:
    """Refuse (ValueError naming ``what`` and the bound) an array of ``values`` x ``itemsize``
    bytes above MAX_ARRAY_BYTES; ``terms`` says which fields multiply to ``values``."""
    if values * itemsize > MAX_ARRAY_BYTES:
        raise ValueError(f"{what}: {terms} = {values} values of {itemsize} bytes, over the bound of "
                         f"{MAX_ARRAY_BYTES} bytes (2 GiB: one array may hold a tenth of this "
                         "machine's 23 GiB)")


def validated(default: Any = dataclasses.MISSING, rule: Rule | None = None, *,
              factory: Callable[[], Any] | None = None, later: bool = False) -> Any:
    """A dataclass field with ``default`` (or ``factory``) whose values must satisfy ``rule``.

    The default is checked here, so a rule that contradicts its default fails at import.
    ``later``: a field added after run keys existed, named by :func:`config_dict` only off its
    default, so every key and stored config made before it keeps its value.
    """
    if rule is None:
        raise TypeError("validated() needs a rule")
    meta = {KEY: rule, LATER: later}
    if factory is not None:
        rule.check("default", factory())
        return dataclasses.field(default_factory=factory, metadata=meta)
    rule.check("default", default)
    return dataclasses.field(default=default, metadata=meta)


def config_dict(cfg) -> dict[str, Any]:
    """``asdict(cfg)`` without the fields declared ``later`` that hold their default: what keys
    hash and runs store, the same as before such a field existed wherever it is not used."""
    out = dataclasses.asdict(cfg)
    for f in dataclasses.fields(cfg):
        if f.metadata.get(LATER) and out[f.name] == f.default:
            del out[f.name]
    return out


def rule_of(f: dataclasses.Field) -> Rule | None:
    """The rule a field declared, or None."""
    return f.metadata.get(KEY)


def unruled(cls_or_obj) -> list[str]:
    """Names of the fields that declare no rule (a config adopting this module has none)."""
    return [f.name for f in dataclasses.fields(cls_or_obj) if rule_of(f) is None]


def validate(obj) -> None:
    """Check every ruled field of the dataclass ``obj``; store normalised values (int -> float
    for float fields, numpy ints -> int). Raises ValueError naming the first bad field."""
    for f in dataclasses.fields(obj):
        rule = rule_of(f)
        if rule is None:
            continue
        value = getattr(obj, f.name)
        checked = rule.check(f.name, value)
        if checked is not value:  # frozen: the one sanctioned way to normalise in __post_init__
            object.__setattr__(obj, f.name, checked)


__all__ = ["Rule", "Number", "Int", "Float", "Bool", "Text", "Tuple", "Instance", "validated", "config_dict",
           "validate", "rule_of", "unruled", "KEY", "short_repr", "MAX_ARRAY_BYTES", "MAX_SCALE", "MAX_LENGTH",
           "MAX_WIDTH", "MAX_COUNT", "within_memory"]
