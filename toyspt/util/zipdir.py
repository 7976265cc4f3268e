"""The central directory of a zip archive, parsed here rather than trusted, and the clean
archive torch is handed instead of the file.

Parsing: the directory is located as torch's zip reader (miniz) locates it (the zip64 end
record whenever its locator sits just before the classic one, as ``torch.save`` writes
both; the two must agree); the entries actually present are counted (never the count the
archive declares, which must agree); every record must be stored (torch never compresses),
lie inside the file, carry its own name, own its bytes (aliased or overlapping records are
refused) and differ from every other name by more than case (torch looks names up
case-insensitively).

Handing over: :func:`clean_archive` assembles a new archive from the scanned records only
(the scanned pickle bytes, the storage records the pickle names, torch's version and
byte-order marks), so whatever else the file holds -- a second directory, a record that
differs in case, a record no one names -- never reaches torch."""
from __future__ import annotations

import bisect
import io
import struct
import zipfile
import zlib
from dataclasses import dataclass

from toyspt.util.files import UnsafeFile


@dataclass(frozen=True)
class _Record:
    name: str
    start: int  # offset of the data in the file
    size: int
    crc: int = 0  # CRC-32 the directory declares (copied into the clean archive)


def read_at(f, offset: int, n: int) -> bytes:
    f.seek(offset)
    return f.read(n)


def _directory(f, size: int, where: str) -> tuple[int, int, int, int]:
    """(declared entries, directory size, directory offset, where the end records start),
    read as miniz reads them: from the zip64 end record whenever its locator sits just before
    the classic end record; the classic values must then agree with it (or be saturated)."""
    tail_len = min(size, 22 + 0xFFFF)
    tail = read_at(f, size - tail_len, tail_len)
    i = tail.rfind(b"PK\x05\x06")
    if i < 0 or len(tail) < i + 22:
        raise UnsafeFile(f"{where}: truncated or corrupt zip archive (no end-of-directory record)")
    _, _, _, declared, cd_size, cd_off, _ = struct.unpack("<HHHHIIH", tail[i + 4:i + 22])
    classic = (declared, cd_size, cd_off)
    eocd = size - tail_len + i
    if i >= 20 and tail[i - 20:i - 16] == b"PK\x06\x07":
        rec = read_at(f, struct.unpack("<Q", tail[i - 12:i - 4])[0], 56)
        if rec[:4] != b"PK\x06\x06" or len(rec) < 56:
            raise UnsafeFile(f"{where}: truncated or corrupt zip archive (bad zip64 directory)")
        declared, cd_size, cd_off = struct.unpack("<QQQ", rec[32:56])
        for name, old, new, full in zip(("entry count", "directory size", "directory offset"),
                                        classic, (declared, cd_size, cd_off),
                                        (0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF)):
            if old not in (new, full):
                raise UnsafeFile(f"{where}: its zip64 and classic directories disagree ({name} "
                                 f"{new} vs {old}); torch's reader would use the zip64 one, so "
                                 "the archive is refused before reading")
        eocd = size - tail_len + i - 20
    elif 0xFFFF in classic[:1] or 0xFFFFFFFF in classic[1:]:
        raise UnsafeFile(f"{where}: truncated or corrupt zip archive (zip64 sizes without a "
                         "zip64 directory)")
    return declared, cd_size, cd_off, eocd


def zip_records(f, size: int, max_records: int, where: str) -> dict[str, _Record]:
    """The records present in the zip archive, parsed here from the central directory."""
    declared, cd_size, cd_off, eocd = _directory(f, size, where)
    if cd_off + cd_size > eocd:
        raise UnsafeFile(f"{where}: truncated or corrupt zip archive (its directory lies "
                         "beyond the file)")
    if cd_size > 4096 * (max_records + 1):
        raise UnsafeFile(f"{where}: the zip directory has {cd_size} bytes, more than "
                         f"{max_records} records need; refused before reading")
    cd = read_at(f, cd_off, cd_size)
    records: dict[str, _Record] = {}
    folded: dict[str, str] = {}
    pos = 0
    while pos < len(cd):
        if len(records) >= max_records:
            raise UnsafeFile(f"{where}: the zip archive holds more than {max_records} "
                             "records (counted in its directory); refused before reading")
        if cd[pos:pos + 4] != b"PK\x01\x02" or pos + 46 > len(cd):
            raise UnsafeFile(f"{where}: truncated or corrupt zip archive (bad directory entry)")
        (flags, method, crc, csize, usize, nlen, elen, clen, loff) = struct.unpack(
            "<2xHH4xIIIHHH8xI", cd[pos + 6:pos + 46])
        name = cd[pos + 46:pos + 46 + nlen].decode("utf-8", "replace")
        extra = cd[pos + 46 + nlen:pos + 46 + nlen + elen]
        pos += 46 + nlen + elen + clen
        usize, csize, loff = _zip64(extra, usize, csize, loff)
        if name.endswith("/constants.pkl") or "/code/" in name:
            raise UnsafeFile(f"{where}: a TorchScript archive (torch.jit.save: compiled code and "
                             "constants), not a file written by torch.save")
        if method != zipfile.ZIP_STORED:
            raise UnsafeFile(f"{where}: record {name!r} is compressed (zip method {method}, "
                             f"{csize} -> {usize} bytes); torch never compresses records, so "
                             "this one is refused before reading")
        if usize > size or csize != usize or flags & 1:
            raise UnsafeFile(f"{where}: record {name!r} declares {usize} bytes in a file of "
                             f"{size} bytes; refused before reading")
        if name in records:
            raise UnsafeFile(f"{where}: the zip archive holds two records named {name!r}")
        twin = folded.setdefault(name.lower(), name)
        if twin != name:
            raise UnsafeFile(f"{where}: records {twin!r} and {name!r} differ only in case; torch "
                             "looks names up case-insensitively, so it could read either; refused")
        head = read_at(f, loff, 30)
        if len(head) < 30 or head[:4] != b"PK\x03\x04":
            raise UnsafeFile(f"{where}: truncated or corrupt zip archive (record {name!r} has "
                             "no local header)")
        n2, e2 = struct.unpack("<HH", head[26:30])
        records[name] = _Record(name, loff + 30 + n2 + e2, usize, crc)
    if len(records) != declared:
        raise UnsafeFile(f"{where}: the zip archive declares {declared} records but its "
                         f"directory holds {len(records)}; refused before reading")
    spans = sorted((r.start, r.start + r.size, r.name) for r in records.values())
    for (s0, e0, n0), (s1, _, n1) in zip(spans, spans[1:]):
        if s1 < e0:
            raise UnsafeFile(f"{where}: records {n0!r} and {n1!r} overlap (aliased zip "
                             "records); refused before reading")
    if spans and spans[-1][1] > cd_off:
        raise UnsafeFile(f"{where}: record {spans[-1][2]!r} runs past the archive's data; "
                         "truncated or corrupt")
    return records


def _zip64(extra: bytes, usize: int, csize: int, loff: int) -> tuple[int, int, int]:
    p = 0
    while p + 4 <= len(extra):
        tag, n = struct.unpack("<HH", extra[p:p + 4])
        if tag == 1:
            vals = list(struct.unpack(f"<{n // 8}Q", extra[p + 4:p + 4 + 8 * (n // 8)]))
            if usize == 0xFFFFFFFF and vals:
                usize = vals.pop(0)
            if csize == 0xFFFFFFFF and vals:
                csize = vals.pop(0)
            if loff == 0xFFFFFFFF and vals:
                loff = vals.pop(0)
        p += 4 + n
    return usize, csize, loff


class Archive(io.RawIOBase):
    """A read-only file assembled from parts: bytes held here, or records of an open file
    read when asked for (so a large checkpoint is never copied whole into memory). A record
    the file no longer holds whole is a short read, and ``fault`` says why (an exception
    raised inside torch's reader would come out as another)."""

    def __init__(self, f, parts: list, where: str):
        self._f, self._where, self._pos, self.fault = f, where, 0, ""
        self._parts = [p for p in parts if (len(p) if isinstance(p, bytes) else p.size)]
        self._starts, at = [], 0
        for p in self._parts:
            self._starts.append(at)
            at += len(p) if isinstance(p, bytes) else p.size
        self._size = at

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._pos = max(0, offset + (0, self._pos, self._size)[whence])
        return self._pos

    def readinto(self, b) -> int:
        view, done = memoryview(b).cast("B"), 0
        while done < len(view) and self._pos < self._size:
            i = bisect.bisect_right(self._starts, self._pos) - 1
            part, off = self._parts[i], self._pos - self._starts[i]
            n = min(len(view) - done, (len(part) if isinstance(part, bytes) else part.size) - off)
            if isinstance(part, bytes):
                view[done:done + n] = part[off:off + n]
            else:
                self._f.seek(part.start + off)
                got = self._f.readinto(view[done:done + n]) or 0
                if got != n:
                    self.fault = (f"{self._where}: the file changed while being read (record "
                                  f"{part.name!r} is shorter than its directory says)")
                    return done + got
            done, self._pos = done + n, self._pos + n
        return done


def clean_archive(f, records: list[tuple[str, bytes | _Record]], where: str) -> Archive:
    """A stored zip archive holding exactly ``records`` ((name, bytes or a record of ``f``)),
    laid out as torch writes one (data 64-byte aligned, one classic directory)."""
    parts, central, pos = [], [], 0
    for name, src in records:
        raw = name.encode()
        size = len(src) if isinstance(src, bytes) else src.size
        crc = zlib.crc32(src) if isinstance(src, bytes) else src.crc
        pad = -(pos + 30 + len(raw) + 4) % 64
        extra = struct.pack("<HH", 0x4246, pad) + bytes(pad)  # torch's "FB" padding field
        head = struct.pack("<4s5H3I2H", b"PK\x03\x04", 20, 0, 0, 0, 0x21, crc, size, size,
                           len(raw), len(extra)) + raw + extra
        central.append(struct.pack("<4s6H3I5HII", b"PK\x01\x02", 20, 20, 0, 0, 0, 0x21, crc, size,
                                   size, len(raw), 0, 0, 0, 0, 0, pos) + raw)
        parts += [head, src]
        pos += len(head) + size
    cd = b"".join(central)
    if pos + len(cd) > 0xFFFFFFFF:
        raise UnsafeFile(f"{where}: its records hold more than 4 GiB; not read")
    end = struct.pack("<4s4H2IH", b"PK\x05\x06", 0, 0, len(records), len(records), len(cd), pos, 0)
    return Archive(f, parts + [cd + end], where)


__all__ = ["zip_records", "read_at", "clean_archive", "Archive"]
