"""Hostile and broken checkpoint files for the LRA reader's tests (builders only; the test
module and the measuring child process use them). Each builder writes one file and
returns its path; pickles are hand-assembled from opcodes where ``pickle`` itself would
recurse or refuse."""
from __future__ import annotations

import io
import pickle
import struct
import zipfile
from collections import OrderedDict
from pathlib import Path

import torch
from torch import nn

from helpers import zipcraft

# pickle opcodes used below (protocol 2)
PROTO2, STOP, MARK = b"\x80\x02", b".", b"("
EMPTY_DICT, EMPTY_LIST, EMPTY_TUPLE = b"}", b"]", b")"
SETITEMS, APPEND, TUPLE1, TUPLE2, REDUCE, BUILD = b"u", b"a", b"\x85", b"\x86", b"R", b"b"
BINPUT0, BINGET0, POP = b"q\x00", b"h\x00", b"0"
BINPUT1, BINGET1 = b"q\x01", b"h\x01"


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
    """n (EMPTY_LIST, APPEND) pairs: a small file that would build n objects."""
    return torch_zip(path, checkpoint_pickle(EMPTY_LIST + (EMPTY_LIST + APPEND) * n))


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


def key_of(path: Path, key: bytes) -> Path:
    """A checkpoint whose top-level dict has ``key`` (raw pickle of a tuple) as a key."""
    return torch_zip(path, PROTO2 + EMPTY_DICT + key + _int1(0) + b"s" + STOP)


def shared_key(path: Path, levels: int) -> Path:
    """A dict key t_levels, t_{i+1} = (t_i, t_i) via the memo: hashing it visits 2^levels nodes."""
    return key_of(path, EMPTY_TUPLE + (BINPUT0 + BINGET0 + TUPLE2) * levels)


def deep_key(path: Path, depth: int) -> Path:
    """A dict key that is a tuple nested ``depth`` deep (hashing it recurses in C)."""
    return key_of(path, EMPTY_TUPLE + TUPLE1 * depth)


class _Storage:
    def __init__(self, key: str, numel: int):
        self.key, self.numel = key, numel


class _View:
    """Pickles as torch's tensor rebuild over ``storage`` (no memory of its own)."""

    def __init__(self, storage: _Storage, shape: tuple, stride: tuple):
        self.storage, self.shape, self.stride = storage, shape, stride

    def __reduce__(self):
        return (torch._utils._rebuild_tensor_v2,
                (self.storage, 0, self.shape, self.stride, False, OrderedDict()))


class _Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, _Storage):
            return ("storage", torch.FloatStorage, obj.key, "cpu", obj.numel)
        return None


def views_pickle(tensors: dict) -> bytes:
    buf = io.BytesIO()
    _Pickler(buf, protocol=2).dump({"state_dict": tensors})
    return buf.getvalue()


def with_records(path: Path, data_pkl: bytes, records: dict[str, bytes]) -> Path:
    """A torch zip archive with ``data_pkl`` and extra ``archive/data/<key>`` records."""
    torch_zip(path, data_pkl)
    with zipfile.ZipFile(path, "a", compression=zipfile.ZIP_STORED) as zf:
        for key, data in records.items():
            zf.writestr(f"archive/data/{key}", data)
    return path


def shared_views(path: Path, n: int, numel: int = 1 << 20) -> Path:
    """n weights, each a full view of one 4 MiB storage: a 4 MiB file that would cost n x 4 MiB."""
    s = _Storage("0", numel)
    sd = {f"model.layers.{i}.w": _View(s, (numel,), (1,)) for i in range(n)}
    return with_records(path, views_pickle(sd), {"0": bytes(4 * numel)})


def aliased_records(path: Path, n: int = 256, numel: int = 1 << 20) -> Path:
    """n zip directory entries data/0..n-1 over the bytes of one 4 MiB record."""
    sd = {f"w{i}": _View(_Storage(str(i), numel), (numel,), (1,)) for i in range(n)}
    with_records(path, views_pickle(sd), {"0": bytes(4 * numel)})
    return add_entries(path, "archive/data/0", [f"archive/data/{i}" for i in range(1, n)])


def add_entries(path: Path, src: str, names: list[str], declare: int | None = None) -> Path:
    """Copies of the directory entry ``src`` under ``names`` (same local header, same bytes);
    the end record declares ``declare`` entries (default: all of them)."""
    data = bytearray(path.read_bytes())
    e = data.rfind(b"PK\x05\x06")
    total, cd_size, cd_off = struct.unpack("<HII", data[e + 10:e + 20])
    cd = bytes(data[cd_off:cd_off + cd_size])
    i, entry = 0, None
    while i < len(cd):
        nlen, elen, clen = struct.unpack("<HHH", cd[i + 28:i + 34])
        if cd[i + 46:i + 46 + nlen].decode() == src:
            entry = (cd[i:i + 28], cd[i + 34:i + 46], cd[i + 46 + nlen:i + 46 + nlen + elen + clen])
        i += 46 + nlen + elen + clen
    head, mid, _ = entry  # the copies carry no extra field or comment
    more = b"".join(head + struct.pack("<HHH", len(n.encode()), 0, 0) + mid + n.encode()
                    for n in names)
    new_cd = cd + more
    count = total + len(names) if declare is None else declare
    eocd = b"PK\x05\x06" + struct.pack("<HHHHIIH", 0, 0, count, count, len(new_cd), cd_off, 0)
    path.write_bytes(bytes(data[:cd_off]) + new_cd + eocd)
    return path


def undeclared_records(path: Path, n: int = 2000, declare: int = 9) -> Path:
    """A plain checkpoint plus n directory entries the end record does not count."""
    torch_zip(path, checkpoint_pickle(EMPTY_DICT))
    return add_entries(path, "archive/version", [f"archive/x{i}" for i in range(n)], declare)


def _global(name: str) -> bytes:
    module, _, qual = name.rpartition(".")
    return b"c" + module.encode() + b"\n" + qual.encode() + b"\n"


def _shared_tuple(levels: int) -> bytes:
    """t_levels, t_{i+1} = (t_i, t_i) via memo 0: hashing it visits 2^levels nodes."""
    return EMPTY_TUPLE + (BINPUT0 + BINGET0 + TUPLE2) * levels


def _hang_pickle() -> bytes:
    """A pickle whose unpickling would hash a 2^64-node dict key (hangs)."""
    return PROTO2 + EMPTY_DICT + _shared_tuple(64) + _int1(0) + b"s" + STOP


def hidden_behind(path: Path, surgery) -> Path:
    """A torch.save archive whose zip surgery (:mod:`zipcraft`) hands torch a hanging pickle
    while a reader of the classic directory or of exact names sees the benign one."""
    buf = io.BytesIO()
    torch.save({"state_dict": {}}, buf)
    path.write_bytes(surgery(buf.getvalue(), _hang_pickle()))
    return path


def build_pairs(path: Path, levels: int = 64) -> Path:
    """OrderedDict() given a BUILD state that is a list of pairs whose key is a shared tuple:
    torch's ``__dict__.update`` hashes it."""
    state = EMPTY_LIST + _shared_tuple(levels) + _int1(0) + TUPLE2 + APPEND
    return torch_zip(path, checkpoint_pickle(_global("collections.OrderedDict") + EMPTY_TUPLE
                                             + REDUCE + state + BUILD))


def codecs_nested(path: Path, levels: int = 20, n: int = 6000) -> Path:
    """_codecs.encode(..., 'hex') nested ``levels`` deep over a latin1 string of n chars:
    each level doubles the bytes (20 levels: 2^20 x n)."""
    calls = _global("_codecs.encode") + BINPUT1 + BINGET1 * levels
    inner = _str("x" * n) + _str("latin1") + TUPLE2 + REDUCE
    return torch_zip(path, checkpoint_pickle(calls + inner + (_str("hex") + TUPLE2 + REDUCE) * levels))


def set_of_shared(path: Path, levels: int = 64) -> Path:
    """set([t]) with t a shared tuple of 2^levels nodes: building the set hashes it."""
    items = EMPTY_LIST + _shared_tuple(levels) + APPEND
    return torch_zip(path, checkpoint_pickle(_global("builtins.set") + items + TUPLE1 + REDUCE))


def _copies(func: str, value: bytes, copies: int) -> bytes:
    """[value, func(value), func(value), ...]: ``value`` memoised, ``func`` called ``copies``
    times on it (torch's opcode set has no POP, so the value stays in the list)."""
    first = _global(func) + BINPUT0 + BINGET1 + TUPLE1 + REDUCE + APPEND
    return (EMPTY_LIST + value + BINPUT1 + APPEND + first
            + (BINGET0 + BINGET1 + TUPLE1 + REDUCE + APPEND) * (copies - 1))


def counter_copies(path: Path, entries: int = 1000, copies: int = 100_000) -> Path:
    """Counter(d) of one memoised dict of ``entries`` keys, ``copies`` times: each copy
    inserts every entry again (10^8 entries in all)."""
    d = EMPTY_DICT + MARK + b"".join(_str(f"k{i}") + _int1(1) for i in range(entries)) + SETITEMS
    return torch_zip(path, checkpoint_pickle(_copies("collections.Counter", d, copies)))


def bytearray_copies(path: Path, n: int = 1 << 20, copies: int = 1000) -> Path:
    """bytearray(b) of one memoised 1 MiB bytes value, ``copies`` times (1 GiB)."""
    b = _global("_codecs.encode") + _str("x" * n) + _str("latin1") + TUPLE2 + REDUCE
    return torch_zip(path, checkpoint_pickle(_copies("builtins.bytearray", b, copies)))


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
    "many_ops_400k": (many_ops, (200_000,)),
    "pickle_9mb": (big_pickle, (9 << 20,)),
    "deflate_1gib": (deflate_bomb, ()),
    "oversized_record": (oversized_record, ()),
    "torchscript": (torchscript, ()),
    "broadcast_1e9": (broadcast_tensor, ()),
    "int_keys": (int_keys, ()),
    "legacy_os_system": (pickled_code, ()),
    "key_shared_64": (shared_key, (64,)),
    "key_deep_300k": (deep_key, (300_000,)),
    "aliased_records_256": (aliased_records, ()),
    "shared_views_20": (shared_views, (20,)),
    "shared_views_100": (shared_views, (100,)),
    "undeclared_records": (undeclared_records, ()),
    "zip64_second_directory": (hidden_behind, (zipcraft.second_directory,)),
    "case_twin_data_pkl": (hidden_behind, (zipcraft.case_twin,)),
    "build_list_of_pairs": (build_pairs, ()),
    "codecs_hex_nested_20": (codecs_nested, ()),
    "set_of_shared_tuple": (set_of_shared, ()),
    "counter_copies_1e8": (counter_copies, ()),
    "bytearray_copies_1gib": (bytearray_copies, ()),
}


def build_all(directory: Path) -> dict[str, Path]:
    return {name: fn(directory / f"{name}.ckpt", *args) for name, (fn, args) in HOSTILE.items()}


__all__ = ["HOSTILE", "build_all", "checkpoint_pickle", "torch_zip", "pickle"]
