"""Reading untrusted files safely, step one: refuse anything but a regular file by its
``stat`` (a folder, FIFO, ``/dev/zero``, socket) and read its size before its content, so a
file argument can neither block the reader nor feed it without end. Every failure is one
line, :class:`UnsafeFile`, naming the file.

Every file the project reads goes through :func:`open_regular` with a size bound: the run
cache's entries and key (:mod:`toyspt.runs.cache`), ``torch.save`` files
(:mod:`toyspt.util.safeload`), UCR data files (:mod:`toyspt.ucr.read`, streamed), and small
text and JSON files whole (:func:`read_bounded`, :func:`read_json_object`: ``metadata.json``
under ``--out``, the CSVs of ``--compare-to``)."""
from __future__ import annotations

import json
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


def read_bounded(path: str | os.PathLike, what: str, max_bytes: int) -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` (checked by ``stat`` before any
    read, and again by reading at most one byte more: a file that grows is refused)."""
    f, _ = open_regular(path, what, max_bytes)
    with f:
        try:
            data = f.read(max_bytes + 1)
        except OSError as e:
            raise UnsafeFile(f"{os.fspath(path)}: cannot read the {what}: {e.strerror or e}") from None
    if len(data) > max_bytes:
        raise UnsafeFile(f"{os.fspath(path)}: grew past the limit of {max_bytes} bytes for a {what} while read")
    return data


def read_json_object(path: str | os.PathLike, what: str, max_bytes: int = 16 << 20) -> dict:
    """A JSON object read by :func:`read_bounded`; UTF-8 that is not JSON (a merge conflict),
    JSON that is not an object (``[]``) or nests too deep is one :class:`UnsafeFile` naming the file."""
    where = os.fspath(path)
    data = read_bounded(path, what, max_bytes)
    try:
        value = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise UnsafeFile(f"{where}: byte {e.start} is not UTF-8 text; not a {what}") from None
    except json.JSONDecodeError as e:
        raise UnsafeFile(f"{where}: not JSON ({e.msg} at line {e.lineno} column {e.colno}); not a {what}") from None
    except RecursionError:
        raise UnsafeFile(f"{where}: JSON nested too deep; not a {what}") from None
    if not isinstance(value, dict):
        raise UnsafeFile(f"{where}: holds a JSON {type(value).__name__}, not an object; not a {what}")
    return value


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


__all__ = ["UnsafeFile", "Refused", "open_regular", "regular_size", "read_bounded", "read_json_object"]
