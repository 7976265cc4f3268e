"""What the checks need of score-space geometry beyond :mod:`toyspt.directions`.

toyspt.directions defines the named directions (``circ_w1``, ``toep_w1``, ``prev``,
``random_s0`` ...), row-centring, ``kappa`` and the blind / visible projectors; the checks
use those. Added here: a *visible* test direction (``column_s{seed}``, ``D_ij = v_j``),
the normalised derivative ``cos(G, D)``, the blind fraction of a gradient, and kappa as an
integer matrix for exact (sympy) rank computations.
"""
from __future__ import annotations

import numpy as np
import torch

from toyspt import directions as dr


def direction(name: str, T: int) -> torch.Tensor:
    """A named raw direction: toyspt.directions' names, plus ``column_s{seed}`` (a random
    column-only direction ``1 v^T``, which the label loss is *not* blind to)."""
    if name.startswith("column_s"):
        seed = int(name[len("column_s"):])
        g = torch.Generator().manual_seed(seed)
        return torch.randn(1, T, generator=g, dtype=dr.DTYPE).expand(T, T).clone()
    return dr.direction(name, T)


def cosine(G: torch.Tensor, D: torch.Tensor) -> torch.Tensor:
    """<G, normalise(D)> / ||G||_F, per leading index of G: the normalised derivative."""
    Du = dr.normalise(D)
    return (G * Du).flatten(-2).sum(-1) / G.flatten(-2).norm(dim=-1)


def blind_fraction(G: torch.Tensor) -> torch.Tensor:
    """||blind(G)||_F / ||G||_F: the share (in norm) of G inside the blind subspace."""
    return dr.energy_share(G, dr.blind).sqrt()


def kappa_matrix(T: int) -> np.ndarray:
    """The T x T^2 integer matrix of T * kappa acting on row-major vec(D)."""
    K = np.zeros((T, T * T), dtype=np.int64)
    for i in range(T):
        for j in range(T):
            for k in range(T):  # d(T kappa_j)/dD_ik = T delta_jk - 1
                K[j, i * T + k] += T * (j == k) - 1
    return K


__all__ = ["direction", "cosine", "blind_fraction", "kappa_matrix"]
