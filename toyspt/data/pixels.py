"""Raw 0..255 pixels as model inputs, normalised the one way the LRA SPT code does it, shared by
the LRA-like data kinds (:mod:`toyspt.kinds`) and the bridge's inputs (:mod:`toyspt.lra.inputs`).

``image`` = grayscale CIFAR10, RGB converted with PIL's integer luma
``(19595 R + 38470 G + 7471 B + 2^15) >> 16``, then ``(x/255 - 122.6/255) / (61/255)``;
``pathfinder`` (also Path-X) and ``digits`` (toyspt's image task, :mod:`toyspt.kinds.tasks`) =
``(x/255 - 0.5) / 0.5``. Images are flattened row by row into sequences of length H*W;
:func:`pixel_levels` inverts the normalisation to the 0..255 grey levels a 256-way decoder targets.
"""
from __future__ import annotations

import numpy as np
import torch

PIXEL_TASKS = ("image", "pathfinder", "digits")
PIXEL_LEVELS = 256  # outputs of that code's PathFinder SPT decoder with lm_loss ce: one per grey level
CIFAR_GRAY_MEAN, CIFAR_GRAY_STD = 122.6 / 255.0, 61.0 / 255.0


def _luma(rgb: np.ndarray) -> np.ndarray:
    r, g, b = (rgb[..., i].astype(np.int64) for i in range(3))
    return ((19595 * r + 38470 * g + 7471 * b + 0x8000) >> 16).astype(np.float64)


def normalize_pixels(arr: np.ndarray, task: str) -> torch.Tensor:
    """(N, H, W), (N, H, W, 3) or (N, L) raw 0..255 pixels -> (N, L, 1) float32 values."""
    if task not in PIXEL_TASKS:
        raise ValueError(f"pixel task must be one of {PIXEL_TASKS}, got {task!r}")
    a = np.asarray(arr)
    if a.dtype.kind not in "uif":
        raise ValueError(f"pixel array has dtype {a.dtype}; expected numbers 0..255")
    if a.ndim == 4:
        if a.shape[-1] != 3:
            raise ValueError(f"4-d pixel array must be (N, H, W, 3) RGB, got {a.shape}")
        a = _luma(a)
    if a.ndim not in (2, 3):
        raise ValueError(f"pixel array must be (N, L), (N, H, W) or (N, H, W, 3), got {a.shape}")
    a = a.astype(np.float64).reshape(a.shape[0], -1)
    if not np.isfinite(a).all() or a.min() < 0 or a.max() > 255:
        raise ValueError("pixel values must be finite and lie in 0..255 (raw pixels)")
    if np.asarray(arr).dtype.kind == "f" and a.max() <= 1.0:
        raise ValueError("pixel values all lie in [0, 1]; pass raw 0..255 pixels")
    x = a / 255.0
    x = (x - CIFAR_GRAY_MEAN) / CIFAR_GRAY_STD if task == "image" else (x - 0.5) / 0.5
    return torch.from_numpy(x).float()[..., None]


def pixel_levels(values: torch.Tensor, task: str) -> torch.Tensor:
    """The 0..255 grey levels (long, same shape minus a trailing 1) of normalised pixel values,
    the inverse of :func:`normalize_pixels` rounded to the nearest level (exact for raw integer
    pixels, as that code's PNGs are): the targets of a 256-way pixel decoder."""
    if task not in PIXEL_TASKS:
        raise ValueError(f"pixel task must be one of {PIXEL_TASKS}, got {task!r}")
    v = values.double()[..., 0] if values.dim() == 3 else values.double()
    raw = (v * CIFAR_GRAY_STD + CIFAR_GRAY_MEAN if task == "image" else v * 0.5 + 0.5) * 255.0
    return raw.round().clamp(0, PIXEL_LEVELS - 1).long()
