"""Reading untrusted files safely, step one: refuse anything but a regular file by its
``stat`` (a folder, FIFO, ``/dev/zero``, socket) and read its size before its content, so a
file argument can neither block the reader nor feed it without end. Every failure is one
line, :class:`UnsafeFile`, naming the file."""
from __future__ import annotations

import os
import stat


class UnsafeFile(ValueError):
    """A file the reader cannot or will not read; the message names the file and the reason."""


class Refused(UnsafeFile):
    """The pickle asks for something beyond tensors and the admitted names; nothing ran."""



def open_regular(path: str | os.PathLike, what: str = "file", max_bytes: int | None = None):
    """Open ``path`` for binary reading after checking, by ``stat`` and before any read, that
    it is a regular file (not a folder, FIFO or device) of at most ``max_bytes``; returns
    ``(file, size)``. The open is non-blocking and re-checked with ``fstat`` (a FIFO swapped
    in between is refused, not waited on)."""
    path = os.fspath(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise UnsafeFile(f"{path}: no such file ({what})") from None
    except OSError as e:
        raise UnsafeFile(f"{path}: cannot read the {what}: {e.strerror or e}") from None
    _check_regular(path, st, what, max_bytes)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise UnsafeFile(f"{path}: cannot read the {what}: {e.strerror or e}") from None
    f = os.fdopen(fd, "rb")
    try:
        st2 = os.fstat(fd)
        _check_regular(path, st2, what, max_bytes)
        if (st2.st_ino, st2.st_dev) != (st.st_ino, st.st_dev):
            raise UnsafeFile(f"{path}: the {what} was replaced while being opened")
    except BaseException:
        f.close()
        raise
    return f, st2.st_size


def regular_size(path: str | os.PathLike, what: str = "file", max_bytes: int | None = None) -> int:
    """The size of ``path`` after the checks of :func:`open_regular` (nothing is read)."""
    f, size = open_regular(path, what, max_bytes)
    f.close()
    return size


def _check_regular(path: str, st: os.stat_result, what: str, max_bytes: int | None) -> None:
    if stat.S_ISDIR(st.st_mode):
        raise UnsafeFile(f"{path}: is a directory, not a {what}")
    if not stat.S_ISREG(st.st_mode):
        kind = ("a FIFO" if stat.S_ISFIFO(st.st_mode) else "a character device"
                if stat.S_ISCHR(st.st_mode) else "a block device" if stat.S_ISBLK(st.st_mode)
                else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
        raise UnsafeFile(f"{path}: is {kind}, not a regular {what}; refused before reading")
    if max_bytes is not None and st.st_size > max_bytes:
        raise UnsafeFile(f"{path}: {st.st_size} bytes, over the limit of {max_bytes} for a "
                         f"{what}; refused before reading")


__all__ = ["UnsafeFile", "Refused", "open_regular", "regular_size"]
