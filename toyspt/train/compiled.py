"""The compiled numerics path of the training loop: one model's forward, loss and backward
compiled by ``torch.compile`` (inductor), the optimizer's fused kernels after it.

A step function is ``(flat, rest, *batch) -> loss``: ``flat`` holds the trainable parameters
of one model end to end (a leaf, so the backward writes its gradient in one piece), ``rest``
every other tensor of its state dict, ``batch`` the step's tensors. Nothing of a run is
captured, so one compiled function per (architecture, objective, static arguments, layout)
and input shape serves every run and seed of a process (:func:`step_function`); inductor
keeps what it built in ``TORCHINDUCTOR_CACHE_DIR`` (the front doors set ``<cache>/inductor``,
beside the run cache), so a later process traces but does not compile again.

Compiled kernels fuse and reorder float32 arithmetic, so they round differently from the
eager path: a run's numbers depend on the path, and its run-cache key names it
(``numerics="compiled"``; eager keys are today's). :func:`available` says whether inductor
compiles on this platform (no C++ compiler: no), once per process, with one line on stderr.
"""
from __future__ import annotations

import sys
import types
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


__all__ = ["NUMERICS", "check_numerics", "available", "step_function"]
