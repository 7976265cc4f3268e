"""The central directory of a zip archive, parsed here rather than trusted: the entries
actually present are counted (never the count the archive declares, which must agree), and
every record must be stored (torch never compresses), lie inside the file, carry its own
name and own its bytes (aliased or overlapping records are refused)."""
from __future__ import annotations

import struct
import zipfile
from dataclasses import dataclass

from toyspt.util.files import UnsafeFile


@dataclass(frozen=True)
class _Record:
    name: str
    start: int  # offset of the data in the file
    size: int


def read_at(f, offset: int, n: int) -> bytes:
    f.seek(offset)
    return f.read(n)


def zip_records(f, size: int, max_records: int, where: str) -> dict[str, _Record]:
    """The records present in the zip archive, parsed here from the central directory."""
    tail_len = min(size, 22 + 0xFFFF)
    tail = read_at(f, size - tail_len, tail_len)
    i = tail.rfind(b"PK\x05\x06")
    if i < 0 or len(tail) < i + 22:
        raise UnsafeFile(f"{where}: truncated or corrupt zip archive (no end-of-directory record)")
    _, _, _, declared, cd_size, cd_off, _ = struct.unpack("<HHHHIIH", tail[i + 4:i + 22])
    eocd = size - tail_len + i
    if 0xFFFF in (declared,) or 0xFFFFFFFF in (cd_size, cd_off):
        j = tail.rfind(b"PK\x06\x07", 0, i)
        rec = read_at(f, struct.unpack("<Q", tail[j + 8:j + 16])[0], 56) if j >= 0 else b""
        if rec[:4] != b"PK\x06\x06" or len(rec) < 56:
            raise UnsafeFile(f"{where}: truncated or corrupt zip archive (bad zip64 directory)")
        declared, cd_size, cd_off = struct.unpack("<QQQ", rec[32:56])
        eocd = size - tail_len + j
    if cd_off + cd_size > eocd:
        raise UnsafeFile(f"{where}: truncated or corrupt zip archive (its directory lies "
                         "beyond the file)")
    if cd_size > 4096 * (max_records + 1):
        raise UnsafeFile(f"{where}: the zip directory has {cd_size} bytes, more than "
                         f"{max_records} records need; refused before reading")
    cd = read_at(f, cd_off, cd_size)
    records: dict[str, _Record] = {}
    pos = 0
    while pos < len(cd):
        if len(records) >= max_records:
            raise UnsafeFile(f"{where}: the zip archive holds more than {max_records} "
                             "records (counted in its directory); refused before reading")
        if cd[pos:pos + 4] != b"PK\x01\x02" or pos + 46 > len(cd):
            raise UnsafeFile(f"{where}: truncated or corrupt zip archive (bad directory entry)")
        (flags, method, csize, usize, nlen, elen, clen, loff) = struct.unpack(
            "<2xHH8xIIHHH8xI", cd[pos + 6:pos + 46])
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
        head = read_at(f, loff, 30)
        if len(head) < 30 or head[:4] != b"PK\x03\x04":
            raise UnsafeFile(f"{where}: truncated or corrupt zip archive (record {name!r} has "
                             "no local header)")
        n2, e2 = struct.unpack("<HH", head[26:30])
        records[name] = _Record(name, loff + 30 + n2 + e2, usize)
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


__all__ = ["zip_records", "read_at"]
