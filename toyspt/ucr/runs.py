"""UCR runs: the toy recipes on real time series. A UCR run is the one
:class:`toyspt.runs.specs.RunSpec` with a :class:`toyspt.ucr.data.UCRSource` as its data; this
module holds only what is particular to UCR sets: their training defaults (:func:`ucr_run`) and
a builder (:func:`ucr_spec`).

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
from toyspt.train.config import RunConfig
from toyspt.train.recipes import TrainConfig
from toyspt.ucr.data import UCRData, UCRSource

# 40 training series (GunPoint after the validation split) give 5 steps per epoch at batch 8:
# 200 label epochs = 1000 steps (scratch reaches ~100% train accuracy well before), 300 SPT
# epochs (the reconstruction loss on validation still falls slowly after 200)
UCR_TRAIN_DEFAULTS = dict(epochs=200, pre_epochs=300, batch_size=8)
UCR_MODEL_DEFAULTS = dict(d_in=1)  # one value per time step (the class count comes from the data)


def ucr_train_config(**overrides) -> TrainConfig:
    return TrainConfig(**{**UCR_TRAIN_DEFAULTS, **overrides})


def ucr_run(recipe: str, **fields) -> RunConfig:
    """A run configuration with the UCR defaults (``fields``: other RunConfig fields, e.g.
    ``train``, ``evaluate``; the model's class count is set from the data by :func:`ucr_spec`)."""
    return RunConfig(recipe, **{"model": ModelConfig(**UCR_MODEL_DEFAULTS), "train": ucr_train_config(), **fields})


def ucr_spec(run: RunConfig | str, data: UCRData | UCRSource, seed: int = 0,
             swap: UCRData | UCRSource | None = None, trackers: Sequence[str] = ()) -> RunSpec:
    """The spec of one run on a UCR set: ``run`` (a recipe name: :func:`ucr_run`'s UCR defaults)
    on ``data`` at ``seed``, the model's class count set from the data."""
    run = run if isinstance(run, RunConfig) else ucr_run(run)
    src = data if isinstance(data, UCRSource) else UCRSource.of(data)
    sw = swap if swap is None or isinstance(swap, UCRSource) else UCRSource.of(swap)
    return RunSpec(run.recipe, seed, src, src.fit(run.model), run.train, sw, tuple(trackers), run.evaluate,
                   run.numerics)


__all__ = ["UCR_TRAIN_DEFAULTS", "UCR_MODEL_DEFAULTS", "ucr_train_config", "ucr_run", "ucr_spec"]
