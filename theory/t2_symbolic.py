"""T2's exact statements, proved with sympy for small T (the numeric checks of
:mod:`t2_blindness` build on them).

- At identical-row scores S = 1 s^T the label gradient G = dL/dS has identical rows, and at
  S = 0 it is G_ij = (gamma_j - mean gamma) / T^2 (:func:`symbolic_row_identity`).
- The blind subspace ker(kappa) has dimension T^2 - (T - 1) (:func:`symbolic_blind_dim`).
- kappa(D) = 0 for a direction with symbolic entries of a given kind: true for circulant
  kinds, false for Toeplitz, column and generic ones (:func:`symbolic_kappa_zero`).
"""
from __future__ import annotations

import sympy as sp

from . import geometry as geo


def symbolic_row_identity(T: int) -> tuple[bool, bool]:
    """(rows of G identical at identical-row S, uniform closed form) for symbolic S, gamma.

    exp(S_ij) is represented by positive symbols E_ij, so A is rational and
    dL/dS_ij = E_ij dL/dE_ij exactly; L = sum_j gamma_j c_j is the general first-order
    loss (gamma_j = dl/dc_j at the point)."""
    E = sp.Matrix(T, T, lambda i, j: sp.Symbol(f"E{i}_{j}", positive=True))
    gam = sp.symbols(f"gamma0:{T}")
    e = sp.symbols(f"e0:{T}", positive=True)
    A = sp.Matrix(T, T, lambda i, j: E[i, j] / sum(E[i, k] for k in range(T)))
    L = sum(gam[j] * sum(A[i, j] for i in range(T)) / T for j in range(T))
    same_row = {E[i, j]: e[j] for i in range(T) for j in range(T)}
    G = sp.Matrix(T, T, lambda i, j: (E[i, j] * sp.diff(L, E[i, j])).subs(same_row))
    rows = all(sp.cancel(G[i, j] - G[0, j]) == 0 for i in range(1, T) for j in range(T))
    mean = sum(gam) / T
    uni = all(sp.cancel(G[0, j].subs({ek: 1 for ek in e}) - (gam[j] - mean) / T ** 2) == 0
              for j in range(T))
    return rows, uni


def symbolic_blind_dim(T: int) -> int:
    """T^2 - rank(kappa), rank computed exactly over the rationals."""
    return T * T - sp.Matrix(geo.kappa_matrix(T)).rank()


def symbolic_direction(kind: str, T: int) -> sp.Matrix:
    """A direction with symbolic entries for a kind of name: ``circ*`` circulant
    f((j-i) mod T), ``toep*`` Toeplitz f(|i-j|), ``column*`` f_j, anything else generic d_ij."""
    f = sp.symbols(f"f0:{T}")
    if kind.startswith("circ"):
        return sp.Matrix(T, T, lambda i, j: f[(j - i) % T])
    if kind.startswith("toep"):
        return sp.Matrix(T, T, lambda i, j: f[abs(i - j)])
    if kind.startswith("column"):
        return sp.Matrix(T, T, lambda i, j: f[j])
    return sp.Matrix(T, T, lambda i, j: sp.Symbol(f"d{i}_{j}"))


def symbolic_kappa_zero(kind: str, T: int) -> bool:
    D = symbolic_direction(kind, T)
    kap = [sum(D[i, j] - sum(D[i, k] for k in range(T)) / T for i in range(T)) for j in range(T)]
    return all(sp.expand(k) == 0 for k in kap)


__all__ = ["symbolic_row_identity", "symbolic_blind_dim", "symbolic_direction", "symbolic_kappa_zero"]
