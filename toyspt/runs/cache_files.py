"""The run cache's files on disk: bounded reading of an entry's files, the manifest's MAC, who
writes a temporary entry (and whether that writer has ended), setting a damaged entry aside.

:mod:`toyspt.runs.cache` is the store made of them."""
from __future__ import annotations

import functools
import hashlib
import hmac
import os
import socket
import stat
from pathlib import Path

from toyspt.util import safeload

FILES = ("spec.json", "result.json", "weights.pt")
STALE_TMP_SECONDS = 3600  # a temporary entry older than this (far longer than any run) is a killed writer's
# the largest file of each kind read back (far above real entries: a few KB of json, MB of weights)
MAX_BYTES = {"manifest.json": 1 << 16, "spec.json": 1 << 24, "result.json": 1 << 26,
             "weights.pt": safeload.BUDGET.max_bytes, ".key": 128}

class Damaged(ValueError):
    """A cache entry whose files contradict each other or its key."""


def _open_entry_file(path: Path):
    """``path`` opened for reading after checking, before any read, that it is a regular file
    (not a link, FIFO or device) of at most ``MAX_BYTES[name]``; :class:`Damaged` if not."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        raise Damaged(f"{path.name} is missing") from None
    except OSError:
        if not os.path.islink(path):
            raise
        raise Damaged(f"{path.name} is a symbolic link") from None
    f = os.fdopen(fd, "rb")
    st, limit = os.fstat(fd), MAX_BYTES[path.name]
    if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
        f.close()
        raise Damaged(f"{path.name} is not a regular file" if not stat.S_ISREG(st.st_mode) else
                      f"{path.name} has {st.st_size} bytes, over the limit of {limit}; not read")
    return f


def _read_text(path: Path) -> str:
    with _open_entry_file(path) as f:
        return f.read(MAX_BYTES[path.name]).decode()


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with _open_entry_file(path) as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _mac(secret: bytes, key: str, name: str, sha: str) -> str:
    return hmac.new(secret, f"{key}\0{name}\0{sha}".encode(), hashlib.sha256).hexdigest()


def _move_aside(d: Path, folder: Path, stem: str, why: str, quiet: bool = False) -> Path | None:
    """Rename ``d`` to ``folder/<stem>-<n>`` beside ``<stem>-<n>.why``; OSError unless ``quiet``."""
    try:
        for n in range(1000):
            dest = folder / f"{stem}-{n}"
            try:
                with open(f"{dest}.why", "x") as f:
                    f.write(why + "\n")
            except FileExistsError:
                continue
            try:
                os.rename(d, dest)
            except OSError:
                os.unlink(f"{dest}.why")
                raise
            return dest
    except OSError:
        if not quiet:
            raise
    return None


@functools.lru_cache(maxsize=1)
def _writer_space() -> str:
    """Who may ask about a writer's process id: this host's name and a short hash of this boot
    and this PID namespace (a container sharing the host name and the cache folder has another
    namespace, where the same number names another process or none)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        ns = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return socket.gethostname().replace("-", "_") + "_any"  # unknown: never ask by pid (see below)
    tag = hashlib.sha256(f"{boot}/{ns}".encode()).hexdigest()[:12]
    return f"{socket.gethostname().replace('-', '_')}_{tag}"


def _tmp_prefix() -> str:
    """``.tmp-<host>_<boot and pid namespace>-<pid>-``: who is writing a temporary entry."""
    return f".tmp-{_writer_space()}-{os.getpid()}-"


def _writer_gone(name: str) -> bool:
    """Whether the temporary entry ``name`` was written by a process of this host, boot and PID
    namespace that has ended. Names of other writers (another host or namespace, an older
    format) or that do not parse (a pid of 20 digits) are never asked about: age alone removes
    them (:meth:`RunCache.sweep_stale`)."""
    parts = name.split("-")
    if len(parts) < 4 or parts[1] != _writer_space() or parts[1].endswith("_any"):
        return False
    if not (parts[2].isascii() and parts[2].isdigit() and 0 < len(parts[2]) <= 7):  # pid_max <= 2**22
        return False
    try:
        os.kill(int(parts[2]), 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError, ValueError):  # exists but not ours to signal; or not a pid
        return False
    return False


__all__ = ["FILES", "STALE_TMP_SECONDS", "MAX_BYTES", "Damaged"]
