"""The one explicit multi-head attention of toyspt, with named hook points.

The toy model and the LRA bridge both build on :class:`Attention`, so probes never
special-case a model. Scores are materialised: hook points named as in TransformerLens let
a caller read a tensor, keep its gradient, or replace it (e.g. add a perturbation):

* ``hook_q``, ``hook_k``, ``hook_v``: (B, H, T, d_head), before any rotary embedding;
* ``hook_attn_scores``: (B, H, T, T) pre-softmax scores after positional biases, before
  any attention mask is applied;
* ``hook_pattern``: (B, H, T, T) attention weights;
* ``hook_z``: (B, H, T, d_head) per-head outputs before W_O.

Hooks are added only through the :func:`hooks` context manager and always removed.
"""
from __future__ import annotations

import contextlib
import math
from typing import Callable, Iterable, Iterator

import torch
from torch import nn

from toyspt.nn.positional import rope

HookFn = Callable[[torch.Tensor, str], "torch.Tensor | None"]


class HookPoint(nn.Module):
    """Identity module that marks a named place where hooks can read or replace a tensor."""

    def __init__(self):
        super().__init__()
        self.name = ""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


def hook_points(model: nn.Module) -> dict[str, HookPoint]:
    """Every HookPoint of ``model`` by qualified name (and tell each its name)."""
    points = {}
    for name, mod in model.named_modules():
        if isinstance(mod, HookPoint):
            mod.name = name
            points[name] = mod
    return points


@contextlib.contextmanager
def hooks(model: nn.Module, fwd_hooks: Iterable[tuple["str | Callable[[str], bool]", HookFn]]
          ) -> Iterator[nn.Module]:
    """Attach ``(name or name-filter, fn)`` hooks for the duration of a ``with`` block.

    ``fn(tensor, name)`` may return a replacement tensor (or None to keep it). Unknown
    names raise ``KeyError`` listing the available hook points. Hooks are removed on exit,
    also when the block raises.
    """
    points = hook_points(model)
    handles = []
    try:
        for key, fn in fwd_hooks:
            if callable(key):
                names = [n for n in points if key(n)]
            else:
                if key not in points:
                    raise KeyError(f"no hook point {key!r}; available: {sorted(points)}")
                names = [key]
            for n in names:
                handles.append(points[n].register_forward_hook(
                    lambda mod, inp, out, fn=fn, n=n: fn(out, n)))
        yield model
    finally:
        for h in handles:
            h.remove()


def active_hook_count(model: nn.Module) -> int:
    """Number of forward hooks currently attached to the model's hook points."""
    return sum(len(p._forward_hooks) for p in hook_points(model).values())


class Attention(nn.Module):
    """Multi-head attention with explicit scores: Q/K/V/O linears with biases, heads as
    contiguous row blocks of size d_model / n_heads, scores scaled by 1/sqrt(d_head)."""

    def __init__(self, d_model: int, n_heads: int, bias: bool = True, use_rope: bool = False):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.d_model, self.n_heads, self.d_head = d_model, n_heads, d_model // n_heads
        self.use_rope = use_rope
        self.W_Q = nn.Linear(d_model, d_model, bias=bias)
        self.W_K = nn.Linear(d_model, d_model, bias=bias)
        self.W_V = nn.Linear(d_model, d_model, bias=bias)
        self.W_O = nn.Linear(d_model, d_model, bias=bias)
        # Names as in TransformerLens, shapes heads-first (TransformerLens: [batch, pos, head, d_head]):
        self.hook_q = HookPoint()  # (B, H, T, d_head) queries, before any rotary embedding
        self.hook_k = HookPoint()  # (B, H, T, d_head) keys, before any rotary embedding
        self.hook_v = HookPoint()  # (B, H, T, d_head) values
        # (B, H, T, T) scaled scores after positional biases and BEFORE any attention mask
        # (TransformerLens hooks them after its causal mask), so probes see every entry
        self.hook_attn_scores = HookPoint()
        self.hook_pattern = HookPoint()  # (B, H, T, T) softmax weights, after masking
        self.hook_z = HookPoint()  # (B, H, T, d_head) per-head outputs, before W_O

    def _heads(self, t_BxTxD: torch.Tensor) -> torch.Tensor:
        B, T, _ = t_BxTxD.shape
        return t_BxTxD.view(B, T, self.n_heads, self.d_head).transpose(1, 2)

    def forward(self, x_BxTxD: torch.Tensor, bias_HxTxT: torch.Tensor | None = None,
                allowed_BxTxT: torch.Tensor | None = None) -> torch.Tensor:
        """``bias_HxTxT`` is added to the scores; ``allowed_BxTxT`` (bool) masks keys."""
        B, T, D = x_BxTxD.shape
        q_BxHxTxE, k_BxHxTxE, v_BxHxTxE = self.qkv(x_BxTxD)
        scores_BxHxTxT = q_BxHxTxE @ k_BxHxTxE.transpose(-1, -2) / math.sqrt(self.d_head)
        if bias_HxTxT is not None:
            scores_BxHxTxT = scores_BxHxTxT + bias_HxTxT
        scores_BxHxTxT = self.hook_attn_scores(scores_BxHxTxT)
        if allowed_BxTxT is not None:
            scores_BxHxTxT = scores_BxHxTxT.masked_fill(~allowed_BxTxT[:, None], float("-inf"))
        pattern_BxHxTxT = self.hook_pattern(torch.softmax(scores_BxHxTxT, dim=-1))
        z_BxHxTxE = self.hook_z(pattern_BxHxTxT @ v_BxHxTxE)
        return self.W_O(z_BxHxTxE.transpose(1, 2).reshape(B, T, D))

    def qkv(self, x_BxTxD: torch.Tensor, hooked: bool = True):
        """Per-head queries, keys and values (B, H, T, d_head), through their hook points
        (unless ``hooked`` is False) and then the rotary step."""
        q, k, v = (self._heads(lin(x_BxTxD)) for lin in (self.W_Q, self.W_K, self.W_V))
        if hooked:
            q, k, v = self.hook_q(q), self.hook_k(k), self.hook_v(v)
        return (*self.rotate(q, k), v)

    def rotate(self, q_BxHxTxE: torch.Tensor, k_BxHxTxE: torch.Tensor):
        """The rotary embedding of queries and keys (identity without RoPE)."""
        if self.use_rope:
            return rope(q_BxHxTxE), rope(k_BxHxTxE)
        return q_BxHxTxE, k_BxHxTxE

    def qk_matrix(self, head: int) -> torch.Tensor:
        """M_h = W_Q^h (W_K^h)^T / sqrt(d_head), (d_model, d_model): scores = x M_h x^T
        (biases and rotary embedding aside)."""
        sl = slice(head * self.d_head, (head + 1) * self.d_head)
        return self.W_Q.weight[sl].T @ self.W_K.weight[sl] / math.sqrt(self.d_head)
