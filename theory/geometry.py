"""Score-space geometry used by the checks: directions D (T x T), the map kappa, and the
split of a score gradient into its visible and blind parts.

Softmax is shift invariant per row, so a direction is compared after row-centring.
``kappa_j(D) = sum_i (D_ij - mean_k D_ik)`` are the row-centred column sums. At scores with
identical rows the label gradient is ``G = 1 g^T`` with ``sum(g) = 0`` (theory.md T2), so
``<G, D> = <g, kappa(D)>``: the *visible* directions form ``V = {1 v^T : sum v = 0}`` (the
image of kappa's adjoint) and the *blind* subspace is ``ker kappa = V^perp``.

These are minimal float64 helpers kept inside ``theory`` so the checks depend on nothing
but the claims; they work on (..., T, T) torch tensors or numpy arrays.
"""
from __future__ import annotations

import numpy as np
import torch

DIRECTIONS = ("toeplitz_nn", "circulant_nn", "toeplitz_exp", "circulant_exp", "random", "column")


def direction(kind: str, T: int, seed: int = 0, width: float = 2.0,
              dtype=torch.float64) -> torch.Tensor:
    """A named T x T score direction (not normalised).

    ``toeplitz_nn``: D_ij = 1[|i-j| = 1] (nearest neighbours, no wrap-around);
    ``circulant_nn``: D_ij = 1[(j-i) mod T in {1, T-1}] (wrap-around neighbours);
    ``toeplitz_exp`` / ``circulant_exp``: exp(-dist / width) proximity kernels;
    ``random``: i.i.d. N(0, 1) entries (seeded); ``column``: D_ij = v_j, a visible direction.
    """
    if T < 2:
        raise ValueError(f"T: need at least 2 positions, got {T}")
    i = torch.arange(T, dtype=dtype)[:, None]
    j = torch.arange(T, dtype=dtype)[None, :]
    lin = (i - j).abs()
    circ = torch.minimum((j - i) % T, (i - j) % T)
    if kind == "toeplitz_nn":
        return (lin == 1).to(dtype)
    if kind == "circulant_nn":
        return (circ == 1).to(dtype)
    if kind == "toeplitz_exp":
        return torch.exp(-lin / width)
    if kind == "circulant_exp":
        return torch.exp(-circ / width)
    g = torch.Generator().manual_seed(seed)
    if kind == "random":
        return torch.randn(T, T, generator=g, dtype=dtype)
    if kind == "column":
        return torch.randn(1, T, generator=g, dtype=dtype).expand(T, T).clone()
    raise ValueError(f"direction kind: unknown {kind!r}; choose one of {DIRECTIONS}")


def row_center(D: torch.Tensor) -> torch.Tensor:
    """Subtract each row's mean (what softmax cannot see)."""
    return D - D.mean(dim=-1, keepdim=True)


def unit(D: torch.Tensor) -> torch.Tensor:
    """Row-centred and scaled to unit Frobenius norm (per leading index)."""
    Dc = row_center(D)
    n = Dc.flatten(-2).norm(dim=-1)[..., None, None]
    if (n == 0).any():
        raise ValueError("direction is constant along rows: softmax cannot see it at all")
    return Dc / n


def kappa(D: torch.Tensor) -> torch.Tensor:
    """Row-centred column sums, (..., T)."""
    return row_center(D).sum(dim=-2)


def mean_row(G: torch.Tensor) -> torch.Tensor:
    return G.mean(dim=-2, keepdim=True)


def row_heterogeneity(G: torch.Tensor) -> torch.Tensor:
    """||G - 1 mean_row(G)||_F / ||G||_F: 0 exactly when all rows of G are equal."""
    return (G - mean_row(G)).flatten(-2).norm(dim=-1) / G.flatten(-2).norm(dim=-1)


def visible_part(G: torch.Tensor) -> torch.Tensor:
    """Orthogonal projection onto V = {1 v^T : sum v = 0}: 1 (m - mean(m))^T, m the mean row."""
    m = mean_row(G)
    return (m - m.mean(dim=-1, keepdim=True)).expand_as(G)


def blind_fraction(G: torch.Tensor) -> torch.Tensor:
    """||G - P_V G||_F / ||G||_F: the share of the gradient that lies in the blind subspace."""
    return (G - visible_part(G)).flatten(-2).norm(dim=-1) / G.flatten(-2).norm(dim=-1)


def cosine(G: torch.Tensor, D: torch.Tensor) -> torch.Tensor:
    """<G, unit(D)> / ||G||_F: normalised directional derivative along D."""
    Du = unit(D)
    return (G * Du).flatten(-2).sum(-1) / G.flatten(-2).norm(dim=-1)


def kappa_matrix(T: int) -> np.ndarray:
    """The T x T^2 integer matrix of T * kappa acting on row-major vec(D) (exact arithmetic)."""
    K = np.zeros((T, T * T), dtype=np.int64)
    for i in range(T):
        for j in range(T):
            for k in range(T):  # d/dD_ik of T * kappa_j = T * delta_jk - 1
                K[j, i * T + k] += T * (j == k) - 1
    return K


__all__ = ["DIRECTIONS", "direction", "row_center", "unit", "kappa", "row_heterogeneity",
           "visible_part", "blind_fraction", "cosine", "kappa_matrix", "mean_row"]
