"""The compiled numerics path of the training loop: one model's forward, loss and backward
compiled by ``torch.compile`` (inductor), the optimizer's fused kernels after it.

A step function is ``(flat, rest, *batch) -> loss``: ``flat`` holds the trainable parameters
of one model end to end (a leaf, so the backward writes its gradient in one piece), ``rest``
every other tensor of its state dict, ``batch`` the step's tensors. Nothing of a run is
captured, so one compiled function per (architecture, objective, static arguments, layout)
and input shape serves every run and seed of a process (:func:`step_function`); inductor
keeps what it built in ``TORCHINDUCTOR_CACHE_DIR``, so a later process traces but does not
compile again.

What ``--compile`` trusts: inductor's cache is code (generated Python that it imports, shared
libraries that it loads, pickles that it unpickles), so it must be as trusted as the Python
environment itself. It is never kept in the run cache, which may be shared (copied, a folder of
a team): :func:`use_private_inductor_cache` puts it in a folder of this user's
(``$XDG_CACHE_HOME/toyspt/inductor``, else ``~/.cache/toyspt/inductor``, mode 0700, owned by this
user), and refuses a ``TORCHINDUCTOR_CACHE_DIR`` that lies inside the run cache. Nothing of the
run cache is ever executed: its entries are JSON and tensors read by the bounded reader.

Compiled kernels fuse and reorder float32 arithmetic, so they round differently from the
eager path: a run's numbers depend on the path, and its run-cache key names it
(``numerics="compiled"``; eager keys are today's). :func:`available` says whether inductor
compiles on this platform (no C++ compiler: no), once per process, with one line on stderr.
"""
from __future__ import annotations

import os
import stat
import sys
import types
from pathlib import Path
from typing import Callable

import torch
from torch import nn
from torch.func import functional_call

NUMERICS = ("eager", "compiled")  # eager: today's bitwise path; compiled: torch.compile + fused optimizer
_STEPS: dict[tuple, Callable] = {}
_AVAILABLE: list[bool] = []  # [whether inductor compiles here], once known


def check_numerics(numerics: str) -> str:
    if numerics not in NUMERICS:
        raise ValueError(f"numerics: choose one of {NUMERICS}, got {numerics!r}")
    return numerics


def _probe(x: torch.Tensor) -> torch.Tensor:
    return torch.sin(x) * 2.0 + 1.0


def available() -> bool:
    """Whether inductor compiles here, once per process: the C++ compiler inductor would
    use answers (the check inductor itself makes), and a tiny function compiles and agrees
    with eager. When not, one line on stderr says so and the caller trains eagerly."""
    if not _AVAILABLE:
        try:
            import warnings

            from torch._inductor.cpp_builder import get_cpp_compiler

            get_cpp_compiler()  # raises where no working compiler is found (before anything is built)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                x = torch.linspace(0, 1, 7)
                if not torch.allclose(torch.compile(_probe, dynamic=False)(x), _probe(x)):
                    raise RuntimeError("the compiled probe computed other numbers")
        except Exception as e:  # any failure of the toolchain means: train eagerly
            why = (str(e).strip().splitlines() or [""])[0][:160]
            print(f"toyspt: torch.compile is not available here ({type(e).__name__}: {why}); "
                  "training with the eager numerics", file=sys.stderr, flush=True)
            _AVAILABLE.append(False)
        else:
            _AVAILABLE.append(True)
    return _AVAILABLE[0]


def private_inductor_dir() -> Path:
    """This user's folder for inductor's cache: ``$XDG_CACHE_HOME/toyspt/inductor``, else
    ``~/.cache/toyspt/inductor``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "toyspt" / "inductor"


def use_private_inductor_cache(run_cache: str | os.PathLike) -> str:
    """Point inductor's cache (``TORCHINDUCTOR_CACHE_DIR``, inherited by worker processes) at a
    folder of this user's, never inside ``run_cache``: a run cache may be shared, and inductor
    imports, loads and unpickles what its cache holds. A ``TORCHINDUCTOR_CACHE_DIR`` set by the
    user is kept unless it lies inside the run cache (refused: ValueError, one line); the
    default folder is made with mode 0700 and must be this user's. Returns the folder."""
    cache = Path(run_cache).expanduser().resolve()
    given = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if given:
        where = Path(given).expanduser().resolve()
        if where == cache or cache in where.parents:
            raise ValueError(f"TORCHINDUCTOR_CACHE_DIR={given} lies inside the run cache {run_cache}: a run cache "
                             "may be shared and inductor runs the code its cache holds; point it at a folder of "
                             "your own (unset it: toyspt uses ~/.cache/toyspt/inductor)")
        return given
    where = private_inductor_dir()
    try:
        where.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.stat(where)
    except OSError as e:
        raise ValueError(f"--compile: cannot make inductor's cache folder {where}: {e.strerror or e}") from None
    if hasattr(os, "getuid") and (st.st_uid != os.getuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)):
        raise ValueError(f"--compile: inductor's cache folder {where} is not this user's alone (owner uid "
                         f"{st.st_uid}, mode {oct(st.st_mode & 0o777)}); inductor runs what it holds")
    if where == cache or cache in where.parents:
        raise ValueError(f"--compile: inductor's cache folder {where} lies inside the run cache {run_cache}; "
                         "set TORCHINDUCTOR_CACHE_DIR to a folder of your own")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(where)
    return str(where)


class _Bound(nn.Module):
    """Lets functional_call reach an objective of the model (classify, reconstruct, ...)."""

    def __init__(self, model: nn.Module, value: Callable):
        super().__init__()
        self.model = model
        self.value = value

    def forward(self, *args):
        return self.value(self.model, *args)


def step_function(template: nn.Module, value: Callable, static: tuple,
                  layout: tuple[tuple[str, torch.Size], ...]) -> Callable:
    """The compiled ``(flat, rest, *batch) -> value(model, *batch, *static)`` for models of
    ``template``'s architecture whose trainable parameters are ``layout`` ((name, shape) in
    the order ``flat`` holds them). ``value`` must be a module-level function and
    ``static`` hashable (they are compiled in); one function per process and key."""
    key = (id(template), value, static, layout)
    fn = _STEPS.get(key)
    if fn is None:
        _raise_recompile_limits()
        bound = _Bound(template, value)

        def loss(flat, rest, *batch):
            tensors, off = {f"model.{n}": t for n, t in rest.items()}, 0
            for name, shape in layout:
                size = shape.numel()
                tensors[f"model.{name}"] = flat[off:off + size].view(shape)
                off += size
            return functional_call(bound, tensors, (*batch, *static))

        # a code object of its own per key: Dynamo keeps its compiled entries per code object
        # and checks their guards one after the other, so sharing one would make every call
        # pay for the guards of every other key (and hit the recompile limit)
        code = loss.__code__.replace(co_name=f"loss_{len(_STEPS)}")
        own = types.FunctionType(code, loss.__globals__, code.co_name, loss.__defaults__, loss.__closure__)
        fn = _STEPS[key] = torch.compile(own, dynamic=False)
    return fn


def _raise_recompile_limits() -> None:
    """Dynamo's recompile limits (8 per code object, and a total) would fall back to eager
    silently after a few configs and batch shapes of a long-lived worker."""
    cfg = torch._dynamo.config
    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(cfg, name):
            setattr(cfg, name, max(getattr(cfg, name), 256))
    if hasattr(cfg, "accumulated_recompile_limit"):
        cfg.accumulated_recompile_limit = max(cfg.accumulated_recompile_limit, 4096)


__all__ = ["NUMERICS", "check_numerics", "available", "step_function", "private_inductor_dir",
           "use_private_inductor_cache"]
