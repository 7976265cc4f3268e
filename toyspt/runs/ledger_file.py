"""The results ledger's file format: one JSON object per line (format :data:`LEDGER_FORMAT`,
docs/ledger.md), what makes a line a usable record, and the facts a record carries besides its
entry (weights' norms, the host's CPU model, the time).

A line that is truncated, not UTF-8, not a JSON object, of another format, whose key does not
match its own spec, or one of two records of a key with different numbers, is named with its
line number and never used (:func:`parse`). Writing records: :mod:`toyspt.runs.ledger_append`;
the ledger as a store: :mod:`toyspt.runs.ledger`.
"""
from __future__ import annotations

import json
import math
import os
import platform
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from toyspt.runs.exact import decode
from toyspt.runs.specs import RunSpec
from toyspt.util.hashing import digest

LEDGER_FORMAT = 1  # bump when a record's layout changes
MAX_BYTES = 1 << 30  # a ledger larger than this is refused before reading (the whole study is ~40 MB)


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


@dataclass
class Line:
    """One usable record and where it is."""

    number: int
    record: dict


FIELD_TYPES = dict(seconds=(int, float, type(None)), cpu=(str, type(None)), cpu_capability=(str, type(None)),
                   parent=(str, type(None)), tier=str, norms=dict, torch=str, written=str)  # optional fields


def _check(rec: Any) -> str | None:
    """Why a parsed line is not a usable record (None: it is)."""
    if not isinstance(rec, dict):
        return "not a JSON object"
    if rec.get("ledger") != LEDGER_FORMAT:
        return f"a record of ledger format {rec.get('ledger')!r}, not {LEDGER_FORMAT}"
    missing = [k for k in ("key", "kind", "spec", "entry", "states") if k not in rec]
    if missing:
        return f"no {', '.join(missing)}"
    if not isinstance(rec["spec"], dict) or digest(identity(rec["kind"], rec["spec"])) != rec["key"]:
        return f"its key {rec['key']!r} does not match its own spec"
    wrong = [k for k, t in FIELD_TYPES.items() if k in rec and (not isinstance(rec[k], t) or isinstance(rec[k], bool))]
    if not isinstance(rec["states"], list) or not all(isinstance(x, str) for x in rec["states"]):
        wrong.append("states")
    if wrong:
        return f"its {', '.join(wrong)} of the wrong type"
    try:
        entry = decode(rec["entry"])
    except Exception as e:  # whatever a damaged entry raises, the line is not used
        return f"its entry cannot be decoded ({type(e).__name__})"
    return None if isinstance(entry, dict) else "its entry is not a JSON object"


def parse(raw: bytes, name: str) -> tuple[dict[str, Line], list[str]]:
    """The usable records of a ledger's bytes by key, and a sentence per line not used."""
    good: dict[str, Line] = {}
    bad: dict[str, list[int]] = {}  # key -> lines of records that disagree
    problems = []
    chunks = raw.split(b"\n")
    for i, chunk in enumerate(chunks, 1):
        if not chunk.strip():
            continue
        if i == len(chunks):
            problems.append(f"{name} line {i}: truncated (no line end: a write cut short); not used")
            continue
        try:
            rec = json.loads(chunk.decode("utf-8"), parse_constant=_constant)
        except UnicodeDecodeError:
            problems.append(f"{name} line {i}: not UTF-8; not used")
            continue
        except json.JSONDecodeError as e:
            problems.append(f"{name} line {i}: not JSON ({e.msg}); not used")
            continue
        except (ValueError, RecursionError) as e:  # NaN, a number of over 4300 digits, arrays nested too deep
            why = "nested too deeply" if isinstance(e, RecursionError) else str(e).split(":")[0]
            problems.append(f"{name} line {i}: not JSON ({why}); not used")
            continue
        why = _check(rec)
        if why is not None:
            problems.append(f"{name} line {i}: {why}; not used")
            continue
        k = rec["key"]
        if k in bad:
            bad[k].append(i)
        elif k in good:  # one key is one spec's identity: where a data set was read (root) may differ
            if good[k].record["entry"] != rec["entry"]:
                bad[k] = [good.pop(k).number, i]
        else:
            good[k] = Line(i, rec)
    for k, where in bad.items():
        problems.append(f"{name} lines {', '.join(map(str, where))}: records of {k} with different numbers; "
                        "none of them used")
    return good, problems


def stamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


__all__ = ["LEDGER_FORMAT", "MAX_BYTES", "LedgerError", "Line", "parse", "read_raw", "identity", "cpu_model",
           "norms", "stamp"]
