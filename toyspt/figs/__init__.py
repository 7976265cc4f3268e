"""The figure registry: one module per paper figure, each a pure pair of functions.

Adding a figure is one module ``toyspt/figs/<name>.py`` plus its name in :data:`FIGURES`:

* ``NAME`` (str), ``TITLE`` (one line) and ``COLUMNS`` (the documented columns of its CSV);
* ``specs(ctx) -> {label: Spec}``: the runs it needs (toy, UCR, LRA-demo or cached-number
  specs of :mod:`toyspt.runs.specs`), under labels of the figure's choosing (any hashable,
  e.g. ``(arm, seed)``). The registry calls it once per figure and call;
* ``draw(ctx, {label: RunResult}) -> (figure, frame)``: the matplotlib figure and the
  plotted numbers (a DataFrame with ``COLUMNS``, or ``{csv name: DataFrame}`` holding
  ``NAME`` and any extra tables). It writes nothing; it may put facts for metadata.json
  in ``ctx.meta[NAME]``.

:func:`write` turns what ``draw`` returns into ``NAME.png``, ``NAME.pdf`` and ``NAME.csv``
in ``ctx.out`` (quick figures stamped QUICK), after checking the documented columns, and
:func:`render` does results -> draw -> write for one figure whose runs are ready:
:mod:`toyspt.figs.job` sweeps every figure's runs through the cache, in the order of
:data:`FIGURES` (the headline first), and renders each figure as soon as its last run is stored
(:mod:`toyspt.figs.schedule`); :mod:`toyspt.figs.metadata` writes ``metadata.json``.
"""
from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from toyspt.data.tasks import TaskConfig
from toyspt.nn.model import ModelConfig
from toyspt.runs.cache import RunCache
from toyspt.runs.specs import RunSpec
from toyspt.studies.registry import BY_TIER
from toyspt.studies.registry import STUDIES as BY_NAME
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
CONTRAST = ("accuracy", "proximity", "ablations", "displacement", "blindness")  # drawn in both regimes
# the figures in the order a reader of the paper wants them, which is the order they are trained
# and drawn in (toyspt.figs.schedule): the headline first, then what SPT does to attention, the
# ablations, the mechanism (displacement, blindness, basin, theory), the LRA bridge, the real data.
# ``task`` needs no run: it is drawn at once, while the workers start on the headline's runs;
# ``lra`` (five demo runs, ~3 CPU-minutes) comes after the toy figures and before the real data,
# whose runs take most of the job. The contrast regime comes after all of them.
FIGURES = ("task", "accuracy", "proximity", "ablations", "displacement", "blindness", "basin", "theory",
           "lra", "ucr", "real_data", "real_gain", "archive_scan", "archive_small", "real_gain_splits", "lra_claims",
           "lra_mechanism", "lra_claims2", "lra_mechanism2")
HEADLINE = "accuracy"  # the figure a reader opens first: trained first, its time measured (benchmarks/)
# tier -> the study a figure job of that tier runs (toyspt.studies.registry.BY_TIER, as each study
# names its tiers): the real-data study's (default, study) and the LRA study's (lra). One study per
# job: its ledger, its order of training, the flags it refuses (the protocol toyspt.studies.protocol)
STUDIES = BY_TIER
TIERS = tuple(STUDIES)
# a figure module may say which tiers draw it (``TIERS``); by default the real-data study's tiers,
# which draw the toy figures too (the lra tier draws its own figure only)
DEFAULT_TIERS = BY_NAME["ucr"].tiers


@dataclass
class FigContext:
    """What every figure gets: where to write, which seeds, quick or full, the cache."""

    out: Path
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    quick: bool = False
    cache: RunCache = field(default_factory=RunCache)
    meta: dict[str, Any] = field(default_factory=dict)  # per-figure facts for metadata.json
    regime: str = "proximity"  # a key of REGIMES: which task the toy figures use
    numerics: str = "eager"  # the toy and UCR runs' numerics path: eager | compiled (toyspt.train.compiled)
    tier: str = "default"  # the job's tier (:data:`TIERS`): default | study (real data) | lra

    def __post_init__(self):
        if self.regime not in REGIMES:
            raise ValueError(f"regime: choose one of {sorted(REGIMES)}, got {self.regime!r}")
        if self.tier not in TIERS:
            raise ValueError(f"tier: choose one of {TIERS}, got {self.tier!r}")

    @functools.cached_property
    def study(self):
        """The study of this job's tier (:data:`STUDIES`: :class:`toyspt.ucr.design.Study`, its
        paper's sets found once for every figure, or :class:`toyspt.studies.lra_design.Study`; quick: its
        smoke version)."""
        return STUDIES[self.tier].for_tier(self.tier, self.quick, self.seeds, self.numerics)

    @property
    def base(self) -> RunSpec:
        """The default run (full), or a small fast one (quick). Runs measure test accuracy
        where validation peaks (``evaluate="peak"``); a figure that draws every epoch asks
        for ``evaluate="all"``, and that run then answers the peak spec too."""
        task = replace(TaskConfig(), **REGIMES[self.regime])
        if not self.quick:
            return RunSpec("scratch", data=task, evaluate="peak", numerics=self.numerics)
        return RunSpec("scratch", data=replace(task, n_train=400, n_val=200, n_test=200),
                       model=ModelConfig(), train=TrainConfig(epochs=4, pre_epochs=3), evaluate="peak",
                       numerics=self.numerics)

    def stamp_regime(self, fig):
        """Note the task regime below everything else a toy figure draws (the saved bbox is
        tight, so the figure grows to hold it); returns ``fig``, laid out."""
        offset = self.base.data.offset
        # where everything ends is known once the figure is laid out: one draw, not rendered
        fig.draw_without_rendering()
        bottom = fig.get_tightbbox(fig.canvas.get_renderer()).y0 / fig.get_figheight()  # inches -> fraction
        fig.text(0.5, bottom - 0.01, f"task regime: {self.regime} (per-sequence offset std {offset:g})",
                 ha="center", va="top", fontsize=7, color="0.35")
        # a plain figure text moves nothing else (layout engines place suptitles, not these), so the
        # figure stays laid out: the readability check reads it as it is instead of drawing it again
        fig.stale = False
        return fig

    def spec(self, arm: str, seed: int, **overrides) -> RunSpec:
        from toyspt.runs.arms import arm_spec

        return arm_spec(arm, replace(self.base, seed=seed, **overrides))

    def tracked_spec(self, arm: str, seed: int, optimizer: str = "adamw") -> RunSpec:
        """A run with the displacement and probe trackers (shared by the displacement and
        blindness figures); ``optimizer="sgd"`` uses :data:`SGD_LR` and no weight decay. The
        AdamW runs are evaluated every epoch: each answers for the untracked run of its arm
        and seed (its twin) that the accuracy figure's curves, and every figure's peak runs,
        ask for; the SGD runs' twins serve nothing, so they keep the cheaper policy."""
        spec = replace(self.spec(arm, seed, evaluate="all" if optimizer == "adamw" else "peak"), trackers=TRACKED)
        if optimizer == "sgd":
            spec = replace(spec, train=replace(spec.train, optimizer="sgd", lr=SGD_LR,
                                               weight_decay=SGD_WEIGHT_DECAY))
        return spec


def tiers_of(mod) -> tuple[str, ...]:
    """The tiers that draw the figure module ``mod`` (``mod.TIERS``, default: :data:`DEFAULT_TIERS`)."""
    return tuple(getattr(mod, "TIERS", DEFAULT_TIERS))


def in_tier(mod, tier: str) -> bool:
    """Whether the figure module ``mod`` is drawn in ``tier`` (:func:`tiers_of`)."""
    return tier in tiers_of(mod)


def load(name: str):
    """The figure module ``name``."""
    if name not in FIGURES:
        raise ValueError(f"unknown figure {name!r}; figures are {FIGURES}")
    return importlib.import_module(f"{__name__}.{name}")


def write(ctx: FigContext, mod, drawn) -> list[Path]:
    """Write what ``mod.draw`` returned, ``(figure, frame or {csv name: frame})``, into
    ``ctx.out``: ``NAME.png``/``.pdf`` and every CSV. The documented columns are checked
    first, so a figure that lacks one writes nothing. Returns the paths."""
    from toyspt.util.plots import save_csv, save_figure

    fig, frame = drawn
    frames = dict(frame) if isinstance(frame, dict) else {mod.NAME: frame}
    if mod.NAME not in frames:
        raise RuntimeError(f"figure {mod.NAME}: draw returned no {mod.NAME!r} table")
    missing = [c for c in mod.COLUMNS if c not in frames[mod.NAME].columns]
    if missing:
        import matplotlib.pyplot as plt

        plt.close(fig)
        raise RuntimeError(f"figure {mod.NAME}: CSV lacks documented columns {missing}")
    from toyspt.figs.readable import overlaps

    ctx.meta.setdefault(mod.NAME, {})["overlapping_labels"] = [list(pair) for pair in overlaps(fig)]
    paths = save_figure(fig, ctx.out, mod.NAME, ctx.quick)
    return paths + [save_csv(f, ctx.out, name) for name, f in frames.items()]


def render(ctx: FigContext, mod, specs: dict, results: dict) -> list[Path]:
    """Draw and write one figure from its ``specs`` (``mod.specs(ctx)``) and ``results``
    (spec key -> RunResult, holding every one of them)."""
    return write(ctx, mod, mod.draw(ctx, {label: results[s.key()] for label, s in specs.items()}))
