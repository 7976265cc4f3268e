"""The results ledger as a store: the record of finished entries that outlives the machine.

The run cache (:mod:`toyspt.runs.cache`) keeps weights, on one machine; a study longer than one
stretch of work also keeps every finished entry of the data kinds it names in a committed text
file, one JSON record per line (:mod:`toyspt.runs.ledger_file`, docs/ledger.md). A study states
its ledger once, beside its design (:class:`StudyLedger`: the file, the data kinds it covers,
what a record leaves out), e.g. ``toyspt.ucr.design.LEDGER``; nothing in this layer names a study.

A record holds ``ledger`` (format), ``key``, ``kind``, ``spec`` (the spec's ``to_dict``),
``parent`` (the key of the run it continues, or null), ``tier``, ``entry`` (the entry's JSON in
the exact encoding of :mod:`toyspt.runs.exact`: per-epoch curves, summary, and every tracker
record but the metrics trackers declare bulk, :data:`toyspt.probe.tracking.BULK_METRICS`),
``states`` (the weights the entry had), ``norms`` (per state and tensor, Frobenius norm),
``seconds``, ``cpu``, ``cpu_capability`` (the vector kernels torch dispatches to: AVX512 and AVX2
hosts of one CPU model name round differently), ``kernels`` (every setting that decides the
kernels: :mod:`toyspt.runs.kernels`; ``toyspt ledger verify`` dispatches them again), ``torch``, ``written``.

As a store (:class:`toyspt.runs.store.Store`), a ledger answers a spec with its record's entry
(no weights: anything that needs them retrains the run), keeps an entry by appending its record
(once per key: an entry whose numbers differ from its record is said so, and the record stays),
and ``remove`` makes a record stop answering in this process (``--recompute``; the file is never
rewritten). Put behind a run cache in a :class:`toyspt.runs.store.LayeredStore`, every cached
entry it covers and lacks is recorded as it is read.
"""
from __future__ import annotations

import json
import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

import torch

from toyspt.probe.tracking import BULK_METRICS
from toyspt.runs.exact import decode, exact_encode
from toyspt.runs.kernels import settings as kernel_settings
from toyspt.runs.ledger_append import Tally, append_line, merge, refuse_link
from toyspt.runs.ledger_file import (
    LEDGER_FORMAT,
    LedgerError,
    Line,
    cpu_model,
    norms,
    parse,
    read,
    read_raw,
    seal,
    stamp,
)
from toyspt.runs.specs import Entry, Spec
from toyspt.util.hashing import jsonable


def data_kind(spec: Spec) -> str | None:
    """The kind of data an entry is about (a run's, a probe's run's, a probe's set's)."""
    for obj in (spec, getattr(spec, "run", None)):
        kind = getattr(getattr(obj, "data", None), "kind", None)
        if isinstance(kind, str):
            return kind
    return None


def _slim(blob: dict, leave_out: Iterable[str] = (), keep: set[str] | None = None) -> dict:
    """The entry's JSON without the tracker records of the metrics ``leave_out`` (with ``keep``:
    only those of the metrics ``keep``)."""
    if isinstance(blob.get("records"), list):
        out = frozenset(leave_out)
        blob = {**blob, "records": [r for r in blob["records"] if r.get("metric") not in out
                                    and (keep is None or r.get("metric") in keep)]}
    return blob


TIMING = ("seconds",)  # an entry's fields that time its computation: never compared


def differences(recorded, got, path: str = "", tol: float = 0.0) -> list[str]:
    """Every place two JSON values differ (``path: recorded -> got``), numbers compared by their
    text (a NaN refused); with ``tol``, two floats that agree within it (relative, or absolute near
    zero), or two NaNs, do not."""
    if isinstance(recorded, dict) and isinstance(got, dict):
        out = [f"{path}/{k}: missing from the new entry" for k in recorded if k not in got]
        out += [f"{path}/{k}: not in the record" for k in got if k not in recorded]
        return out + [d for k in recorded if k in got for d in differences(recorded[k], got[k], f"{path}/{k}", tol)]
    if isinstance(recorded, list) and isinstance(got, list):
        if len(recorded) != len(got):
            return [f"{path}: {len(recorded)} items recorded, {len(got)} new"]
        return [d for i, (a, b) in enumerate(zip(recorded, got)) for d in differences(a, b, f"{path}[{i}]", tol)]
    if tol and isinstance(recorded, float) and isinstance(got, float):  # NaN (metadata may hold one) is NaN
        same = math.isclose(recorded, got, rel_tol=tol, abs_tol=tol) or math.isnan(recorded) and math.isnan(got)
        return [] if same else [f"{path}: {recorded!r} -> {got!r}"]
    a, b = json.dumps(recorded, allow_nan=bool(tol)), json.dumps(got, allow_nan=bool(tol))
    return [] if a == b else [f"{path}: {a} -> {b}"]


def numbers(entry: dict, recorded: dict | None = None) -> dict:
    """An entry's JSON as a record's is compared: without its timing; with ``recorded``, only the
    tracker metrics that record kept (a record written under another ``leave_out`` still compares)."""
    if recorded is not None and isinstance(recorded.get("records"), list):
        entry = _slim(entry, keep={r.get("metric") for r in recorded["records"]})
    return {k: v for k, v in entry.items() if k not in TIMING}


def _plain(entry: Entry) -> dict:
    """``entry``'s JSON in plain types, as it is stored."""
    return json.loads(json.dumps(jsonable(entry.to_json())))


class WeightsNotKept(dict):
    """The ``states`` of an entry read from the ledger: the state names, without tensors."""

    def __init__(self, names: Iterable[str], key: str):
        super().__init__({n: {} for n in names})
        self.key = key

    def __getitem__(self, name):
        raise KeyError(f"the weights ({name}) of entry {self.key} are not kept in the ledger: "
                       "only its run cache has them (rerun the figure with that cache, or retrain the run)")


def entry_of(spec: Spec, record: dict, where: str = "its record") -> Entry:
    """The entry a record gives ``spec``, exactly as the run cache would give it (no weights);
    :class:`LedgerError` naming ``where`` (the ledger and line) when it gives none."""
    try:
        return spec.result_type.from_stored(decode(record["entry"]), WeightsNotKept(record["states"], record["key"]))
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
        raise LedgerError(f"{where}: its entry is not one of a {spec.kind} ({type(e).__name__}: "
                          f"{' '.join(str(e).split())[:80]}); repair or remove the line") from None


@dataclass
class Ledger:
    """The ledger at ``path``, covering entries of the data kinds ``kinds`` (a store)."""

    path: Path
    kinds: tuple[str, ...] = ()  # the data kinds whose entries it records (toyspt.data.source kinds)
    tier: str = ""  # written into new records: the tier that trained them
    leave_out: frozenset[str] = BULK_METRICS  # tracker metrics a new record leaves out
    answers: bool = True  # whether its records answer specs (False: it only records, for a caller that needs weights)
    warn: Callable[[str], None] = field(default=lambda m: print(f"ledger: {m}", file=sys.stderr))
    _lines: dict[str, Line] | None = field(default=None, repr=False)
    _tally: Tally | None = field(default=None, repr=False)  # the file's line ends as last read or appended
    _removed: set[str] = field(default_factory=set, repr=False)  # keys whose records no longer answer here
    conflicted: set[str] = field(default_factory=set, repr=False)  # keys whose records conflict: none answers
    unsealed_ok: bool = True  # whether records without a digest answer (False: a study's ledger, sealed only)
    unsealed: list[int] = field(default_factory=list, repr=False)  # lines of usable records without a digest
    duplicates: list[Line] = field(default_factory=list, repr=False)  # records repeating a usable one
    _said: set[str] = field(default_factory=set, repr=False)  # conflicted keys already warned of
    problems: list[str] = field(default_factory=list, repr=False)
    foreign: str | None = field(default=None, repr=False)  # why the file is no ledger at all (None: it is one)

    name = "ledger"
    keeps_weights = False
    root = None  # a worker process never writes to it: the sweep's process records what workers stored

    def __post_init__(self):
        self.path = Path(self.path)
        self.kinds = tuple(self.kinds)
        self.leave_out = frozenset(self.leave_out)

    def covers(self, spec: Spec) -> bool:
        return data_kind(spec) in self.kinds

    # ---- reading ---------------------------------------------------------------------------
    def _raw(self) -> bytes:
        raw, st = read_raw(self.path)
        if st is not None:
            self._tally = Tally((st.st_dev, st.st_ino), len(raw), raw.count(b"\n"))  # appends number from here
        return raw

    def lines(self) -> dict[str, Line]:
        """key -> its usable record (read once); :attr:`problems` names every line not used."""
        if self._lines is None:
            raw = self._raw()
            got = read(raw, str(self.path))
            self._lines, self.problems, self.conflicted, self.unsealed = (got.good, got.problems,
                                                                          set(got.conflicts), got.unsealed)
            self.duplicates = got.duplicates
            # no record and not even a JSON object's first byte: some other file (a damaged ledger's
            # lines, or a killed first writer's cut-off line, still begin with "{")
            if raw.strip() and not raw.lstrip().startswith(b"{") and not (got.good or got.duplicates or got.conflicts):
                self.foreign = got.problems[0]
            for p in self.problems:
                self.warn(p)
            if self.unsealed:
                self._unsealed()
        return self._lines

    def _unsealed(self) -> None:
        """Say once how many records without a digest answer beside sealed ones; in a study's
        ledger (``unsealed_ok`` False) they answer nothing."""
        bare = [k for k, x in self._lines.items() if not x.sealed]
        shown = ", ".join(map(str, self.unsealed[:10])) + (" ..." if len(self.unsealed) > 10 else "")
        if not self.unsealed_ok:
            for k in bare:
                del self._lines[k]
            self.warn(f"{self.path}: {len(bare)} record(s) without a digest not used (lines {shown}): a study's "
                      f"ledger answers with sealed records only (`toyspt ledger check` names them; `toyspt ledger "
                      "migrate` seals those written before digests)")
        elif bare:
            self.warn(f"{self.path}: {len(bare)} record(s) without a digest used beside {len(self._lines) - len(bare)}"
                      f" sealed (lines {shown}): their numbers are bound to nothing (`toyspt ledger check`)")

    def __contains__(self, key: str) -> bool:
        return key in self.lines()

    def __len__(self) -> int:
        return len(self.lines())

    def _answering(self, spec: Spec) -> tuple[Spec, Line] | None:
        """(``spec`` or the alternative whose record answers it, that record's line), or None."""
        for s in (spec, *spec.alternatives()):
            line = self.lines().get(s.key()) if s.key() not in self._removed else None
            if line is not None:
                return s, line
        return None

    def load(self, spec: Spec, weights: bool = False) -> Entry | None:
        """The entry of ``spec`` (or of one of its alternatives) as its record gives it, or None
        (always None with ``weights``: a record keeps none)."""
        found = None if weights or not self.answers else self._answering(spec)
        return entry_of(found[0], found[1].record, f"{self.path} line {found[1].number}") if found is not None \
            else None


    def provenance(self, spec: Spec) -> str | None:
        """The ``cpu_capability`` of the record that answers ``spec`` (whose kernels made its bits;
        ``unknown``: a record older than the field), None when none does."""
        found = self._answering(spec)
        return (found[1].record.get("cpu_capability") or "unknown") if found is not None else None


    def remove(self, spec: Spec) -> None:
        """``spec``'s record no longer answers in this process (the file is not changed; a new
        entry of it is still checked against the record)."""
        self._removed.add(spec.key())

    # ---- writing ---------------------------------------------------------------------------
    def check_writable(self) -> None:
        """:class:`LedgerError` now if records could not be appended to ``path`` (nor through a
        link out of the working folder: :func:`toyspt.runs.ledger_append.locked`), or if the file
        holds not one record and does not begin as a record does (a file that is no ledger; one
        with damaged lines is written to)."""
        refuse_link(self.path)
        where = self.path if self.path.exists() else next((p for p in self.path.parents if p.exists()), Path("."))
        if not os.access(where, os.W_OK) or (where == self.path and not self.path.is_file()):
            raise LedgerError(f"{self.path}: records cannot be appended there ({where} is not writable)")
        if where == self.path:
            self.lines()
        if self.foreign is not None:
            raise LedgerError(f"{self.path}: not a ledger, no line of it is a record ({self.foreign}); nothing is "
                              "written to it (name a ledger file, or a path that does not exist yet)")

    def record(self, spec: Spec, entry: Entry) -> dict:
        """The record of ``spec``'s finished ``entry`` (weights summarised by their norms)."""
        tensors = entry.tensors()
        parent = spec.parent()
        return seal(dict(ledger=LEDGER_FORMAT, key=spec.key(), kind=spec.kind, spec=jsonable(spec.to_dict()),
                    parent=parent.key() if parent is not None else None, tier=self.tier,
                    entry=exact_encode(_slim(_plain(entry), self.leave_out)), states=list(tensors),
                    norms=norms(tensors), seconds=getattr(entry, "seconds", None), cpu=cpu_model(),
                    cpu_capability=torch.backends.cpu.get_cpu_capability(), kernels=kernel_settings(),
                    torch=torch.__version__, written=stamp()))

    def store(self, spec: Spec, entry: Entry) -> bool:
        """Append ``spec``'s entry unless it is not covered, has no weights (read from a ledger)
        or its key is recorded already (True: appended). An entry whose numbers differ from its
        record is not appended, and said so (the record stays). The comparison is :func:`numbers`
        (what the record kept, without the timing), decoded, so a cached run is checked without
        encoding it again."""
        if not self.covers(spec) or isinstance(entry.tensors(), WeightsNotKept):
            return False
        self.lines()
        if spec.key() in self.conflicted:
            if spec.key() not in self._said:  # appending one more would only add to the conflict
                self._said.add(spec.key())
                self.warn(f"{spec.label()}: not appended, its records in {self.path} conflict (toyspt ledger "
                          "repair sets them aside; then it is recorded once)")
            return False
        old = self.lines().get(spec.key())
        if old is not None:
            recorded = decode(old.record["entry"])
            diff = differences(numbers(recorded), numbers(_plain(entry), recorded))
            if diff:
                self.warn(f"{spec.label()} was computed again with numbers that differ from its record "
                          f"({self.path} line {old.number}, {old.record.get('cpu')}): {len(diff)} differ, "
                          f"first {diff[0][:160]}; the record is kept")
            return False
        if self.foreign is not None:
            self.check_writable()
        rec = self.record(spec, entry)
        number = append_line(self.path, rec, self._tally)
        self.lines()[rec["key"]] = Line(number, raw=json.dumps(rec, separators=(",", ":"), ensure_ascii=True).encode())
        return True


@dataclass(frozen=True)
class StudyLedger:
    """A study's ledger, declared beside the study's design: where it lives and what it covers."""

    path: Path  # the committed file, relative to the repository root
    kinds: tuple[str, ...]  # the data kinds whose entries it records (toyspt.data.source kinds)
    leave_out: frozenset[str] = BULK_METRICS  # tracker metrics its records leave out

    def open(self, path: str | os.PathLike | None = None, tier: str = "", **kw) -> Ledger:
        """The ledger at ``path`` (default: :attr:`path`), covering :attr:`kinds`, answering with
        sealed records only (``kw``: the other fields of :class:`Ledger`, e.g. ``answers``, ``warn``,
        ``unsealed_ok``)."""
        return Ledger(Path(path) if path is not None else self.path, self.kinds, tier, self.leave_out,
                      **{"unsealed_ok": False, **kw})


__all__ = ["LEDGER_FORMAT", "Ledger", "StudyLedger", "LedgerError", "WeightsNotKept", "parse", "entry_of",
           "append_line", "Tally", "merge", "cpu_model", "data_kind", "norms"]
