"""Writing a results ledger: appending a record (one ``write`` of a whole line under an exclusive
lock, fsynced, so a kill -9 loses at most the line in flight, and a truncated last line is closed
before the next append) and merging the ledgers of several machines into one."""
from __future__ import annotations

import fcntl
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from toyspt.runs.ledger_file import LedgerError, parse, read_raw


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
        good, bad = parse(read_raw(Path(p))[0], str(p))
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


__all__ = ["Tally", "append_line", "merge"]
