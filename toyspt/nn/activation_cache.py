"""Every hook point's tensor of one forward pass, by name: ``out, cache = run_with_cache(model, x)``,
TransformerLens's call on toyspt's models (the toy and the LRA bridge, which share
:class:`toyspt.nn.attention.Attention` and its hook points).

``cache["blocks.0.attn.hook_pattern"]`` is the (B, H, T, T) attention map of the first layer;
``cache["pattern", 0]`` says the same the short way TransformerLens does (``blocks.{layer}.attn.hook_
{name}``), and ``cache.by_module("hook_pattern")`` gives ``{"blocks.0.attn": ..., ...}``, one tensor
per attention module. Tensors are detached; the pass runs without autograd unless ``grad=True``.
The hooks are attached through :func:`toyspt.nn.attention.hooks`, so they are removed when the
call returns, also when the forward pass raises. A hook point that fires twice in one pass is
refused (a cache holds one tensor per name), never silently overwritten.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable

import torch
from torch import nn

from toyspt.nn.attention import hook_points, hooks


class ActivationCache(dict):
    """``{hook point name: tensor}`` of one forward pass, in the order the hooks fired."""

    def __getitem__(self, key):
        if isinstance(key, tuple):  # ("pattern", layer) -> "blocks.{layer}.attn.hook_pattern"
            name, layer = key
            key = f"blocks.{layer}.attn.hook_{name}"
        try:
            return super().__getitem__(key)
        except KeyError:
            raise KeyError(f"no cached hook point {key!r}; cached: {list(self)}") from None

    def by_module(self, hook: str) -> dict[str, Any]:
        """``{module name: value}`` of every cached ``<module>.<hook>`` (e.g. ``hook_pattern``:
        one attention map per attention module)."""
        return {n.rpartition(".")[0]: v for n, v in self.items() if n.rpartition(".")[2] == hook}


NameFilter = Callable[[str], bool]


def _admits(names_filter: "str | tuple[str, ...] | NameFilter | None") -> NameFilter:
    """A name filter from a filter, a suffix (``"hook_pattern"``) or suffixes, or None (every point)."""
    if names_filter is None:
        return lambda n: True
    if isinstance(names_filter, (str, tuple)):
        return lambda n: n.endswith(names_filter)
    return names_filter


def run_with_cache(model: nn.Module, *args, names_filter: "str | tuple[str, ...] | NameFilter | None" = None,
                   forward: Callable[..., Any] | None = None, reduce: Callable[[torch.Tensor, str], Any] | None = None,
                   grad: bool = False, **kwargs) -> tuple[Any, ActivationCache]:
    """``(forward(*args, **kwargs), cache)``: run the model (``forward``, default ``model`` itself,
    e.g. ``model.classify`` or ``model.encode_embedded``) and keep the tensor of every hook point
    of ``model`` that ``names_filter`` admits (a predicate of the name, a name suffix, or None:
    all). ``reduce(tensor, name)``: keep what it returns instead of the tensor, computed as the
    pass produces it (nothing of the tensor's size is kept: the LRA report's way with (T, T)
    maps of long sequences). Unknown points cannot be named: the filter only selects among
    :func:`toyspt.nn.attention.hook_points`; a filter that admits none is refused."""
    admit = _admits(names_filter)
    names = [n for n in hook_points(model) if admit(n)]
    if not names:
        raise KeyError(f"run_with_cache: no hook point admitted by {names_filter!r}; "
                       f"available: {sorted(hook_points(model))}")
    cache = ActivationCache()

    def keep(t: torch.Tensor, name: str) -> None:
        if name in cache:
            raise RuntimeError(f"run_with_cache: hook point {name!r} fired twice in one pass "
                               "(a cache holds one tensor per hook point)")
        t = t.detach()
        dict.__setitem__(cache, name, reduce(t, name) if reduce is not None else t)

    mode = contextlib.nullcontext() if grad else torch.no_grad()
    with mode, hooks(model, [(n, keep) for n in names]):
        out = (forward if forward is not None else model)(*args, **kwargs)
    return out, cache


__all__ = ["ActivationCache", "run_with_cache"]
