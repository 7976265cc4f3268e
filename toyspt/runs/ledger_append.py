"""Writing a results ledger: appending a record, merging the ledgers of several machines,
repairing one and sealing its records, every write under the ledger's one lock.

The lock is an exclusive ``flock`` on the ledger file; a writer that replaces the file (merge,
repair onto it, migrate: a new file renamed over it, whole or not at all) holds the lock on
the old file until the rename, and every writer checks under the lock that the path still
names the file it locked (else it locks the new one), so an append waiting on a merge lands in
the merged file, never in the one it replaced. An append is one ``write`` of a whole line,
fsynced, so a kill -9 loses at most the line in flight, and a truncated last line is closed
before the next append; a write that fails (disk full, read-only, I/O error) is cut back to
where the file ended and raised as one :class:`toyspt.util.atomic.WriteError`: no half record
stays. A path that a symbolic link takes out of the working folder is not written through.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from toyspt.runs.ledger_file import (
    BEFORE_DIGESTS,
    LedgerError,
    Line,
    Read,
    predates_digests,
    read,
    read_raw,
    seal,
)
from toyspt.util.atomic import WriteError, outside_through_link, write_text


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


def _fault(path: Path, e: OSError, what: str) -> WriteError:
    return WriteError(f"{path}: cannot {what}: {e.strerror or e}; nothing half-written was left")


def refuse_link(path: Path) -> None:
    """:class:`LedgerError` when a symbolic link takes ``path`` out of the working folder."""
    real = outside_through_link(path)
    if real is not None:
        raise LedgerError(f"{path}: a link to {real}, outside the working folder; a ledger is not written "
                          "through a link (name the file itself)")


@contextlib.contextmanager
def locked(path: Path, made: list | None = None) -> Iterator[int]:
    """The ledger at ``path`` open for writing (created if need be) under its exclusive lock:
    the file the path names once the lock is held. ``made``: a list that gets True appended
    when this call created the file (a refusal then removes it: nothing is left)."""
    refuse_link(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _fault(path, e, "create its folder") from None
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
            if made is not None:
                made.append(True)
        except FileExistsError:
            fd = None
        except OSError as e:
            raise _fault(path, e, "open it to write") from None
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644) if fd is None else fd
        except OSError as e:
            raise _fault(path, e, "open it to write") from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise LedgerError(f"{path}: not a regular file")
            fcntl.flock(fd, fcntl.LOCK_EX)
            st = os.fstat(fd)
            try:
                now = os.stat(path)
            except FileNotFoundError:
                now = None
            if now is not None and (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino):
                yield fd
                return
        finally:
            os.close(fd)  # closing releases the lock; replaced while we waited: lock the new file


def append_line(path: Path, rec: dict, tally: Tally | None = None) -> int:
    """Append ``rec`` as one line under the lock (a last line left without its line end by a
    killed writer is closed first). Returns the line's number, counted under the lock from
    ``tally`` (updated to the file after the append; None: counted from the start), so lines
    appended by others in between are counted. A failed write is cut back (module docstring)."""
    text = json.dumps(rec, separators=(",", ":"), ensure_ascii=True) + "\n"
    tally = tally if tally is not None else Tally()
    with locked(path) as fd:
        lines = tally.count(fd)
        if tally.size and os.pread(fd, 1, tally.size - 1) != b"\n":
            text = "\n" + text
        data = text.encode()
        try:
            written = os.write(fd, data)
            if written != len(data):
                raise OSError(28, f"a short write ({written} of {len(data)} bytes; disk full?)")
            os.fsync(fd)
        except OSError as e:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, tally.size)  # the file as it was: no half record
            raise _fault(path, e, "append a record") from None
        tally.size, tally.lines = tally.size + len(data), lines + text.count("\n")
        return tally.lines


def _text(lines: list[Line]) -> str:
    """The lines of ``lines``, each byte as it was read."""
    return b"".join(x.raw + b"\n" for x in lines).decode("utf-8")


def _read_locked(fd: int, path: Path) -> Read:
    """The records of the ledger open at ``fd`` (its lock held)."""
    size = os.fstat(fd).st_size
    raw, _ = read_raw(path) if size else (b"", None)
    return read(raw, str(path))


def merge(paths: list[Path], out: Path) -> tuple[int, list[str]]:
    """One ledger of the records of ``paths`` (each key once, in first-seen order), written to
    ``out`` atomically under ``out``'s lock, the inputs read under it (an input that is ``out``
    read as it is then: appends made meanwhile are kept). Records of one key with different
    numbers are a conflict: nothing is written and the conflicts are returned; so are lines
    that are not usable records (``toyspt ledger repair`` drops or sets them aside)."""
    made: list = []
    with locked(out, made) as fd:
        seen: dict[str, tuple[str, Line]] = {}
        conflicts, problems = [], []
        for p in paths:
            got = _read_locked(fd, out) if _same(p, out) else read(read_raw(Path(p))[0], str(p))
            problems += got.problems
            for k, line in sorted(got.good.items(), key=lambda kv: kv[1].number):
                if k not in seen:
                    seen[k] = (str(p), line)
                elif seen[k][1].numbers != line.numbers:
                    conflicts.append(f"{k}: {seen[k][0]} line {seen[k][1].number} and {p} line {line.number} differ")
        if conflicts or problems:
            if made and os.fstat(fd).st_size == 0:
                os.unlink(out)  # made by this call, nothing in it: as it was
            return 0, conflicts + problems
        write_text(out, _text([x for _, x in seen.values()]))
        return len(seen), []


def _same(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name one file: the same inode where both exist (a hard link, a
    symbolic one), else the same real path (one that is still to be made)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def repair(path: Path, out: Path, aside: Path) -> tuple[Read, int, int]:
    """Write to ``out`` every usable record of ``path`` once, in order, and to ``aside`` every
    record of a key whose records conflict (none of them kept: each verifies, so which is right
    is for retraining to say, ``toyspt ledger verify``); lines not usable (cut off, damaged) are
    dropped. Returns (what was read, records kept, records set aside); neither ``out`` nor
    ``aside`` may be ``path`` (by name or by inode: review them, then move one over), nor one the other."""
    for what, flag in ((out, "-o"), (aside, "--aside")):
        if _same(path, what):
            raise LedgerError(f"{what}: repair writes new files, not the ledger it reads; name another {flag}")
    if _same(out, aside):
        raise LedgerError(f"{aside}: the same file as -o; name another --aside")
    got = read(read_raw(path)[0], str(path))
    kept = sorted(got.good.values(), key=lambda x: x.number)
    set_aside: list[Line] = sorted((x for lines in got.conflicts.values() for x in lines), key=lambda x: x.number)
    with locked(out):
        write_text(out, _text(kept))
    if set_aside:
        with locked(aside):
            write_text(aside, _text(set_aside))
    return got, len(kept), len(set_aside)


def spans(numbers: list[int]) -> str:
    """Line numbers as runs (``1-120, 125``): every one of them, in few characters."""
    out: list[str] = []
    for n in sorted(numbers):
        if out and out[-1][1] == n - 1:
            out[-1] = (out[-1][0], n)
        else:
            out.append((n, n))
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in out)


def unasked(got: Read) -> list[tuple[int, str]]:
    """(line, why) of each record without a digest that :func:`migrate` seals only when named: one of
    the layout written since digests (its digest removed, or the record written by hand), or one
    beside sealed records (an older checkout's append, or a digest stripped)."""
    lines = [*got.good.values(), *got.duplicates]
    sealed = sum(x.sealed for x in lines)
    out = []
    for x in sorted(lines, key=lambda x: x.number):
        if x.sealed:
            continue
        rec = x.record
        if not predates_digests(rec):
            new = sorted(set(rec) - BEFORE_DIGESTS)
            out.append((x.number, f"of the layout written since digests (it has {', '.join(new)[:80]}) and no digest"))
        elif sealed:
            out.append((x.number, f"without a digest beside {sealed} sealed records"))
    return out


def migrate(path: Path, named: frozenset[int] | set[int] = frozenset()) -> tuple[list[int], int]:
    """Seal the records of ``path`` written before digests (:func:`toyspt.runs.ledger_file.seal`),
    the file rewritten atomically under its lock, every other byte of a record kept: (the lines
    sealed, records sealed before). A record without a digest that may have lost it
    (:func:`unasked`) is sealed only when its line is in ``named``; otherwise, or with a line not
    used, or a named line that is not such a record, nothing is written (:class:`LedgerError`)."""
    with locked(path) as fd:
        got = _read_locked(fd, path)
        if got.problems:
            raise LedgerError(f"{path}: {len(got.problems)} line(s) not used, e.g. {got.problems[0]}; nothing "
                              "sealed (toyspt ledger repair first)")
        lines = [*got.good.values(), *got.duplicates]
        bare = {x.number for x in lines if not x.sealed}
        stray = sorted(set(named) - bare)
        if stray:
            raise LedgerError(f"{path}: line(s) {spans(stray)} named, but not a usable record without a digest; "
                              "nothing sealed")
        ask = [(n, why) for n, why in unasked(got) if n not in named]
        if ask:
            raise LedgerError(f"{path}: {len(ask)} record(s) without a digest that may have lost it, e.g. line "
                              f"{ask[0][0]}: a record {ask[0][1]}; nothing sealed. Review them (git diff, toyspt "
                              f"ledger verify), then name each: --line {' --line '.join(str(n) for n, _ in ask[:5])}"
                              f"{' ...' if len(ask) > 5 else ''} (lines {spans([n for n, _ in ask])})")
        raw, _ = read_raw(path)
        text = raw.split(b"\n")
        for line in lines:
            if line.number in bare:
                text[line.number - 1] = json.dumps(seal(line.record), separators=(",", ":"),
                                                   ensure_ascii=True).encode()
        if bare:
            write_text(path, b"\n".join(text).decode("utf-8"))
        return sorted(bare), len(lines) - len(bare)


__all__ = ["Tally", "append_line", "locked", "refuse_link", "merge", "repair", "migrate", "unasked", "spans"]
