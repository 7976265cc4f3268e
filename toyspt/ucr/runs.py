"""UCR runs: the toy recipes on real time series. A UCR run is the one
:class:`toyspt.runs.specs.RunSpec` with a :class:`toyspt.ucr.data.UCRSource` as its data; this
module holds only what is particular to UCR sets: their training defaults and a builder.

The model and recipes are the toy's: one token per time step, a 1-D value plus the mask
channel (``ModelConfig(d_in=1)``), sinusoidal PE unless an arm says otherwise. The run's key
hashes the data *content* (the source's fingerprint) and the split rule, not the path the
files came from, so the same GunPoint from a local archive or from the package share cache
entries only if their values are identical. Keys carry ``kind="ucr"`` and never collide
with toy runs.
"""
from __future__ import annotations

from typing import Sequence

from toyspt.nn.model import ModelConfig
from toyspt.runs.specs import RunSpec
from toyspt.train.recipes import TrainConfig
from toyspt.ucr.data import UCRData, UCRSource

# 40 training series (GunPoint after the validation split) give 5 steps per epoch at batch 8:
# 200 label epochs = 1000 steps (scratch reaches ~100% train accuracy well before), 300 SPT
# epochs (the reconstruction loss on validation still falls slowly after 200)
UCR_TRAIN_DEFAULTS = dict(epochs=200, pre_epochs=300, batch_size=8)
UCR_MODEL_DEFAULTS = dict(d_in=1)  # one value per time step (the class count comes from the data)


def ucr_train_config(**overrides) -> TrainConfig:
    return TrainConfig(**{**UCR_TRAIN_DEFAULTS, **overrides})


def ucr_spec(recipe: str, data: UCRData | UCRSource, seed: int = 0, model: ModelConfig | None = None,
             train: TrainConfig | None = None, swap: UCRData | UCRSource | None = None,
             trackers: Sequence[str] = (), evaluate: str = "all", numerics: str = "eager") -> RunSpec:
    """The spec of one run on a UCR set (UCR defaults; the class count set from the data)."""
    src = data if isinstance(data, UCRSource) else UCRSource.of(data)
    sw = swap if swap is None or isinstance(swap, UCRSource) else UCRSource.of(swap)
    return RunSpec(recipe, seed, src, src.fit(model or ModelConfig(**UCR_MODEL_DEFAULTS)),
                   train or ucr_train_config(), sw, tuple(trackers), evaluate, numerics)


__all__ = ["UCR_TRAIN_DEFAULTS", "UCR_MODEL_DEFAULTS", "ucr_train_config", "ucr_spec"]
