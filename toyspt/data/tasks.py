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

import functools
from dataclasses import asdict, dataclass, fields
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

from toyspt.data.source import register
from toyspt.util.validation import (
    MAX_COUNT,
    MAX_LENGTH,
    MAX_SCALE,
    MAX_WIDTH,
    Float,
    Int,
    Text,
    Tuple,
    validate,
    validated,
    within_memory,
)

_RANGE = Tuple(Float(gt=0, le=MAX_SCALE), length=2, ordered=True)  # (lo, hi) with 0 < lo <= hi
_BAND = Tuple(Int(gt=0, le=MAX_LENGTH // 2), unique=True)  # a non-empty set of positive integer frequencies


@dataclass(frozen=True)
class TaskConfig:
    family: str = validated("local_shuffle", Text())  # a TASK_FAMILIES name: local_shuffle (order = label) | freq_band
    T: int = validated(32, Int(ge=2, le=MAX_LENGTH))  # points per sequence
    dim: int = validated(2, Int(gt=0, le=MAX_WIDTH))  # coordinates per point
    n_train: int = validated(3000, Int(gt=0, le=MAX_COUNT))  # training sequences
    n_val: int = validated(500, Int(gt=0, le=MAX_COUNT))  # validation sequences (model selection)
    n_test: int = validated(1000, Int(gt=0, le=MAX_COUNT))  # held-out test sequences
    freq_range: tuple[float, float] = validated((1.0, 3.0), _RANGE)  # local_shuffle: cycles/sequence ~ U(lo, hi)
    amp_range: tuple[float, float] = validated((0.5, 1.5), _RANGE)  # amplitude of each coordinate ~ U(lo, hi)
    noise: float = validated(0.05, Float(ge=0, le=MAX_SCALE))  # std of additive Gaussian observation noise
    # local_shuffle: class 1 sorts positions by t + width * U(0,1)
    shuffle_width: float = validated(3.0, Float(ge=0, le=MAX_SCALE))
    band0: tuple[int, ...] = validated((1, 2, 3, 4), _BAND)  # freq_band: integer frequencies of class 0
    band1: tuple[int, ...] = validated((5, 6, 7, 8), _BAND)  # freq_band: integer frequencies of class 1
    seed: int = validated(0, Int(ge=0, le=2**63 - 1))  # seeds every draw of the data
    # std of a per-sequence, per-coordinate translation b ~ N(0, offset^2) (drawn after all else);
    # 0.5: the proximity regime (SPT learns proximity); 0: the zero-mean regime (anti-local)
    offset: float = validated(0.5, Float(ge=0, le=MAX_SCALE))

    def __post_init__(self):
        validate(self)
        family_draw(self.family)
        within_memory("task", "(n_train + n_val + n_test) x T x dim (drawn in float64)",
                      (self.n_train + self.n_val + self.n_test) * self.T * self.dim, 8)
        if self.family == "freq_band" and max(self.band0 + self.band1) > self.T / 2:
            raise ValueError(f"band0/band1: frequency {max(self.band0 + self.band1)} is above the "
                             f"Nyquist frequency T/2 = {self.T / 2:g} of T = {self.T} points; it "
                             "would alias onto a lower frequency (possibly the other class's)")

    # ------------------------------------------------------------------ a data source (toyspt.data.source)
    kind = "toy"  # class attribute, not a field

    @property
    def name(self) -> str:
        return f"{self.family} T={self.T}"

    def load(self) -> "TaskData":
        """The task's splits (drawn once per process and config: make_task is pure)."""
        return _cached_task(self)

    def fingerprint(self) -> str:
        """The task's data are a pure function of its config: the config's hash names them."""
        from toyspt.util.hashing import digest

        return digest(asdict(self))

    def key_fields(self, swap: "TaskConfig | None") -> dict:
        """The run key's data part (the layout toy keys have always had)."""
        if swap is not None and not isinstance(swap, TaskConfig):
            raise ValueError(f"a toy task run pretrains on another toy task, got a {swap.kind} source")
        return dict(task=asdict(self), swap_task=asdict(swap) if swap is not None else None)

    def probe_inputs(self) -> torch.Tensor:
        """The inputs probes of stored weights read (no labels): the first 256 validation sequences."""
        return self.load().val.x[:256]

    def fit(self, model):
        """``model`` if it reads ``dim`` features per point (refused with both numbers otherwise)."""
        if model.d_in != self.dim:
            raise ValueError(f"task has {self.dim} features per point, model.d_in={model.d_in}")
        return model


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


def _waves(amp, phase, freq, t, T: int) -> np.ndarray:
    """(n, T, dim) trajectories a * cos(2 pi f t / T + phi)."""
    return amp[:, None, :] * np.cos(2 * np.pi * freq[:, None, :] * t[None, :, None] / T
                                    + phase[:, None, :])


def draw_local_shuffle(cfg: TaskConfig, y, amp, phase, t, rng) -> np.ndarray:
    """Frequencies ~ U(freq_range); class 1 reordered locally in time (the order is the label)."""
    n, T = len(y), cfg.T
    x = _waves(amp, phase, rng.uniform(*cfg.freq_range, size=amp.shape), t, T)
    keys = t[None, :] + cfg.shuffle_width * rng.uniform(size=(n, T))
    perm = np.argsort(keys, axis=1, kind="stable")
    shuffled = np.take_along_axis(x, perm[:, :, None], axis=1)
    return np.where(y[:, None, None] == 1, shuffled, x)


def draw_freq_band(cfg: TaskConfig, y, amp, phase, t, rng) -> np.ndarray:
    """Integer frequencies from band0 (class 0) or band1 (class 1): the content is the label."""
    f0 = rng.choice(np.asarray(cfg.band0, dtype=np.float64), size=amp.shape)
    f1 = rng.choice(np.asarray(cfg.band1, dtype=np.float64), size=amp.shape)
    return _waves(amp, phase, np.where(y[:, None] == 1, f1, f0), t, cfg.T)


# name -> draw(cfg, y, amp, phase, t, rng) -> (n, T, dim): adding a family is one function here
TASK_FAMILIES: dict[str, Callable] = {"local_shuffle": draw_local_shuffle, "freq_band": draw_freq_band}
FAMILIES = tuple(TASK_FAMILIES)


def family_draw(name: str) -> Callable:
    """The clean-trajectory draw of a registered family; an unknown name is refused by name."""
    try:
        return TASK_FAMILIES[name]
    except KeyError:
        raise ValueError(f"family: unknown task family {name!r}; registered: "
                         f"{sorted(TASK_FAMILIES)}") from None


def other_family(name: str) -> str:
    """The family data_swap pretrains on by default: the first registered one that is not ``name``."""
    return next(f for f in TASK_FAMILIES if f != name)


def _draw(cfg: TaskConfig, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Draw ``n`` raw sequences and balanced labels: (n, T, dim), (n,). The family draws the
    clean trajectories from labels, amplitudes and phases; the noise is added last."""
    y = np.arange(n) % 2
    rng.shuffle(y)
    t = np.arange(cfg.T, dtype=np.float64)
    amp = rng.uniform(*cfg.amp_range, size=(n, cfg.dim))
    phase = rng.uniform(0, 2 * np.pi, size=(n, cfg.dim))
    x_NxTxD = family_draw(cfg.family)(cfg, y, amp, phase, t, rng)
    x_NxTxD = x_NxTxD + cfg.noise * rng.standard_normal(size=x_NxTxD.shape)
    return x_NxTxD, y


def task_from_fields(d: dict) -> tuple[TaskConfig, TaskConfig | None]:
    """(task, swap task) of a toy run from its key fields (lists become tuples again)."""
    def build(sub):
        if sub is None:
            return None
        names = {f.name for f in fields(TaskConfig)}
        return TaskConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in sub.items() if k in names})
    return build(d["task"]), build(d.get("swap_task"))


@functools.lru_cache(maxsize=16)
def _cached_task(cfg: TaskConfig) -> TaskData:
    return make_task(cfg)


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
    """Reconstruction loss on masked positions only: mean over masked entries (L1 or MSE), or
    ``ce``: cross-entropy of per-token logits against one-hot inputs (token tasks), mean over
    masked tokens, or ``levels``: cross-entropy of L logits per value (``pred`` is (B, T, D*L))
    against the value's grey level ``round((x + 1) / 2 * (L - 1))`` (pixels normalised to [-1, 1]:
    the LRA SPT code's 256-way pixel loss), mean over masked values."""
    if kind == "levels":
        return levels_loss(pred_BxTxD, x_BxTxD, mask_BxT)
    if kind == "ce":
        m = mask_BxT.bool()
        if not bool(m.any()):
            return pred_BxTxD.sum() * 0.0
        return F.cross_entropy(pred_BxTxD[m], x_BxTxD[m].argmax(-1))
    if kind == "l1":
        err = (pred_BxTxD - x_BxTxD).abs()
    elif kind == "mse":
        err = (pred_BxTxD - x_BxTxD).pow(2)
    else:
        raise ValueError(f"recon loss kind must be 'l1', 'mse', 'ce' or 'levels', got {kind!r}")
    m = mask_BxT.to(err.dtype).unsqueeze(-1)
    return (err * m).sum() / (m.sum() * err.shape[-1]).clamp_min(1.0)


def grey_levels(x: torch.Tensor, levels: int) -> torch.Tensor:
    """The grey level (0..levels-1, long) of each value of ``x`` in [-1, 1] (nearest level)."""
    return ((x.double() + 1.0) * 0.5 * (levels - 1)).round().clamp(0, levels - 1).long()


def levels_loss(pred_BxTxDL: torch.Tensor, x_BxTxD: torch.Tensor, mask_BxT: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over masked values of L grey-level logits per value (``recon_loss`` "levels")."""
    D = x_BxTxD.shape[-1]
    if pred_BxTxDL.shape[-1] % D or pred_BxTxDL.shape[-1] // D < 2:
        raise ValueError(f"levels loss: {pred_BxTxDL.shape[-1]} logits per position is not L >= 2 per each "
                         f"of {D} values (ModelConfig.rec_levels)")
    m = mask_BxT.bool()
    if not bool(m.any()):
        return pred_BxTxDL.sum() * 0.0
    logits = pred_BxTxDL[m].reshape(-1, D, pred_BxTxDL.shape[-1] // D)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), grey_levels(x_BxTxD[m], logits.shape[-1]).reshape(-1))


def _task_from_args(args, names: list[str], configs: dict) -> tuple[list[TaskConfig], None]:
    """``--data toy``: the task of the ``--task.*`` flags (``configs["task"]``); it takes no name."""
    if names:
        raise ValueError(f"--data: the toy task takes no name (its --task.* flags describe it), got toy:{names[0]}")
    return [configs["task"]], None


def _task_flags_given(args) -> list[str]:
    return [f"--{k}" for k, v in sorted(vars(args).items()) if k.startswith("task.") and v is not None]


register("toy", task_from_fields, from_args=_task_from_args, given=_task_flags_given, usage="toy (the --task.* flags)")
