"""Bounded reading of untrusted LRA checkpoint files: the errors, the budget, and the
bounded conversion of the unpickled config to plain data.

Everything before unpickling (the file type and size, the zip directory, the pickle's
opcodes, depth, shared references, dict keys and materialised bytes) is checked by the
project's one reader, :mod:`toyspt.util.safeload`, within ``ReadLimits.file``. After it,
the unpickled config and other entries are converted within ``max_depth`` nesting and
``max_values`` values, a shared object counted at every place it appears (so a 22 KB
pickle of nested shared tuples, which expands to 2^n values, is refused after
``max_values`` steps instead of being walked forever), self-references refused.

Real LRA checkpoints are far inside these limits: a run config of ~10^3 values nested
~20 deep.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from toyspt.util.files import Refused, UnsafeFile
from toyspt.util.picklescan import BUDGET, Budget


class CheckpointError(UnsafeFile):
    """A file that cannot be read as an LRA checkpoint; the message names the problem."""


class CheckpointRefused(CheckpointError, Refused):
    """The file's pickle names something beyond tensors and plain config data; nothing ran."""


@dataclass(frozen=True)
class ReadLimits:
    max_depth: int = 100  # nesting of the config / other entries (OmegaConf adds ~2 per level)
    max_values: int = 200_000  # values walked in the config / other entries, shared ones each time
    file: Budget = BUDGET  # the reader's budget before unpickling (records, opcodes, bytes, ...)

    def __post_init__(self):
        for name in ("max_depth", "max_values"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"{name}: must be a positive int, got {v!r}")


LIMITS = ReadLimits()

# -------------------------------------------------------------------- bounded walking

class Walker:
    """Converts unpickled config data to plain values with a depth and value budget.

    ``convert(obj, recurse)`` decides how one object becomes plain data and calls
    ``recurse(child)`` for its children; the walker counts values, tracks depth and
    refuses cycles. Every failure is a CheckpointError naming ``where``."""

    def __init__(self, where: str, convert, limits: ReadLimits = LIMITS):
        self.where, self.convert, self.limits = where, convert, limits
        self.values = 0
        self.depth = 0
        self.open: set[int] = set()

    def __call__(self, obj: Any) -> Any:
        self.values += 1
        if self.values > self.limits.max_values:
            raise CheckpointError(f"{self.where}: more than {self.limits.max_values} values "
                                  "(counting shared references at each use); refused")
        if self.depth >= self.limits.max_depth:
            raise CheckpointError(f"{self.where}: nested deeper than {self.limits.max_depth} "
                                  "levels; refused")
        key = id(obj)
        container = isinstance(obj, (dict, list, tuple, set)) or hasattr(obj, "__dict__")
        if container and key in self.open:
            raise CheckpointError(f"{self.where}: an object that contains itself "
                                  f"({type(obj).__name__}); refused")
        if container:
            self.open.add(key)
        self.depth += 1
        try:
            return self.convert(obj, self)
        finally:
            self.depth -= 1
            if container:
                self.open.discard(key)


__all__ = ["CheckpointError", "CheckpointRefused", "ReadLimits", "LIMITS", "Walker"]
