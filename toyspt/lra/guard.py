"""Bounded reading of untrusted checkpoint files: every check that runs *before* torch
unpickles anything, and the bounded conversion of the unpickled config to plain data.

A hostile file must not hang the reader or exhaust memory, and every malformed file gets a
:class:`CheckpointError` with a reason a person can read. The budget (:class:`ReadLimits`):

* the zip archive: at most ``max_records`` records (read from the end-of-central-directory
  record before the directory itself is parsed); every record **stored** (torch never
  compresses, so a deflated record can only be a decompression bomb) and no record larger
  than the file; a TorchScript archive (``torch.jit.save``) is named as such;
* the pickle: at most ``max_pickle_bytes`` bytes and ``max_pickle_ops`` opcodes, scanned with
  :mod:`pickletools` (which runs nothing) before torch's weights-only unpickler sees it, so
  the objects it can build are bounded too;
* the unpickled config and other entries: at most ``max_depth`` nesting and ``max_values``
  values, a shared object counted at every place it appears (so a 22 KB pickle of nested
  shared tuples, which expands to 2^n values, is refused after ``max_values`` steps instead
  of being walked forever), self-references refused.

Real LRA checkpoints are far inside these limits: a 6x512 model with optimizer state has a
data.pkl of ~0.1 MB and ~10^4 opcodes, and a run config of ~10^3 values nested ~20 deep.
"""
from __future__ import annotations

import io
import os
import pickletools
import struct
import zipfile
from dataclasses import dataclass
from typing import Any


class CheckpointError(ValueError):
    """A file that cannot be read as an LRA checkpoint; the message names the problem."""


class CheckpointRefused(CheckpointError):
    """The file's pickle names something beyond tensors and plain config data; nothing ran."""


@dataclass(frozen=True)
class ReadLimits:
    max_pickle_bytes: int = 8 << 20  # size of the pickle (data.pkl); real ones are ~0.1 MB
    max_pickle_ops: int = 1_000_000  # pickle opcodes; bounds the objects the unpickler can build
    max_records: int = 100_000  # zip records (one per tensor storage, plus a few)
    max_depth: int = 100  # nesting of the config / other entries (OmegaConf adds ~2 per level)
    max_values: int = 200_000  # values walked in the config / other entries, shared ones each time

    def __post_init__(self):
        for name, v in vars(self).items():
            if not isinstance(v, int) or v <= 0:
                raise ValueError(f"{name}: must be a positive int, got {v!r}")


LIMITS = ReadLimits()

# ---------------------------------------------------------------------------- container

_EOCD = b"PK\x05\x06"
_EOCD64_LOCATOR = b"PK\x06\x07"


def _zip_entry_count(path: str, size: int) -> int | None:
    """Total entries declared by the end-of-central-directory record (None if not found)."""
    with open(path, "rb") as f:
        tail_len = min(size, 22 + 0xFFFF)
        f.seek(size - tail_len)
        tail = f.read(tail_len)
        i = tail.rfind(_EOCD)
        if i < 0 or len(tail) < i + 22:
            return None
        total = struct.unpack("<H", tail[i + 10:i + 12])[0]
        if total != 0xFFFF:
            return total
        j = tail.rfind(_EOCD64_LOCATOR, 0, i)  # zip64: the count is in the zip64 record
        if j < 0 or len(tail) < j + 20:
            return None
        off = struct.unpack("<Q", tail[j + 8:j + 16])[0]
        if off + 56 > size:
            return None
        f.seek(off)
        rec = f.read(56)
        return struct.unpack("<Q", rec[32:40])[0] if rec[:4] == b"PK\x06\x06" else None


def check_zip(path: str, size: int, limits: ReadLimits) -> str:
    """Check the torch zip archive; returns the name of its ``data.pkl`` record."""
    n = _zip_entry_count(path, size)
    if n is not None and n > limits.max_records:
        raise CheckpointError(f"{path}: the zip archive declares {n} records (limit "
                              f"{limits.max_records}); not a checkpoint of the LRA code")
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, struct.error, EOFError) as e:
        raise CheckpointError(f"{path}: truncated or corrupt checkpoint ({size} bytes; the zip "
                              f"archive is unreadable: {e})") from None
    names = [i.filename for i in infos]
    if any(n.endswith("/constants.pkl") or "/code/" in n for n in names):
        raise CheckpointError(f"{path}: a TorchScript archive (torch.jit.save: compiled code and "
                              "constants), not a Lightning checkpoint; the bridge reads only "
                              "checkpoints written by torch.save")
    for info in infos:
        if info.compress_type != zipfile.ZIP_STORED:
            raise CheckpointError(
                f"{path}: record {info.filename!r} is compressed (zip method "
                f"{info.compress_type}, {info.compress_size} -> {info.file_size} bytes); torch "
                "never compresses checkpoint records, so this one is refused before reading")
        if info.file_size > size or info.compress_size != info.file_size:
            raise CheckpointError(
                f"{path}: record {info.filename!r} declares {info.file_size} bytes in a file of "
                f"{size} bytes; refused before reading")
    pkl = [n for n in names if n.endswith("/data.pkl") or n == "data.pkl"]
    if not pkl:
        raise CheckpointError(f"{path}: a zip archive but not a torch checkpoint (no data.pkl)")
    return pkl[0]


# ------------------------------------------------------------------------------- pickle

def scan_pickle(stream, limits: ReadLimits, where: str, ops_used: int = 0) -> tuple[list[str], int]:
    """Parse one pickle with :mod:`pickletools` (nothing is built or run): (globals named,
    opcodes used so far). Raises CheckpointError beyond the opcode budget or on bad bytes."""
    names: list[str] = []
    strings: list[str] = []  # recent string arguments (protocol 4 STACK_GLOBAL takes two)
    ops = ops_used
    try:
        for op, arg, _ in pickletools.genops(stream):
            ops += 1
            if ops > limits.max_pickle_ops:
                raise CheckpointError(f"{where}: the pickle has more than {limits.max_pickle_ops} "
                                      "opcodes (far beyond any LRA checkpoint); refused before "
                                      "unpickling")
            if op.name == "GLOBAL":
                names.append(str(arg).replace(" ", "."))
            elif op.name == "STACK_GLOBAL" and len(strings) >= 2:
                names.append(f"{strings[-2]}.{strings[-1]}")
            if isinstance(arg, str):
                strings = (strings + [arg])[-2:]
    except CheckpointError:
        raise
    except Exception as e:  # pickletools raises ValueError/EOFError/... on malformed bytes
        raise CheckpointError(f"{where}: truncated or corrupt pickle ({type(e).__name__}: "
                              f"{_first_line(str(e))})") from None
    return names, ops


def scan_zip_pickle(path: str, record: str, limits: ReadLimits) -> list[str]:
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(record)
        if info.file_size > limits.max_pickle_bytes:
            raise CheckpointError(f"{path}: its pickle ({record}) has {info.file_size} bytes, "
                                  f"over the limit of {limits.max_pickle_bytes}; refused before "
                                  "unpickling")
        try:
            data = zf.read(record)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as e:
            raise CheckpointError(f"{path}: truncated or corrupt checkpoint ({e})") from None
    return scan_pickle(io.BytesIO(data), limits, path)[0]


def scan_legacy_pickle(path: str, limits: ReadLimits) -> list[str]:
    """The non-zip torch format: magic number, protocol, sys info and the object pickle."""
    with open(path, "rb") as f:
        head = f.read(limits.max_pickle_bytes + 1)
    stream = io.BytesIO(head)
    try:
        names, ops = scan_pickle(stream, limits, path)
        if head.startswith(b"\x80\x02\x8a\x0a"):  # torch's legacy magic number (a LONG1)
            for _ in range(3):
                more, ops = scan_pickle(stream, limits, path, ops)
                names += more
    except CheckpointError:
        if len(head) > limits.max_pickle_bytes:
            raise CheckpointError(f"{path}: its pickle exceeds {limits.max_pickle_bytes} bytes; "
                                  "refused before unpickling") from None
        raise
    return names


def _first_line(msg: str) -> str:
    return msg.strip().splitlines()[0] if msg.strip() else "no detail"


# ----------------------------------------------------------------- torch's refusals

def unpickler_reason(msg: str) -> str:
    """The readable core of torch's weights-only refusal message."""
    if "WeightsUnpickler error:" in msg:
        msg = msg.split("WeightsUnpickler error:", 1)[1]
    msg = msg.split("Check the documentation of torch.load", 1)[0]
    lines = [ln.strip() for ln in msg.splitlines() if ln.strip()
             and not ln.startswith(("Weights only load failed", "Please file an issue"))]
    text = " ".join(lines) or "an object the safe reader does not admit"
    if text.startswith("Unsupported operand "):
        code = text.split()[-1]
        try:
            op = pickletools.code2op.get(chr(int(code)))
        except ValueError:
            op = None
        if op is not None:
            text = f"the pickle opcode {op.name} ({op.doc.strip().splitlines()[0].rstrip('.')})"
    return text


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


def file_size(path: str) -> int:
    if not os.path.exists(path):
        raise CheckpointError(f"{path}: no such file")
    if os.path.isdir(path):
        raise CheckpointError(f"{path}: is a directory, not a checkpoint file")
    return os.path.getsize(path)


__all__ = ["CheckpointError", "CheckpointRefused", "ReadLimits", "LIMITS", "check_zip",
           "scan_pickle", "scan_zip_pickle", "scan_legacy_pickle", "unpickler_reason", "Walker",
           "file_size"]
