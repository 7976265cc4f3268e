"""How local an attention map is: its mass on a neighbourhood of each query, relative to
uniform attention (1 = uniform, > 1 local, < 1 anti-local).

Neighbourhoods: the 1-D window ``1 <= |j - i| <= w`` along the sequence (the proximity index
of :mod:`toyspt.probe.tracking`), and for an image read row by row (width ``W``) its 2-D
4-neighbourhood: left and right in the same row (offsets +-1 that do not wrap to another row)
and up and down (offsets +-W).
"""
from __future__ import annotations

import torch


def window_neighbours(T: int, window: int) -> torch.Tensor:
    """(T, T) bool: key j is a neighbour of query i when ``1 <= |j - i| <= window``."""
    if window < 1:
        raise ValueError(f"window: must be >= 1, got {window}")
    d = torch.arange(T)
    off = (d[None, :] - d[:, None]).abs()
    return (off >= 1) & (off <= window)


def grid_neighbours(T: int, width: int) -> torch.Tensor:
    """(T, T) bool: the 4-neighbourhood of pixels of an image of ``width`` columns read row by
    row (``T`` a multiple of ``width``): same row and one column apart, or same column and one
    row apart."""
    if width < 2 or T % width:
        raise ValueError(f"grid: a length of {T} is not a whole number of rows of width {width}")
    i = torch.arange(T)
    r, c = i // width, i % width
    dr, dc = (r[None, :] - r[:, None]).abs(), (c[None, :] - c[:, None]).abs()
    return (dr + dc) == 1


def relative_mass(A_HxTxT: torch.Tensor, near_TxT: torch.Tensor) -> torch.Tensor:
    """(H,) ``mean_i sum_{j near i} A_ij / mean_i (n_i / T)``: attention mass on the
    neighbourhood relative to what uniform attention puts there."""
    T = A_HxTxT.shape[-1]
    mass = (A_HxTxT * near_TxT).sum(-1).mean(-1)
    return mass / (near_TxT.sum(-1).double().mean() / T).to(mass.dtype)


def proximity_index(A_HxTxT: torch.Tensor, window: int = 2) -> torch.Tensor:
    """(H,) attention mass on neighbours ``1 <= |i-j| <= window`` relative to uniform."""
    return relative_mass(A_HxTxT, window_neighbours(A_HxTxT.shape[-1], window))


def neighbourhood_index(A_HxTxT: torch.Tensor, width: int) -> torch.Tensor:
    """(H,) attention mass on the 2-D 4-neighbourhood (:func:`grid_neighbours`) relative to uniform."""
    return relative_mass(A_HxTxT, grid_neighbours(A_HxTxT.shape[-1], width))


def self_index(A_HxTxT: torch.Tensor) -> torch.Tensor:
    """(H,) ``T * mean_i A_ii``: self attention relative to uniform."""
    return A_HxTxT.diagonal(dim1=-2, dim2=-1).mean(-1) * A_HxTxT.shape[-1]


__all__ = ["window_neighbours", "grid_neighbours", "relative_mass", "proximity_index", "neighbourhood_index",
           "self_index"]
