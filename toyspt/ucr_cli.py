"""UCR experiments: the toy recipes on real time series, cached, with a mean ± std table.

This module holds the run spec, the cached sweep, the table and the ``toyspt ucr``
subcommand.

The model and recipes are the toy's (:mod:`toyspt.train`): one token per time step, a 1-D
value plus the mask channel (``ModelConfig(d_in=1)``), sinusoidal PE unless an arm says
otherwise. Runs go through :class:`toyspt.runs.RunCache` unchanged: :class:`UCRRunSpec`
offers the two methods the cache uses (``key``, ``to_dict``), and its key hashes the data
*content* (``UCRData.fingerprint``) and the split rule, not the path the files came from,
so the same GunPoint from a local archive or from the package share cache entries only if
their values are identical. Keys carry ``kind="ucr"`` and never collide with toy runs.

Defaults for GunPoint-sized sets (50 training series): see :data:`UCR_TRAIN_DEFAULTS`.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

import pandas as pd
import torch

from .model import ModelConfig
from .train import RunResult, TrainConfig, run_recipe
from .ucr import ENV_ROOT, PAPER_DATASETS, SOURCES, UCRConfig, UCRData, load_ucr, locate

FORMAT_VERSION = 1  # bump when the meaning of a cached UCR entry changes
# 40 training series (GunPoint after the validation split) give 5 steps per epoch at batch 8:
# 200 label epochs = 1000 steps (scratch reaches ~100% train accuracy well before), 300 SPT
# epochs (the reconstruction loss on validation still falls slowly after 200)
UCR_TRAIN_DEFAULTS = dict(epochs=200, pre_epochs=300, batch_size=8)
METRICS = ("peak_val_acc", "test_at_peak", "final_train_acc", "final_test_acc")
# post-hoc probes of the final weights (see probe_columns)
PROBE_COLUMNS = ("proximity_index", "self_index", "rel_disp_WQ", "rel_disp_WK", "blind_ratio_circ_w1",
                 "column_share_label")
PROBE_DIRECTION = "circ_w1"  # circulant proximity kernel of width 1: blind to a row-identical gradient


def ucr_train_config(**overrides) -> TrainConfig:
    return TrainConfig(**{**UCR_TRAIN_DEFAULTS, **overrides})


@dataclass(frozen=True)
class UCRRunSpec:
    """Everything that determines one UCR run (build with :func:`ucr_spec`)."""

    recipe: str  # one of toyspt.train.RECIPES
    seed: int = 0  # model init and data order
    data: UCRConfig = field(default_factory=UCRConfig)  # which data set, split rule
    model: ModelConfig = field(default_factory=lambda: ModelConfig(d_in=1))  # architecture
    train: TrainConfig = field(default_factory=ucr_train_config)  # optimisation and SPT
    fingerprint: str = ""  # UCRData.fingerprint of ``data`` (content hash of the raw files)
    swap_data: UCRConfig | None = None  # data_swap: the UCR set SPT runs on
    swap_fingerprint: str = ""  # its fingerprint
    trackers: tuple[str, ...] = ()  # names of tracker callbacks (toyspt.tracking)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["format"], d["kind"] = FORMAT_VERSION, "ucr"
        return d

    def key(self) -> str:
        """Content hash: the data's fingerprint stands for where it was read from."""
        if not self.fingerprint or (self.swap_data is not None and not self.swap_fingerprint):
            raise ValueError("UCRRunSpec has no data fingerprint; build it with ucr_spec()")
        d = self.to_dict()
        for part in ("data", "swap_data"):
            if d[part] is not None:
                d[part] = {k: v for k, v in d[part].items() if k not in ("root", "source")}
        blob = json.dumps(d, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:24]

    def execute(self, progress: bool = False) -> RunResult:
        return execute(self, progress)


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
             trackers: Sequence[str] = ()) -> UCRRunSpec:
    """The spec of one run on loaded ``data`` (n_classes is set from the data)."""
    return UCRRunSpec(recipe, seed, data.config, _fit_model(model or ModelConfig(d_in=1), data),
                      train or ucr_train_config(), data.fingerprint,
                      swap.config if swap is not None else None,
                      swap.fingerprint if swap is not None else "", tuple(trackers))


def _load_checked(cfg: UCRConfig, fingerprint: str) -> UCRData:
    data = load_ucr(cfg)
    if data.fingerprint != fingerprint:
        raise ValueError(f"{cfg.name} at {data.source} has changed since the spec was made "
                         f"(fingerprint {data.fingerprint[:12]} != {fingerprint[:12]})")
    return data


def execute(spec: UCRRunSpec, progress: bool = False) -> RunResult:
    """Train the run a spec describes (no cache)."""
    data = _load_checked(spec.data, spec.fingerprint)
    swap = _load_checked(spec.swap_data, spec.swap_fingerprint) if spec.swap_data else None
    if spec.recipe == "data_swap" and swap is None:
        raise ValueError("a UCR data_swap run needs swap data (--swap-dataset)")
    callbacks = ()
    if spec.trackers:
        from .tracking import make_trackers  # imported only when a spec asks for trackers
        callbacks = make_trackers(spec.trackers, data)
    return run_recipe(spec.recipe, data, spec.model, spec.train, spec.seed, callbacks=callbacks,
                      pretrain_data=swap, progress=progress)


def ucr_sweep(specs: Sequence[UCRRunSpec], cache, workers: int = 1, recompute: bool = False,
              progress: bool = True) -> list[RunResult]:
    """Every spec through the run cache (:func:`toyspt.runs.sweep`, one run at a time or in
    a process pool when ``workers`` > 1); each run is stored as soon as it ends."""
    from .runs import sweep

    return sweep(specs, cache, workers=workers, recompute=recompute, progress=progress,
                 desc="ucr runs", vectorize=False)


# --------------------------------------------------------------------------------------
# arms (the toy's grammar: recipe[:key=value,...] and its aliases)

def arm_spec(arm: str, base: UCRRunSpec) -> UCRRunSpec:
    """``base`` with the recipe and model/train overrides of ``arm`` (task keys are refused)."""
    from .arms import arm_spec as toy_arm_spec
    from .runs import RunSpec

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

    * ``proximity_index`` / ``self_index`` (:mod:`toyspt.tracking`): attention mass on the
      two nearest neighbours each side / on self, relative to uniform, averaged over the
      train + validation series (inputs only; no test data, no labels);
    * ``rel_disp_WQ`` / ``rel_disp_WK``: ``||W_final - W_init||_F / ||W_init||_F``;
    * ``blind_ratio_circ_w1``: ``|cos_label| / |cos_recon|`` along the width-1 circulant
      proximity direction (:func:`toyspt.probes.blindness`, float64) on all training series
      with a seeded mask; 0 = the label loss is blind to it, ~1 = both losses see it;
    * ``column_share_label``: share of the label-loss score gradient in column-only directions.
    """
    from . import tracking as tr
    from .probes import blindness, make_batch
    from .train import load_model

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
                     trackers=base.trackers)
        specs += [(data, arm, arm_spec(arm, replace(b, seed=s))) for arm in arms for s in seeds]
    return specs


def per_seed_frame(datasets: Sequence[UCRData], arms: Sequence[str], seeds: Sequence[int],
                   base: UCRRunSpec, cache, workers: int = 1, recompute: bool = False,
                   progress: bool = True, swap: UCRData | None = None, probes: bool = True
                   ) -> pd.DataFrame:
    """One row per (dataset, arm, seed): the run summary (see :data:`METRICS`) and, when
    ``probes``, the :data:`PROBE_COLUMNS` of the final weights."""
    specs = arm_specs(datasets, arms, seeds, base, swap)
    results = ucr_sweep([s for *_, s in specs], cache, workers, recompute, progress)
    rows = []
    for (data, arm, spec), res in zip(specs, results):
        row = dict(dataset=data.config.name, arm=arm, seed=spec.seed,
                   **{k: res.summary[k] for k in METRICS}, peak_epoch=res.summary["peak_epoch"])
        if probes:
            row.update(probe_columns(data, res, spec.train.mask_rate))
        rows.append(row)
    return pd.DataFrame(rows)


def summary_table(per_seed: pd.DataFrame) -> pd.DataFrame:
    """Mean ± std (ddof=1) over seeds per (dataset, arm), in the order given."""
    from .compare import summary_table as arm_table

    parts = []
    for name, g in per_seed.groupby("dataset", sort=False):
        t = arm_table(g.drop(columns=["dataset"]))
        t.insert(0, "dataset", name)
        parts.append(t)
    return pd.concat(parts, ignore_index=True)


def write_outputs(per_seed: pd.DataFrame, out: Path) -> None:
    """``<out>/<dataset>/compare.csv|compare.json|per_seed.csv`` (toyspt.compare's format)."""
    from .compare import summary_table as arm_table, write_table

    for name, g in per_seed.groupby("dataset", sort=False):
        g = g.drop(columns=["dataset"])
        write_table(arm_table(g), g, out / name)


# --------------------------------------------------------------------------------------
# the subcommand

def _data_config(args, name: str) -> UCRConfig:
    return UCRConfig(name=name, root=args.ucr_root, source=args.source,
                     val_fraction=args.val_fraction, split_seed=args.split_seed)


def _base_from_flags(args) -> UCRRunSpec:
    from .cli import base_spec

    given = {a: v for a, v in vars(args).items() if a.startswith("task.") and v is not None}
    if given:
        raise ValueError(f"task flags do not apply to UCR data: {sorted(given)}")
    toy = base_spec(args)
    train = replace(toy.train, **{k: v for k, v in UCR_TRAIN_DEFAULTS.items()
                                  if getattr(args, f"train.{k}") is None})
    model = toy.model if getattr(args, "model.d_in") is not None else replace(toy.model, d_in=1)
    return UCRRunSpec("scratch", model=model, train=train)


def cmd_list(args) -> int:
    names = [n for n in args.dataset.split(",") if n] if args.dataset else list(PAPER_DATASETS)
    for name in names:
        try:
            loc = locate(name, args.ucr_root, args.source)
            print(f"{name:18s} {loc.source}")
        except FileNotFoundError as e:
            print(f"{name:18s} not available: {e}")
    return 0


def cmd_ucr(args) -> int:
    from .runs import RunCache

    if args.list:
        return cmd_list(args)
    torch.set_num_threads(1)
    seeds = args.seeds
    arms = [a for a in args.recipes.split(",") if a]
    names = [n for n in (args.dataset or "GunPoint").split(",") if n]
    base = _base_from_flags(args)
    datasets = [load_ucr(_data_config(args, n)) for n in names]
    swap = load_ucr(_data_config(args, args.swap_dataset)) if args.swap_dataset else None
    for d in datasets:
        print(f"{d.config.name}: {d.source}; train {len(d.train)} / val {len(d.val)} / test "
              f"{len(d.test)}, length {d.length}, classes {d.n_classes} (labels {list(d.label_map)})")
    print(f"train config: {json.dumps(asdict(base.train))}")
    per_seed = per_seed_frame(datasets, arms, seeds, base, RunCache(args.cache), workers=args.workers,
                              recompute=args.recompute, swap=swap, probes=not args.no_probes)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(summary_table(per_seed).to_string(index=False))
    if args.out:
        write_outputs(per_seed, Path(args.out))
        print(f"wrote {args.out}/<dataset>/compare.csv, compare.json, per_seed.csv")
    return 0


def register(subparsers) -> None:
    """Add ``toyspt ucr`` to the main parser (called by toyspt.cli)."""
    from .arms import ALIASES
    from .cli import add_config_flags, parse_seeds
    from .runs import DEFAULT_CACHE

    p = subparsers.add_parser("ucr", help="scratch vs SPT (and ablations) on UCR time-series data",
                              description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default=None,
                   help="comma-separated UCR names as the archive spells them (default GunPoint)")
    p.add_argument("--recipes", default="scratch,spt,scratch_matched,qk_transfer,alibi",
                   help=f"comma-separated arms; aliases: {', '.join(sorted(ALIASES))}")
    p.add_argument("--seeds", type=parse_seeds, default=parse_seeds("0-4"), help="e.g. 0-4 or 0,2")
    p.add_argument("--ucr-root", default=None,
                   help=f"UCR archive folder holding <Name>/<Name>_TRAIN.tsv (default ${ENV_ROOT}, "
                        "else a packaged copy)")
    p.add_argument("--source", default="auto", choices=SOURCES, help="where to read the data from")
    p.add_argument("--val-fraction", type=float, default=UCRConfig.val_fraction,
                   help="share of each class of train held out for validation")
    p.add_argument("--split-seed", type=int, default=UCRConfig.split_seed,
                   help="seed of the stratified validation split")
    p.add_argument("--swap-dataset", default=None, help="data_swap arm: the UCR set SPT runs on")
    p.add_argument("--no-probes", action="store_true",
                   help="skip the proximity index / displacement / blindness columns")
    p.add_argument("--list", action="store_true", help="say where each data set would be read from")
    p.add_argument("--workers", type=int, default=1, help="parallel training processes")
    p.add_argument("--out", default=None, help="directory for <dataset>/compare.csv etc.")
    p.add_argument("--cache", default=str(DEFAULT_CACHE), help="run cache directory")
    p.add_argument("--recompute", action="store_true", help="ignore cached runs")
    add_config_flags(p)
    for action in p._actions:  # the train defaults differ from the toy's: say so in --help
        name = action.dest.partition(".")[2]
        if action.dest.startswith("train.") and name in UCR_TRAIN_DEFAULTS:
            action.help = f"(UCR default {UCR_TRAIN_DEFAULTS[name]!r})"
        elif action.dest.startswith("task."):
            action.help = "not used by ucr"
    p.set_defaults(func=cmd_ucr)


__all__ = ["UCRRunSpec", "UCR_TRAIN_DEFAULTS", "METRICS", "ucr_train_config", "ucr_spec", "execute",
           "PROBE_COLUMNS", "probe_columns", "ucr_sweep", "arm_spec", "per_seed_frame", "summary_table", "write_outputs", "register"]
