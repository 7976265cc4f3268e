"""Atomic file writing: a file appears whole or not at all (temp file in the same folder,
then ``os.replace``), so a killed process never leaves a half-written figure, table,
checkpoint or cache file behind."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable


def atomic_write(path: str | os.PathLike, write: Callable[[str], object]) -> Path:
    """Call ``write(tmp_path)`` on a temporary file beside ``path``, then rename it into place.
    The temporary file is removed if ``write`` fails."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` atomically."""
    return atomic_write(path, lambda tmp: Path(tmp).write_text(text))


def write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically."""
    return atomic_write(path, lambda tmp: Path(tmp).write_bytes(data))


__all__ = ["atomic_write", "write_text", "write_bytes"]
