"""The results ledger's file format: one JSON object per line (format :data:`LEDGER_FORMAT`,
docs/ledger.md), what makes a line a usable record, and the facts a record carries besides its
entry (weights' norms, the host's CPU model, the time).

A line that is truncated, over :data:`MAX_LINE_BYTES`, not UTF-8, not a JSON object, of another
format, whose key does not match its own spec, whose compact form claims more values than its
length allows (:class:`toyspt.runs.exact.Budget`), whose numbers no run can have
(:mod:`toyspt.runs.record_checks`), whose digest does not match its fields (:func:`record_digest`:
a field edited after the line was written), or one of two records of a key with different
numbers, is named with its line number and never used (:func:`read`).

Caps, sized to the study (2,260 records, 31.4 MB, 13.9 KB a record, the largest line 30.7 KB):
a ledger of at most :data:`MAX_BYTES` (128 MiB: four times the study; reading it takes about
twice its size in memory, each record held as its line: :class:`Line`), a line of at most
:data:`MAX_LINE_BYTES` (1 MiB: 34 times the largest), a record's decoded values at most
:data:`toyspt.runs.exact.MAX_VALUES`.

A record's ``digest`` is the sha256 of its other fields as canonical JSON, whatever fields it
has; records written before digests (format 1 without one) are *unsealed*: used as they are,
counted by ``toyspt ledger check``, sealed once by ``toyspt ledger migrate``.

Writing records: :mod:`toyspt.runs.ledger_append`; the ledger as a store: :mod:`toyspt.runs.ledger`.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from toyspt.runs.exact import Budget, decode
from toyspt.runs.record_checks import Impossible, check_bounds, check_entry, check_shapes
from toyspt.runs.specs import RunSpec
from toyspt.util.hashing import digest

LEDGER_FORMAT = 1  # bump when a record's layout changes
MAX_BYTES = 128 << 20  # a ledger larger than this is refused before reading (the study: 31.4 MB)
MAX_LINE_BYTES = 1 << 20  # a line longer than this is not parsed (the study's longest: 30.7 KB)
DIGEST = "digest"  # the field holding a record's digest
BEFORE_DIGESTS = frozenset(("ledger", "key", "kind", "spec", "parent", "tier", "entry", "states", "norms", "seconds",
                            "cpu", "cpu_capability", "torch", "written"))  # every field a record had before digests


class LedgerError(ValueError):
    """A ledger that cannot be used at all (not a regular file, too large, unreadable)."""


def read_raw(path: Path) -> tuple[bytes, os.stat_result | None]:
    """The bytes of the ledger at ``path`` (empty when there is none) and its stat; a folder,
    device or pipe, or a file over :data:`MAX_BYTES`, is :class:`LedgerError`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return b"", None
    except OSError as e:
        raise LedgerError(f"{path}: cannot be read ({e.strerror})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # a folder, a device or a pipe is never read as a ledger
        os.close(fd)
        raise LedgerError(f"{path}: not a regular file")
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if st.st_size > MAX_BYTES:
            raise LedgerError(f"{path}: {st.st_size} bytes, more than the {MAX_BYTES} a ledger may hold")
        return f.read(MAX_BYTES + 1), st


def cpu_model() -> str:
    """The host's CPU model name (``/proc/cpuinfo``; the platform's processor string elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def identity(kind: str, d: dict) -> dict:
    """What the key of a record of ``kind`` hashes (a run's: :meth:`RunSpec.identity_of`)."""
    return RunSpec.identity_of(d) if "recipe" in d else d


def norms(states: dict) -> dict[str, dict[str, float | str]]:
    """Frobenius norm (float64) of every floating-point tensor of every state but ``resume``
    (a diverged tensor's as the text ``nan`` or ``inf``, as entries write NaN)."""
    return {s: {k: _number(float(torch.linalg.vector_norm(v.detach().double()))) for k, v in t.items()
                if isinstance(v, torch.Tensor) and v.is_floating_point()}
            for s, t in states.items() if s != "resume" and isinstance(t, dict)}


def _number(x: float) -> float | str:
    return x if math.isfinite(x) else str(x)


def _constant(name: str) -> float:
    """``Infinity`` and ``-Infinity`` as Python's json writes them (an entry may hold one); ``NaN``
    refused: this code never writes it (entries hold the text ``nan``), so a NaN is damage."""
    if name == "NaN":
        raise ValueError("NaN is not a JSON number")
    return float(name)


class Line:
    """One usable record and where it is, kept as its line's bytes and parsed each time
    :attr:`record` is read: a ledger held in memory costs about its size, not the 10-25 times
    of its records parsed (docs/ledger.md, "Bounded")."""

    __slots__ = ("number", "raw", "sealed", "numbers", "_record")

    def __init__(self, number: int, record: dict | None = None, raw: bytes | None = None):
        """``record`` alone: kept as given; with ``raw`` (its line), only the line is kept."""
        self.number = number
        self.raw = raw if raw is not None else json.dumps(record, separators=(",", ":"), ensure_ascii=True).encode()
        self._record = record if raw is None else None
        rec = record if record is not None else self.record
        self.sealed = DIGEST in rec
        self.numbers = _numbers(rec.get("entry"))  # what tells two records of a key apart

    @property
    def record(self) -> dict:
        """The record (a fresh parse of its line, unless it was given as a dict)."""
        return self._record if self._record is not None else json.loads(self.raw, parse_constant=_constant)


def _numbers(entry: Any) -> str:
    """An entry's canonical JSON text, hashed: two records of one key conflict when theirs differ."""
    return hashlib.sha256(json.dumps(entry, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


FIELD_TYPES = dict(seconds=(int, float, type(None)), cpu=(str, type(None)), cpu_capability=(str, type(None)),
                   kernels=dict, parent=(str, type(None)), tier=str, norms=dict, torch=str,
                   written=str, digest=str)  # optional fields


def record_digest(rec: dict) -> str:
    """The sha256 (hex) of every field of ``rec`` but its digest, as canonical JSON: fields
    added later (a kernel setting) are covered as they come, and the line's spacing or key
    order is not."""
    body = {k: v for k, v in rec.items() if k != DIGEST}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def predates_digests(rec: dict) -> bool:
    """Whether ``rec`` is of the layout written before digests (no field added since, e.g. ``kernels``):
    only such a record may lack its digest unasked (:func:`toyspt.runs.ledger_append.migrate`)."""
    return DIGEST not in rec and set(rec) <= BEFORE_DIGESTS


def seal(rec: dict) -> dict:
    """``rec`` with its digest (:func:`record_digest`)."""
    return {**{k: v for k, v in rec.items() if k != DIGEST}, DIGEST: record_digest(rec)}


def _check(rec: Any, size: int) -> str | None:
    """Why a parsed line of ``size`` bytes is not a usable record (None: it is)."""
    if not isinstance(rec, dict):
        return "not a JSON object"
    try:
        check_bounds(rec)
    except Impossible as e:
        return f"its {e}"
    if type(rec.get("ledger")) is not int or rec["ledger"] != LEDGER_FORMAT:  # true is not 1
        return f"a record of ledger format {rec.get('ledger')!r}, not {LEDGER_FORMAT}"
    missing = [k for k in ("key", "kind", "spec", "entry", "states") if k not in rec]
    if missing:
        return f"no {', '.join(missing)}"
    if not isinstance(rec["kind"], str) or not isinstance(rec["key"], str):
        return f"its {'kind' if not isinstance(rec['kind'], str) else 'key'} is not a text"
    if not isinstance(rec["spec"], dict) or digest(identity(rec["kind"], rec["spec"])) != rec["key"]:
        return f"its key {rec['key'][:40]!r} does not match its own spec"
    wrong = [k for k, t in FIELD_TYPES.items() if k in rec and (not isinstance(rec[k], t) or isinstance(rec[k], bool))]
    if not isinstance(rec["states"], list) or not all(isinstance(x, str) for x in rec["states"]):
        wrong.append("states")
    if wrong:
        return f"its {', '.join(wrong)} of the wrong type"
    try:
        check_shapes(rec)
    except Impossible as e:
        return f"its {e}"
    try:
        entry = decode(rec["entry"], Budget.of_line(size))
    except Exception as e:  # whatever a damaged entry raises, the line is not used
        return f"its entry cannot be decoded ({type(e).__name__}{': ' + str(e) if isinstance(e, ValueError) else ''})"
    if not isinstance(entry, dict):
        return "its entry is not a JSON object"
    try:
        check_entry(rec["spec"], entry)
    except Impossible as e:
        return f"its {e}"
    if DIGEST in rec and rec[DIGEST] != record_digest(rec):
        return "its digest does not match its fields (a field was edited after the line was written)"
    return None


@dataclass
class Read:
    """What :func:`read` found in a ledger's bytes."""

    good: dict[str, Line] = field(default_factory=dict)  # key -> its usable record
    problems: list[str] = field(default_factory=list)  # a sentence per line not used
    conflicts: dict[str, list[Line]] = field(default_factory=dict)  # key -> its records whose numbers differ
    dropped: list[int] = field(default_factory=list)  # the lines not used, but for conflicts
    duplicates: list[Line] = field(default_factory=list)  # records identical in numbers to a usable one
    unsealed: list[int] = field(default_factory=list)  # the lines of usable records without a digest


def read(raw: bytes, name: str, max_line: int | None = None) -> Read:
    """The records of a ledger's bytes (see the module docstring); ``max_line``: MAX_LINE_BYTES."""
    max_line = MAX_LINE_BYTES if max_line is None else max_line
    out = Read()
    chunks = raw.split(b"\n")
    for i, chunk in enumerate(chunks, 1):
        if not chunk.strip():
            continue
        why, rec = _line(chunk, i == len(chunks), max_line)
        if why is not None:
            out.problems.append(f"{name} line {i}: {why}; not used")
            out.dropped.append(i)
            continue
        k, line = rec["key"], Line(i, rec, raw=chunk)
        del rec
        if k in out.conflicts:
            out.conflicts[k].append(line)
        elif k in out.good:  # one key is one spec's identity: where a data set was read (root) may differ
            if out.good[k].numbers != line.numbers:
                out.conflicts[k] = [out.good.pop(k), line]
            elif line.sealed and not out.good[k].sealed:  # the sealed copy answers
                out.duplicates.append(out.good[k])
                out.good[k] = line
            else:
                out.duplicates.append(line)
        else:
            out.good[k] = line
    for k, lines in out.conflicts.items():
        out.problems.append(f"{name} lines {', '.join(str(x.number) for x in lines)}: records of {k} with "
                            "different numbers; none of them used (toyspt ledger repair sets them aside)")
    out.unsealed = sorted(x.number for x in [*out.good.values(), *out.duplicates] if not x.sealed)
    return out


def _line(chunk: bytes, last: bool, max_line: int) -> tuple[str | None, dict | None]:
    """(why the line is not used, or None; its record)."""
    if last:
        return "truncated (no line end: a write cut short)", None
    if len(chunk) > max_line:
        return f"{len(chunk)} bytes, over the limit of {max_line} for a line (the study's longest: 30.7 KB)", None
    try:
        rec = json.loads(chunk.decode("utf-8"), parse_constant=_constant)
    except UnicodeDecodeError:
        return "not UTF-8", None
    except json.JSONDecodeError as e:
        return f"not JSON ({e.msg})", None
    except (ValueError, RecursionError) as e:  # NaN, a number of over 4300 digits, arrays nested too deep
        return f"not JSON ({'nested too deeply' if isinstance(e, RecursionError) else str(e).split(':')[0]})", None
    return _check(rec, len(chunk)), rec


def parse(raw: bytes, name: str) -> tuple[dict[str, Line], list[str]]:
    """The usable records of a ledger's bytes by key, and a sentence per line not used (:func:`read`)."""
    r = read(raw, name)
    return r.good, r.problems


def stamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


__all__ = ["LEDGER_FORMAT", "MAX_BYTES", "MAX_LINE_BYTES", "DIGEST", "LedgerError", "Line", "Read", "read", "parse",
           "read_raw", "record_digest", "seal", "predates_digests", "identity", "cpu_model",
           "norms", "stamp"]
