"""The run cache: finished entries on disk (training runs, and whatever else a spec
computes: :class:`toyspt.runs.specs.Entry`), keyed by spec hash.

An entry ``<root>/<key[:2]>/<key>/`` holds ``spec.json`` (the spec's ``to_dict``),
``result.json`` (the entry's JSON: a run's history, summary, tracker records, configs),
``weights.pt`` (its tensors only)
and ``manifest.json``: for each of those three, an HMAC-SHA256, under the cache's own secret
key (``<root>/.key``, random, made on first use, mode 0600), of the entry's key, the file's
name and its sha256 -- so a manifest recomputed by anyone without the key does not validate,
and a file moved to another entry does not either. An entry is written in a temporary
directory and renamed into place, so a killed run leaves no half entry. On load, an entry is
*damaged* when its manifest does not list exactly those three files with valid digests,
when a file does not parse (``weights.pt`` is read by the project's one bounded reader,
:mod:`toyspt.util.safeload`, so a code-running pickle is refused, never run), when its
stored spec does not hash to its key, or when its result names another recipe or seed than
its spec; every file is checked to be a regular file of a bounded size before it is read
(a FIFO, a link to ``/dev/zero`` or a sparse 32 GB file is damage, not a hang). A damaged
entry is reported on stderr (one line: which entry, why) and set aside, never deleted: moved
to ``<root>/.damaged/<key>-<n>`` with the reason in ``<key>-<n>.why``; the run is recomputed.
Where ``.damaged`` cannot be used (a file, a link loop), that is one more line on stderr and the
entry is set aside beside itself (``<root>/<key[:2]>/.damaged-<key>-<n>``): the new entry is
stored all the same.
Any other failure to read (permissions, I/O errors) raises :class:`CacheError`: it is
reported, never "repaired". The key is the cache's: 64 hex digits, in either case (one key);
a key file that is not a regular file of 64 hex digits, or a missing key beside existing
entries (a cache copied without its hidden ``.key``), is refused in one line, nothing set
aside or retrained. A disk fault while storing (full, read-only, I/O error) is one
:class:`CacheError` naming the entry; the half-written entry is removed, the runs already
stored stay.
"""
from __future__ import annotations

import contextlib
import errno
import hmac
import json
import os
import re
import secrets
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch

from toyspt.runs.cache_files import (
    FILES,
    MAX_BYTES,
    STALE_TMP_SECONDS,
    Damaged,
    _mac,
    _move_aside,
    _read_text,
    _sha256,
    _tmp_prefix,
    _writer_gone,
)
from toyspt.runs.specs import Entry, Spec
from toyspt.util import safeload
from toyspt.util.atomic import disk_fault
from toyspt.util.files import UnsafeFile, open_regular
from toyspt.util.hashing import digest, jsonable

DEFAULT_CACHE = Path(os.environ.get("TOYSPT_CACHE", ".cache/toyspt"))
class CacheError(OSError):
    """A cache entry or folder that cannot be read or written (not damage: nothing is deleted)."""


class RunCache:
    """A directory of finished runs keyed by spec hash: a store (:class:`toyspt.runs.store.Store`)
    that covers every spec and keeps weights."""

    name = "cache"
    keeps_weights = True

    def __init__(self, root: str | os.PathLike = DEFAULT_CACHE):
        if not str(root).strip():  # Path("") is the current folder
            raise ValueError("run cache: an empty path; name the run cache's folder")
        self.root = Path(root)
        self._secret: bytes | None = None

    def secret(self) -> bytes:
        """The cache's HMAC key (``<root>/.key``, 64 hex digits), made once, atomically,
        readable by its owner only, and only in a cache that holds no entries yet: entries
        without their key are refused, never re-keyed (that would drop every run)."""
        if self._secret is None:
            path = self.root / ".key"
            restore = (f"restore the key from where the cache came from (cp SRC/.key {path}) or start a "
                       "new cache in an empty folder; nothing was set aside or retrained")
            try:
                if not os.path.lexists(path):
                    if self._has_entries():
                        raise CacheError(f"run cache {self.root} holds runs but no key file {path} "
                                         f"(copied without it? cp -r SRC/* skips it): {restore}")
                    self._make_key(path)
                f, _ = open_regular(path, "cache key file", MAX_BYTES[".key"])
                with f:
                    text = f.read(MAX_BYTES[".key"]).decode("ascii", "replace").strip()
            except UnsafeFile as e:
                raise CacheError(f"run cache {self.root}: {e}; {restore}") from None
            except CacheError:
                raise
            except OSError as e:
                raise CacheError(f"run cache {self.root}: cannot make its key file {path}: "
                                 f"{disk_fault(e)}") from None
            if not re.fullmatch(r"[0-9a-fA-F]{64}", text):
                raise CacheError(f"run cache {self.root}: its key file {path} is damaged (expected "
                                 f"64 hex digits); {restore}")
            self._secret = text.lower().encode()  # the key is the number: its hex digits' case is not
        return self._secret

    def _make_key(self, path: Path) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-key-", dir=self.root)
        try:
            os.write(fd, secrets.token_hex(32).encode())
            os.close(fd)
            with contextlib.suppress(FileExistsError):  # another process made it first
                os.link(tmp, path)
        finally:
            os.unlink(tmp)

    def _has_entries(self) -> bool:
        """Whether any entry ``<root>/<xx>/<key>`` is present (stops at the first)."""
        try:
            with os.scandir(self.root) as top:
                for d in top:
                    if len(d.name) == 2 and d.is_dir(follow_symlinks=False):
                        with os.scandir(d.path) as inner:
                            if any(not e.name.startswith(".") for e in inner):
                                return True
        except (FileNotFoundError, NotADirectoryError):
            pass
        return False

    def path(self, spec: Spec) -> Path:
        k = spec.key()
        return self.root / k[:2] / k

    def covers(self, spec: Spec) -> bool:
        return True

    def provenance(self, spec: Spec) -> None:
        return None

    def has(self, spec: Spec) -> bool:
        return self.load(spec) is not None

    def check_writable(self) -> None:
        """Raise :class:`CacheError` now if runs could not be stored (before any training)."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(prefix=".tmp-probe-", dir=self.root):
                pass
        except OSError as e:
            raise CacheError(f"run cache {self.root} is not writable: {e.strerror or e}") from None
        self.secret()  # a cache copied without its key is refused before anything trains

    def _read(self, d: Path, spec: Spec) -> Entry:
        """Read and verify one entry; :class:`Damaged` for damage, OSError for I/O trouble."""
        if d.is_symlink() or not d.is_dir():
            raise Damaged(f"{d} is not a directory")
        try:
            manifest = json.loads(_read_text(d / "manifest.json"))
        except (ValueError, RecursionError) as e:  # not UTF-8, not JSON, nested too deep, a 5000-digit number
            why = "nested too deep" if isinstance(e, RecursionError) else e
            raise Damaged(f"manifest does not parse: {why}") from None
        if not isinstance(manifest, dict) or sorted(manifest) != sorted(FILES):
            raise Damaged(f"manifest lists {sorted(manifest) if isinstance(manifest, dict) else manifest!r}, "
                          f"expected {sorted(FILES)}")
        key, secret = spec.key(), self.secret()
        for name, want in manifest.items():
            got = _mac(secret, key, name, _sha256(d / name))
            if not isinstance(want, str) or not hmac.compare_digest(got, want):
                raise Damaged(f"the keyed digest of {name} does not match (edited, moved from "
                              "another entry, or written without this cache's key)")
        try:
            stored = json.loads(_read_text(d / "spec.json"))
            res = json.loads(_read_text(d / "result.json"))
            states = safeload.load(d / "weights.pt", what="cache weights file")
        except safeload.UnsafeFile as e:
            raise Damaged(str(e)) from None
        except (ValueError, RecursionError) as e:  # parse errors
            raise Damaged(f"unreadable content: {e}") from None
        if digest(type(spec).identity_of(stored)) != key:
            raise Damaged("its stored spec does not hash to its key")
        if not isinstance(res, dict) or not isinstance(stored, dict):
            raise Damaged("spec.json or result.json is not an object")
        for field in ("recipe", "seed"):
            if field in stored and field in res and res[field] != stored[field]:
                raise Damaged(f"its result.json says {field} {res.get(field)!r} but its spec says "
                              f"{stored[field]!r}")
        try:
            return spec.result_type.from_stored(res, states)
        except (KeyError, TypeError) as e:
            raise Damaged(f"result.json lacks {e}") from None

    def load(self, spec: Spec, weights: bool = False) -> Entry | None:
        """The cached result (always with its weights), or None when missing or damaged (a damaged entry is reported on
        stderr and set aside; an unreadable one, or a missing or damaged key, raises
        :class:`CacheError`)."""
        d = self.path(spec)
        try:
            ino = d.lstat().st_ino
        except FileNotFoundError:
            return None
        except OSError as e:
            raise CacheError(f"cannot read cache entry {d}: {e.strerror or e}") from None
        self.secret()  # a missing or damaged key is the cache's fault, not this entry's
        try:
            return self._read(d, spec)
        except Damaged as e:
            why = " ".join(str(e).split()).rstrip(".")
            aside = self._set_aside(d, ino, spec.key(), why)
            where = f"set aside in {aside}" if aside else "left in place (it changed meanwhile, or cannot be moved)"
            print(f"toyspt: run cache: damaged entry {d} ({spec.label()}): {why}; {where}; the run "
                  "will be recomputed", file=sys.stderr)
            return None
        except OSError as e:
            raise CacheError(f"cannot read cache entry {d} ({spec.label()}): {e.strerror or e}") from None

    def _set_aside(self, d: Path, ino: int, key: str, why: str) -> Path | None:
        """Move a damaged entry to ``<root>/.damaged/<key>-<n>``, its reason in ``<key>-<n>.why``
        (what cannot be verified is never deleted). When that folder cannot be used (a file, a
        symbolic link loop, not writable) the failure is named on stderr and the entry is set aside
        beside itself, as ``<root>/<key[:2]>/.damaged-<key>-<n>``, so that a new entry can take its
        place. None if another worker has just replaced it or it cannot be moved at all."""
        try:
            if d.lstat().st_ino != ino:
                return None
        except OSError:
            return None
        aside = self.root / ".damaged"
        try:
            aside.mkdir(exist_ok=True)
            if aside.is_symlink() or not aside.is_dir():
                raise NotADirectoryError(errno.ENOTDIR, "not a directory")
            return _move_aside(d, aside, key, why)
        except OSError as e:
            beside = _move_aside(d, d.parent, f".damaged-{key}", why, quiet=True)
            where = f"set aside beside it as {beside}" if beside else "left in place"
            print(f"toyspt: run cache: cannot set aside damaged entry {d} in {aside} ({disk_fault(e) or e}); "
                  f"{where}", file=sys.stderr)
            return beside

    def store(self, spec: Spec, result: Entry) -> Path:
        """Write an entry atomically (temp dir + rename); a concurrent writer of the same
        spec loses the race harmlessly. A disk fault is one :class:`CacheError` naming the
        entry, the half-written one removed."""
        final = self.path(spec)
        key, secret = spec.key(), self.secret()
        tmp = None
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            self.sweep_stale(final.parent)
            tmp = Path(tempfile.mkdtemp(prefix=_tmp_prefix(), dir=final.parent))
            (tmp / "spec.json").write_text(json.dumps(jsonable(spec.to_dict()), indent=1))
            (tmp / "result.json").write_text(json.dumps(jsonable(result.to_json())))
            torch.save(result.tensors(), tmp / "weights.pt")
            manifest = {n: _mac(secret, key, n, _sha256(tmp / n)) for n in FILES}
            (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1))
            for _ in range(5):  # another worker may be writing or dropping the same entry
                try:
                    os.rename(tmp, final)
                    break
                except OSError:  # already there (another worker): keep theirs if it is sound
                    if self.load(spec) is not None:
                        break
            else:
                raise CacheError(f"could not place cache entry {final}")
        except CacheError:
            raise
        except (OSError, RuntimeError) as e:
            why = disk_fault(e)
            if why is None:
                raise
            raise CacheError(f"run cache: cannot store {spec.label()} in {final}: {why}; nothing "
                             "half-written is left, the runs already stored are kept") from None
        finally:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
        return final

    def remove(self, spec: Spec) -> None:
        """Drop the entry of ``spec`` (``--recompute``); not in a cache whose key is missing."""
        self.secret()
        d = self.path(spec)
        if d.is_symlink():
            d.unlink()
        elif d.exists():
            shutil.rmtree(d)

    @staticmethod
    def sweep_stale(folder: Path, age: float = STALE_TMP_SECONDS) -> None:
        """Remove temporary entries in ``folder`` left by killed writers: those of a process of
        this host and PID namespace that no longer runs, and any older than ``age`` seconds
        (writers elsewhere, e.g. dask workers on another host or a container sharing the cache,
        cannot be asked whether they still run: only age removes theirs)."""
        now = time.time()
        for p in folder.glob(".tmp-*"):
            with contextlib.suppress(OSError):
                if _writer_gone(p.name) or now - p.lstat().st_mtime > age:
                    shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()


__all__ = ["RunCache", "CacheError", "DEFAULT_CACHE", "FILES"]
