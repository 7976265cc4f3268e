"""UCR runs: the toy recipes on real time series, as run specs of the run system, with
per-seed tables and post-hoc probe columns (the ``toyspt ucr`` subcommand is
:mod:`toyspt.cli.ucr`, the figure :mod:`toyspt.figs.ucr`).

The model and recipes are the toy's (:mod:`toyspt.train.loop`): one token per time step, a 1-D
value plus the mask channel (``ModelConfig(d_in=1)``), sinusoidal PE unless an arm says
otherwise. :class:`UCRRunSpec` is a :class:`toyspt.runs.Spec` like the toy's, so UCR runs
go through the same cache and sweep; its key hashes the data
*content* (``UCRData.fingerprint``) and the split rule, not the path the files came from,
so the same GunPoint from a local archive or from the package share cache entries only if
their values are identical. Keys carry ``kind="ucr"`` and never collide with toy runs.

Defaults for GunPoint-sized sets (50 training series): see :data:`UCR_TRAIN_DEFAULTS`.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, Sequence

import pandas as pd
import torch

from toyspt.data import directions as dr
from toyspt.nn.model import ModelConfig
from toyspt.runs.specs import RecipeSpec, RunSpec
from toyspt.runs.tables import rows, summary_table as arm_table, write_table
from toyspt.train.recipes import TrainConfig
from toyspt.train.loop import RunResult
from toyspt.ucr.data import UCRConfig, UCRData, load_ucr

FORMAT_VERSION = 3  # bump when the meaning of a cached UCR entry changes (2: resume state, evaluate; 3: val loss)
# 40 training series (GunPoint after the validation split) give 5 steps per epoch at batch 8:
# 200 label epochs = 1000 steps (scratch reaches ~100% train accuracy well before), 300 SPT
# epochs (the reconstruction loss on validation still falls slowly after 200)
UCR_TRAIN_DEFAULTS = dict(epochs=200, pre_epochs=300, batch_size=8)
METRICS = ("peak_val_acc", "test_at_peak", "final_train_acc", "final_test_acc")
# post-hoc probes of the final weights (see probe_columns)
PROBE_COLUMNS = ("proximity_index", "self_index", "rel_disp_WQ", "rel_disp_WK", "blind_ratio_circ_w1",
                 "column_share_label")
PROBE_DIRECTION = dr.PROXIMITY_W1[0]  # circulant kernel of width 1: blind to a row-identical gradient


def ucr_train_config(**overrides) -> TrainConfig:
    return TrainConfig(**{**UCR_TRAIN_DEFAULTS, **overrides})


@dataclass(frozen=True)
class UCRRunSpec(RecipeSpec):
    """Everything that determines one UCR run (build with :func:`ucr_spec`)."""

    kind: ClassVar[str] = "ucr"
    swap_name: ClassVar[str] = "swap data (--swap-dataset)"

    recipe: str  # one of toyspt.train.recipes.RECIPES
    seed: int = 0  # model init and data order
    data: UCRConfig = field(default_factory=UCRConfig)  # which data set, split rule
    model: ModelConfig = field(default_factory=lambda: ModelConfig(d_in=1))  # architecture
    train: TrainConfig = field(default_factory=ucr_train_config)  # optimisation and SPT
    fingerprint: str = ""  # UCRData.fingerprint of ``data`` (content hash of the raw files)
    swap_data: UCRConfig | None = None  # data_swap: the UCR set SPT runs on
    swap_fingerprint: str = ""  # its fingerprint
    trackers: tuple[str, ...] = ()  # names of tracker callbacks (toyspt.probe.tracking)
    evaluate: str = "all"  # what the label phase measures: all | peak (toyspt.train.evaluation)
    numerics: str = "eager"  # eager (bitwise) | compiled (toyspt.train.compiled); keyed unless eager

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["format"], d["kind"] = FORMAT_VERSION, "ucr"
        return d

    @classmethod
    def identity_of(cls, d: dict[str, Any]) -> dict[str, Any]:
        """The data's fingerprint stands for where it was read from (root, source)."""
        d = dict(super().identity_of(d))
        for part in ("data", "swap_data"):
            if d.get(part) is not None:
                d[part] = {k: v for k, v in d[part].items() if k not in ("root", "source")}
        return d

    def key(self) -> str:
        if not self.fingerprint or (self.swap_data is not None and not self.swap_fingerprint):
            raise ValueError("UCRRunSpec has no data fingerprint; build it with ucr_spec()")
        return super().key()

    def label(self) -> str:
        return f"UCR run {self.key()} ({self.data.name}, {self.recipe}, seed {self.seed})"

    def load_data(self):
        swap = _load_checked(self.swap_data, self.swap_fingerprint) if self.swap_data else None
        return _load_checked(self.data, self.fingerprint), swap


def _fit_model(model: ModelConfig, data: UCRData) -> ModelConfig:
    """The model config with d_in = 1 and n_classes = the data set's class count."""
    if model.d_in != 1:
        raise ValueError(f"UCR series are univariate: model.d_in must be 1, got {model.d_in}")
    if data.length > model.max_len:
        raise ValueError(f"{data.config.name}: series length {data.length} exceeds model.max_len="
                         f"{model.max_len}; raise --model.max_len")
    return replace(model, n_classes=data.n_classes)


def ucr_spec(recipe: str, data: UCRData, seed: int = 0, model: ModelConfig | None = None,
             train: TrainConfig | None = None, swap: UCRData | None = None,
             trackers: Sequence[str] = (), evaluate: str = "all", numerics: str = "eager") -> UCRRunSpec:
    """The spec of one run on loaded ``data`` (n_classes is set from the data)."""
    return UCRRunSpec(recipe, seed, data.config, _fit_model(model or ModelConfig(d_in=1), data),
                      train or ucr_train_config(), data.fingerprint,
                      swap.config if swap is not None else None,
                      swap.fingerprint if swap is not None else "", tuple(trackers), evaluate, numerics)


def _load_checked(cfg: UCRConfig, fingerprint: str) -> UCRData:
    data = load_ucr(cfg)
    if data.fingerprint != fingerprint:
        raise ValueError(f"{cfg.name} at {data.source} has changed since the spec was made "
                         f"(fingerprint {data.fingerprint[:12]} != {fingerprint[:12]})")
    return data


# --------------------------------------------------------------------------------------
# arms (the toy's grammar: recipe[:key=value,...] and its aliases)

def arm_spec(arm: str, base: UCRRunSpec) -> UCRRunSpec:
    """``base`` with the recipe and model/train overrides of ``arm`` (task keys are refused)."""
    from toyspt.runs.arms import arm_spec as toy_arm_spec

    if "swap." in arm:
        raise ValueError(f"arm {arm!r}: swap.* keys describe a toy task; UCR data_swap takes "
                         "--swap-dataset")
    toy = RunSpec(recipe="scratch", seed=base.seed, model=base.model, train=base.train)
    got = toy_arm_spec(arm, toy)
    if got.task != toy.task:
        raise ValueError(f"arm {arm!r}: task.* keys do not apply to UCR data")
    if got.recipe == "data_swap" and base.swap_data is None:
        raise ValueError(f"arm {arm!r}: data_swap on UCR needs --swap-dataset NAME")
    spec = replace(base, recipe=got.recipe, model=got.model, train=got.train)
    if got.recipe != "data_swap":  # swap data must not change the key of the other arms
        spec = replace(spec, swap_data=None, swap_fingerprint="")
    return spec


def probe_columns(data: UCRData, result: RunResult, mask_rate: float = 0.5) -> dict[str, float]:
    """Probes of a run's final weights (layer 0, mean over heads; float64 where it matters):

    * ``proximity_index`` / ``self_index`` (:mod:`toyspt.probe.tracking`): attention mass on the
      two nearest neighbours each side / on self, relative to uniform, averaged over the
      train + validation series (inputs only; no test data, no labels);
    * ``rel_disp_WQ`` / ``rel_disp_WK``: ``||W_final - W_init||_F / ||W_init||_F``;
    * ``blind_ratio_circ_w1``: ``|cos_label| / |cos_recon|`` along the width-1 circulant
      proximity direction (:func:`toyspt.probe.engine.blindness`, float64) on all training series
      with a seeded mask; 0 = the label loss is blind to it, ~1 = both losses see it;
    * ``column_share_label``: share of the label-loss score gradient in column-only directions.
    """
    from toyspt.probe import tracking as tr
    from toyspt.probe.engine import blindness
    from toyspt.probe.losses import make_batch
    from toyspt.train.loop import load_model

    model = load_model(result, "final")
    x = torch.cat([data.train.x, data.val.x])
    a = next(iter(tr.attention_maps(model, x).values()))
    final, init = result.states["final"], result.states["init"]
    bl = blindness(model, make_batch(data.train.x, data.train.y, mask_rate, seed=0), [PROBE_DIRECTION],
                   per_example=False, use_jvp=False)
    site = bl.label.layers[0].site
    return dict(proximity_index=tr.proximity_index(a).mean().item(), self_index=tr.self_index(a).mean().item(),
                rel_disp_WQ=tr.relative_displacement(final, init, "W_Q"),
                rel_disp_WK=tr.relative_displacement(final, init, "W_K"),
                blind_ratio_circ_w1=bl.ratio[site][:, 0].mean().item(),
                column_share_label=bl.label.layers[0].column_share.mean().item())


def arm_specs(datasets: Sequence[UCRData], arms: Sequence[str], seeds: Sequence[int],
              base: UCRRunSpec, swap: UCRData | None = None) -> list[tuple[UCRData, str, UCRRunSpec]]:
    """(data set, arm, spec) for every data set, arm and seed, on top of ``base``."""
    specs = []
    for data in datasets:
        b = ucr_spec(base.recipe, data, model=base.model, train=base.train, swap=swap,
                     trackers=base.trackers, evaluate=base.evaluate, numerics=base.numerics)
        specs += [(data, arm, arm_spec(arm, replace(b, seed=s))) for arm in arms for s in seeds]
    return specs


def per_seed_frame(datasets: Sequence[UCRData], arms: Sequence[str], seeds: Sequence[int],
                   base: UCRRunSpec, cache, workers: int = 1, recompute: bool = False,
                   progress: bool = True, swap: UCRData | None = None, probes: bool = True,
                   executor=None, dask: str | None = None, vectorize: bool = True) -> pd.DataFrame:
    """One row per (dataset, arm, seed): the run summary (see :data:`METRICS`) and, when
    ``probes``, the :data:`PROBE_COLUMNS` of the final weights; runs through the sweep
    (seeds of an arm in lockstep unless ``vectorize`` is False; bitwise the same)."""
    from toyspt.runs.sweeps import sweep

    specs = arm_specs(datasets, arms, seeds, base, swap)
    results = sweep([s for *_, s in specs], cache, workers=workers, executor=executor, recompute=recompute,
                    progress=progress, desc="ucr runs", dask=dask, vectorize=vectorize)
    return frame_of(specs, results, probes)


def frame_of(specs: Sequence[tuple[UCRData, str, UCRRunSpec]], results: Sequence[RunResult],
             probes: bool = True) -> pd.DataFrame:
    """The per-seed frame of finished runs (``specs`` as :func:`arm_specs` gives them)."""
    labelled = [(dict(dataset=data.config.name, arm=arm, seed=spec.seed), spec) for data, arm, spec in specs]
    out = rows(labelled, results, METRICS)
    out["peak_epoch"] = [r.summary["peak_epoch"] for r in results]
    if probes:
        probe = pd.DataFrame([probe_columns(data, res, spec.train.mask_rate)
                              for (data, _, spec), res in zip(specs, results)], columns=list(PROBE_COLUMNS))
        out = pd.concat([out, probe], axis=1)
    return out


def summary_table(per_seed: pd.DataFrame) -> pd.DataFrame:
    """Mean ± std (ddof=1) over seeds per (dataset, arm), in the order given."""
    return arm_table(per_seed, by=("dataset", "arm"))


def write_outputs(per_seed: pd.DataFrame, out: Path) -> None:
    """``<out>/<dataset>/compare.csv|compare.json|per_seed.csv`` (the toy comparison's format)."""
    for name, g in per_seed.groupby("dataset", sort=False):
        g = g.drop(columns=["dataset"])
        write_table(arm_table(g), g, Path(out) / name)


__all__ = ["UCRRunSpec", "UCR_TRAIN_DEFAULTS", "METRICS", "ucr_train_config", "ucr_spec",
           "PROBE_COLUMNS", "probe_columns", "arm_spec", "arm_specs", "per_seed_frame", "frame_of",
           "summary_table", "write_outputs"]
