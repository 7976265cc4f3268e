"""Score-space directions: named T×T perturbations of the attention scores, and the
subspaces of theory.md T2 (blind, visible, column-only). Exact linear algebra in float64.

A direction ``D`` (T×T) perturbs scores ``S -> S + eps D``; a loss sees it through
``dL[D] = <dL/dS, D>``. Adding a constant to a row does nothing (softmax is shift
invariant), so directions are compared after :func:`row_centre` and :func:`normalise`.

Named directions (parse with :func:`direction`, list with :func:`named_directions`):

* ``circ_w{w}``: circulant proximity kernel with wrap-around,
  ``D_ij = 1`` if the circular distance ``min((j-i) mod T, (i-j) mod T) <= w`` (self included);
* ``toep_w{w}``: banded Toeplitz proximity kernel without wrap-around, ``D_ij = 1`` if
  ``|i-j| <= w``;
* ``prev`` / ``next``: ``D_ij = 1`` if ``j = i-1`` / ``j = i+1`` (no wrap-around);
* ``random_s{seed}``: i.i.d. standard normal entries drawn from ``torch.Generator(seed)``.

Named lists of directions (use these rather than spelling names out): :data:`PROXIMITY`,
:data:`PROXIMITY_W1`, :data:`SHIFTS`, :data:`RANDOM`, :data:`DEFAULT` (what the probes use
when not told) and :data:`COMPACT` (fewer widths, for probing often: over training, per LRA
layer); :data:`DIRECTION_SETS` maps a lower-case key to each.

Offsets: :func:`offsets` is the axis ``j - i = -(T-1)..T-1`` of anything indexed by
diagonal (positional profiles); :func:`offset_matrix` is ``j - i`` at every (i, j).

Subspaces (theory.md T2). ``kappa_j(D) = sum_i (D_ij - mean_k D_ik)`` are the row-centred
column sums. The *blind* subspace ``{D : kappa(D) = 0}`` has dimension ``T^2 - (T-1)``; a
loss whose score gradient has identical rows (label loss at uniform attention) has zero
derivative along it. Its orthogonal complement, the *visible* subspace, is
``{1 c^T : sum(c) = 0}`` (T-1 dimensional), because ``<kappa(D), v> = <D, 1 (Cv)^T>`` with
``C`` the centring matrix. The *column-only* subspace ``{1 c^T}`` (dimension T) adds the
row-constant direction ``1 1^T``. Projections (orthogonal, Frobenius inner product):

* column-only: ``D -> 1 colmean(D)^T``;
* visible: ``D -> 1 (colmean(D) - mean(D))^T``;
* blind: ``D -> D - visible(D)``.

Every circulant direction is blind (its column sums and row sums are all equal). A banded
Toeplitz kernel ``toep_w{w}`` is not: its ``kappa`` is constant on the interior columns and
differs only on the first and last ``w`` columns, so a row-identical gradient ``1 g^T``
(``sum g = 0``) sees it only through the sequence boundary, ``<1 g^T, D> = <g, kappa(D)>``.

All functions act on the last two dimensions, so stacks ``(..., T, T)`` work.
"""
from __future__ import annotations

import re
from typing import Iterable, Sequence

import torch

DTYPE = torch.float64

# named lists of directions; every name parses with direction() (tested)
PROXIMITY = ("circ_w1", "circ_w2", "circ_w4",  # proximity, widths 1, 2, 4, with wrap-around
             "toep_w1", "toep_w2", "toep_w4")  # the same widths without wrap-around
PROXIMITY_W1 = ("circ_w1", "toep_w1")  # width 1: blind (circulant) against boundary-visible (Toeplitz)
SHIFTS = ("prev", "next")  # previous- and next-token
RANDOM = ("random_s0",)  # one seeded random reference
DEFAULT = PROXIMITY + SHIFTS + RANDOM  # what toyspt.probe.engine probes when not told
COMPACT = ("circ_w1", "circ_w2", "toep_w1", "toep_w2") + SHIFTS + RANDOM  # 7, for probing often
DIRECTION_SETS = dict(proximity=PROXIMITY, proximity_w1=PROXIMITY_W1, shifts=SHIFTS, random=RANDOM,
                      default=DEFAULT, compact=COMPACT)
_NAME = re.compile(r"^(circ_w|toep_w|random_s)(\d+)$|^(prev|next)$")


def _check_T(T: int) -> None:
    if not isinstance(T, int) or T < 2:
        raise ValueError(f"T: a direction needs at least 2 positions, got {T!r}")


def _check_square(D: torch.Tensor) -> None:
    if D.dim() < 2 or D.shape[-1] != D.shape[-2]:
        raise ValueError(f"direction must have shape (..., T, T), got {tuple(D.shape)}")


def offsets(T: int) -> list[int]:
    """The 2T-1 diagonal offsets ``j - i``, ``[-(T-1), ..., T-1]`` as Python ints: the axis of
    a profile indexed by diagonal (``torch.diagonal(M, offset)``, left to right)."""
    if not isinstance(T, int) or T < 1:
        raise ValueError(f"T: offsets need at least 1 position, got {T!r}")
    return list(range(-(T - 1), T))


def offset_matrix(T: int) -> torch.Tensor:
    """``j - i`` at row i, column j: a (T, T) long tensor."""
    _check_T(T)
    pos = torch.arange(T)
    return pos[None, :] - pos[:, None]


def circulant(T: int, width: int) -> torch.Tensor:
    """Box proximity kernel with wrap-around: 1 where circular |j - i| <= width."""
    _check_T(T)
    if width < 0:
        raise ValueError(f"width: must be >= 0, got {width}")
    d = offset_matrix(T) % T
    return (torch.minimum(d, T - d) <= width).to(DTYPE)


def toeplitz(T: int, width: int) -> torch.Tensor:
    """Banded box proximity kernel without wrap-around: 1 where |j - i| <= width."""
    _check_T(T)
    if width < 0:
        raise ValueError(f"width: must be >= 0, got {width}")
    return (offset_matrix(T).abs() <= width).to(DTYPE)


def shift(T: int, k: int) -> torch.Tensor:
    """1 where ``j = i + k``: ``k = -1`` is previous-token, ``k = +1`` next-token."""
    _check_T(T)
    return (offset_matrix(T) == k).to(DTYPE)


def random_direction(T: int, seed: int) -> torch.Tensor:
    """Standard normal T×T entries from ``torch.Generator().manual_seed(seed)``."""
    _check_T(T)
    return torch.randn(T, T, generator=torch.Generator().manual_seed(seed), dtype=DTYPE)


def direction(name: str, T: int) -> torch.Tensor:
    """The raw (not centred) named direction, float64 (T, T); see the module docstring."""
    m = _NAME.match(name)
    if m is None:
        raise ValueError(f"unknown direction {name!r}; names look like circ_w2, toep_w1, prev, "
                         "next, random_s0")
    kind, num, word = m.groups()
    if word == "prev":
        return shift(T, -1)
    if word == "next":
        return shift(T, +1)
    n = int(num)
    if kind == "circ_w":
        return circulant(T, n)
    if kind == "toep_w":
        return toeplitz(T, n)
    return random_direction(T, n)


def named_directions(T: int, names: Iterable[str] = DEFAULT,
                     normalised: bool = True) -> dict[str, torch.Tensor]:
    """``{name: (T, T)}`` in the given order, row-centred and unit-norm unless told not."""
    out = {}
    for n in names:
        D = direction(n, T)
        out[n] = normalise(D, name=n) if normalised else D
    return out


def stack(dirs: "dict[str, torch.Tensor] | Sequence[str]", T: int | None = None
          ) -> tuple[tuple[str, ...], torch.Tensor]:
    """Names and a normalised (K, T, T) float64 stack from names (needs ``T``) or a dict of
    given (T, T) directions (normalised here)."""
    if isinstance(dirs, dict):
        items = list(dirs.items())
    else:
        if T is None:
            raise ValueError("stack: T is required when directions are given by name")
        items = [(n, direction(n, T)) for n in dirs]
    if not items:
        raise ValueError("no directions given")
    shapes = {tuple(D.shape) for _, D in items}
    if len(shapes) != 1:
        raise ValueError(f"directions have different shapes: {sorted(shapes)}")
    return tuple(n for n, _ in items), torch.stack([normalise(D, name=n) for n, D in items])


# --------------------------------------------------------------------------------------
# centring, kappa and the subspaces

def row_centre(D: torch.Tensor) -> torch.Tensor:
    """Subtract each row's mean: removes the part of D that softmax ignores."""
    _check_square(D)
    return D - D.mean(dim=-1, keepdim=True)


def normalise(D: torch.Tensor, name: str = "direction") -> torch.Tensor:
    """Row-centred, unit Frobenius norm, float64. A direction that is row-constant
    (nothing left after centring) raises."""
    R = row_centre(D.to(DTYPE))
    norm = torch.linalg.matrix_norm(R)
    # a 0/1 kernel that survives centring has norm >= sqrt(1 - 1/T) >= 0.7; 1e-12 only
    # catches directions that are row-constant up to rounding
    if (norm <= 1e-12 * torch.linalg.matrix_norm(D.to(DTYPE)).clamp_min(1.0)).any():
        raise ValueError(f"{name}: is constant along rows, so softmax ignores it (zero after row-centring)")
    return R / norm[..., None, None]


def kappa(D: torch.Tensor) -> torch.Tensor:
    """Row-centred column sums ``kappa_j = sum_i (D_ij - mean_k D_ik)``: (..., T)."""
    return row_centre(D).sum(dim=-2)


def column_only(D: torch.Tensor) -> torch.Tensor:
    """Projection onto ``{1 c^T}``: every row replaced by the column means."""
    _check_square(D)
    return D.mean(dim=-2, keepdim=True).expand_as(D)


def visible(D: torch.Tensor) -> torch.Tensor:
    """Projection onto the complement of the blind subspace, ``{1 c^T : sum c = 0}``."""
    _check_square(D)
    c = D.mean(dim=-2, keepdim=True)
    return (c - c.mean(dim=-1, keepdim=True)).expand_as(D)


def blind(D: torch.Tensor) -> torch.Tensor:
    """Projection onto the blind subspace ``{D : kappa(D) = 0}``."""
    return D - visible(D)


def is_blind(D: torch.Tensor, rtol: float = 1e-12) -> torch.Tensor:
    """Whether ``kappa(D)`` vanishes relative to ``||D||_F`` (float64 rounding level)."""
    return kappa(D.to(DTYPE)).norm(dim=-1) <= rtol * torch.linalg.matrix_norm(D.to(DTYPE)).clamp_min(1e-300)


def energy_share(G: torch.Tensor, projector) -> torch.Tensor:
    """``||P(G)||_F^2 / ||G||_F^2`` for an orthogonal projector ``P`` (per leading index)."""
    G = G.to(DTYPE)
    return torch.linalg.matrix_norm(projector(G)) ** 2 / torch.linalg.matrix_norm(G) ** 2


def row_heterogeneity(G: torch.Tensor) -> torch.Tensor:
    """``||G - 1 mean_rows(G)||_F / ||G||_F``: 0 iff all rows of G are equal."""
    G = G.to(DTYPE)
    return torch.linalg.matrix_norm(G - column_only(G)) / torch.linalg.matrix_norm(G)


def projector_matrix(T: int, which: str = "blind") -> torch.Tensor:
    """The (T^2, T^2) float64 matrix of a projection acting on row-major ``D.flatten()``:
    ``which`` in blind | visible | column_only. Built from the closed forms above; its
    rank is ``T^2 - (T-1)``, ``T - 1`` and ``T``."""
    fns = dict(blind=blind, visible=visible, column_only=column_only)
    if which not in fns:
        raise ValueError(f"which: choose one of {sorted(fns)}, got {which!r}")
    _check_T(T)
    basis = torch.eye(T * T, dtype=DTYPE).reshape(T * T, T, T)
    return fns[which](basis).reshape(T * T, T * T).T.contiguous()


__all__ = ["PROXIMITY", "PROXIMITY_W1", "SHIFTS", "RANDOM", "DEFAULT", "COMPACT", "DIRECTION_SETS",
           "offsets", "offset_matrix", "circulant", "toeplitz", "shift",
           "random_direction", "direction", "named_directions", "stack", "row_centre", "normalise",
           "kappa", "column_only", "visible", "blind", "is_blind", "energy_share", "row_heterogeneity",
           "projector_matrix"]
