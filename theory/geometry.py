"""What the checks need of score-space geometry beyond :mod:`toyspt.data.directions`.

toyspt.data.directions defines the named directions (``circ_w1``, ``toep_w1``, ``prev``,
``random_s0`` ...), row-centring, ``kappa`` and the blind / visible projectors; the checks
use those. Added here: a *visible* test direction (``column_s{seed}``, ``D_ij = v_j``),
the normalised derivative ``cos(G, D)``, the blind fraction of a gradient, the float64
bound on the cosine of a gradient with a blind direction, and kappa as an integer matrix for
exact (sympy) rank computations.
"""
from __future__ import annotations

import numpy as np
import torch

from toyspt.data import directions as dr


def direction(name: str, T: int) -> torch.Tensor:
    """A named raw direction: toyspt.data.directions' names, plus ``column_s{seed}`` (a random
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


def blind_cos_bound(G_BxTxT: torch.Tensor, AGamma_BxTxT: torch.Tensor, n_upstream: int
                    ) -> dict:
    """Float64 bound on |cos(G, D)| for a blind D (<G, D> = 0 exactly), per example and for
    the batch sum G = sum_b G_b.

    The softmax backward computes G = A o (Gamma - s 1^T) with Gamma = dL/dA and
    s_i = sum_k A_ik Gamma_ik, so its rounding error is relative to the *terms*
    A o |Gamma|, not to G: when Gamma has a large common part, G is a small difference of
    large numbers. With n_upstream the reduction terms behind each entry of Gamma plus the
    T-term sum s_i, |delta G_ij| <~ n_upstream u (A o |Gamma|)_ij; the inner product with a
    unit D adds T^2 u ||G||_F and the batch sum B u sum_b ||G_b||_F. Hence (10x safety, as
    :func:`theory.result.rounding_tol`)

        |cos| <= 10 u [n_upstream kappa_A + (T^2 + B) kappa_B],
        kappa_A = sum_b ||A_b o |Gamma_b| ||_F / ||sum_b G_b||_F,
        kappa_B = sum_b ||G_b||_F / ||sum_b G_b||_F,

    (B = 1, kappa_B = 1 per example): kappa_A is the cancellation in the softmax backward,
    kappa_B the cancellation between examples. ``AGamma_BxTxT`` is A o |Gamma| per example.
    Returns the per-example bounds (B,), the batch bound and both kappas."""
    from .result import U64

    B, T, _ = G_BxTxT.shape
    nG_B = torch.linalg.matrix_norm(G_BxTxT)
    nA_B = torch.linalg.matrix_norm(AGamma_BxTxT)
    per_example = 10 * U64 * (n_upstream * nA_B / nG_B + T * T)
    nsum = torch.linalg.matrix_norm(G_BxTxT.sum(0)).item()
    kA, kB = nA_B.sum().item() / nsum, nG_B.sum().item() / nsum
    return dict(per_example=per_example, batch=10 * U64 * (n_upstream * kA + (T * T + B) * kB),
                kappa_A=kA, kappa_B=kB, kappa_A_per_example=nA_B / nG_B)


def kappa_matrix(T: int) -> np.ndarray:
    """The T x T^2 integer matrix of T * kappa acting on row-major vec(D)."""
    K = np.zeros((T, T * T), dtype=np.int64)
    for i in range(T):
        for j in range(T):
            for k in range(T):  # d(T kappa_j)/dD_ik = T delta_jk - 1
                K[j, i * T + k] += T * (j == k) - 1
    return K


__all__ = ["direction", "cosine", "blind_fraction", "blind_cos_bound", "kappa_matrix"]
