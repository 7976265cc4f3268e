"""Synthetic trajectory tasks on which the self-pretraining effect is measured.

Generative process (every draw comes from one ``numpy.random.Generator`` seeded by
``TaskConfig.seed``, so a config names its data exactly):

* A clean trajectory has ``T`` points in R^dim. Coordinate ``c`` at time ``t = 0..T-1`` is
  ``a_c * cos(2*pi*f_c*t/T + phi_c)`` with amplitude ``a_c ~ U(amp_range)``, phase
  ``phi_c ~ U(0, 2*pi)`` and frequency ``f_c`` (cycles per sequence) drawn per family.
  The uniform phase makes every time step's marginal distribution the same.
* ``local_shuffle`` (default): ``f_c ~ U(freq_range)``. Class 0 keeps the time order.
  Class 1 reorders time locally: positions are sorted by ``t + shuffle_width * U(0, 1)``,
  so points move about ``shuffle_width / 2`` steps. The set of points and every point's
  marginal distribution are identical in both classes; only which point sits next to
  which in time carries the label.
* ``freq_band``: class 0 draws integer frequencies from ``band0``, class 1 from ``band1``;
  no shuffling. A contrast in which content (not order) separates the classes.
* Observation noise ``N(0, noise^2)`` is added to every coordinate.
* ``offset`` (default 0.5): every sequence is translated by ``b_c ~ N(0, offset^2)``, one draw
  per sequence and coordinate, constant over time. The offsets of all three splits are
  drawn after every other draw of the task (train, val, test in that order), so the
  underlying trajectories, noise and labels are those of ``offset=0`` and ``offset=0``
  draws nothing (its data are bit-identical to a config without the knob). A shared
  per-sequence level makes every pair of time steps positively correlated (``+offset^2``),
  which flips the sign of the reconstruction gain on the mean of the visible tokens
  (toyspt.probe.basin) and with it the attention basin SPT falls into.

Labels are balanced (alternating, then shuffled). Splits are drawn from the same stream;
features are standardised per channel with the train split's mean and std only.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from toyspt.util.validation import Float, Int, Text, Tuple, validate, validated

FAMILIES = ("local_shuffle", "freq_band")
_RANGE = Tuple(Float(gt=0), length=2, ordered=True)  # (lo, hi) with 0 < lo <= hi
_BAND = Tuple(Int(gt=0), unique=True)  # a non-empty set of positive integer frequencies


@dataclass(frozen=True)
class TaskConfig:
    family: str = validated("local_shuffle", Text(FAMILIES))  # local_shuffle (order = label) | freq_band
    T: int = validated(32, Int(ge=2))  # points per sequence
    dim: int = validated(2, Int(gt=0))  # coordinates per point
    n_train: int = validated(3000, Int(gt=0))  # training sequences
    n_val: int = validated(500, Int(gt=0))  # validation sequences (model selection)
    n_test: int = validated(1000, Int(gt=0))  # held-out test sequences
    freq_range: tuple[float, float] = validated((1.0, 3.0), _RANGE)  # local_shuffle: cycles/sequence ~ U(lo, hi)
    amp_range: tuple[float, float] = validated((0.5, 1.5), _RANGE)  # amplitude of each coordinate ~ U(lo, hi)
    noise: float = validated(0.05, Float(ge=0))  # std of additive Gaussian observation noise
    # local_shuffle: class 1 sorts positions by t + width * U(0,1)
    shuffle_width: float = validated(3.0, Float(ge=0))
    band0: tuple[int, ...] = validated((1, 2, 3, 4), _BAND)  # freq_band: integer frequencies of class 0
    band1: tuple[int, ...] = validated((5, 6, 7, 8), _BAND)  # freq_band: integer frequencies of class 1
    seed: int = validated(0, Int(ge=0))  # seeds every draw of the data
    # std of a per-sequence, per-coordinate translation b ~ N(0, offset^2) (drawn after all else);
    # 0.5: the proximity regime (SPT learns proximity); 0: the zero-mean regime (anti-local)
    offset: float = validated(0.5, Float(ge=0))

    def __post_init__(self):
        validate(self)


@dataclass(frozen=True)
class Split:
    """One split: inputs ``x`` (N, T, dim) float32 and labels ``y`` (N,) int64."""

    x: torch.Tensor
    y: torch.Tensor

    def __len__(self) -> int:
        return len(self.y)


@dataclass(frozen=True)
class TaskData:
    """Train/val/test splits of one task, standardised with train statistics."""

    config: TaskConfig
    train: Split
    val: Split
    test: Split
    mean: torch.Tensor  # (dim,) train mean used for standardisation
    std: torch.Tensor  # (dim,) train std used for standardisation


def _draw(cfg: TaskConfig, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Draw ``n`` raw sequences and balanced labels: (n, T, dim), (n,)."""
    T, D = cfg.T, cfg.dim
    y = np.arange(n) % 2
    rng.shuffle(y)
    t = np.arange(T, dtype=np.float64)
    amp = rng.uniform(*cfg.amp_range, size=(n, D))
    phase = rng.uniform(0, 2 * np.pi, size=(n, D))
    if cfg.family == "local_shuffle":
        freq = rng.uniform(*cfg.freq_range, size=(n, D))
    else:
        f0 = rng.choice(np.asarray(cfg.band0, dtype=np.float64), size=(n, D))
        f1 = rng.choice(np.asarray(cfg.band1, dtype=np.float64), size=(n, D))
        freq = np.where(y[:, None] == 1, f1, f0)
    x_NxTxD = amp[:, None, :] * np.cos(
        2 * np.pi * freq[:, None, :] * t[None, :, None] / T + phase[:, None, :]
    )
    if cfg.family == "local_shuffle":
        keys = t[None, :] + cfg.shuffle_width * rng.uniform(size=(n, T))
        perm = np.argsort(keys, axis=1, kind="stable")
        shuffled = np.take_along_axis(x_NxTxD, perm[:, :, None], axis=1)
        x_NxTxD = np.where(y[:, None, None] == 1, shuffled, x_NxTxD)
    x_NxTxD = x_NxTxD + cfg.noise * rng.standard_normal(size=x_NxTxD.shape)
    return x_NxTxD, y


def make_task(cfg: TaskConfig | None = None) -> TaskData:
    """Generate the splits of ``cfg`` (default config when None)."""
    cfg = cfg or TaskConfig()
    rng = np.random.default_rng(cfg.seed)
    raw = [_draw(cfg, n, rng) for n in (cfg.n_train, cfg.n_val, cfg.n_test)]
    if cfg.offset > 0:  # drawn last, so offset=0 leaves the stream (and every split) unchanged
        raw = [(x + cfg.offset * rng.standard_normal(size=(len(x), 1, cfg.dim)), y) for x, y in raw]
    mean = raw[0][0].mean(axis=(0, 1))
    std = raw[0][0].std(axis=(0, 1)) + 1e-8
    splits = [
        Split(torch.tensor((x - mean) / std, dtype=torch.float32), torch.tensor(y, dtype=torch.long))
        for x, y in raw
    ]
    return TaskData(cfg, *splits, mean=torch.tensor(mean, dtype=torch.float32),
                    std=torch.tensor(std, dtype=torch.float32))


# ---------------------------------------------------------------------------------------
# SPT masking: the scheme of the LRA self-pretraining code (values zeroed, indicator added)

def sample_mask(n: int, T: int, rate: float, generator: torch.Generator | None = None) -> torch.Tensor:
    """Bernoulli(rate) mask of shape (n, T), True = masked. At least one position per row."""
    if not 0.0 < rate <= 1.0:
        raise ValueError(f"mask rate must be in (0, 1], got {rate}")
    m = torch.rand(n, T, generator=generator) < rate
    empty = ~m.any(dim=1)
    if empty.any():  # a row with nothing masked gives no reconstruction signal: mask one
        idx = torch.randint(T, (int(empty.sum()),), generator=generator)
        m[empty.nonzero(as_tuple=True)[0], idx] = True
    return m


def mask_inputs(x_BxTxD: torch.Tensor, mask_BxT: torch.Tensor | None) -> torch.Tensor:
    """Zero masked values and append the mask-indicator channel: (B, T, D+1)."""
    if mask_BxT is None:
        mask_BxT = torch.zeros(x_BxTxD.shape[:2], dtype=torch.bool, device=x_BxTxD.device)
    if mask_BxT.shape != x_BxTxD.shape[:2]:
        raise ValueError(f"mask shape {tuple(mask_BxT.shape)} does not match inputs {tuple(x_BxTxD.shape[:2])}")
    m = mask_BxT.to(x_BxTxD.dtype).unsqueeze(-1)
    return torch.cat([x_BxTxD * (1 - m), m], dim=-1)


def recon_loss(pred_BxTxD: torch.Tensor, x_BxTxD: torch.Tensor, mask_BxT: torch.Tensor,
               kind: str = "l1") -> torch.Tensor:
    """Reconstruction loss on masked positions only: mean over masked entries (L1 or MSE)."""
    if kind == "l1":
        err = (pred_BxTxD - x_BxTxD).abs()
    elif kind == "mse":
        err = (pred_BxTxD - x_BxTxD).pow(2)
    else:
        raise ValueError(f"recon loss kind must be 'l1' or 'mse', got {kind!r}")
    m = mask_BxT.to(err.dtype).unsqueeze(-1)
    return (err * m).sum() / (m.sum() * err.shape[-1]).clamp_min(1.0)
