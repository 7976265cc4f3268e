"""One bounded reader for untrusted ``torch.save`` files (LRA checkpoints, the run cache's
``weights.pt``): the file never runs its own budget.

Before torch (or pickle) hashes, builds or allocates anything, the reader

1. refuses anything but a regular file (``S_ISREG``: no FIFO, no ``/dev/zero``) and reads
   its size before its content (:func:`open_regular`);
2. parses the zip central directory itself (:mod:`toyspt.util.zipdir`, located as torch's
   reader locates it: zip64 and classic directories must agree) and counts the entries
   actually present (never the count the archive declares, which must agree with it): every
   record stored, inside the file, under its own name, over its own bytes (aliased or
   overlapping records refused) and not a case-twin of another, at most ``max_records``;
3. interprets the pickle's opcodes on *abstract* values (:mod:`toyspt.util.picklescan`),
   with the exact opcode set of torch's weights-only unpickler: each value carries its depth
   and its expanded size (a shared reference counted at every use, which is what hashing a
   tuple costs); refused beyond ``max_depth`` nesting, ``max_memo_gets`` shared references,
   a dict key or set item larger than ``max_key_nodes``, more than ``max_hashed`` values
   hashed or copied in all, or a global beyond the admitted names;
4. prices every tensor by what it would materialise: a storage once per distinct record,
   and the views on it by their own size (100 full views of one 4 MiB storage cost
   400 MiB), refusing more than ``alias_factor`` (4: three views of one storage are real
   files') x the file size (+ ``slack_bytes``) or
   ``max_bytes`` in all, and any view larger than its storage (a broadcast view).

Only then is ``torch.load(weights_only=True)`` handed a clean archive built from the scanned
records alone (the scanned pickle bytes, the storages it names, torch's version and
byte-order marks; storages read from the same open file as torch asks for them), so no
second directory, case-twin or unnamed record of the file can reach torch.
Every failure is one line: :class:`UnsafeFile`, or :class:`Refused` when the pickle asks for
something beyond tensors and the admitted names (nothing from the file ran).

The bounds (:class:`Budget`) are far above real files: a 6x512 LRA model with optimizer state
has ~10^4 opcodes, ~10^3 records, keys that are strings (one hashed node each) and nesting
~60 deep; ``max_bytes`` (2 GiB) is a tenth of this 23 GiB machine's memory, shared by its
users, and 10x the largest LRA checkpoint with optimizer state (~0.2 GB).
"""
from __future__ import annotations

import os
import pickle
import re
import struct
import zipfile
from typing import Any, Iterable

from toyspt.util.atomic import uninterrupted
from toyspt.util.files import Refused, UnsafeFile, open_regular
from toyspt.util.picklescan import BUDGET, Budget, scan_pickle
from toyspt.util.zipdir import Archive, clean_archive, read_at, zip_records


def check_file(f, size: int, where: str, budget: Budget = BUDGET,
               extra_globals: Iterable[str] = (), what: str = "torch file") -> Archive:
    """Every check of the module docstring on an open file of ``size`` bytes; returns the
    archive torch is handed: the scanned pickle bytes, the storage records it names and
    torch's version and byte-order marks, nothing else (:func:`toyspt.util.zipdir.clean_archive`)."""
    if size == 0:
        raise UnsafeFile(f"{where}: empty file, not a {what}")
    head = read_at(f, 0, 4)
    if head[:2] == b"PK":
        records = zip_records(f, size, budget.max_records, where)
        pkl = [n for n in records if n.endswith("/data.pkl") and n.count("/") == 1]
        if len(pkl) != 1:
            raise UnsafeFile(f"{where}: a zip archive but not a torch file ({len(pkl)} data.pkl)")
        rec, prefix = records[pkl[0]], pkl[0][:-len("data.pkl")]
        if rec.size > budget.max_pickle_bytes:
            raise UnsafeFile(f"{where}: its pickle ({rec.name}) has {rec.size} bytes, over the "
                             f"limit of {budget.max_pickle_bytes}; refused before unpickling")
        data = read_at(f, rec.start, rec.size)
        scan = scan_pickle(data, where, budget, extra_globals=extra_globals, records=records,
                           prefix=prefix, file_size=size)
        keep = [("archive/data.pkl", data)] + _marks(f, records, prefix, where)
        keep += [(f"archive/data/{key}", records[f"{prefix}data/{key}"]) for key in scan.storages]
        return clean_archive(f, keep, where)
    if head[:1] == b"\x80":  # a bare pickle or torch's legacy format: scanned for what it asks
        data = read_at(f, 0, min(size, budget.max_pickle_bytes))
        scan_pickle(data, where, budget, extra_globals=extra_globals, file_size=size)
        raise UnsafeFile(f"{where}: a legacy torch file (torch < 1.6 or "
                         "_use_new_zipfile_serialization=False); only torch zip archives are read")
    raise UnsafeFile(f"{where}: not a {what} (starts with {head!r}; expected a zip archive)")


# the small records torch reads besides the pickle and the storages: (the names it looks for,
# first found wins, as in torch's reader), what torch writes there
_MARKS = {"version": ((".data/version", "version"), rb"[0-9]{1,4}\n?"),
          "byteorder": (("byteorder",), rb"little|big")}


def _marks(f, records: dict, prefix: str, where: str) -> list[tuple[str, bytes]]:
    """Torch's version and byte-order records, each checked for its form."""
    out = []
    for mark, (names, form) in _MARKS.items():
        rec = next((records[prefix + n] for n in names if prefix + n in records), None)
        if rec is None:
            continue
        data = read_at(f, rec.start, min(rec.size, 64))
        if rec.size > 64 or not re.fullmatch(form, data):
            raise UnsafeFile(f"{where}: its {mark} record holds {data[:20]!r} ({rec.size} bytes), "
                             "not what torch writes there; refused")
        out.append((f"archive/{mark}", data))
    return out


def load(path: str | os.PathLike, *, what: str = "torch file", budget: Budget = BUDGET,
         safe_globals: Iterable[tuple[Any, str]] = (), trust: bool = False) -> Any:
    """Check ``path`` (every budget above), then ``torch.load`` the clean archive of its
    scanned records (read from the same open file) with the weights-only unpickler,
    admitting ``safe_globals`` ((object, full name) pairs) besides torch's own.
    ``trust=True`` checks the archive and the pickle's size only and then runs the pickle
    (``weights_only=False``): for files whose origin is trusted."""
    import torch  # keeps this module importable without torch

    where = os.fspath(path)
    pairs = list(safe_globals)
    archive = None
    f, size = open_regular(where, what)
    with f:
        if trust:
            if read_at(f, 0, 2) == b"PK":
                zip_records(f, size, budget.max_records, where)
            f.seek(0)
        else:
            archive = check_file(f, size, where, budget, [name for _, name in pairs], what)
        try:
            with uninterrupted():  # Ctrl-C inside torch's read callbacks would come out as damage
                if trust:
                    return torch.load(f, map_location="cpu", weights_only=False)
                with torch.serialization.safe_globals(pairs):
                    return torch.load(archive, map_location="cpu", weights_only=True)
        except (UnsafeFile, pickle.UnpicklingError, ModuleNotFoundError, TypeError, EOFError,
                zipfile.BadZipFile, RuntimeError, ValueError, IndexError, KeyError, AttributeError,
                OverflowError, MemoryError, RecursionError, struct.error) as e:
            if archive is not None and archive.fault:  # the file changed under torch's reads
                raise UnsafeFile(archive.fault) from None
            raise _one_line(e, where, what) from None


def _one_line(e: Exception, where: str, what: str) -> UnsafeFile:
    """What went wrong inside ``torch.load``, as one line naming the file."""
    if isinstance(e, UnsafeFile):  # raised by an admitted stand-in during unpickling
        return UnsafeFile(str(e) if str(e).startswith(f"{where}: ") else f"{where}: {e}")
    if isinstance(e, pickle.UnpicklingError):
        return Refused(f"{where}: refused by torch's weights-only unpickler: {' '.join(str(e).split())[:300]}")
    if isinstance(e, ModuleNotFoundError):
        return UnsafeFile(f"{where}: trusted loading needs the module {e.name!r} (pip install {e.name})")
    if isinstance(e, TypeError):
        return UnsafeFile(f"{where}: malformed pickle: it applies an admitted name in a way no "
                          f"checkpoint does ({e})")
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return UnsafeFile(f"{where}: truncated or corrupt {what} ({type(e).__name__}: {first})")


__all__ = ["UnsafeFile", "Refused", "Budget", "BUDGET", "open_regular", "check_file",
           "load"]
