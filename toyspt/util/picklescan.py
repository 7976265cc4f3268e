"""Step three of reading an untrusted torch file (:mod:`toyspt.util.safeload`): interpret
its pickle's opcodes on abstract values, so that nothing is hashed, built or allocated before
every budget has been checked. Each value carries its nesting depth and its expanded size (a
shared reference counted at every use, which is what hashing a tuple costs); tensors are
priced by what they would materialise. The opcode set is exactly that of torch's weights-only
unpickler; any other opcode, and any global beyond the admitted names, is :class:`Refused`.

What torch does with each admitted name is priced before it runs: keys hashed by a dict,
a set or a BUILD, entries copied (``Counter(d)``, ``__dict__.update``), tensor dimensions
converted, bytes made (``_codecs.encode`` only as ``torch.save`` writes it: a str to
latin1), tensors of every dtype (``_rebuild_tensor_v3``: float8, uint16, ...) by their bytes."""
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
    max_hashed: int = 2_000_000  # values hashed or copied in all (keys, set items, entries, dims)
    max_bytes: int = 2 << 30  # bytes the tensors may materialise, in all
    alias_factor: int = 4  # ... and at most this many times the file size (tied weights and views: 3 seen)
    slack_bytes: int = 1 << 20  # ... plus this much (tiny files)

    def __post_init__(self):
        for f in fields(self):
            v = getattr(self, f.name)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"{f.name}: must be a positive int, got {v!r}")


BUDGET = Budget()

_CAP = 1 << 62  # sizes saturate here (a 64-level shared tuple is "2^64", i.e. too many)
# the opcodes torch's weights-only unpickler executes; any other is refused by name
_SCALARS = {"NONE": "none", "NEWTRUE": "bool", "NEWFALSE": "bool", "BININT": "int",
            "BININT1": "int", "BININT2": "int", "LONG1": "int", "BINFLOAT": "float",
            "BINUNICODE": "str", "SHORT_BINSTRING": "str"}
_EMPTY = {"EMPTY_TUPLE": "tuple", "EMPTY_LIST": "list", "EMPTY_DICT": "dict", "EMPTY_SET": "set"}
_TENSOR_FUNCS = {"torch._utils._rebuild_tensor_v3", "torch._utils._rebuild_tensor_v2",
                 "torch._utils._rebuild_tensor"}
_PARAM_FUNCS = {"torch._utils._rebuild_parameter", "torch._utils._rebuild_parameter_with_state"}
_INERT_FUNCS = {"torch.device", "torch.serialization._get_layout"}
_NOT_READ = {  # tensors torch's weights-only loader admits that this reader does not read
    "_rebuild_qtensor": "a quantized tensor", "_rebuild_sparse_tensor": "a sparse tensor",
    "_rebuild_nested_tensor": "a nested tensor", "_rebuild_meta_tensor_no_storage": "a meta tensor",
    "_rebuild_wrapper_subclass": "a tensor subclass without storage",
    "_rebuild_device_tensor_from_numpy": "a tensor of another device",
    "_rebuild_device_tensor_from_cpu_tensor": "a tensor of another device"}


class _V:
    """An abstract value: kind, nesting depth, expanded size (shared refs at each use), its
    entries ``n`` (items of a dict, list or set; bytes of bytes) and the largest hash cost of
    an item (``top``: what hashing it as a set item would cost)."""
    __slots__ = ("kind", "depth", "size", "val", "items", "info", "n", "top")

    def __init__(self, kind, depth=1, size=1, val=None, items=None, info=None, n=0):
        self.kind, self.depth, self.size = kind, depth, size
        self.val, self.items, self.info, self.n, self.top = val, items, info, n, 0


def _hash_cost(v: _V) -> int:
    return v.size if v.kind == "tuple" else 1


@functools.lru_cache(maxsize=1)
def _elem_sizes() -> dict[str, int]:
    """Bytes per element of each storage class and each dtype a pickle may name."""
    import torch  # only the pickle scan needs dtype sizes
    out = {"torch.UntypedStorage": 1, "torch.storage.UntypedStorage": 1}
    out.update({str(v): v.itemsize for v in vars(torch).values() if isinstance(v, torch.dtype)})
    for cls in torch._storage_classes:
        with warnings.catch_warnings():  # legacy typed storages warn when asked their dtype
            warnings.simplefilter("ignore")
            dtype = getattr(cls, "dtype", None)
        if isinstance(dtype, torch.dtype):
            out[f"{cls.__module__}.{cls.__name__}"] = dtype.itemsize
    return out


@functools.lru_cache(maxsize=1)
def _torch_allowed() -> frozenset[str]:
    from torch import _weights_only_unpickler as w
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
        self.gets = self.hashed = self.plain_bytes = 0
        self.storages: dict[str, list] = {}  # key -> [bytes, bytes of views]
        self.elem = _elem_sizes()

    def fail(self, msg: str, cls=UnsafeFile):
        raise cls(f"{self.where}: {msg}")

    def pop(self) -> _V:
        return self.stack.pop() if self.stack else self.fail("truncated or corrupt pickle (pops an empty stack)")

    def pop_mark(self) -> list[_V]:
        if not self.marks:
            self.fail("truncated or corrupt pickle (no MARK)")
        items, self.stack = self.stack, self.marks.pop()
        return items

    def deeper(self, node: _V, child: _V) -> None:
        node.depth = max(node.depth, child.depth + 1)
        node.size = min(_CAP, node.size + child.size)
        node.top = max(node.top, _hash_cost(child))
        if node.depth > self.b.max_depth:
            self.fail(f"its pickle has values nested deeper than {self.b.max_depth} levels; refused "
                      "before unpickling")

    def container(self, kind: str, children: list[_V]) -> _V:
        node = _V(kind, items=children, n=len(children))
        for c in children:
            self.deeper(node, c)
        return node

    def charge(self, n: int) -> None:
        """Count ``n`` values that torch will hash, copy or convert."""
        self.hashed += n
        if self.hashed > self.b.max_hashed:
            self.fail(f"its pickle makes torch hash or copy more than {self.b.max_hashed} values in "
                      "all (dict keys, set items, copied entries, tensor dimensions); refused "
                      "before unpickling")

    def key(self, k: _V, what: str = "dict key") -> None:
        if k.kind in ("list", "dict", "set"):
            self.fail(f"its pickle uses a {k.kind} as a {what}; refused before unpickling")
        cost = _hash_cost(k)
        if cost > self.b.max_key_nodes:
            self.fail(f"its pickle has a {what} of {'more than 2^62' if cost >= _CAP else cost}"
                      f" values (shared references counted at each use; limit "
                      f"{self.b.max_key_nodes}); refused before hashing it")
        self.charge(cost)

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

    def step(self, op, arg) -> None:  # one branch per opcode, like pickle itself
        name = op.name
        push = self.stack.append  # the current stack (TUPLE appends to the one pop_mark restores)
        if name in _SCALARS:
            push(_V(_SCALARS[name], val=(name == "NEWTRUE") if _SCALARS[name] == "bool" else arg))
        elif name == "PROTO":
            pass
        elif name == "MARK":
            self.marks.append(self.stack)
            self.stack = []
        elif name in _EMPTY:
            push(_V(_EMPTY[name], items=[] if name == "EMPTY_TUPLE" else None))
        elif name in ("TUPLE", "TUPLE1", "TUPLE2", "TUPLE3"):
            n = {"TUPLE1": 1, "TUPLE2": 2, "TUPLE3": 3}.get(name)
            if n is None:
                items = self.pop_mark()
            else:
                if len(self.stack) < n:
                    self.fail("truncated or corrupt pickle (pops an empty stack)")
                items, self.stack[-n:] = self.stack[-n:], []
            self.stack.append(self.container("tuple", items))
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
            target.n += len(items) if want == "list" else len(items) // 2
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
            if state.kind != "dict":
                self.fail(f"its pickle gives a {inst.kind} a BUILD state that is a {state.kind} "
                          "(torch would hash what it holds as attribute names); torch.save writes "
                          "a dict there; refused before unpickling")
            self.charge(state.n)  # copied into the object's __dict__
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
        if fname in _TENSOR_FUNCS:
            return self.tensor(fname, items)
        if fname in _PARAM_FUNCS or (how == "NEWOBJ" and fname == "torch.nn.parameter.Parameter"):
            if items and items[0].kind == "tensor":
                if len(items) > 3:  # _rebuild_parameter_with_state: set as attributes
                    self.charge(items[3].size)
                return items[0]
            self.fail(f"its pickle calls {fname} without a tensor; refused")
        if (fname == "torch._tensor._rebuild_from_type_v2" and len(items) == 4
                and items[0].val in _TENSOR_FUNCS):
            inner = self.call(items[0], items[2], "REDUCE")
            if inner.kind == "tensor" and items[1].val in ("torch.Tensor", "torch.nn.parameter.Parameter"):
                self.charge(items[3].size)  # the tensor's attributes, set one by one
                return inner
        what = _NOT_READ.get(fname.rpartition(".")[2]) if fname.startswith("torch._utils.") else None
        if what:
            self.fail(f"its pickle holds {what} ({fname}); only dense tensors are read")
        plain = self.plain(fname, items)
        if plain is not None:
            return plain
        if fname in _INERT_FUNCS or fname in self.extra:
            return self.container("obj", [args])
        self.fail(f"refused: its pickle calls {fname} with arguments torch.save never writes there "
                  "(or a name the safe reader does not read: only tensors and plain data). Nothing "
                  "from the file was executed.", Refused)

    def plain(self, fname: str, it: list[_V]) -> _V | None:
        """The builtins torch admits for plain data, called as ``torch.save`` writes them, with
        what they hash, copy or allocate charged; None for any other call."""
        kinds = [v.kind for v in it]
        if fname in ("collections.OrderedDict", "collections.Counter", "builtins.set",
                     "builtins.bytearray") and not it:
            return _V({"builtins.set": "set", "builtins.bytearray": "bytes"}.get(fname, "dict"))
        if fname == "collections.Counter" and kinds == ["dict"]:  # Counter(d): d's entries copied
            self.charge(it[0].n)
            return _V("dict", depth=it[0].depth, size=it[0].size, n=it[0].n)
        if fname == "builtins.set" and kinds == ["list"]:  # set(items): each item hashed
            lst = it[0]
            if lst.top > self.b.max_key_nodes:
                self.key(_V("tuple", size=lst.top), "set item")
            self.charge(lst.size)
            return _V("set", depth=lst.depth, size=lst.size, n=lst.n)
        if fname == "builtins.complex" and 1 <= len(it) <= 2 and set(kinds) <= {"int", "float"}:
            return _V("complex")
        if fname == "builtins.bytearray" and kinds == ["bytes"]:  # a copy of the bytes
            self.plain_bytes += it[0].n
            return _V("bytes", n=it[0].n)
        if fname == "_codecs.encode" and kinds == ["str", "str"] and it[1].val == "latin1":
            try:  # how torch.save writes bytes under pickle protocol 2
                n = len(it[0].val.encode("latin1"))
            except UnicodeEncodeError:
                self.fail("its pickle encodes a string beyond latin1 as bytes (torch.save never "
                          "writes that); refused before unpickling")
            self.plain_bytes += n
            return _V("bytes", n=n)
        if fname == "torch.Size" and kinds == ["tuple"]:
            return it[0]
        return None

    def storage(self, pid: _V) -> _V:
        it = pid.items if pid.kind == "tuple" else None
        if (not it or len(it) != 5 or it[0].val != "storage" or it[1].kind != "global"
                or not isinstance(it[2].val, str) or it[4].kind != "int"):
            self.fail("its pickle has a persistent id that is not a storage record; refused")
        itemsize = self.elem.get(it[1].val) if it[1].val.endswith("Storage") else None
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
        return _V("storage", info=(key, nbytes, itemsize))

    def tensor(self, fname: str, items: list[_V]) -> _V:
        """A dense tensor over a storage, priced by its own size (v3 names its dtype)."""
        v3 = fname.endswith("_v3")
        def ints(v) -> bool:
            return v.kind == "tuple" and all(x.kind == "int" for x in v.items)
        if (len(items) < (7 if v3 else 4) or items[0].kind != "storage" or items[1].kind != "int"
                or not ints(items[2]) or not ints(items[3])):
            self.fail("its pickle rebuilds a tensor from something other than a storage, an "
                      "offset, a shape and strides; refused")
        key, nbytes, itemsize = items[0].info
        if v3:
            dtype = items[6].val if items[6].kind == "global" else None
            itemsize = None if dtype is None or dtype.endswith("Storage") else self.elem.get(dtype)
            if itemsize is None:
                self.fail(f"a tensor on storage {key} of unknown dtype {dtype!r}; refused")
        dims, steps = [x.val for x in items[2].items], [x.val for x in items[3].items]
        self.charge(len(dims) + len(steps))  # converted by torch at every rebuild
        numel, off = nbytes // itemsize, items[1].val
        shown = tuple(dims) if len(dims) <= 8 else f"({len(dims)} dimensions)"
        if len(dims) != len(steps) or off < 0 or min(dims + steps + [0]) < 0:
            self.fail(f"a tensor on storage {key} has a negative or mismatched shape/stride; refused")
        if 0 not in dims and off + sum((d - 1) * st for d, st in zip(dims, steps)) >= numel:
            self.fail(f"a tensor of shape {shown} reaches beyond its storage of {numel} "
                      "elements; refused before reading")
        elems = 0 if 0 in dims else 1
        for d in dims:
            elems *= d
            if elems > numel:
                self.fail(f"a tensor of shape {shown} over a storage of {numel * itemsize} bytes has "
                          "more elements than the storage (a broadcast view); refused before reading")
        self.storages[key][1] += elems * itemsize
        return _V("tensor", info=key)

    def materialised(self) -> int:
        return sum(max(nbytes, views) for nbytes, views in self.storages.values()) + self.plain_bytes


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
                  f"counted by their size, {scan.plain_bytes} in bytes values) from a file of "
                  f"{file_size} bytes; limit {limit} ({budget.alias_factor} x the file size, at most "
                  f"{budget.max_bytes}); refused before loading")
    return scan


__all__ = ["Budget", "BUDGET", "scan_pickle"]
