"""Gradient-blindness probes on any model built from :class:`toyspt.attention.Attention`.

A probe perturbs every attention score tensor (hook points named ``*hook_attn_scores``)
by a zero tensor and differentiates a loss with respect to it, so ``dL/dS`` is exact and
nothing about the model is special-cased. The loss is an argument: ``"label"`` and
``"recon"`` name adapters (the toy model's by default; the LRA bridge passes its own
through ``losses=``), or pass any callable ``loss_fn(model, batch) -> scalar``.

What is returned per layer (score site) and head, see :class:`LayerProbe`:

* ``G``: gradient of the batch loss w.r.t. a score perturbation shared by all examples,
  (H, T, T). For a loss that averages over examples this is the mean of the per-example
  gradients.
* ``G_per_example``: (B, H, T, T), the gradient of the loss of each example alone (a batch
  of one), by ``torch.func.vmap(grad(...))`` over ``functional_call``.
* directional derivatives ``<G_h, D_k>`` along normalised directions (autograd), the same
  by forward mode (``torch.func.jvp``), cosines, row heterogeneity, and the share of
  ``||G||^2`` in the column-only and blind subspaces (:mod:`toyspt.directions`). Score
  gradients are row-centred (softmax is shift invariant), so the blind share equals the
  squared row heterogeneity; both are reported because they answer different questions.
* ``grad_W_Q``, ``grad_W_K``: weight gradients of the batch loss (d_model, d_model).
* ``dLdM``: (H, d, d), the derivative w.r.t. ``M_h`` in ``S_h = X M_h X^T`` (theory.md T4),
  computed as ``sum_b X_b^T dL/dS_bh X_b`` with ``X`` the attention input captured by a
  forward pre-hook. This is the derivative along a score perturbation ``X dM X^T``, exact
  whatever the Q/K biases are; when the biases are zero it satisfies
  ``dL/dW_Q^h = W_K^h dLdM_h^T / sqrt(d_head)`` (tested). Rotary layers have no such M:
  their ``dLdM`` is None.

Probes run on a float64 deep copy by default (``dtype=torch.float64``); ``dtype=None`` uses
the model as it is (in place, eval mode for the duration, flags restored). The caller's
model is never mutated and every hook is removed, also when the loss raises.
"""
from __future__ import annotations

import contextlib
import copy
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, jvp, vmap

from . import directions as dr
from .attention import Attention, hook_points, hooks
from .tasks import recon_loss, sample_mask

SCORE_HOOK = "hook_attn_scores"
LossFn = Callable[[nn.Module, Any], torch.Tensor]
DEFAULT_EPS = 1e-4  # central finite differences in float64: truncation ~eps^2, rounding ~1e-16/eps


# --------------------------------------------------------------------------------------
# batches and loss adapters

def make_batch(x: torch.Tensor, y: torch.Tensor | None = None, mask_rate: float = 0.5,
               seed: int = 0) -> dict[str, torch.Tensor]:
    """``{"x", "y", "mask"}`` with a Bernoulli(mask_rate) SPT mask drawn from ``seed``."""
    if x.dim() != 3:
        raise ValueError(f"x: expected (B, T, dim), got {tuple(x.shape)}")
    mask = sample_mask(x.shape[0], x.shape[1], mask_rate, torch.Generator().manual_seed(seed))
    batch = dict(x=x, mask=mask)
    if y is not None:
        if y.shape != x.shape[:1]:
            raise ValueError(f"y: expected shape ({x.shape[0]},), got {tuple(y.shape)}")
        batch["y"] = y
    return batch


def label_loss(model: nn.Module, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """Mean cross-entropy of ``model.classify(x)`` (mean-pooled classifier) against ``y``."""
    if "y" not in batch:
        raise KeyError("the 'label' loss needs labels: batch has no 'y'")
    return F.cross_entropy(model.classify(batch["x"]), batch["y"])


def recon(kind: str = "l1", attend: str = "all") -> LossFn:
    """Masked reconstruction (``model.reconstruct`` + :func:`toyspt.tasks.recon_loss`) on
    the batch's ``mask``; ``kind`` l1 (the SPT default) or mse (theory.md T3)."""

    def recon_loss_fn(model: nn.Module, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        if "mask" not in batch:
            raise KeyError("the 'recon' loss needs a mask: build the batch with make_batch")
        x, m = batch["x"], batch["mask"]
        return recon_loss(model.reconstruct(x, m, attend), x, m, kind)

    recon_loss_fn.__name__ = f"recon_{kind}"
    return recon_loss_fn


TOY_LOSSES: dict[str, LossFn] = {"label": label_loss, "recon": recon("l1")}


def resolve_loss(loss: "str | LossFn", losses: Mapping[str, LossFn] | None = None
                 ) -> tuple[str, LossFn]:
    """(name, fn) from a registered name or a callable."""
    if callable(loss):
        return getattr(loss, "__name__", "custom"), loss
    table = TOY_LOSSES if losses is None else losses
    if loss not in table:
        raise ValueError(f"unknown loss {loss!r}; named losses are {sorted(table)} or pass a callable")
    return loss, table[loss]


# --------------------------------------------------------------------------------------
# score sites, the working copy and the instrumented forward

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
                         f"('*.{SCORE_HOOK}'); probes need toyspt.attention.Attention modules")
    return sites


def _tree_map(fn, obj):
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, Mapping):
        return {k: _tree_map(fn, v) for k, v in obj.items()}
    if isinstance(obj, (tuple, list)):
        return type(obj)(_tree_map(fn, v) for v in obj)
    raise TypeError(f"batch leaves must be tensors, got {type(obj).__name__}")


def _stack_tree(items: list):
    """Stack a list of equally structured dicts/tuples of tensors along a new first dim."""
    first = items[0]
    if isinstance(first, torch.Tensor):
        return torch.stack(items)
    if isinstance(first, Mapping):
        return {k: _stack_tree([it[k] for it in items]) for k in first}
    return type(first)(_stack_tree(list(vs)) for vs in zip(*items))


def _batch_size(batch) -> int:
    sizes = set()
    _tree_map(lambda t: sizes.add(t.shape[0] if t.dim() else -1), batch)
    if len(sizes) != 1 or -1 in sizes:
        raise ValueError(f"every batch tensor needs the same leading batch dimension, got {sorted(sizes)}")
    return sizes.pop()


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


class _LossModule(nn.Module):
    """Wraps (model, loss) so ``functional_call`` can swap the model's parameters."""

    def __init__(self, model: nn.Module, loss_fn: LossFn):
        super().__init__()
        self.model = model
        self.loss_fn = loss_fn

    def forward(self, batch):
        return self.loss_fn(self.model, batch)


class _Instrument:
    """Score hooks that add ``self.delta[hook]`` (created lazily as zeros when ``lazy``)
    and pre-hooks recording each Attention module's input in ``self.x``."""

    def __init__(self, model: nn.Module, sites: Sequence[ScoreSite]):
        self.model, self.sites = model, list(sites)
        self.delta: dict[str, torch.Tensor] = {}
        self.x: dict[str, torch.Tensor] = {}
        self.lazy = False

    def _score_hook(self, s: torch.Tensor, name: str) -> torch.Tensor:
        if self.lazy and name not in self.delta:
            self.delta[name] = torch.zeros_like(s, requires_grad=True)
        if name not in self.delta:
            return s
        return s + self.delta[name]

    @contextlib.contextmanager
    def active(self) -> Iterator["_Instrument"]:
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


def _check_grad(g: torch.Tensor | None, what: str) -> torch.Tensor:
    if g is None:
        raise RuntimeError(f"gradient of {what} is None: the loss does not depend on it")
    if not torch.isfinite(g).all():
        raise FloatingPointError(f"gradient of {what} is not finite")
    return g


def _qk_names(work: nn.Module, sites: Sequence[ScoreSite]) -> dict[str, tuple[str, str]]:
    """hook -> (W_Q weight name, W_K weight name) for Attention sites without rotary."""
    out = {}
    for site in sites:
        mod = work.get_submodule(site.module)
        if isinstance(mod, Attention) and not mod.use_rope:
            pre = f"model.{site.module}." if site.module else "model."
            out[site.hook] = (pre + "W_Q.weight", pre + "W_K.weight")
    return out


# --------------------------------------------------------------------------------------
# results

@dataclass(frozen=True)
class LayerProbe:
    """Probe quantities of one score site; H heads, K directions, B examples, d = d_model."""

    site: str  # score hook name
    G: torch.Tensor  # (H, T, T) dL/dS, perturbation shared by the batch
    row_heterogeneity: torch.Tensor  # (H,) ||G - 1 mean_rows(G)|| / ||G||
    column_share: torch.Tensor  # (H,) share of ||G||^2 in {1 c^T}
    blind_share: torch.Tensor  # (H,) share of ||G||^2 in the blind subspace
    deriv: torch.Tensor  # (H, K) <G_h, D_k> by autograd (D_k row-centred, unit norm)
    cos: torch.Tensor  # (H, K) <G_h, D_k> / ||G_h||
    deriv_jvp: torch.Tensor | None  # (H, K) the same by forward mode
    G_per_example: torch.Tensor | None  # (B, H, T, T) gradient of each example's own loss
    deriv_per_example: torch.Tensor | None  # (B, H, K)
    row_heterogeneity_per_example: torch.Tensor | None  # (B, H)
    grad_W_Q: torch.Tensor | None  # (d, d) weight gradient of the batch loss
    grad_W_K: torch.Tensor | None  # (d, d)
    grad_W_Q_per_example: torch.Tensor | None  # (B, d, d)
    grad_W_K_per_example: torch.Tensor | None  # (B, d, d)
    dLdM: torch.Tensor | None  # (H, d, d) sum_b X_b^T dL/dS_bh X_b
    dLdM_sv: torch.Tensor | None  # (H, d) singular values, descending
    dLdM_sv_per_example: torch.Tensor | None  # (B, H, d)

    @property
    def cos_rms_per_example(self) -> torch.Tensor | None:
        """(H, K) ``rms_b <G_bh, D_k> / rms_b ||G_bh||``: the cosine seen example by example."""
        if self.G_per_example is None:
            return None
        num = self.deriv_per_example.pow(2).mean(0).sqrt()
        den = torch.linalg.matrix_norm(self.G_per_example).pow(2).mean(0).sqrt()
        return num / den[:, None]


@dataclass(frozen=True)
class ProbeResult:
    """All score sites of one probe: ``result[site]`` or ``result.layers``."""

    loss: str  # loss name
    value: float  # loss of the batch at the probed weights
    directions: tuple[str, ...]  # names of the K directions
    D: torch.Tensor  # (K, T, T) the normalised directions used
    layers: tuple[LayerProbe, ...]  # one per score site, in module order

    def __getitem__(self, site: str) -> LayerProbe:
        for lp in self.layers:
            if lp.site == site:
                return lp
        raise KeyError(f"no score site {site!r}; sites are {[lp.site for lp in self.layers]}")

    def to_frame(self) -> pd.DataFrame:
        """Tidy rows (loss, layer, head, direction, metric, value); per-example tensors are
        summarised (max row heterogeneity, rms cosine, max sv2/sv1 of dL/dM)."""
        rows = []

        def add(layer, head, direction, metric, value):
            rows.append(dict(loss=self.loss, layer=layer, head=head, direction=direction,
                             metric=metric, value=float(value)))

        for lp in self.layers:
            H = lp.G.shape[0]
            cos_rms = lp.cos_rms_per_example
            for h in range(H):
                add(lp.site, h, None, "row_heterogeneity", lp.row_heterogeneity[h])
                add(lp.site, h, None, "column_share", lp.column_share[h])
                add(lp.site, h, None, "blind_share", lp.blind_share[h])
                add(lp.site, h, None, "grad_S_norm", torch.linalg.matrix_norm(lp.G[h]))
                if lp.row_heterogeneity_per_example is not None:
                    add(lp.site, h, None, "row_heterogeneity_per_example_max",
                        lp.row_heterogeneity_per_example[:, h].max())
                if lp.grad_W_Q is not None:
                    dh = lp.grad_W_Q.shape[0] // H
                    sl = slice(h * dh, (h + 1) * dh)
                    add(lp.site, h, None, "grad_W_Q_norm", lp.grad_W_Q[sl].norm())
                    add(lp.site, h, None, "grad_W_K_norm", lp.grad_W_K[sl].norm())
                if lp.dLdM_sv is not None:
                    sv = lp.dLdM_sv[h]
                    add(lp.site, h, None, "dLdM_sv1", sv[0])
                    add(lp.site, h, None, "dLdM_sv2_over_sv1", sv[1] / sv[0])
                    # numerical rank, the usual threshold sv1 * size * machine epsilon
                    tol = sv[0] * sv.numel() * torch.finfo(sv.dtype).eps
                    add(lp.site, h, None, "dLdM_rank", int((sv > tol).sum()))
                if lp.dLdM_sv_per_example is not None:
                    sv = lp.dLdM_sv_per_example[:, h]
                    add(lp.site, h, None, "dLdM_sv2_over_sv1_per_example_max", (sv[:, 1] / sv[:, 0]).max())
                for k, name in enumerate(self.directions):
                    add(lp.site, h, name, "deriv", lp.deriv[h, k])
                    add(lp.site, h, name, "cos", lp.cos[h, k])
                    if lp.deriv_jvp is not None:
                        add(lp.site, h, name, "deriv_jvp", lp.deriv_jvp[h, k])
                    if cos_rms is not None:
                        add(lp.site, h, name, "cos_rms_per_example", cos_rms[h, k])
        return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------
# the probe

def _cast(batch, dtype):
    if dtype is None:
        return batch
    return _tree_map(lambda t: t.to(dtype) if t.is_floating_point() else t, batch)


def _params(work: nn.Module, grad_names: Sequence[str] = ()) -> dict[str, torch.Tensor]:
    return {"model." + n: p.detach().requires_grad_("model." + n in grad_names)
            for n, p in work.named_parameters()}


@contextlib.contextmanager
def _instrumented(model: nn.Module, batch, loss, losses, dtype):
    """The setup every probe shares: score sites, the resolved loss, a working copy of the
    model (float64 on request) with its score hooks active, the cast batch. Yields
    ``(sites, loss name, work, batch, loss wrapper, instrument, {hook: (W_Q, W_K) names})``."""
    sites = score_sites(model)
    name, loss_fn = resolve_loss(loss, losses)
    if _batch_size(batch) == 0:
        raise ValueError("empty batch")
    with working_model(model, dtype) as work:
        inst = _Instrument(work, sites)
        with inst.active():
            yield (sites, name, work, _cast(batch, dtype), _LossModule(work, loss_fn), inst,
                   _qk_names(work, sites))


def probe(model: nn.Module, batch, loss: "str | LossFn" = "label",
          directions: "Sequence[str] | Mapping[str, torch.Tensor] | None" = None, *,
          losses: Mapping[str, LossFn] | None = None, dtype: torch.dtype | None = torch.float64,
          per_example: bool = True, use_jvp: bool = True, jvp_chunk: int = 32) -> ProbeResult:
    """Score-gradient probe of ``loss`` on ``batch`` at every attention score site.

    ``directions``: names (see :mod:`toyspt.directions`, default
    :data:`~toyspt.directions.DEFAULT_DIRECTIONS`) or ``{name: (T, T) tensor}`` (normalised
    here). ``per_example`` adds the torch.func per-example gradients; ``use_jvp`` the
    forward-mode directional derivatives. Raises on None or non-finite gradients.
    """
    with _instrumented(model, batch, loss, losses, dtype) as (sites, name, work, batch, wrapper, inst, qk):
        qk_flat = [n for pair in qk.values() for n in pair]
        # 1) one batched backward: dL/dS_b of the batch loss, weight grads, inputs X
        inst.lazy = True
        params = _params(work, qk_flat)
        L = functional_call(wrapper, params, (batch,))
        inst.lazy = False
        if L.dim() != 0:
            raise ValueError(f"loss {name!r} must return a scalar, got shape {tuple(L.shape)}")
        if not torch.isfinite(L):
            raise FloatingPointError(f"loss {name!r} is not finite ({L.item()})")
        missing = [s.hook for s in sites if s.hook not in inst.delta]
        if missing:
            raise RuntimeError(f"score hooks {missing} were not reached by loss {name!r}")
        if not L.requires_grad:
            raise RuntimeError(f"gradient of the scores is None: loss {name!r} does not depend "
                               "on them (detached?)")
        targets = [inst.delta[s.hook] for s in sites] + [params[n] for n in qk_flat]
        grads = torch.autograd.grad(L, targets, allow_unused=True)
        gS = {s.hook: _check_grad(g, f"the scores at {s.hook}") for s, g in zip(sites, grads)}
        gW = {n: _check_grad(g, n) for n, g in zip(qk_flat, grads[len(sites):])}
        X = {k: v.detach() for k, v in inst.x.items()}
        shapes = {h: g.shape[1:] for h, g in gS.items()}
        T = next(iter(shapes.values()))[-1]
        names, D = dr.stack(dict(directions) if isinstance(directions, Mapping)
                            else list(directions or dr.DEFAULT_DIRECTIONS), T)
        if D.shape[-1] != T:
            raise ValueError(f"directions are {D.shape[-1]}x{D.shape[-1]}, scores are {T}x{T}")
        D = D.to(L.dtype)
        inst.delta = {}
        # 2) per-example gradients with torch.func
        pe = _per_example(wrapper, work, inst, sites, qk_flat, batch, shapes, L.dtype) if per_example else None
        # 3) forward-mode directional derivatives
        djvp = _jvp_derivs(wrapper, work, inst, sites, batch, shapes, D, jvp_chunk) if use_jvp else None
    layers = []
    for s in sites:
        G_B = gS[s.hook]
        G = G_B.sum(0)
        deriv = torch.einsum("htu,ktu->hk", G, D)
        lp = dict(site=s.hook, G=G, row_heterogeneity=dr.row_heterogeneity(G),
                  column_share=dr.energy_share(G, dr.column_only), blind_share=dr.energy_share(G, dr.blind),
                  deriv=deriv, cos=deriv / torch.linalg.matrix_norm(G)[:, None],
                  deriv_jvp=None if djvp is None else djvp[s.hook],
                  G_per_example=None, deriv_per_example=None, row_heterogeneity_per_example=None,
                  grad_W_Q=None, grad_W_K=None, grad_W_Q_per_example=None, grad_W_K_per_example=None,
                  dLdM=None, dLdM_sv=None, dLdM_sv_per_example=None)
        if s.hook in qk:
            nq, nk = qk[s.hook]
            x = X[s.hook]
            dLdM = torch.einsum("bti,bhtu,buj->hij", x, G_B, x)
            lp.update(grad_W_Q=gW[nq], grad_W_K=gW[nk], dLdM=dLdM, dLdM_sv=torch.linalg.svdvals(dLdM))
        if pe is not None:
            Gp, gWp, Xp = pe
            g = Gp[s.hook]
            lp.update(G_per_example=g, deriv_per_example=torch.einsum("bhtu,ktu->bhk", g, D),
                      row_heterogeneity_per_example=dr.row_heterogeneity(g))
            if s.hook in qk:
                nq, nk = qk[s.hook]
                x = Xp[s.hook]
                lp.update(grad_W_Q_per_example=gWp[nq], grad_W_K_per_example=gWp[nk],
                          dLdM_sv_per_example=torch.linalg.svdvals(
                              torch.einsum("bti,bhtu,buj->bhij", x, g, x)))
        layers.append(LayerProbe(**lp))
    return ProbeResult(name, L.item(), names, D, tuple(layers))


def _per_example(wrapper, work, inst, sites, qk_flat, batch, shapes, dtype):
    """vmap(grad) of the loss of a batch of one: score and W_Q/W_K gradients, and inputs."""
    frozen = {k: v for k, v in _params(work).items() if k not in qk_flat}
    qk0 = {n: dict(work.named_parameters())[n[len("model."):]].detach() for n in qk_flat}
    x_hooks = [s.hook for s in sites if s.hook in inst.x]

    def one(delta, qk, example):
        inst.delta, inst.x = delta, {}
        b1 = _tree_map(lambda t: t.unsqueeze(0), example)
        L = functional_call(wrapper, {**frozen, **qk}, (b1,))
        return L, {h: inst.x[h][0] for h in x_hooks}

    zeros = {h: torch.zeros(shp, dtype=dtype) for h, shp in shapes.items()}
    g1 = grad(one, argnums=(0, 1), has_aux=True)
    try:
        try:
            (gD, gQK), X = vmap(g1, in_dims=(None, None, 0))(zeros, qk0, batch)
        except RuntimeError as e:  # a model op without a batching rule (e.g. boolean-mask indexing)
            if "vmap" not in str(e):
                raise
            warnings.warn(f"per-example gradients: vmap failed ({e}); falling back to a loop over examples",
                          RuntimeWarning, stacklevel=3)
            outs = [g1(zeros, qk0, _tree_map(lambda t: t[b], batch)) for b in range(_batch_size(batch))]
            (gD, gQK), X = _stack_tree([o[0] for o in outs]), _stack_tree([o[1] for o in outs])
    finally:
        inst.delta, inst.x = {}, {}
    gD = {h: _check_grad(g, f"the per-example scores at {h}") for h, g in gD.items()}
    gQK = {n: _check_grad(g, f"per-example {n}") for n, g in gQK.items()}
    return gD, gQK, X


@dataclass(frozen=True)
class PerExampleGrads:
    """Gradients of each example's own loss (a batch of one), from one vmap(grad) call."""

    scores: dict[str, torch.Tensor]  # score hook -> (B, H, T, T) dl_b/dS_b
    weights: dict[str, torch.Tensor]  # "<attention>.W_Q.weight" / W_K -> (B, d, d)
    inputs: dict[str, torch.Tensor]  # score hook -> (B, T, d) attention input X_b


def per_example_grads(model: nn.Module, batch, loss: "str | LossFn" = "label", *,
                      losses: Mapping[str, LossFn] | None = None,
                      dtype: torch.dtype | None = torch.float64) -> PerExampleGrads:
    """Per-example score and W_Q/W_K gradients only (what :func:`probe` computes with
    ``per_example=True``), via ``torch.func.vmap(grad(...))`` over ``functional_call``."""
    with _instrumented(model, batch, loss, losses, dtype) as (sites, _, work, batch, wrapper, inst, qk):
        qk_flat = [n for pair in qk.values() for n in pair]
        inst.lazy = True  # shapes from one example, without gradients
        with torch.no_grad():
            L = wrapper(_tree_map(lambda t: t[:1], batch))
        inst.lazy = False
        shapes = {h: d.shape[1:] for h, d in inst.delta.items()}
        missing = [s.hook for s in sites if s.hook not in shapes]
        if missing:
            raise RuntimeError(f"score hooks {missing} were not reached by the loss")
        inst.delta = {}
        gS, gW, X = _per_example(wrapper, work, inst, sites, qk_flat, batch, shapes, L.dtype)
    return PerExampleGrads(gS, {n[len("model."):]: g for n, g in gW.items()}, X)


def _jvp_derivs(wrapper, work, inst, sites, batch, shapes, D, chunk):
    """(H, K) forward-mode derivatives per site: jvp of L(delta) along head h, direction k.
    One vmap over the K directions per (site, head), so memory is K x (H, T, T) at most."""
    params = _params(work)
    zeros = {s.hook: torch.zeros(shapes[s.hook], dtype=D.dtype) for s in sites}

    def f(delta):
        inst.delta = delta
        return functional_call(wrapper, params, (batch,))

    res = {}
    try:
        with warnings.catch_warnings():  # torch's forward-AD decompositions load via torch.jit once
            warnings.filterwarnings("ignore", message=".*torch.jit.script.*deprecated", category=DeprecationWarning)
            for s in sites:
                H = shapes[s.hook][0]
                res[s.hook] = torch.zeros(H, D.shape[0], dtype=D.dtype)
                for head in range(H):
                    onehot = torch.zeros(H, 1, 1, dtype=D.dtype)
                    onehot[head] = 1.0

                    def along(d_TxT, hook=s.hook, onehot=onehot):
                        tangent = {**zeros, hook: onehot * d_TxT}
                        return jvp(f, (zeros,), (tangent,))[1]

                    res[s.hook][head] = vmap(along, chunk_size=chunk)(D)
    finally:
        inst.delta = {}
    for h, v in res.items():
        if not torch.isfinite(v).all():
            raise FloatingPointError(f"forward-mode directional derivative at {h} is not finite")
    return res


def directional_fd(model: nn.Module, batch, loss: "str | LossFn", site: str, head: int,
                   D: torch.Tensor, eps: float = DEFAULT_EPS, *, losses: Mapping[str, LossFn] | None = None,
                   dtype: torch.dtype | None = torch.float64) -> float:
    """Central finite difference ``(L(S + eps D_h) - L(S - eps D_h)) / (2 eps)``, with the
    (T, T) direction ``D`` added to head ``head`` of every example's scores at ``site``."""
    sites = score_sites(model)
    if site not in {s.hook for s in sites}:
        raise KeyError(f"no score site {site!r}; sites are {[s.hook for s in sites]}")
    _, loss_fn = resolve_loss(loss, losses)
    with working_model(model, dtype) as work, torch.no_grad():
        batch = _cast(batch, dtype)
        inst = _Instrument(work, sites)
        vals = []
        with inst.active():
            for sign in (1.0, -1.0):
                inst.lazy = True
                inst.delta = {}
                L0 = loss_fn(work, batch)  # creates zero deltas of the right shape
                del L0
                delta = torch.zeros_like(inst.delta[site])
                delta[:, head] = sign * eps * D.to(delta.dtype)
                inst.lazy, inst.delta = False, {site: delta}
                vals.append(float(loss_fn(work, batch)))
    return (vals[0] - vals[1]) / (2 * eps)


# --------------------------------------------------------------------------------------
# label against recon

@dataclass(frozen=True)
class Blindness:
    """Two probes on the same batch and the blindness ratio per site, head and direction.

    ``ratio = |cos_label| / |cos_recon|`` with ``cos = <G, D_hat> / ||G||_F``: each loss's
    derivative along the unit direction, relative to that loss's own steepest rate, so the
    scale of the losses (cross-entropy vs L1) cancels. 0 means the label loss is blind to
    the direction while reconstruction is not; ~1 equally sighted; nan when recon is blind
    too. ``ratio_per_example`` uses the rms cosines (directions seen example by example).
    """

    label: ProbeResult
    recon: ProbeResult

    @property
    def ratio(self) -> dict[str, torch.Tensor]:
        return {a.site: a.cos.abs() / b.cos.abs() for a, b in zip(self.label.layers, self.recon.layers)}

    @property
    def ratio_per_example(self) -> dict[str, torch.Tensor] | None:
        if self.label.layers[0].G_per_example is None or self.recon.layers[0].G_per_example is None:
            return None
        return {a.site: a.cos_rms_per_example / b.cos_rms_per_example
                for a, b in zip(self.label.layers, self.recon.layers)}

    def table(self) -> pd.DataFrame:
        """One row per (layer, head, direction): cosines, derivatives and ratios."""
        rows = []
        rpe = self.ratio_per_example
        for a, b in zip(self.label.layers, self.recon.layers):
            r = self.ratio[a.site]
            for h in range(a.G.shape[0]):
                for k, name in enumerate(self.label.directions):
                    row = dict(layer=a.site, head=h, direction=name, cos_label=float(a.cos[h, k]),
                               cos_recon=float(b.cos[h, k]), ratio=float(r[h, k]),
                               deriv_label=float(a.deriv[h, k]), deriv_recon=float(b.deriv[h, k]))
                    if rpe is not None:
                        row["ratio_per_example"] = float(rpe[a.site][h, k])
                    rows.append(row)
        return pd.DataFrame(rows)

    def to_frame(self) -> pd.DataFrame:
        """Tidy: both probes' frames plus ``ratio`` rows (loss = "label/recon")."""
        t = self.table()
        extra = t.melt(id_vars=["layer", "head", "direction"],
                       value_vars=[c for c in ("ratio", "ratio_per_example") if c in t],
                       var_name="metric", value_name="value").assign(loss="label/recon")
        return pd.concat([self.label.to_frame(), self.recon.to_frame(), extra], ignore_index=True)


def blindness(model: nn.Module, batch, directions=None, *, label: "str | LossFn" = "label",
              recon: "str | LossFn" = "recon", losses: Mapping[str, LossFn] | None = None,
              **kw) -> Blindness:
    """Probe ``label`` and ``recon`` on the same batch and directions (see :class:`Blindness`)."""
    return Blindness(probe(model, batch, label, directions, losses=losses, **kw),
                     probe(model, batch, recon, directions, losses=losses, **kw))


__all__ = ["make_batch", "label_loss", "recon", "TOY_LOSSES", "resolve_loss", "ScoreSite",
           "score_sites", "working_model", "LayerProbe", "ProbeResult", "probe", "directional_fd",
           "PerExampleGrads", "per_example_grads",
           "Blindness", "blindness"]
