"""Zip surgery on real ``torch.save`` archives, for the reader's tests: archives that show one
pickle to a reader of the classic directory or of exact names, and another to torch's zip
reader."""
import io
import pickle
import struct
import zipfile
import zlib

import torch


def _pkl_name(data: bytes) -> str:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return next(n for n in z.namelist() if n.endswith("/data.pkl"))


def second_directory(data: bytes, hidden: bytes) -> bytes:
    """``data`` plus a record holding the pickle ``hidden`` and a second central directory in
    which data.pkl is that record, reached through the zip64 end record (which torch's reader
    follows whenever its locator precedes the classic end record); the classic end record
    still points at the original directory."""
    e = data.rfind(b"PK\x05\x06")
    count, cd_size, cd_off = struct.unpack("<HII", data[e + 10:e + 20])
    cd, body = data[cd_off:cd_off + cd_size], data[:cd_off]
    name = _pkl_name(data).encode()
    crc, n = zlib.crc32(hidden), len(hidden)
    local = struct.pack("<4s5H3I2H", b"PK\x03\x04", 20, 0, 0, 0, 0x21, crc, n, n, len(name), 0) + name
    cd2, i = bytearray(cd), 0
    while i < len(cd2):
        nlen, elen, clen = struct.unpack("<HHH", cd2[i + 28:i + 34])
        if bytes(cd2[i + 46:i + 46 + nlen]) == name:
            cd2[i + 16:i + 28] = struct.pack("<III", crc, n, n)
            cd2[i + 42:i + 46] = struct.pack("<I", len(body))
        i += 46 + nlen + elen + clen
    c1 = len(body) + len(local) + n
    c2 = c1 + len(cd)
    z64 = struct.pack("<4sQHHIIQQQQ", b"PK\x06\x06", 44, 45, 45, 0, 0, count, count, len(cd2), c2)
    locator = struct.pack("<4sIQI", b"PK\x06\x07", 0, c2 + len(cd2), 1)
    end = struct.pack("<4s4H2IH", b"PK\x05\x06", 0, 0, count, count, len(cd), c1, 0)
    return body + local + hidden + cd + bytes(cd2) + z64 + locator + end


def _with_twin(data: bytes, hidden: bytes, last: bool, pad: int) -> bytes:
    name = _pkl_name(data)
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
        if not last:
            dst.writestr(name.replace("data.pkl", "Data.pkl"), hidden)
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info.filename))
        for i in range(pad):  # unnamed records that move where the binary search lands
            dst.writestr(name.replace("data.pkl", f"pad{i}"), b"")
        if last:
            dst.writestr(name.replace("data.pkl", "Data.pkl"), hidden)
    return out.getvalue()


def case_twin(data: bytes, hidden: bytes) -> bytes:
    """``data`` rewritten with a record ``<prefix>/Data.pkl`` holding ``hidden`` beside the
    original ``<prefix>/data.pkl``, placed (first or last, after a few empty records) where
    torch's reader finds it (it looks names up case-insensitively, by binary search over the
    sorted names): found with a harmless marker pickle, so ``hidden`` itself never runs here."""
    marker = pickle.dumps("twin", protocol=2)
    for pad in range(8):
        for last in (True, False):
            if torch.load(io.BytesIO(_with_twin(data, marker, last, pad)), weights_only=True) == "twin":
                return _with_twin(data, hidden, last, pad)
    raise AssertionError("torch's reader finds the original data.pkl in every layout tried")


def data_pkl(data: bytes) -> bytes:
    """The pickle of a torch.save archive."""
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return z.read(_pkl_name(data))
