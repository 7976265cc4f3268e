"""Positional encodings: absolute (added to tokens), score biases (ALiBi, FIRE), RoPE.

Kinds, by where they act:
* ``sinusoidal`` / ``learned``: a (max_len, d) table added to the token embeddings;
  ``pe[p, 2i] = sin(p / 10000^(2i/d))``, ``pe[p, 2i+1] = cos(...)`` (the LRA code's PE).
* ``alibi`` / ``fire``: an additive (H, T, T) bias on the attention scores.
* ``rope``: rotates query/key pairs; "halves" convention (dims i and i + d_head/2 form a
  pair, as in GPT-NeoX), angle ``p * theta_i`` with ``theta_i = 10000^(-2i/d_head)``.
* ``none``: nothing (attention is permutation-equivariant then).
"""
from __future__ import annotations

import torch
from torch import nn

POS_KINDS = ("sinusoidal", "learned", "none", "alibi", "rope", "fire")
ABSOLUTE = ("sinusoidal", "learned")
SCORE_BIAS = ("alibi", "fire")


def sinusoidal_table(n: int, d: int, dtype=torch.float32) -> torch.Tensor:
    """The fixed sinusoidal table (n, d): sin on even, cos on odd channels."""
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    inv = torch.pow(10000.0, -torch.arange(0, d, 2, dtype=torch.float64) / d)
    pe = torch.zeros(n, d, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos * inv)
    pe[:, 1::2] = torch.cos(pos * inv[: d // 2])
    return pe.to(dtype)


class AbsolutePE(nn.Module):
    """Adds a position table to (B, T, d) embeddings; ``table`` is a buffer or a parameter."""

    def __init__(self, kind: str, max_len: int, d: int):
        super().__init__()
        self.kind = kind
        if kind == "sinusoidal":
            self.register_buffer("table", sinusoidal_table(max_len, d))
        elif kind == "learned":
            self.table = nn.Parameter(0.02 * torch.randn(max_len, d))
        else:
            raise ValueError(f"AbsolutePE kind must be one of {ABSOLUTE}, got {kind!r}")

    def forward(self, x_BxTxD: torch.Tensor) -> torch.Tensor:
        T = x_BxTxD.shape[1]
        if T > self.table.shape[0]:
            raise ValueError(f"sequence length {T} exceeds the positional table ({self.table.shape[0]})")
        return x_BxTxD + self.table[:T].to(x_BxTxD.dtype)


def alibi_slopes(n_heads: int, base: float = 8.0) -> torch.Tensor:
    """Slopes m_h = 2^(-base h / H), h = 1..H; base 8 is the ALiBi paper's sequence (which
    gives a single head the weak slope 1/256)."""
    return torch.pow(2.0, -base * torch.arange(1, n_heads + 1, dtype=torch.float64) / n_heads)


class ALiBi(nn.Module):
    """Symmetric (encoder) ALiBi: bias_h(i, j) = -m_h |i - j|."""

    def __init__(self, n_heads: int, base: float = 8.0):
        super().__init__()
        self.register_buffer("slopes", alibi_slopes(n_heads, base).float())

    def forward(self, T: int, dtype=torch.float32) -> torch.Tensor:
        pos = torch.arange(T, device=self.slopes.device)
        dist = (pos[:, None] - pos[None, :]).abs().to(dtype)
        return -self.slopes.to(dtype)[:, None, None] * dist  # (H, T, T)


class FIRE(nn.Module):
    """FIRE bias f_theta(psi(|i-j|) / psi(max(L, i+1))), psi(x) = log(c x + 1).

    Bidirectional adaptation: distances are |i - j| and the query index is 1-based, so the
    ratio is defined at i = 0. ``c`` and ``L`` are learnable; f_theta is a 1-hidden-layer MLP.
    """

    def __init__(self, n_heads: int, hidden: int = 32, init_L: float = 32.0):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(1, hidden), nn.ReLU(), nn.Linear(hidden, n_heads))
        self.log_c = nn.Parameter(torch.zeros(()))  # c = exp(log_c) > 0
        self.L = nn.Parameter(torch.tensor(float(init_L)))

    def forward(self, T: int, dtype=torch.float32) -> torch.Tensor:
        c = self.log_c.exp()
        pos = torch.arange(T, device=c.device, dtype=c.dtype)
        dist = (pos[:, None] - pos[None, :]).abs()
        denom = torch.log(c * torch.maximum(self.L.abs(), pos + 1.0) + 1.0)
        ratio = torch.log(c * dist + 1.0) / denom[:, None]
        return self.mlp(ratio.unsqueeze(-1)).permute(2, 0, 1).to(dtype)  # (H, T, T)


def rope(x_BxHxTxE: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Rotate (B, H, T, d_head) by position, halves convention; d_head must be even."""
    E = x_BxHxTxE.shape[-1]
    if E % 2:
        raise ValueError(f"RoPE needs an even head dimension, got {E}")
    T = x_BxHxTxE.shape[-2]
    theta = torch.pow(base, -torch.arange(0, E // 2, dtype=torch.float64) * 2.0 / E)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * theta[None, :]
    cos = ang.cos().to(x_BxHxTxE.dtype)
    sin = ang.sin().to(x_BxHxTxE.dtype)
    x1, x2 = x_BxHxTxE[..., : E // 2], x_BxHxTxE[..., E // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


__all__ = ["POS_KINDS", "ABSOLUTE", "SCORE_BIAS", "sinusoidal_table", "AbsolutePE", "ALiBi",
           "FIRE", "rope", "alibi_slopes"]
