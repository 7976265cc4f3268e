"""The figure registry: one module per paper figure.

A figure module defines
* ``NAME`` (str) and ``TITLE`` (one line);
* ``COLUMNS``: the documented columns of the CSV of plotted numbers;
* ``specs(ctx) -> list[Spec]``: the runs it needs (toy, UCR or LRA-demo specs; every
  figure's runs go through one sweep and the cache);
* ``draw(ctx, runs) -> pandas.DataFrame``: draws ``NAME.png``/``NAME.pdf`` into ``ctx.out``
  from ``runs`` (spec key -> RunResult) and returns the plotted numbers, which the
  registry writes as ``NAME.csv``. It may put extra metadata in ``ctx.meta[NAME]``.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from toyspt.nn.model import ModelConfig
from toyspt.runs.cache import RunCache
from toyspt.runs.specs import RunSpec
from toyspt.data.tasks import TaskConfig
from toyspt.train.recipes import TrainConfig

TRACKED = ("displacement", "probes:every=100,n=128")  # trackers of the tracked runs
SGD_LR = 0.05  # SGD (momentum 0.9) learning rate of tracked SGD runs; AdamW keeps the default 1e-3
# SGD runs use no weight decay: with L2 decay and momentum, shrinkage alone moves W_Q by
# ~lr*wd/(1-momentum) per step and would swamp the gradient-driven displacement of W_Q, W_K
SGD_WEIGHT_DECAY = 0.0
# the task regimes the figures are drawn in: the default task (per-sequence offset 0.5, where
# SPT learns proximity) and, as the contrast, the same task without offset (zero-mean
# oscillations, where SPT falls into the anti-local basin); see toyspt.probe.basin
REGIMES = {"proximity": {}, "zero_mean": dict(offset=0.0)}
CONTRAST = ("accuracy", "proximity", "displacement", "blindness", "ablations")  # drawn in both regimes
FIGURES = ("task", "accuracy", "proximity", "basin", "displacement", "blindness", "theory", "ablations",
           "lra", "ucr")


@dataclass
class FigContext:
    """What every figure gets: where to write, which seeds, quick or full, the cache."""

    out: Path
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    quick: bool = False
    cache: RunCache = field(default_factory=RunCache)
    meta: dict[str, Any] = field(default_factory=dict)  # per-figure facts for metadata.json
    regime: str = "proximity"  # a key of REGIMES: which task the toy figures use

    def __post_init__(self):
        if self.regime not in REGIMES:
            raise ValueError(f"regime: choose one of {sorted(REGIMES)}, got {self.regime!r}")

    @property
    def base(self) -> RunSpec:
        """The default run (full), or a small fast one (quick). Runs measure test accuracy
        where validation peaks (``evaluate="peak"``); a figure that draws every epoch asks
        for ``evaluate="all"``, and that run then answers the peak spec too."""
        task = replace(TaskConfig(), **REGIMES[self.regime])
        if not self.quick:
            return RunSpec("scratch", task=task, evaluate="peak")
        return RunSpec("scratch", task=replace(task, n_train=400, n_val=200, n_test=200),
                       model=ModelConfig(), train=TrainConfig(epochs=4, pre_epochs=3), evaluate="peak")

    def save(self, fig, name: str) -> None:
        """Write ``name.png``/``.pdf`` into ``out``, stamped with the task regime (and QUICK)."""
        from toyspt.util.plots import save_figure

        offset = self.base.task.offset
        fig.text(0.5, 0.0, f"task regime: {self.regime} (per-sequence offset std {offset:g})",
                 ha="center", va="top", fontsize=7, color="0.35")  # below the axes (bbox is tight)
        save_figure(fig, self.out, name, self.quick)

    def spec(self, arm: str, seed: int, **overrides) -> RunSpec:
        from toyspt.runs.arms import arm_spec

        return arm_spec(arm, replace(self.base, seed=seed, **overrides))

    def tracked_spec(self, arm: str, seed: int, optimizer: str = "adamw") -> RunSpec:
        """A run with the displacement and probe trackers (shared by the displacement and
        blindness figures); ``optimizer="sgd"`` uses :data:`SGD_LR` and no weight decay."""
        spec = replace(self.spec(arm, seed), trackers=TRACKED)
        if optimizer == "sgd":
            spec = replace(spec, train=replace(spec.train, optimizer="sgd", lr=SGD_LR,
                                               weight_decay=SGD_WEIGHT_DECAY))
        return spec


def load(name: str):
    """The figure module ``name``."""
    if name not in FIGURES:
        raise ValueError(f"unknown figure {name!r}; figures are {FIGURES}")
    return importlib.import_module(f"{__name__}.{name}")
