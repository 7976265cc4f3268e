"""Atomic file writing: a file appears whole or not at all (temp file in the same folder,
then ``os.replace``), so a killed process never leaves a half-written figure, table,
checkpoint or cache file behind.

A new file gets the mode the umask gives any new file (``0666 & ~umask``: the temporary
file is created with that mode, not ``mkstemp``'s 0600); a replaced file keeps its mode. A
disk fault (full, read-only, I/O error, or torch's writer's ``RuntimeError`` on one) is one
:class:`WriteError` naming the file, and the temporary file is removed."""
from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import signal
import stat
import threading
from pathlib import Path
from typing import Callable, Iterator


class WriteError(OSError):
    """A file that could not be written (disk full, read-only, I/O error); nothing was left."""


def disk_fault(e: BaseException) -> str | None:
    """The reason in words when ``e`` is a failure to write to disk: any OSError, or torch's
    file writer's RuntimeError (``[enforce fail at inline_container.cc...]``, which carries
    no errno); None for anything else (a bug keeps its traceback)."""
    if isinstance(e, OSError):
        return e.strerror or str(e) or type(e).__name__
    text = str(e).strip()
    if isinstance(e, RuntimeError) and ("inline_container" in text or "PytorchStreamWriter" in text):
        first = text.splitlines()[0] if text else ""
        return f"torch's file writer failed ({first}; disk full or read-only?)"
    return None


def _refuse_special(path: Path) -> None:
    """Refuse a ``path`` that is there but is neither a regular file nor a link (a folder, a
    device such as /dev/null, a FIFO, a socket): the rename would replace it. A link is replaced
    by the new file, as any rename replaces it; what it pointed to is never written."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as e:
        raise WriteError(f"{path}: cannot write it: {e.strerror or e}; nothing was written") from None
    if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
        what = "a folder" if stat.S_ISDIR(mode) else "not a regular file"
        raise WriteError(f"{path}: cannot write it: {what}; nothing was written")


def existing_ancestor(path: str) -> str:
    """``path`` itself when it exists, else its nearest existing parent (what a write under
    ``path`` would meet first on disk)."""
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def outside_through_link(path: str | os.PathLike, tree: str | os.PathLike = ".") -> str | None:
    """Where ``path`` really is when it is named inside the folder ``tree`` (default: the working
    folder, the repository's root) but a symbolic link (``path`` itself or a folder of it) takes
    it out; None otherwise. A path named outside the tree is the caller's choice (the two-checkout
    recipe's ``$OLDPWD/figures/ledger/ucr.jsonl``, even under a linked home folder); a link inside
    the tree that leads out of it is not written through."""
    def inside(p: str, root: str) -> bool:
        return p == root or p.startswith(root.rstrip(os.sep) + os.sep)

    path, root = os.path.abspath(path), os.path.abspath(tree)
    if not inside(path, root):
        return None
    real = os.path.realpath(path)
    return None if inside(real, os.path.realpath(tree)) else real


def out_file(text: str) -> str:
    """An argparse type for a file to write (``--json``, ``-o``): refused at parse time when the
    path names a folder, a device, a FIFO or a socket (an atomic write renames over what is
    there), or lies under an existing file (the rules of :func:`atomic_write`)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("empty path")
    path = os.path.abspath(text)
    if os.path.lexists(path) and not (os.path.islink(path) or os.path.isfile(path)):
        what = "a folder" if os.path.isdir(path) else "not a regular file"
        raise argparse.ArgumentTypeError(f"{text} must be a file to write, but it is {what}")
    probe = existing_ancestor(os.path.dirname(path))
    if not os.path.isdir(probe):
        raise argparse.ArgumentTypeError(f"{text} cannot be written: {probe} is a file, not a folder")
    return text


def atomic_write(path: str | os.PathLike, write: Callable[[str], object]) -> Path:
    """Call ``write(tmp_path)`` on a temporary file beside ``path``, then rename it into place.
    The temporary file is removed if ``write`` fails; a disk fault raises :class:`WriteError`, so
    does a ``path`` that is there but is not a regular file or a link (:func:`_refuse_special`)."""
    path = Path(path)
    _refuse_special(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.parent / f".tmp-{secrets.token_hex(8)}{path.suffix}"
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))  # the umask applies
        write(str(tmp))
        if os.path.isfile(path):
            os.chmod(tmp, stat.S_IMODE(os.stat(path).st_mode))
        os.replace(tmp, path)
    except (OSError, RuntimeError) as e:
        why = disk_fault(e)
        if why is None:
            raise
        raise WriteError(f"{path}: cannot write it: {why}; nothing half-written was left") from None
    finally:
        if tmp is not None and os.path.lexists(tmp):
            os.unlink(tmp)
    return path


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` atomically."""
    return atomic_write(path, lambda tmp: Path(tmp).write_text(text))


def write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically."""
    return atomic_write(path, lambda tmp: Path(tmp).write_bytes(data))


@contextlib.contextmanager
def uninterrupted() -> Iterator[None]:
    """Ctrl-C (SIGINT) during a ``with`` block is held and raised as KeyboardInterrupt when
    the block ends, however it ends (an error raised in the block becomes its context): files
    written together stay together, and a read through C++ code that calls back into Python
    (``torch.load`` of a file object) is never cut inside a callback, where torch turns the
    KeyboardInterrupt into another error. A held signal goes to the handler the block found
    (ignored where it was ignored, as in a sweep's workers). Only in the main thread, where
    Python delivers signals, and under a handler Python can restore (not one installed from C);
    elsewhere the block runs as is."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, None):
        yield
        return
    held: list[int] = []
    before = signal.signal(signal.SIGINT, lambda sig, frame: held.append(sig))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)
        if held:
            signal.raise_signal(signal.SIGINT)


__all__ = ["out_file", "outside_through_link",
           "existing_ancestor", "atomic_write", "write_text", "write_bytes", "WriteError", "disk_fault",
           "uninterrupted"]
