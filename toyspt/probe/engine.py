"""Gradient-blindness probes on any model built from :class:`toyspt.nn.attention.Attention`.

A probe perturbs every attention score tensor (hook points named ``*hook_attn_scores``)
by a zero tensor and differentiates a loss with respect to it, so ``dL/dS`` is exact and
nothing about the model is special-cased. The loss is an argument: ``"label"`` and
``"recon"`` name adapters (the toy model's, :mod:`toyspt.probe.losses`, by default; the LRA bridge
passes its own through ``losses=``), or pass any callable ``loss_fn(model, batch) -> scalar``.

This module is the engine: one batched backward for ``dL/dS``, the W_Q / W_K gradients and
the attention inputs (for ``dL/dM``); per-example gradients by
``torch.func.vmap(grad(...))`` over ``functional_call``; forward-mode directional
derivatives by ``torch.func.jvp``; central finite differences. How a probe attaches to a
model is :mod:`toyspt.probe.instrument`; what it returns is described in :mod:`toyspt.probe.results`
(records and tidy tables); the toy's losses and batches are :mod:`toyspt.probe.losses`.

``probe(..., lean=True)`` is the same probe for long sequences (the LRA report at T = 2000):
per head only ||G||, the row heterogeneity, column-only and blind shares and ``<G_h, D_r>``,
without keeping any (H, T, T) gradient or weight gradient. The weights are frozen and only a
zero scalar added to each score tensor carries a gradient, so backward does no weight-gradient
work; each site's G is reduced **as soon as backward produces it** (a tensor hook), one head
at a time in float64 (as :mod:`toyspt.data.directions` does), and dropped, so at most one
site's G and one head's float64 copy exist at once. Same numbers as the full path (tested).

Probes run on a float64 deep copy by default (``dtype=torch.float64``); ``dtype=None`` uses
the model as it is (in place, eval mode for the duration, flags restored). The caller's
model is never mutated and every hook is removed, also when the loss raises.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Mapping, Sequence

import torch
from torch import nn
from torch.func import functional_call, grad, jvp, vmap

from toyspt.data import directions as dr
from toyspt.nn.attention import hooks
from toyspt.probe.instrument import (
    PARAM_PREFIX,
    Instrument,
    Session,
    batch_size,
    cast_batch,
    check_grad,
    functional_params,
    instrumented,
    resolve_loss,
    score_sites,
    stack_tree,
    tree_map,
    working_model,
)
from toyspt.probe.losses import LossFn
from toyspt.probe.results import Blindness, LayerProbe, PerExampleGrads, PerExampleProbe, ProbeResult, QKGrads

DEFAULT_EPS = 1e-4  # central finite differences in float64: truncation ~eps^2, rounding ~1e-16/eps


# --------------------------------------------------------------------------------------
# the probe

@dataclass(frozen=True)
class _BatchGrads:
    """One batched backward of the batch loss."""

    value: torch.Tensor  # () the loss
    scores: dict[str, torch.Tensor]  # hook -> (B, H, T, T) dL/dS_b
    weights: dict[str, torch.Tensor]  # W_Q / W_K functional_call name -> (d, d)
    inputs: dict[str, torch.Tensor]  # hook -> (B, T, d) attention input


def _batch_grads(ses: Session) -> _BatchGrads:
    """dL/dS_b of the batch loss at every site, W_Q / W_K gradients, attention inputs."""
    sites, inst, name = ses.sites, ses.inst, ses.loss_name
    qk_flat = ses.qk_flat
    inst.lazy = True
    params = functional_params(ses.work, qk_flat)
    L = functional_call(ses.wrapper, params, (ses.batch,))
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
    gS = {s.hook: check_grad(g, f"the scores at {s.hook}") for s, g in zip(sites, grads)}
    gW = {n: check_grad(g, n) for n, g in zip(qk_flat, grads[len(sites):])}
    return _BatchGrads(L, gS, gW, {k: v.detach() for k, v in inst.x.items()})


def _dLdM(X_BxTxD: torch.Tensor, G_BxHxTxT: torch.Tensor) -> torch.Tensor:
    """(H, d, d) ``sum_b X_b^T G_bh X_b``: the derivative along ``S_h -> S_h + X dM X^T``."""
    return torch.einsum("bti,bhtu,buj->hij", X_BxTxD, G_BxHxTxT, X_BxTxD)


def _dLdM_per_example(X_BxTxD: torch.Tensor, G_BxHxTxT: torch.Tensor) -> torch.Tensor:
    """(B, H, d, d) ``X_b^T G_bh X_b`` for each example."""
    return torch.einsum("bti,bhtu,buj->bhij", X_BxTxD, G_BxHxTxT, X_BxTxD)


def _layer_probe(site: str, bg: _BatchGrads, D_RxTxT: torch.Tensor, qk: tuple[str, str] | None,
                 deriv_jvp_HxR: torch.Tensor | None, pe: PerExampleGrads | None) -> LayerProbe:
    """The record of one score site from the batch gradients (and the per-example ones)."""
    G_BxHxTxT = bg.scores[site]
    G_HxTxT = G_BxHxTxT.sum(0)
    deriv_HxR = torch.einsum("htu,rtu->hr", G_HxTxT, D_RxTxT)
    qk_grads = None
    if qk is not None:
        dLdM_HxDxD = _dLdM(bg.inputs[site], G_BxHxTxT)
        qk_grads = QKGrads(grad_W_Q=bg.weights[qk[0]], grad_W_K=bg.weights[qk[1]], dLdM=dLdM_HxDxD,
                           dLdM_sv=torch.linalg.svdvals(dLdM_HxDxD))
    per_example = None
    if pe is not None:
        g_BxHxTxT = pe.scores[site]
        wq, wk, sv = None, None, None
        if qk is not None:
            wq, wk = pe.weights[qk[0][len(PARAM_PREFIX):]], pe.weights[qk[1][len(PARAM_PREFIX):]]
            sv = torch.linalg.svdvals(_dLdM_per_example(pe.inputs[site], g_BxHxTxT))
        per_example = PerExampleProbe(G=g_BxHxTxT, deriv=torch.einsum("bhtu,rtu->bhr", g_BxHxTxT, D_RxTxT),
                                      row_heterogeneity=dr.row_heterogeneity(g_BxHxTxT),
                                      grad_W_Q=wq, grad_W_K=wk, dLdM_sv=sv)
    return LayerProbe(site=site, G=G_HxTxT, grad_norm=torch.linalg.matrix_norm(G_HxTxT),
                      row_heterogeneity=dr.row_heterogeneity(G_HxTxT),
                      column_share=dr.energy_share(G_HxTxT, dr.column_only),
                      blind_share=dr.energy_share(G_HxTxT, dr.blind), deriv=deriv_HxR,
                      cos=deriv_HxR / torch.linalg.matrix_norm(G_HxTxT)[:, None],
                      deriv_jvp=deriv_jvp_HxR, qk=qk_grads, per_example=per_example)


def _directions(directions, T: int) -> tuple[tuple[str, ...], torch.Tensor]:
    """(names, (R, T, T) normalised directions) from names or ``{name: tensor}``."""
    names, D_RxTxT = dr.stack(dict(directions) if isinstance(directions, Mapping)
                              else list(directions or dr.DEFAULT), T)
    if D_RxTxT.shape[-1] != T:
        raise ValueError(f"directions are {D_RxTxT.shape[-1]}x{D_RxTxT.shape[-1]}, scores are {T}x{T}")
    return names, D_RxTxT


def probe(model: nn.Module, batch, loss: "str | LossFn" = "label",
          directions: "Sequence[str] | Mapping[str, torch.Tensor] | None" = None, *,
          losses: Mapping[str, LossFn] | None = None, dtype: torch.dtype | None = torch.float64,
          per_example: bool = True, use_jvp: bool = True, jvp_chunk: int = 32, lean: bool = False) -> ProbeResult:
    """Score-gradient probe of ``loss`` on ``batch`` at every attention score site.

    ``directions``: names (see :mod:`toyspt.data.directions`, default
    :data:`~toyspt.data.directions.DEFAULT`) or ``{name: (T, T) tensor}`` (normalised
    here). ``per_example`` adds the torch.func per-example gradients; ``use_jvp`` the
    forward-mode directional derivatives. ``lean``: the per-head statistics only (see the
    module docstring; ``G``, ``qk``, ``per_example`` and ``deriv_jvp`` are None). Raises on
    None or non-finite gradients.
    """
    if lean:
        return _lean_probe(model, batch, loss, directions, losses, dtype)
    with instrumented(model, batch, loss, losses, dtype) as ses:
        # 1) one batched backward: dL/dS_b of the batch loss, weight grads, inputs X
        bg = _batch_grads(ses)
        shapes = {h: g.shape[1:] for h, g in bg.scores.items()}
        names, D_RxTxT = _directions(directions, next(iter(shapes.values()))[-1])
        D_RxTxT = D_RxTxT.to(bg.value.dtype)
        ses.inst.delta = {}
        # 2) per-example gradients with torch.func
        pe = _per_example(ses, shapes, bg.value.dtype) if per_example else None
        # 3) forward-mode directional derivatives
        djvp = _jvp_derivs(ses, shapes, D_RxTxT, jvp_chunk) if use_jvp else None
    layers = tuple(_layer_probe(s.hook, bg, D_RxTxT, ses.qk.get(s.hook),
                                None if djvp is None else djvp[s.hook], pe) for s in ses.sites)
    return ProbeResult(ses.loss_name, bg.value.item(), names, D_RxTxT, layers)


def head_stats(G_HxTxT: torch.Tensor, D_RxTxT: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per head, one head at a time in float64: grad_norm, row_heterogeneity, column_share,
    blind_share (each (H,)) and deriv ``<G_h, D_r>`` (H, R)."""
    rows = []
    for h in range(G_HxTxT.shape[0]):
        g = G_HxTxT[h].to(dr.DTYPE)
        rows.append([float(torch.linalg.matrix_norm(g)), float(dr.row_heterogeneity(g)),
                     float(dr.energy_share(g, dr.column_only)), float(dr.energy_share(g, dr.blind)),
                     *[float((g * D_RxTxT[k]).sum()) for k in range(D_RxTxT.shape[0])]])
        del g
    t = torch.tensor(rows, dtype=dr.DTYPE).reshape(G_HxTxT.shape[0], 4 + D_RxTxT.shape[0])
    return dict(grad_norm=t[:, 0], row_heterogeneity=t[:, 1], column_share=t[:, 2], blind_share=t[:, 3],
                deriv=t[:, 4:])


def _lean_probe(model: nn.Module, batch, loss, directions, losses, dtype) -> ProbeResult:
    """``probe(..., lean=True)``: see the module docstring."""
    sites = score_sites(model)
    name, loss_fn = resolve_loss(loss, losses)
    if batch_size(batch) == 0:
        raise ValueError("empty batch")
    stats: dict[str, dict[str, torch.Tensor]] = {}
    found: dict[str, tuple] = {}

    def on_scores(s: torch.Tensor, hook: str) -> torch.Tensor:
        if "D" not in found:
            found["D"] = _directions(directions, s.shape[-1])
        zero = torch.zeros((), dtype=s.dtype, requires_grad=True)  # the only leaf with a gradient
        s = s + zero
        s.register_hook(lambda g, hook=hook: stats.__setitem__(hook, head_stats(g.sum(0), found["D"][1])))
        return s

    with working_model(model, dtype) as work:
        flags = [(p, p.requires_grad) for p in work.parameters()]
        try:
            for p, _ in flags:
                p.requires_grad_(False)
            with hooks(work, [(s.hook, on_scores) for s in sites]):
                L = loss_fn(work, cast_batch(batch, dtype))
                if L.dim() != 0 or not torch.isfinite(L):
                    raise FloatingPointError(f"loss {name!r} is not a finite scalar ({L})")
                L.backward()
        finally:
            for p, f in flags:
                p.requires_grad_(f)
    missing = [s.hook for s in sites if s.hook not in stats]
    if missing:
        raise RuntimeError(f"score gradients at {missing} were not reached by loss {name!r}")
    names, D_RxTxT = found["D"]
    layers = []
    for s in sites:
        st = stats[s.hook]
        layers.append(LayerProbe(site=s.hook, G=None, cos=st["deriv"] / st["grad_norm"][:, None], deriv_jvp=None,
                                 qk=None, per_example=None, **st))
    return ProbeResult(name, L.item(), names, D_RxTxT, tuple(layers))


def _per_example(ses: Session, shapes: Mapping[str, torch.Size], dtype: torch.dtype) -> PerExampleGrads:
    """vmap(grad) of the loss of a batch of one: score and W_Q/W_K gradients, and inputs."""
    inst, qk_flat, batch = ses.inst, ses.qk_flat, ses.batch
    frozen = {k: v for k, v in functional_params(ses.work).items() if k not in qk_flat}
    named = dict(ses.work.named_parameters())
    qk0 = {n: named[n[len(PARAM_PREFIX):]].detach() for n in qk_flat}
    x_hooks = [s.hook for s in ses.sites if s.hook in inst.x]

    def one(delta, qk, example):
        inst.delta, inst.x = delta, {}
        b1 = tree_map(lambda t: t.unsqueeze(0), example)
        L = functional_call(ses.wrapper, {**frozen, **qk}, (b1,))
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
            outs = [g1(zeros, qk0, tree_map(lambda t: t[b], batch)) for b in range(batch_size(batch))]
            (gD, gQK), X = stack_tree([o[0] for o in outs]), stack_tree([o[1] for o in outs])
    finally:
        inst.delta, inst.x = {}, {}
    gD = {h: check_grad(g, f"the per-example scores at {h}") for h, g in gD.items()}
    gQK = {n[len(PARAM_PREFIX):]: check_grad(g, f"per-example {n}") for n, g in gQK.items()}
    return PerExampleGrads(gD, gQK, X)


def per_example_grads(model: nn.Module, batch, loss: "str | LossFn" = "label", *,
                      losses: Mapping[str, LossFn] | None = None,
                      dtype: torch.dtype | None = torch.float64) -> PerExampleGrads:
    """Per-example score and W_Q/W_K gradients only (what :func:`probe` computes with
    ``per_example=True``), via ``torch.func.vmap(grad(...))`` over ``functional_call``."""
    with instrumented(model, batch, loss, losses, dtype) as ses:
        inst = ses.inst
        inst.lazy = True  # shapes from one example, without gradients
        with torch.no_grad():
            L = ses.wrapper(tree_map(lambda t: t[:1], ses.batch))
        inst.lazy = False
        shapes = {h: d.shape[1:] for h, d in inst.delta.items()}
        missing = [s.hook for s in ses.sites if s.hook not in shapes]
        if missing:
            raise RuntimeError(f"score hooks {missing} were not reached by the loss")
        inst.delta = {}
        return _per_example(ses, shapes, L.dtype)


def _jvp_derivs(ses: Session, shapes: Mapping[str, torch.Size], D_RxTxT: torch.Tensor,
                chunk: int) -> dict[str, torch.Tensor]:
    """(H, R) forward-mode derivatives per site: jvp of L(delta) along head h, direction r.
    One vmap over the R directions per (site, head), so memory is R x (H, T, T) at most."""
    inst = ses.inst
    params = functional_params(ses.work)
    zeros = {s.hook: torch.zeros(shapes[s.hook], dtype=D_RxTxT.dtype) for s in ses.sites}

    def f(delta):
        inst.delta = delta
        return functional_call(ses.wrapper, params, (ses.batch,))

    res = {}
    try:
        with warnings.catch_warnings():  # torch's forward-AD decompositions load via torch.jit once
            warnings.filterwarnings("ignore", message=".*torch.jit.script.*deprecated",
                                    category=DeprecationWarning)
            for s in ses.sites:
                H = shapes[s.hook][0]
                res[s.hook] = torch.zeros(H, D_RxTxT.shape[0], dtype=D_RxTxT.dtype)
                for head in range(H):
                    onehot_Hx1x1 = torch.zeros(H, 1, 1, dtype=D_RxTxT.dtype)
                    onehot_Hx1x1[head] = 1.0

                    def along(d_TxT, hook=s.hook, onehot_Hx1x1=onehot_Hx1x1):
                        tangent = {**zeros, hook: onehot_Hx1x1 * d_TxT}
                        return jvp(f, (zeros,), (tangent,))[1]

                    res[s.hook][head] = vmap(along, chunk_size=chunk)(D_RxTxT)
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
        batch = cast_batch(batch, dtype)
        inst = Instrument(work, sites)
        vals = []
        with inst.active():
            for sign in (1.0, -1.0):
                inst.lazy = True
                inst.delta = {}
                L0 = loss_fn(work, batch)  # creates zero deltas of the right shape
                del L0
                delta_BxHxTxT = torch.zeros_like(inst.delta[site])
                delta_BxHxTxT[:, head] = sign * eps * D.to(delta_BxHxTxT.dtype)
                inst.lazy, inst.delta = False, {site: delta_BxHxTxT}
                vals.append(float(loss_fn(work, batch)))
    return (vals[0] - vals[1]) / (2 * eps)


def blindness(model: nn.Module, batch, directions=None, *, label: "str | LossFn" = "label",
              recon: "str | LossFn" = "recon", losses: Mapping[str, LossFn] | None = None,
              **kw) -> Blindness:
    """Probe ``label`` and ``recon`` on the same batch and directions (see :class:`Blindness`)."""
    return Blindness(probe(model, batch, label, directions, losses=losses, **kw),
                     probe(model, batch, recon, directions, losses=losses, **kw))


__all__ = ["DEFAULT_EPS", "probe", "head_stats", "directional_fd", "per_example_grads", "blindness"]
