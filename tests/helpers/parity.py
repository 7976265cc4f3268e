"""The parity bound of the LRA bridge, derived from the numerics (not measured on one CPU).

Two correct float implementations of the same forward (fused vs explicit attention, another
summation order) differ by at most the rounding of their reductions: a sum of n terms is off
by <= n * eps * (sum of |terms|). Along one output, the longest chain of reductions is the
embedding/LayerNorm (d), per layer two LayerNorms (2d), the q.k dot (d/H), the softmax sum
and A.V (2T), the output projection (d), the two feed-forward linears (d + d_ff), then the
final LayerNorm (d), the pooling (T) and the head (d, + its hidden width). The bound is that
count x eps(dtype) x the size of the outputs (at least 1, as LayerNorm rescales to O(1))."""
from __future__ import annotations

import torch

from toyspt.lra.model import LRAConfig


def accumulations(cfg: LRAConfig, T: int) -> int:
    per_layer = 2 * cfg.d_model + cfg.d_model // cfg.n_heads + 2 * T + cfg.d_model + cfg.d_model + cfg.d_ff
    head = cfg.d_model + (cfg.head_hidden or cfg.d_model if cfg.head in ("mlp", "retrieval") else 0)
    return cfg.d_model + cfg.n_layers * per_layer + cfg.d_model + T + head


def parity_tol(cfg: LRAConfig, T: int, dtype: torch.dtype, want: torch.Tensor) -> float:
    scale = max(1.0, float(want.abs().max()))
    return accumulations(cfg, T) * torch.finfo(dtype).eps * scale


__all__ = ["accumulations", "parity_tol"]
