"""Step three of reading an untrusted torch file (:mod:`toyspt.util.safeload`): interpret
its pickle's opcodes on abstract values, so that nothing is hashed, built or allocated before
every budget has been checked. Each value carries its nesting depth and its expanded size (a
shared reference counted at every use, which is what hashing a tuple costs); tensors are
priced by what they would materialise. The opcode set is exactly that of torch's weights-only
unpickler; any other opcode, and any global beyond the admitted names, is :class:`Refused`."""
from __future__ import annotations

import functools
import io
import pickletools
import warnings
from _compat_pickle import IMPORT_MAPPING, NAME_MAPPING
from dataclasses import dataclass, fields
from typing import Iterable

from toyspt.util.files import Refused, UnsafeFile


@dataclass(frozen=True)
class Budget:
    max_pickle_bytes: int = 8 << 20  # size of the pickle (data.pkl); real ones are ~0.1 MB
    max_ops: int = 300_000  # pickle opcodes; real checkpoints have ~10^4 (30x headroom)
    max_records: int = 100_000  # zip entries present (one per storage, plus ~6)
    max_depth: int = 1_000  # nesting of any value (hashing a tuple recurses in C)
    max_memo_gets: int = 250_000  # shared references (BINGET/LONG_BINGET)
    max_key_nodes: int = 10_000  # nodes hashed for one dict key (shared ones at each use)
    max_hashed: int = 2_000_000  # nodes hashed for all dict keys together
    max_bytes: int = 2 << 30  # bytes the tensors may materialise, in all
    alias_factor: int = 2  # ... and at most this many times the file size (tied weights: 2)
    slack_bytes: int = 1 << 20  # ... plus this much (tiny files)

    def __post_init__(self):
        for f in fields(self):
            v = getattr(self, f.name)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"{f.name}: must be a positive int, got {v!r}")


BUDGET = Budget()

_CAP = 1 << 62  # sizes saturate here (a 64-level shared tuple is "2^64", i.e. too many)
# the opcodes torch's weights-only unpickler executes; any other is refused by name
_SCALAR_OPS = {"NONE", "NEWTRUE", "NEWFALSE", "BININT", "BININT1", "BININT2", "LONG1",
               "BINFLOAT", "BINUNICODE", "SHORT_BINSTRING"}
_TENSOR_FUNCS = {"torch._utils._rebuild_tensor_v2", "torch._utils._rebuild_tensor"}
_PARAM_FUNCS = {"torch._utils._rebuild_parameter", "torch._utils._rebuild_parameter_with_state"}
_INERT_FUNCS = {"torch.device", "torch.serialization._get_layout", "_codecs.encode"}


class _V:
    """An abstract value: kind, nesting depth, expanded size (shared refs at each use)."""
    __slots__ = ("kind", "depth", "size", "val", "items", "info")

    def __init__(self, kind, depth=1, size=1, val=None, items=None, info=None):
        self.kind, self.depth, self.size = kind, depth, size
        self.val, self.items, self.info = val, items, info


@functools.lru_cache(maxsize=1)
def _elem_sizes() -> dict[str, int]:
    """Bytes per element of each storage class a pickle may name."""
    import torch  # noqa: PLC0415 - only the pickle scan needs dtype sizes
    out = {"torch.UntypedStorage": 1, "torch.storage.UntypedStorage": 1}
    for cls in torch._storage_classes:
        with warnings.catch_warnings():  # legacy typed storages warn when asked their dtype
            warnings.simplefilter("ignore")
            dtype = getattr(cls, "dtype", None)
        if isinstance(dtype, torch.dtype):
            out[f"{cls.__module__}.{cls.__name__}"] = dtype.itemsize
    return out


@functools.lru_cache(maxsize=1)
def _torch_allowed() -> frozenset[str]:
    from torch import _weights_only_unpickler as w  # noqa: PLC0415
    return frozenset(w._get_allowed_globals())


class _Scan:
    """Abstract interpretation of one pickle (see the module docstring)."""

    def __init__(self, where: str, budget: Budget, admitted: set[str], records: dict | None,
                 prefix: str, file_size: int, extra: set[str]):
        self.where, self.b, self.admitted, self.extra = where, budget, admitted | extra, extra
        self.records, self.prefix, self.file_size = records, prefix, file_size
        self.stack: list[_V] = []
        self.marks: list[list[_V]] = []
        self.memo: dict[int, _V] = {}
        self.gets = self.hashed = 0
        self.storages: dict[str, list] = {}  # key -> [bytes, bytes of views]
        self.elem = _elem_sizes()

    def fail(self, msg: str, cls=UnsafeFile):
        raise cls(f"{self.where}: {msg}")

    def pop(self) -> _V:
        if not self.stack:
            self.fail("truncated or corrupt pickle (pops an empty stack)")
        return self.stack.pop()

    def pop_mark(self) -> list[_V]:
        if not self.marks:
            self.fail("truncated or corrupt pickle (no MARK)")
        items, self.stack = self.stack, self.marks.pop()
        return items

    def deeper(self, node: _V, child: _V) -> None:
        node.depth = max(node.depth, child.depth + 1)
        node.size = min(_CAP, node.size + child.size)
        if node.depth > self.b.max_depth:
            self.fail(f"its pickle has values nested deeper than {self.b.max_depth} levels; refused "
                      "before unpickling")

    def container(self, kind: str, children: list[_V], keep: bool = True) -> _V:
        node = _V(kind, items=children if keep and len(children) <= 16 else None)
        for c in children:
            self.deeper(node, c)
        return node

    def key(self, k: _V) -> None:
        if k.kind in ("list", "dict", "set"):
            self.fail(f"its pickle uses a {k.kind} as a dict key; refused before unpickling")
        cost = k.size if k.kind == "tuple" else 1
        self.hashed += cost
        if cost > self.b.max_key_nodes:
            self.fail(f"its pickle has a dict key of {'more than 2^62' if cost >= _CAP else cost}"
                      f" values (shared references counted at each use; limit "
                      f"{self.b.max_key_nodes}); refused before hashing it")
        if self.hashed > self.b.max_hashed:
            self.fail(f"its pickle's dict keys hash more than {self.b.max_hashed} values in all; "
                      "refused before unpickling")

    def run(self, data: bytes) -> _V:
        ops = 0
        try:
            for op, arg, _ in pickletools.genops(io.BytesIO(data)):
                ops += 1
                if ops > self.b.max_ops:
                    self.fail(f"the pickle has more than {self.b.max_ops} opcodes (far beyond any "
                              "checkpoint); refused before unpickling")
                if op.name == "STOP":
                    return self.pop()
                self.step(op, arg)
        except UnsafeFile:
            raise
        except Exception as e:  # pickletools raises ValueError/EOFError/... on malformed bytes
            text = str(e).strip().splitlines()[0] if str(e).strip() else "no detail"
            self.fail(f"truncated or corrupt pickle ({type(e).__name__}: {text})")
        self.fail("truncated or corrupt pickle (no STOP)")

    def step(self, op, arg) -> None:  # noqa: C901 - one branch per opcode, like pickle itself
        name = op.name

        def push(v: _V) -> None:  # onto the current stack (MARK opcodes replace it)
            self.stack.append(v)
        if name in _SCALAR_OPS:
            kind = "str" if isinstance(arg, str) else "int" if isinstance(arg, int) else "scalar"
            push(_V(kind, val=arg))
        elif name == "PROTO":
            pass
        elif name == "MARK":
            self.marks.append(self.stack)
            self.stack = []
        elif name in ("EMPTY_TUPLE", "EMPTY_LIST", "EMPTY_DICT", "EMPTY_SET"):
            push(_V({"EMPTY_TUPLE": "tuple", "EMPTY_LIST": "list", "EMPTY_DICT": "dict",
                     "EMPTY_SET": "set"}[name], items=[]))
        elif name in ("TUPLE", "TUPLE1", "TUPLE2", "TUPLE3"):
            n = {"TUPLE1": 1, "TUPLE2": 2, "TUPLE3": 3}.get(name)
            if n is None:
                items = self.pop_mark()
            else:
                if len(self.stack) < n:
                    self.fail("truncated or corrupt pickle (pops an empty stack)")
                items, self.stack[-n:] = self.stack[-n:], []
            push(self.container("tuple", items))
        elif name in ("APPEND", "APPENDS", "SETITEM", "SETITEMS"):
            items = [self.pop()] if name == "APPEND" else self.pop_mark() if name.endswith("S") \
                else [self.pop(), self.pop()][::-1]
            target = self.stack[-1] if self.stack else self.fail("corrupt pickle (no target)")
            want = "list" if name.startswith("APPEND") else "dict"
            if target.kind != want:
                self.fail(f"its pickle applies {name} to a {target.kind}; refused")
            if want == "dict":
                if len(items) % 2:
                    self.fail("truncated or corrupt pickle (SETITEMS with an odd count)")
                for k in items[::2]:
                    self.key(k)
            for c in items:
                self.deeper(target, c)
        elif name in ("BINPUT", "LONG_BINPUT"):
            if not self.stack:
                self.fail("truncated or corrupt pickle (memoizes an empty stack)")
            self.memo[arg] = self.stack[-1]
        elif name in ("BINGET", "LONG_BINGET"):
            self.gets += 1
            if self.gets > self.b.max_memo_gets:
                self.fail(f"its pickle has more than {self.b.max_memo_gets} shared references "
                          "(memo gets); refused before unpickling")
            if arg not in self.memo:
                self.fail(f"truncated or corrupt pickle (memo index {arg} unset)")
            push(self.memo[arg])
        elif name == "GLOBAL":
            module, _, qual = str(arg).partition(" ")
            if (module, qual) in NAME_MAPPING:
                module, qual = NAME_MAPPING[(module, qual)]
            elif module in IMPORT_MAPPING:
                module = IMPORT_MAPPING[module]
            full = f"{module}.{qual}"
            if full not in self.admitted:
                self.fail(f"refused: its pickle asks for the global {full}, beyond tensors and "
                          "plain data. Nothing from the file was executed.", Refused)
            push(_V("global", val=full))
        elif name == "BINPERSID":
            push(self.storage(self.pop()))
        elif name in ("REDUCE", "NEWOBJ"):
            args = self.pop()
            func = self.pop()
            push(self.call(func, args, name))
        elif name == "BUILD":
            state = self.pop()
            inst = self.stack[-1] if self.stack else self.fail("corrupt pickle (BUILD on nothing)")
            if inst.kind not in ("obj", "dict"):
                self.fail(f"its pickle gives a {inst.kind} a BUILD state; refused before unpickling")
            self.deeper(inst, state)
        else:
            doc = op.doc.strip().splitlines()[0].rstrip(".")
            self.fail(f"refused: its pickle uses the opcode {name} ({doc}), which the safe reader "
                      "does not execute. Nothing from the file was executed.", Refused)

    def call(self, func: _V, args: _V, how: str) -> _V:
        fname = func.val if func.kind == "global" else None
        if fname is None or args.kind != "tuple":
            self.fail(f"its pickle applies {how} to a {func.kind} with a {args.kind}; refused")
        items = args.items
        if fname in _TENSOR_FUNCS and items is not None and len(items) >= 4:
            return self.tensor(items)
        if fname in _PARAM_FUNCS or (how == "NEWOBJ" and fname == "torch.nn.parameter.Parameter"):
            if items and items[0].kind == "tensor":
                return items[0]
            self.fail(f"its pickle calls {fname} without a tensor; refused")
        if fname in ("collections.OrderedDict", "collections.Counter") and args.size == 1:
            return _V("dict")
        if fname == "torch.Size":
            inner = items[0] if items and len(items) == 1 else None
            if inner is not None and inner.kind == "tuple":
                return inner
        if fname in _INERT_FUNCS or fname in self.extra:
            return self.container("obj", [args], keep=False)
        self.fail(f"refused: its pickle calls {fname}, which the safe reader does not read "
                  "(only dense tensors and plain data). Nothing from the file was executed.",
                  Refused)

    def storage(self, pid: _V) -> _V:
        it = pid.items if pid.kind == "tuple" else None
        if (not it or len(it) != 5 or it[0].val != "storage" or it[1].kind != "global"
                or not isinstance(it[2].val, str) or not isinstance(it[4].val, int)):
            self.fail("its pickle has a persistent id that is not a storage record; refused")
        itemsize = self.elem.get(it[1].val)
        if itemsize is None:
            self.fail(f"storage of unknown type {it[1].val}; refused")
        key, numel = it[2].val, it[4].val
        nbytes = numel * itemsize
        if self.records is not None:
            rec = self.records.get(f"{self.prefix}data/{key}")
            if rec is None:
                self.fail(f"its pickle names the storage record data/{key}, absent from the archive")
            if numel < 0 or rec.size != nbytes:
                self.fail(f"storage record data/{key} holds {rec.size} bytes but the pickle "
                          f"declares {numel} x {itemsize}; refused before reading")
        elif numel < 0 or nbytes > self.file_size:
            self.fail(f"storage {key} declares {nbytes} bytes in a file of {self.file_size}")
        self.storages.setdefault(key, [nbytes, 0])
        return _V("storage", info=(key, itemsize, numel))

    def tensor(self, items: list[_V]) -> _V:
        s, off, shape, strides = items[:4]
        ints = (lambda v: v.kind == "tuple" and v.items is not None
                and all(isinstance(x.val, int) and x.kind == "int" for x in v.items))
        if s.kind != "storage" or off.kind != "int" or not ints(shape) or not ints(strides):
            self.fail("its pickle rebuilds a tensor from something other than a storage, an "
                      "offset, a shape and strides; refused")
        key, itemsize, numel = s.info
        dims = [x.val for x in shape.items]
        steps = [x.val for x in strides.items]
        if len(dims) != len(steps) or off.val < 0 or min(dims + steps + [0]) < 0:
            self.fail(f"a tensor on storage {key} has a negative or mismatched shape/stride; refused")
        elems = 1
        for d in dims:
            elems *= d
        if elems and off.val + sum((d - 1) * st for d, st in zip(dims, steps)) >= numel:
            self.fail(f"a tensor of shape {tuple(dims)} reaches beyond its storage of {numel} "
                      "elements; refused before reading")
        view = elems * itemsize
        if view > numel * itemsize:
            self.fail(f"a tensor of shape {tuple(dims)} ({view} bytes) over a storage of "
                      f"{numel * itemsize} bytes (a broadcast view); refused before reading")
        self.storages[key][1] += view
        return _V("tensor", info=key)

    def materialised(self) -> int:
        return sum(max(nbytes, views) for nbytes, views in self.storages.values())


def scan_pickle(data: bytes, where: str, budget: Budget = BUDGET, *,
                extra_globals: Iterable[str] = (), records: dict | None = None,
                prefix: str = "", file_size: int = 0) -> _Scan:
    """Interpret ``data`` abstractly within ``budget`` (nothing is built); the scan holds
    the storages and their materialised bytes. Raises :class:`UnsafeFile`/:class:`Refused`."""
    extra = set(extra_globals)
    scan = _Scan(where, budget, _torch_allowed(), records, prefix, file_size, extra)
    scan.run(data)
    total = scan.materialised()
    limit = min(budget.max_bytes, budget.alias_factor * file_size + budget.slack_bytes)
    if total > limit:
        stored = sum(b for b, _ in scan.storages.values())
        scan.fail(f"its tensors would materialise {total} bytes ({stored} bytes of storage, views "
                  f"counted by their size) from a file of {file_size} bytes; limit {limit} "
                  f"({budget.alias_factor} x the file size, at most {budget.max_bytes}); refused "
                  "before loading")
    return scan


__all__ = ["Budget", "BUDGET", "scan_pickle"]
