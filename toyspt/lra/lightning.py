"""Lightning ``.ckpt`` files of the LRA self-pretraining code: safe reading, trusted reading,
and writing in the same format.

A checkpoint is a pickled dict (``state_dict``, ``hyper_parameters``, ``epoch``, ...) whose
``hyper_parameters`` is an OmegaConf ``DictConfig``. Plain ``weights_only=True`` loading
refuses that object, and ``weights_only=False`` would run whatever the pickle says. By
default we use torch's weights-only unpickler and admit, besides tensors and plain
containers, only the OmegaConf container/node/metadata class *names*, each mapped to an
inert stand-in of ours that merely stores the state it is given. The config is then read as
plain data; anything else in the pickle (``os.system``, ``builtins.eval``, an unknown
class) is refused before it can run. ``trust=True`` (the CLI's ``--trust-checkpoint``) uses
``torch.load(weights_only=False)`` and needs ``omegaconf`` installed.

Before torch sees the file, the project's one bounded reader (:mod:`toyspt.util.safeload`)
checks the file type, the zip directory and the pickle's opcodes against a budget (depth,
shared references, dict-key size, records present, materialised bytes) and hands torch only
the scanned records; the config is converted to plain data within a depth and value budget
(:mod:`toyspt.lra.guard`); state-dict keys must be strings and tensors dense views within
their storage. Every failure is a one-line :class:`CheckpointError`.

Writing emits the same pickle layout as OmegaConf 2.x (``NEWOBJ`` of
``omegaconf.dictconfig.DictConfig`` etc. with ``_metadata``/``_parent``/``_content``
state) without importing omegaconf, so files written here load with the real library too.
"""
from __future__ import annotations

import collections
import copyreg
import os
import pickle
import typing
from dataclasses import dataclass, field
from typing import Any

import torch

from toyspt.lra import guard
from toyspt.lra.guard import LIMITS, CheckpointError, CheckpointRefused, ReadLimits
from toyspt.util import safeload
from toyspt.util.atomic import atomic_write, uninterrupted
from toyspt.util.files import Refused, UnsafeFile
from toyspt.util.validation import short_repr

LIGHTNING_VERSION = "1.5.10"  # the version string written into checkpoints made here


# ---------------------------------------------------------------- inert stand-ins (reading)

class _Inert:
    """Stands in for a class named in a checkpoint's pickle: stores its state, runs nothing."""

    global_name = "?"

    def __new__(cls, *args):
        if args:  # OmegaConf objects pickle as NEWOBJ(cls, ()) + BUILD(state), never with arguments
            raise CheckpointError(f"malformed config object: {cls.global_name} called with "
                                  f"{len(args)} argument(s)")
        return object.__new__(cls)

    def __setstate__(self, state):
        if not isinstance(state, dict):
            raise CheckpointError(f"malformed config object: {self.global_name} given a "
                                  f"{type(state).__name__} as its state (expected a dict)")
        self.__dict__["state"] = state

    def __repr__(self):
        return f"<inert {self.global_name}>"


class _TypeRef:
    """Stands in for a type named as a value in the pickle (``typing.Any``, ``dict``)."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self):
        return self.name


def _plain_defaultdict(*args):
    """``collections.defaultdict(factory)`` read as an empty plain dict (OmegaConf's
    resolver cache; the factory is never called)."""
    return {}


_OMEGACONF_CLASSES = (
    "omegaconf.dictconfig.DictConfig", "omegaconf.listconfig.ListConfig",
    "omegaconf.base.ContainerMetadata", "omegaconf.base.Metadata",
    "omegaconf.nodes.AnyNode", "omegaconf.nodes.ValueNode", "omegaconf.nodes.StringNode",
    "omegaconf.nodes.IntegerNode", "omegaconf.nodes.FloatNode", "omegaconf.nodes.BooleanNode",
    "omegaconf.nodes.BytesNode", "omegaconf.nodes.PathNode", "omegaconf.nodes.EnumNode",
)
_TYPE_NAMES = ("typing.Any", "typing.Dict", "typing.List", "typing.Union", "typing.Optional",
               "builtins.dict", "builtins.list", "builtins.int", "builtins.float",
               "builtins.str", "builtins.bool", "builtins.bytes", "builtins.tuple")
_INERT = {name: type(name.rsplit(".", 1)[1], (_Inert,), {"global_name": name})
          for name in _OMEGACONF_CLASSES}
_TYPES = {name: _TypeRef(name) for name in _TYPE_NAMES}


def _safe_globals() -> list:
    """(stand-in, full name) pairs admitted by the restricted reader."""
    pairs = [(cls, name) for name, cls in _INERT.items()]
    pairs += [(ref, name) for name, ref in _TYPES.items()]
    pairs.append((_plain_defaultdict, "collections.defaultdict"))
    return pairs


def _convert(obj: Any, walk) -> Any:
    if isinstance(obj, _Inert):
        name, state = obj.global_name, obj.__dict__.get("state") or {}
        if name.endswith(("DictConfig", "ListConfig")):
            return walk(state.get("_content"))
        if ".nodes." in name:
            return walk(state.get("_val"))
        return {k: walk(v) for k, v in state.items() if k != "_parent"}
    if isinstance(obj, _TypeRef):
        return obj.name
    if isinstance(obj, type) and issubclass(obj, _Inert):
        return obj.global_name
    if isinstance(obj, type):
        return f"{obj.__module__}.{obj.__qualname__}"
    if isinstance(obj, dict):
        odd = next((k for k in obj if not isinstance(k, (str, int, float, bool, type(None)))), None)
        if odd is not None:
            raise CheckpointError(f"{walk.where}: a key {short_repr(odd)} of type "
                                  f"{type(odd).__name__}; config keys are plain values")
        return {k: walk(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(walk(v) for v in obj)
    if type(obj).__module__.startswith("omegaconf"):  # real OmegaConf (trusted path)
        from omegaconf import OmegaConf  # only present when trusted loading
        return walk(OmegaConf.to_container(obj, resolve=False))
    return obj


def to_plain(obj: Any, where: str = "config", limits: ReadLimits = LIMITS) -> Any:
    """OmegaConf objects (stand-ins or real) -> plain dicts/lists/values; interpolations
    such as ``${..dropout}`` and ``???`` stay as strings (nothing is resolved). Bounded:
    nesting, value count (shared references counted at each use) and cycles are checked
    (:class:`toyspt.lra.guard.Walker`)."""
    return guard.Walker(where, _convert, limits)(obj)


# ------------------------------------------------------------------------------- reading

@dataclass
class RawCheckpoint:
    """What a checkpoint file holds, as plain data."""
    path: str
    state_dict: dict[str, torch.Tensor]  # parameter name -> tensor, in file order
    config: dict | None  # the run config (hyper_parameters) as plain dicts/lists, if any
    meta: dict = field(default_factory=dict)  # epoch, global_step, versions, other top-level keys
    trusted: bool = False  # True when read with weights_only=False
    entries: list[str] = field(default_factory=list)  # every top-level key of the file


def _load(path: str, trust: bool, limits: ReadLimits):
    """The file through the project's one bounded reader (:func:`toyspt.util.safeload.load`)."""
    try:
        return safeload.load(path, what="checkpoint", budget=limits.file,
                             safe_globals=_safe_globals(), trust=trust)
    except CheckpointError:
        raise
    except Refused as e:
        raise CheckpointRefused(f"{e} Load it with trust=True (--trust-checkpoint) only if you "
                                "trust where it came from.") from None
    except UnsafeFile as e:
        raise CheckpointError(str(e)) from None


def _check_tensor(path: str, key, t: torch.Tensor) -> None:
    if t.layout != torch.strided or t.is_quantized or t.device.type == "meta":
        raise CheckpointError(f"{path}: state_dict[{key!r}] is a {t.layout} "
                              f"{'quantized ' if t.is_quantized else ''}tensor on {t.device}; "
                              "only dense tensors are read")
    need = t.numel() * t.element_size()
    have = t.untyped_storage().nbytes()
    if need > have:
        raise CheckpointError(f"{path}: state_dict[{key!r}] has shape {tuple(t.shape)} "
                              f"({need} bytes) over a storage of {have} bytes (a broadcast view); "
                              "refused")


def _name(key) -> str:
    """A top-level key as text (bounded for hostile keys)."""
    return key if isinstance(key, str) else short_repr(key)


def read_checkpoint(path: str | os.PathLike, trust: bool = False,
                    limits: ReadLimits = LIMITS) -> RawCheckpoint:
    """Read a Lightning ``.ckpt`` (or a bare ``torch.save``-d state dict) without executing
    code from it, unless ``trust``, within ``limits``; see the module docstring."""
    path = os.fspath(path)
    obj = _load(path, trust, limits)
    if not isinstance(obj, dict):
        raise CheckpointError(f"{path}: unknown format: top level is {type(obj).__name__}, "
                              "expected a dict with 'state_dict'")
    if "state_dict" in obj:
        sd = obj["state_dict"]
        if not isinstance(sd, dict):
            raise CheckpointError(f"{path}: 'state_dict' is a {type(sd).__name__}, not a dict")
        config = obj.get("hyper_parameters")
        meta = {_name(k): to_plain(v, f"{path}: entry {short_repr(k)}", limits) for k, v in obj.items()
                if k not in ("state_dict", "hyper_parameters", "optimizer_states")}
    elif obj and all(isinstance(v, torch.Tensor) for v in obj.values()):
        sd, config, meta = obj, None, {"format": "bare state dict"}
    else:
        keys = sorted(map(_name, obj))[:12]
        raise CheckpointError(f"{path}: unknown format: no 'state_dict' among top-level keys {keys}")
    if len(sd) > limits.file.max_records:
        raise CheckpointError(f"{path}: state_dict has {len(sd)} entries (limit "
                              f"{limits.file.max_records})")
    bad_keys = [k for k in sd if not isinstance(k, str)]
    if bad_keys:
        raise CheckpointError(f"{path}: state_dict keys must be parameter names (str); found "
                              f"{type(bad_keys[0]).__name__} key {short_repr(bad_keys[0])}")
    bad = [k for k, v in sd.items() if not isinstance(v, torch.Tensor)]
    if bad:
        raise CheckpointError(f"{path}: state_dict entries that are not tensors: {bad[:5]}")
    for k, v in sd.items():
        _check_tensor(path, k, v)
    config = to_plain(config, f"{path}: run config", limits) if config is not None else None
    if config is not None and not isinstance(config, dict):
        config = {"value": config}
    return RawCheckpoint(path, dict(sd), config, meta, trusted=trust, entries=list(map(_name, obj)))


# ------------------------------------------------------------------------------- writing

class _Emu:
    """Base of the write-side stand-ins: pickles as ``NEWOBJ(cls) + BUILD(state)``, the
    layout OmegaConf 2.x objects have (their __getstate__ drops ``_flags_cache``)."""

    pickle_global: tuple[str, str] = ("", "")

    def __init__(self, state: dict):
        self._state = state

    def __reduce_ex__(self, protocol):
        return (copyreg.__newobj__, (type(self),), self._state)


def _emu_class(full_name: str) -> type:
    module, name = full_name.rsplit(".", 1)
    return type(name, (_Emu,), {"pickle_global": (module, name)})


_EMU = {name: _emu_class(name) for name in (
    "omegaconf.dictconfig.DictConfig", "omegaconf.listconfig.ListConfig",
    "omegaconf.base.ContainerMetadata", "omegaconf.base.Metadata", "omegaconf.nodes.AnyNode")}


class _Pickler(pickle._Pickler):
    """Pure-Python pickler that writes the write-side stand-ins under OmegaConf's names."""

    def save_global(self, obj, name=None):
        tag = obj.__dict__.get("pickle_global") if isinstance(obj, type) else None
        if not tag:
            return super().save_global(obj, name)
        module, qual = tag
        self.write(pickle.GLOBAL + f"{module}\n{qual}\n".encode("utf-8"))
        self.memoize(obj)


class _PickleModule:
    """What ``torch.save(pickle_module=...)`` needs: a ``Pickler`` class."""
    Pickler = _Pickler
    Unpickler = pickle.Unpickler
    __name__ = "toyspt_lra_pickle"


def _metadata(key, container: str | None):
    common = {"ref_type": typing.Any, "object_type": None, "optional": True, "key": key,
              "flags": {}, "flags_root": False, "resolver_cache": collections.defaultdict(dict)}
    if container is None:
        return _EMU["omegaconf.base.Metadata"](common)
    common["object_type"] = dict if container == "dict" else list
    common["key_type"] = typing.Any if container == "dict" else int
    common["element_type"] = typing.Any
    return _EMU["omegaconf.base.ContainerMetadata"](common)


def as_dictconfig(value: Any, key=None, parent=None) -> Any:
    """A plain dict/list tree as write-side OmegaConf stand-ins (untyped, like Hydra's)."""
    if isinstance(value, dict):
        node = _EMU["omegaconf.dictconfig.DictConfig"]({})
        content = {k: as_dictconfig(v, k, node) for k, v in value.items()}
        node._state.update(_metadata=_metadata(key, "dict"), _parent=parent, _content=content)
        return node
    if isinstance(value, (list, tuple)):
        node = _EMU["omegaconf.listconfig.ListConfig"]({})
        content = [as_dictconfig(v, i, node) for i, v in enumerate(value)]
        node._state.update(_metadata=_metadata(key, "list"), _parent=parent, _content=content)
        return node
    if value is not None and not isinstance(value, (bool, int, float, str)):
        raise TypeError(f"config value {value!r} at key {key!r} is not a plain type")
    return _EMU["omegaconf.nodes.AnyNode"]({"_metadata": _metadata(key, None), "_parent": parent,
                                            "_val": value})


def write_checkpoint(path: str | os.PathLike, state_dict: dict[str, torch.Tensor],
                     config: dict | None, *, epoch: int = 0, global_step: int = 0,
                     extra: dict | None = None) -> None:
    """Write ``state_dict`` (+ ``config`` as a pickled DictConfig) as a Lightning 1.5
    checkpoint, atomically (temp file + rename)."""
    path = os.fspath(path)
    ckpt = {"epoch": int(epoch), "global_step": int(global_step),
            "pytorch-lightning_version": LIGHTNING_VERSION,
            "state_dict": collections.OrderedDict((k, v.detach().cpu().contiguous())
                                                  for k, v in state_dict.items()),
            "callbacks": {}, "optimizer_states": [], "lr_schedulers": []}
    if config is not None:
        ckpt["hparams_name"] = "config"
        ckpt["hyper_parameters"] = as_dictconfig(config)
        ckpt["hparams_type"] = _EMU["omegaconf.dictconfig.DictConfig"]
    ckpt.update(extra or {})

    def write(tmp: str) -> None:
        with open(tmp, "wb") as f, uninterrupted():  # Ctrl-C inside torch's write callbacks: an interrupt
            torch.save(ckpt, f, pickle_module=_PickleModule, pickle_protocol=2)

    atomic_write(path, write)


__all__ = ["CheckpointError", "CheckpointRefused", "ReadLimits", "RawCheckpoint", "read_checkpoint",
           "write_checkpoint", "as_dictconfig", "to_plain", "LIGHTNING_VERSION"]
