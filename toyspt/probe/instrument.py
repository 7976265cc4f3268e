"""How a probe attaches to a model: score sites, the working copy, the instrumented forward.

Every probe of :mod:`toyspt.probe.engine` runs inside :func:`instrumented`: the model's score
sites (hook points ``*hook_attn_scores``), the resolved loss, a working copy of the model
(float64 on request, eval mode, flags restored after) whose score hooks add a perturbation
``delta`` that the probes differentiate, and pre-hooks that record each attention module's
input ``X``. Hooks are removed on exit, also when the loss raises.
"""
from __future__ import annotations

import contextlib
import copy
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence

import torch
from torch import nn

from toyspt.nn.attention import Attention, hook_points, hooks
from toyspt.probe.losses import TOY_LOSSES, LossFn

SCORE_HOOK = "hook_attn_scores"
PARAM_PREFIX = "model."  # prefix of the model's parameters in the functional_call of LossModule


def resolve_loss(loss: "str | LossFn", losses: Mapping[str, LossFn] | None = None
                 ) -> tuple[str, LossFn]:
    """(name, fn) from a registered name (``losses``, default the toy model's) or a callable."""
    if callable(loss):
        return getattr(loss, "__name__", "custom"), loss
    table = TOY_LOSSES if losses is None else losses
    if loss not in table:
        raise ValueError(f"unknown loss {loss!r}; named losses are {sorted(table)} or pass a callable")
    return loss, table[loss]


@dataclass(frozen=True)
class ScoreSite:
    """One attention score tensor: its hook name and the module that owns it."""

    hook: str  # e.g. blocks.0.attn.hook_attn_scores
    module: str  # e.g. blocks.0.attn


def score_sites(model: nn.Module) -> list[ScoreSite]:
    """Every ``*hook_attn_scores`` hook point, in module order; none -> ValueError."""
    sites = [ScoreSite(n, n.rpartition(".")[0]) for n in hook_points(model)
             if n == SCORE_HOOK or n.endswith("." + SCORE_HOOK)]
    if not sites:
        raise ValueError(f"{type(model).__name__} has no attention score hook points "
                         f"('*.{SCORE_HOOK}'); probes need toyspt.nn.attention.Attention modules")
    return sites


def tree_map(fn, obj):
    """``fn`` applied to every tensor of a nested dict/tuple/list batch; other leaves raise."""
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, Mapping):
        return {k: tree_map(fn, v) for k, v in obj.items()}
    if isinstance(obj, (tuple, list)):
        return type(obj)(tree_map(fn, v) for v in obj)
    raise TypeError(f"batch leaves must be tensors, got {type(obj).__name__}")


def stack_tree(items: list):
    """Stack a list of equally structured dicts/tuples of tensors along a new first dim."""
    first = items[0]
    if isinstance(first, torch.Tensor):
        return torch.stack(items)
    if isinstance(first, Mapping):
        return {k: stack_tree([it[k] for it in items]) for k in first}
    return type(first)(stack_tree(list(vs)) for vs in zip(*items))


def batch_size(batch) -> int:
    """The leading dimension shared by every tensor of the batch; disagreement raises."""
    sizes = set()
    tree_map(lambda t: sizes.add(t.shape[0] if t.dim() else -1), batch)
    if len(sizes) != 1 or -1 in sizes:
        raise ValueError(f"every batch tensor needs the same leading batch dimension, got {sorted(sizes)}")
    return sizes.pop()


def cast_batch(batch, dtype):
    """Floating tensors of the batch cast to ``dtype`` (None: unchanged); labels keep theirs."""
    if dtype is None:
        return batch
    return tree_map(lambda t: t.to(dtype) if t.is_floating_point() else t, batch)


@contextlib.contextmanager
def working_model(model: nn.Module, dtype: torch.dtype | None) -> Iterator[nn.Module]:
    """The model to probe: a deep copy cast to ``dtype`` when that changes anything, else
    the model itself; eval mode inside, the original train/eval flags restored after."""
    floats = {p.dtype for p in list(model.parameters()) + list(model.buffers()) if p.is_floating_point()}
    work = copy.deepcopy(model).to(dtype) if dtype is not None and floats - {dtype} else model
    flags = [(m, m.training) for m in work.modules()]
    work.eval()
    try:
        yield work
    finally:
        for m, t in flags:
            m.train(t)


class LossModule(nn.Module):
    """Wraps (model, loss) so ``functional_call`` can swap the model's parameters."""

    def __init__(self, model: nn.Module, loss_fn: LossFn):
        super().__init__()
        self.model = model
        self.loss_fn = loss_fn

    def forward(self, batch):
        return self.loss_fn(self.model, batch)


class Instrument:
    """Score hooks that add ``self.delta[hook]`` (created lazily as zeros when ``lazy``)
    and pre-hooks recording each Attention module's input in ``self.x``."""

    def __init__(self, model: nn.Module, sites: Sequence[ScoreSite]):
        self.model, self.sites = model, list(sites)
        self.delta: dict[str, torch.Tensor] = {}  # score hook -> (B, H, T, T) perturbation
        self.x: dict[str, torch.Tensor] = {}  # score hook -> (B, T, d) attention input
        self.lazy = False

    def _score_hook(self, s: torch.Tensor, name: str) -> torch.Tensor:
        if self.lazy and name not in self.delta:
            self.delta[name] = torch.zeros_like(s, requires_grad=True)
        if name not in self.delta:
            return s
        return s + self.delta[name]

    @contextlib.contextmanager
    def active(self) -> Iterator["Instrument"]:
        """The hooks attached for the ``with`` block, removed after (also on error)."""
        pre = []
        try:
            for site in self.sites:
                mod = self.model.get_submodule(site.module)
                if isinstance(mod, Attention):
                    pre.append(mod.register_forward_pre_hook(
                        lambda m, args, n=site.hook: self.x.__setitem__(n, args[0])))
            with hooks(self.model, [(site.hook, self._score_hook) for site in self.sites]):
                yield self
        finally:
            for h in pre:
                h.remove()


def check_grad(g: torch.Tensor | None, what: str) -> torch.Tensor:
    """``g`` itself; None (the loss does not depend on ``what``) or non-finite raises."""
    if g is None:
        raise RuntimeError(f"gradient of {what} is None: the loss does not depend on it")
    if not torch.isfinite(g).all():
        raise FloatingPointError(f"gradient of {what} is not finite")
    return g


def qk_names(work: nn.Module, sites: Sequence[ScoreSite]) -> dict[str, tuple[str, str]]:
    """hook -> (W_Q weight name, W_K weight name), as ``functional_call`` names (``PARAM_PREFIX``
    prefix), for Attention sites without rotary."""
    out = {}
    for site in sites:
        mod = work.get_submodule(site.module)
        if isinstance(mod, Attention) and not mod.use_rope:
            pre = f"{PARAM_PREFIX}{site.module}." if site.module else PARAM_PREFIX
            out[site.hook] = (pre + "W_Q.weight", pre + "W_K.weight")
    return out


def functional_params(work: nn.Module, grad_names: Sequence[str] = ()) -> dict[str, torch.Tensor]:
    """Detached parameters of ``work`` by ``functional_call`` name; those in ``grad_names``
    require grad."""
    return {PARAM_PREFIX + n: p.detach().requires_grad_(PARAM_PREFIX + n in grad_names)
            for n, p in work.named_parameters()}


@dataclass(frozen=True)
class Session:
    """The setup every probe shares, from :func:`instrumented`."""

    sites: list[ScoreSite]  # score sites, in module order
    loss_name: str  # the resolved loss's name
    work: nn.Module  # the working model (float64 copy on request), eval mode
    batch: Any  # the batch, floats cast to the working dtype
    wrapper: LossModule  # (work, loss) for functional_call
    inst: Instrument  # score perturbations and attention inputs, hooks active
    qk: dict[str, tuple[str, str]]  # hook -> (W_Q, W_K) functional_call names; non-rotary sites

    @property
    def qk_flat(self) -> list[str]:
        """Every W_Q / W_K name of ``qk``, site by site."""
        return [n for pair in self.qk.values() for n in pair]


@contextlib.contextmanager
def instrumented(model: nn.Module, batch, loss, losses, dtype) -> Iterator[Session]:
    """Score sites, the resolved loss, a working copy of the model (float64 on request)
    with its score hooks active and the cast batch, as one :class:`Session`."""
    sites = score_sites(model)
    name, loss_fn = resolve_loss(loss, losses)
    if batch_size(batch) == 0:
        raise ValueError("empty batch")
    with working_model(model, dtype) as work:
        inst = Instrument(work, sites)
        with inst.active():
            yield Session(sites, name, work, cast_batch(batch, dtype), LossModule(work, loss_fn), inst,
                          qk_names(work, sites))


__all__ = ["SCORE_HOOK", "PARAM_PREFIX", "resolve_loss", "ScoreSite", "score_sites", "working_model",
           "tree_map", "stack_tree", "batch_size", "cast_batch", "LossModule", "Instrument", "check_grad",
           "qk_names", "functional_params", "Session", "instrumented"]
