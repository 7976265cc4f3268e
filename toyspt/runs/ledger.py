"""The results ledger: the record of finished entries that outlives the machine.

The run cache (:mod:`toyspt.runs.cache`) keeps weights, on one machine; a study longer than one
stretch of work also appends every finished entry it covers (by default the UCR study's: its
runs, their proximity probes and the init probes) to a committed text file, one JSON object
per line (format :data:`LEDGER_FORMAT`, docs/ledger.md):

``ledger`` (format), ``key``, ``kind``, ``spec`` (the spec's ``to_dict``: data set and
fingerprint, recipe, seed, evaluation policy, numerics, format version), ``parent`` (the key of
the run it continues, or null), ``tier``, ``entry`` (the entry's JSON in the exact compact form
of :mod:`toyspt.runs.records`: per-epoch curves, summary, tracker records the figures read),
``states`` (the weights the entry had), ``norms`` (per state and tensor, Frobenius norm),
``seconds`` (wall seconds of its computation), ``cpu`` (the host's CPU model), ``cpu_capability``
(the vector kernels torch dispatches to: AVX512 and AVX2 hosts of one CPU model name round
differently, so a run reproduces bit for bit only on its capability), ``kernels`` (every setting
that decides the kernels: torch's capability, oneDNN's ISA, threads; :mod:`toyspt.runs.kernels`;
``toyspt ledger verify`` dispatches them again), ``torch``.

Figures and statistics are drawn from it alone: a spec asked for by a figure is answered by its
record when the cache has no entry (:meth:`Ledger.answer`; the entry then has no weights, and
anything that needs them retrains the run). A line that is truncated, not UTF-8, not a JSON
object, of another format, whose key does not match its own spec, or one of two records of a
key with different numbers, is named with its line number and never used. Appends are one
``write`` of a whole line under an exclusive lock and fsynced, so a kill -9 loses at most the
line in flight, and a truncated last line is closed before the next append.
"""
from __future__ import annotations

import fcntl
import json
import math
import os
import platform
import stat
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import torch

from toyspt.runs.kernels import settings as kernel_settings
from toyspt.runs.records import decode, exact_encode
from toyspt.runs.specs import Entry, RunSpec, Spec
from toyspt.util.hashing import digest, jsonable

LEDGER_FORMAT = 1  # bump when a record's layout changes
DEFAULT_LEDGER = Path("figures/ledger/ucr.jsonl")  # the UCR study's ledger, relative to the repository root
MAX_BYTES = 1 << 30  # a ledger larger than this is refused before reading (the whole study is ~40 MB)
KEPT_METRICS = ("beta", "beta_unif", "proximity_index", "self_index")  # tracker records a record keeps


class LedgerError(ValueError):
    """A ledger that cannot be used at all (not a regular file, too large, unreadable)."""


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


def data_kind(spec: Spec) -> str | None:
    """The kind of data an entry is about (a run's, a probe's run's, a probe's set's)."""
    for obj in (spec, getattr(spec, "run", None)):
        kind = getattr(getattr(obj, "data", None), "kind", None)
        if isinstance(kind, str):
            return kind
    return None


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


def _slim(blob: dict) -> dict:
    """The entry's JSON without the tracker records no figure reads (per-offset profiles)."""
    if isinstance(blob.get("records"), list):
        blob = {**blob, "records": [r for r in blob["records"] if r.get("metric") in KEPT_METRICS]}
    return blob


def _recorded(entry: Entry) -> dict:
    """What a record keeps of ``entry``: its JSON (plain types) without the unread tracker records."""
    return _slim(json.loads(json.dumps(jsonable(entry.to_json()))))


class WeightsNotKept(dict):
    """The ``states`` of an entry read from the ledger: the state names, without tensors."""

    def __init__(self, names: Iterable[str], key: str):
        super().__init__({n: {} for n in names})
        self.key = key

    def __getitem__(self, name):
        raise KeyError(f"the weights ({name}) of entry {self.key} are not kept in the ledger: "
                       "only its run cache has them (rerun the figure with that cache, or retrain the run)")


@dataclass
class Line:
    """One usable record and where it is."""

    number: int
    record: dict


@dataclass
class Ledger:
    """The ledger at ``path``, covering entries of the data kinds ``kinds``."""

    path: Path = DEFAULT_LEDGER
    kinds: tuple[str, ...] = ("ucr",)
    tier: str = ""  # written into new records: the tier that trained them
    warn: Callable[[str], None] = field(default=lambda m: print(f"ledger: {m}", file=sys.stderr))
    _lines: dict[str, Line] | None = field(default=None, repr=False)
    _tally: "Tally | None" = field(default=None, repr=False)  # the file's line ends as last read or appended
    problems: list[str] = field(default_factory=list, repr=False)

    def __post_init__(self):
        self.path = Path(self.path)

    def covers(self, spec: Spec) -> bool:
        return data_kind(spec) in self.kinds

    # ---- reading ---------------------------------------------------------------------------
    def _raw(self) -> bytes:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        except FileNotFoundError:
            return b""
        except OSError as e:
            raise LedgerError(f"{self.path}: cannot be read ({e.strerror})") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # a folder, a device or a pipe is never read as a ledger
            os.close(fd)
            raise LedgerError(f"{self.path}: not a regular file")
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if st.st_size > MAX_BYTES:
                raise LedgerError(f"{self.path}: {st.st_size} bytes, more than the {MAX_BYTES} a ledger may hold")
            raw = f.read(MAX_BYTES + 1)
        self._tally = Tally((st.st_dev, st.st_ino), len(raw), raw.count(b"\n"))  # appends number from here
        return raw

    def lines(self) -> dict[str, Line]:
        """key -> its usable record (read once); :attr:`problems` names every line not used."""
        if self._lines is None:
            self._lines, self.problems = parse(self._raw(), str(self.path))
            for p in self.problems:
                self.warn(p)
        return self._lines

    def __contains__(self, key: str) -> bool:
        return key in self.lines()

    def __len__(self) -> int:
        return len(self.lines())

    def _answering(self, spec: Spec) -> tuple[Spec, Line] | None:
        """(``spec`` or the alternative whose record answers it, that record's line), or None."""
        for s in (spec, *spec.alternatives()):
            line = self.lines().get(s.key())
            if line is not None:
                return s, line
        return None

    def answer(self, spec: Spec) -> Entry | None:
        """The entry of ``spec`` (or of one of its alternatives) as its record gives it, or None."""
        found = self._answering(spec)
        return entry_of(found[0], found[1].record) if found is not None else None

    def capability(self, spec: Spec) -> str | None:
        """The ``cpu_capability`` of the record that answers ``spec`` (whose kernels made its bits;
        ``unknown``: a record older than the field), None when none does."""
        found = self._answering(spec)
        return (found[1].record.get("cpu_capability") or "unknown") if found is not None else None

    # ---- writing ---------------------------------------------------------------------------
    def record(self, spec: Spec, entry: Entry) -> dict:
        """The record of ``spec``'s finished ``entry`` (weights summarised by their norms)."""
        tensors = entry.tensors()
        parent = spec.parent()
        return dict(ledger=LEDGER_FORMAT, key=spec.key(), kind=spec.kind, spec=jsonable(spec.to_dict()),
                    parent=parent.key() if parent is not None else None, tier=self.tier,
                    entry=exact_encode(_recorded(entry)), states=list(tensors), norms=norms(tensors),
                    seconds=getattr(entry, "seconds", None), cpu=cpu_model(),
                    cpu_capability=torch.backends.cpu.get_cpu_capability(), kernels=kernel_settings(),
                    torch=torch.__version__, written=stamp())

    def add(self, spec: Spec, entry: Entry) -> bool:
        """Append ``spec``'s entry unless its key is recorded already (True: appended). An entry
        whose numbers differ from its record is not appended, and said so (the record stays).
        A recorded entry is compared decoded (every record was written by :func:`exact_encode`,
        whose decoded JSON text is the entry's), so a cached run is checked against its record
        without encoding it again, the costly half of writing a record."""
        if not self.covers(spec) or isinstance(entry.tensors(), WeightsNotKept):
            return False
        old = self.lines().get(spec.key())
        if old is not None:
            recorded, mine = (json.dumps(x, allow_nan=False) for x in (decode(old.record["entry"]), _recorded(entry)))
            if recorded != mine:
                self.warn(f"{spec.label()} was computed again with numbers that differ from its record "
                          f"({self.path} line {old.number}, {old.record.get('cpu')}); the record is kept")
            return False
        rec = self.record(spec, entry)
        number = append_line(self.path, rec, self._tally)
        self.lines()[rec["key"]] = Line(number, json.loads(json.dumps(rec)))
        return True


FIELD_TYPES = dict(seconds=(int, float, type(None)), cpu=(str, type(None)), cpu_capability=(str, type(None)),
                   kernels=dict, parent=(str, type(None)), tier=str, norms=dict, torch=str, written=str)  # optional fields


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


def entry_of(spec: Spec, record: dict) -> Entry:
    """The entry a record gives ``spec``, exactly as the run cache would give it (no weights)."""
    return spec.result_type.from_stored(decode(record["entry"]), WeightsNotKept(record["states"], record["key"]))


@dataclass
class Tally:
    """The line ends in the first ``size`` bytes of the file ``ident`` (device, inode): an append
    numbers its line from it, reading only what was appended since, not the whole ledger."""

    ident: tuple[int, int] = (-1, -1)
    size: int = 0
    lines: int = 0

    def count(self, fd: int) -> int:
        """Line ends of the file open at ``fd`` (its lock held): the bytes past ``size`` are
        counted, all of them when it is another file or shorter (replaced, truncated)."""
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != self.ident or st.st_size < self.size:
            self.ident, self.size, self.lines = (st.st_dev, st.st_ino), 0, 0
        while self.size < st.st_size:
            chunk = os.pread(fd, min(1 << 20, st.st_size - self.size), self.size)
            if not chunk:
                break
            self.lines += chunk.count(b"\n")
            self.size += len(chunk)
        return self.lines


def append_line(path: Path, rec: dict, tally: Tally | None = None) -> int:
    """Append ``rec`` as one line (one ``write`` under an exclusive lock, fsynced); a last line
    left without its line end by a killed writer is closed first. Returns the line's number,
    counted under the lock from ``tally`` (updated to the file after the append; None: counted
    from the start), so lines appended by others in between are counted."""
    text = json.dumps(rec, separators=(",", ":"), ensure_ascii=True) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    tally = tally if tally is not None else Tally()
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise LedgerError(f"{path}: not a regular file")
        fcntl.flock(fd, fcntl.LOCK_EX)
        lines = tally.count(fd)
        if tally.size and os.pread(fd, 1, tally.size - 1) != b"\n":
            text = "\n" + text
        data = text.encode()
        if os.write(fd, data) != len(data):
            raise OSError(f"{path}: short write")
        os.fsync(fd)
        tally.size, tally.lines = tally.size + len(data), lines + text.count("\n")
        return tally.lines
    finally:
        os.close(fd)  # closing releases the lock


def merge(paths: list[Path], out: Path) -> tuple[int, list[str]]:
    """One ledger of the records of ``paths`` (each key once, in first-seen order), written to
    ``out`` atomically. Records of one key with different numbers are a conflict: nothing is
    written and the conflicts are returned; so are lines that are not usable records."""
    from toyspt.util.atomic import write_text

    seen: dict[str, tuple[str, int, dict]] = {}
    conflicts, problems = [], []
    for p in paths:
        good, bad = parse(Ledger(Path(p))._raw(), str(p))
        problems += bad
        for k, line in sorted(good.items(), key=lambda kv: kv[1].number):
            if k not in seen:
                seen[k] = (str(p), line.number, line.record)
            elif seen[k][2]["entry"] != line.record["entry"]:
                conflicts.append(f"{k}: {seen[k][0]} line {seen[k][1]} and {p} line {line.number} differ")
    if conflicts or problems:
        return 0, conflicts + problems
    write_text(out, "".join(json.dumps(r, separators=(",", ":"), ensure_ascii=True) + "\n"
                            for _, _, r in seen.values()))
    return len(seen), []


def stamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


__all__ = ["LEDGER_FORMAT", "DEFAULT_LEDGER", "KEPT_METRICS", "Ledger", "LedgerError", "WeightsNotKept", "parse",
           "entry_of", "append_line", "Tally", "merge", "cpu_model", "data_kind", "norms"]
