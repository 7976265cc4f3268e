"""Lean score-gradient probing for long sequences: the report's per-head statistics of
``G = dL/dS`` without keeping any (H, T, T) gradient or weight gradient.

:func:`toyspt.probe.engine.probe` returns every layer's full G (and the gradients of W_Q/W_K and
dL/dM, an extra T^2 d^2 contraction per layer) and differentiates through the weights.
The report needs only, per layer and head, ||G||_F, the row heterogeneity, the blind share
and <G, D_k> for a few directions. Here:

* the weights are frozen and only the embedded input carries a gradient, so backward does no
  weight-gradient work;
* each layer's G is reduced to those statistics **as soon as backward produces it** (a
  tensor hook on the score hook point), **one head at a time**, and then dropped, so at most
  one layer's G and one head's float64 copy exist at once;
* the statistics are computed in float64 (as :mod:`toyspt.data.directions` does) whatever the
  model's dtype, so a float32 model only changes the forward/backward rounding.

Same numbers as the :func:`toyspt.probe.engine.probe` path (tested to 1e-10 in float64).
"""
from __future__ import annotations

import contextlib

import torch

from toyspt.data import directions as dr
from toyspt.nn.attention import hooks
from toyspt.lra.model import LRATransformer


@contextlib.contextmanager
def _frozen(model: LRATransformer):
    flags = [(p, p.requires_grad) for p in model.parameters()]
    for p, _ in flags:
        p.requires_grad_(False)
    handle = model.embed.register_forward_hook(lambda m, i, out: out.detach().requires_grad_(True))
    try:
        yield model
    finally:
        handle.remove()
        for p, f in flags:
            p.requires_grad_(f)


def head_stats(G_HxTxT: torch.Tensor, D_KxTxT: torch.Tensor) -> list[dict]:
    """Per head: grad_norm, row_heterogeneity, blind_share, and deriv <G_h, D_k> per k,
    computed one head at a time in float64."""
    out = []
    for h in range(G_HxTxT.shape[0]):
        g = G_HxTxT[h].to(dr.DTYPE)
        norm = torch.linalg.matrix_norm(g)
        out.append(dict(grad_norm=float(norm), row_heterogeneity=float(dr.row_heterogeneity(g)),
                        blind_share=float(dr.energy_share(g, dr.blind)),
                        deriv=[float((g * D_KxTxT[k]).sum()) for k in range(D_KxTxT.shape[0])]))
        del g
    return out


def score_grad_stats(model: LRATransformer, batch: dict, loss_fn, direction_names
                     ) -> tuple[tuple[str, ...], dict[int, list[dict]]]:
    """(direction names, {layer: per-head stats}) of ``loss_fn(model, batch)`` (see the
    module docstring)."""
    T = int(batch["inputs"].shape[1])
    names, D = dr.stack(list(direction_names), T)
    stats: dict[int, list[dict]] = {}

    def on_scores(t: torch.Tensor, name: str):
        layer = int(name.split(".")[1])

        def reduce(grad_BxHxTxT):
            stats[layer] = head_stats(grad_BxHxTxT.sum(0), D)
            return None
        if t.requires_grad:
            t.register_hook(reduce)
        return None

    with _frozen(model), hooks(model, [(lambda n: n.endswith("hook_attn_scores"), on_scores)]):
        L = loss_fn(model, batch)
        if L.dim() != 0 or not torch.isfinite(L):
            raise FloatingPointError(f"loss is not a finite scalar ({L})")
        L.backward()
    missing = sorted(set(range(len(model.blocks))) - set(stats))
    if missing:
        raise RuntimeError(f"score gradients of layers {missing} were not reached by the loss")
    return names, dict(sorted(stats.items()))


__all__ = ["score_grad_stats", "head_stats"]
