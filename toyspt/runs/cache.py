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
its spec; a damaged entry is reported on stderr (one line: which entry, why) and dropped,
and the run recomputed. Any other failure to read (permissions, I/O errors) raises
:class:`CacheError`: it is reported, never "repaired" by deleting.
"""
from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path

import torch

from toyspt.runs.specs import Entry, Spec
from toyspt.util.hashing import digest, jsonable
from toyspt.util import safeload

DEFAULT_CACHE = Path(os.environ.get("TOYSPT_CACHE", ".cache/toyspt"))
FILES = ("spec.json", "result.json", "weights.pt")
STALE_TMP_SECONDS = 3600  # a temporary entry older than this (far longer than any run) is a killed writer's


class CacheError(OSError):
    """A cache entry or folder that cannot be read or written (not damage: nothing is deleted)."""


class Damaged(ValueError):
    """A cache entry whose files contradict each other or its key."""


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _mac(secret: bytes, key: str, name: str, sha: str) -> str:
    return hmac.new(secret, f"{key}\0{name}\0{sha}".encode(), hashlib.sha256).hexdigest()


class RunCache:
    """A directory of finished runs keyed by spec hash."""

    def __init__(self, root: str | os.PathLike = DEFAULT_CACHE):
        self.root = Path(root)
        self._secret: bytes | None = None

    def secret(self) -> bytes:
        """The cache's HMAC key (``<root>/.key``), made once, atomically, readable by its owner only."""
        if self._secret is None:
            path = self.root / ".key"
            if not path.exists():
                self.root.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(prefix=".tmp-key-", dir=self.root)
                try:
                    os.write(fd, secrets.token_hex(32).encode())
                    os.close(fd)
                    with contextlib.suppress(FileExistsError):  # another process made it first
                        os.link(tmp, path)
                finally:
                    os.unlink(tmp)
            text = path.read_text().strip()
            if len(text) != 64:
                raise CacheError(f"run cache {self.root}: its key file {path} is damaged "
                                 "(expected 64 hex digits); remove the cache folder to start anew")
            self._secret = text.encode()
        return self._secret

    def path(self, spec: Spec) -> Path:
        k = spec.key()
        return self.root / k[:2] / k

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

    def _read(self, d: Path, spec: Spec) -> Entry:
        """Read and verify one entry; :class:`Damaged` for damage, OSError for I/O trouble."""
        if d.is_symlink() or not d.is_dir():
            raise Damaged(f"{d} is not a directory")
        try:
            manifest = json.loads((d / "manifest.json").read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise Damaged(f"manifest does not parse: {e}") from None
        except FileNotFoundError:
            raise Damaged("no manifest") from None
        if not isinstance(manifest, dict) or sorted(manifest) != sorted(FILES):
            raise Damaged(f"manifest lists {sorted(manifest) if isinstance(manifest, dict) else manifest!r}, "
                          f"expected {sorted(FILES)}")
        key, secret = spec.key(), self.secret()
        for name, want in manifest.items():
            try:
                got = _mac(secret, key, name, _sha256(d / name))
            except FileNotFoundError:
                raise Damaged(f"{name} is missing") from None
            if not isinstance(want, str) or not hmac.compare_digest(got, want):
                raise Damaged(f"the keyed digest of {name} does not match (edited, moved from "
                              "another entry, or written without this cache's key)")
        try:
            stored = json.loads((d / "spec.json").read_text())
            res = json.loads((d / "result.json").read_text())
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

    def load(self, spec: Spec) -> Entry | None:
        """The cached result, or None when missing or damaged (a damaged entry is reported on
        stderr and removed; an unreadable one raises :class:`CacheError`)."""
        d = self.path(spec)
        try:
            ino = d.lstat().st_ino
        except FileNotFoundError:
            return None
        except OSError as e:
            raise CacheError(f"cannot read cache entry {d}: {e.strerror or e}") from None
        try:
            return self._read(d, spec)
        except Damaged as e:
            why = " ".join(str(e).split()).rstrip(".")
            print(f"toyspt: run cache: dropping damaged entry {d} ({spec.label()}): {why}; "
                  "the run will be recomputed", file=sys.stderr)
            with contextlib.suppress(OSError):  # unless another worker has just replaced it
                if d.lstat().st_ino == ino:
                    if d.is_symlink() or not d.is_dir():
                        d.unlink()
                    else:
                        shutil.rmtree(d)
            return None
        except OSError as e:
            raise CacheError(f"cannot read cache entry {d} ({spec.label()}): {e.strerror or e}") from None

    def store(self, spec: Spec, result: Entry) -> Path:
        """Write an entry atomically (temp dir + rename); a concurrent writer of the same
        spec loses the race harmlessly."""
        final = self.path(spec)
        final.parent.mkdir(parents=True, exist_ok=True)
        self.sweep_stale(final.parent)
        tmp = Path(tempfile.mkdtemp(prefix=_tmp_prefix(), dir=final.parent))
        try:
            (tmp / "spec.json").write_text(json.dumps(jsonable(spec.to_dict()), indent=1))
            (tmp / "result.json").write_text(json.dumps(jsonable(result.to_json())))
            torch.save(result.tensors(), tmp / "weights.pt")
            key, secret = spec.key(), self.secret()
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
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return final

    def remove(self, spec: Spec) -> None:
        """Drop the entry of ``spec`` (``--recompute``)."""
        d = self.path(spec)
        if d.is_symlink():
            d.unlink()
        elif d.exists():
            shutil.rmtree(d)

    @staticmethod
    def sweep_stale(folder: Path, age: float = STALE_TMP_SECONDS) -> None:
        """Remove temporary entries in ``folder`` left by killed writers: those of a process of
        this host that no longer runs, and any older than ``age`` seconds (writers elsewhere,
        e.g. dask workers on another host, cannot be asked whether they still run)."""
        now = time.time()
        for p in folder.glob(".tmp-*"):
            with contextlib.suppress(OSError):
                if _writer_gone(p.name) or now - p.lstat().st_mtime > age:
                    shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()


def _tmp_prefix() -> str:
    """``.tmp-<host>-<pid>-``: who is writing a temporary entry."""
    return f".tmp-{socket.gethostname().replace('-', '_')}-{os.getpid()}-"


def _writer_gone(name: str) -> bool:
    """Whether the temporary entry ``name`` was written by a process of this host that has ended."""
    parts = name.split("-")
    if len(parts) < 4 or parts[1] != socket.gethostname().replace("-", "_") or not parts[2].isdigit():
        return False
    try:
        os.kill(int(parts[2]), 0)
    except ProcessLookupError:
        return True
    except OSError:  # exists but not ours to signal
        return False
    return False


__all__ = ["RunCache", "CacheError", "DEFAULT_CACHE", "FILES"]
