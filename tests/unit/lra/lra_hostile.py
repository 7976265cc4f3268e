"""Hostile and broken checkpoint files for the LRA reader's tests (builders only; the test
module and the measuring child process use them). Each builder writes one file and
returns its path; pickles are hand-assembled from opcodes where ``pickle`` itself would
recurse or refuse."""
from __future__ import annotations

import io
import pickle
import struct
import zipfile
from pathlib import Path

import torch
from torch import nn

# pickle opcodes used below (protocol 2)
PROTO2, STOP, MARK = b"\x80\x02", b".", b"("
EMPTY_DICT, EMPTY_LIST, EMPTY_TUPLE = b"}", b"]", b")"
SETITEMS, APPEND, TUPLE1, TUPLE2, REDUCE = b"u", b"a", b"\x85", b"\x86", b"R"
BINPUT0, BINGET0, POP = b"q\x00", b"h\x00", b"0"


def _str(s: str) -> bytes:
    b = s.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def _int1(v: int) -> bytes:
    return b"K" + bytes([v])


def checkpoint_pickle(hparams: bytes, state_dict: bytes = EMPTY_DICT) -> bytes:
    """{'state_dict': <state_dict>, 'hyper_parameters': <hparams>} as raw pickle bytes."""
    return (PROTO2 + EMPTY_DICT + MARK + _str("state_dict") + state_dict
            + _str("hyper_parameters") + hparams + SETITEMS + STOP)


def torch_zip(path: Path, data_pkl: bytes) -> Path:
    """A torch zip archive (records copied from a real torch.save) with ``data_pkl``."""
    buf = io.BytesIO()
    torch.save({}, buf)
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as src, \
            zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            data = data_pkl if info.filename.endswith("data.pkl") else src.read(info.filename)
            dst.writestr(info, data)
    return path


def shared_tuples(path: Path, levels: int) -> Path:
    """t_{i+1} = (t_i, t_i) through the memo: 5 bytes per level, 2^levels values when
    walked as a tree."""
    return torch_zip(path, checkpoint_pickle(EMPTY_TUPLE + (BINPUT0 + BINGET0 + TUPLE2) * levels))


def self_list(path: Path) -> Path:
    """l = [l]."""
    return torch_zip(path, checkpoint_pickle(EMPTY_LIST + BINPUT0 + BINGET0 + APPEND))


def deep_lists(path: Path, depth: int) -> Path:
    """[[[...]]] nested ``depth`` deep."""
    return torch_zip(path, checkpoint_pickle(EMPTY_LIST * (depth + 1) + APPEND * depth))


def reduce_admitted(path: Path, name: str = "omegaconf.nodes\nAnyNode") -> Path:
    """REDUCE (a call with arguments) on a name the safe reader admits as a stand-in."""
    return torch_zip(path, checkpoint_pickle(b"c" + name.encode() + b"\n" + _int1(1) + TUPLE1 + REDUCE))


def opcode(path: Path, op: bytes) -> Path:
    """A pickle with an opcode torch's weights-only unpickler does not support."""
    return torch_zip(path, checkpoint_pickle(op))


def many_ops(path: Path, n: int) -> Path:
    """n (EMPTY_LIST, POP) pairs: a small file that would build n objects."""
    return torch_zip(path, checkpoint_pickle(EMPTY_LIST + (POP + EMPTY_LIST) * n))


def big_pickle(path: Path, n_bytes: int) -> Path:
    return torch_zip(path, checkpoint_pickle(_str("x" * n_bytes)))


def deflate_bomb(path: Path, n_bytes: int = 1 << 30) -> Path:
    """A ~1 MB zip whose data.pkl record inflates to ``n_bytes`` zeros."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        zf.writestr("archive/version", b"3\n", compress_type=zipfile.ZIP_STORED)
        with zf.open("archive/data.pkl", "w", force_zip64=True) as f:
            chunk = bytes(1 << 24)
            for _ in range(n_bytes // len(chunk)):
                f.write(chunk)
    return path


def oversized_record(path: Path, claimed: int = 1 << 31) -> Path:
    """A stored zip whose central directory claims a 2 GiB data.pkl."""
    torch_zip(path, checkpoint_pickle(EMPTY_DICT))
    data = bytearray(path.read_bytes())
    i = data.find(b"PK\x01\x02")
    while i >= 0:
        name_len = struct.unpack("<H", data[i + 28:i + 30])[0]
        if bytes(data[i + 46:i + 46 + name_len]).endswith(b"data.pkl"):
            data[i + 20:i + 28] = struct.pack("<II", claimed, claimed)
        i = data.find(b"PK\x01\x02", i + 4)
    path.write_bytes(bytes(data))
    return path


def torchscript(path: Path) -> Path:
    torch.jit.save(torch.jit.script(nn.Linear(2, 2)), str(path))
    return path


def broadcast_tensor(path: Path) -> Path:
    """A one-element storage viewed as 10^9 elements (stride 0)."""
    torch.save({"state_dict": {"w": torch.zeros(1).expand(10 ** 9)}}, path)
    return path


def int_keys(path: Path) -> Path:
    torch.save({"state_dict": {0: torch.zeros(2)}}, path)
    return path


def pickled_code(path: Path) -> Path:
    """A legacy (non-zip) pickle that would call os.system."""
    path.write_bytes(b"\x80\x02cos\nsystem\nX\x04\x00\x00\x00true\x85R.")
    return path


HOSTILE = {  # name -> (builder, args): files read_checkpoint must refuse
    "shared_tuples_22kb": (shared_tuples, (4400,)),
    "shared_tuples_60": (shared_tuples, (60,)),
    "self_list": (self_list, ()),
    "deep_200k": (deep_lists, (200_000,)),
    "reduce_anynode": (reduce_admitted, ()),
    "reduce_typing_any": (reduce_admitted, ("typing\nAny",)),
    "opcode_inst": (opcode, (b"(ios\nsystem\n",)),
    "opcode_ext1": (opcode, (b"\x82\x01",)),
    "opcode_persid": (opcode, (b"P1\n",)),
    "many_ops_2m": (many_ops, (2_000_000,)),
    "pickle_9mb": (big_pickle, (9 << 20,)),
    "deflate_1gib": (deflate_bomb, ()),
    "oversized_record": (oversized_record, ()),
    "torchscript": (torchscript, ()),
    "broadcast_1e9": (broadcast_tensor, ()),
    "int_keys": (int_keys, ()),
    "legacy_os_system": (pickled_code, ()),
}


def build_all(directory: Path) -> dict[str, Path]:
    return {name: fn(directory / f"{name}.ckpt", *args) for name, (fn, args) in HOSTILE.items()}


__all__ = ["HOSTILE", "build_all", "checkpoint_pickle", "torch_zip", "pickle"]
