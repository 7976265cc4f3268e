"""``toyspt ucr``: the toy recipes on UCR time series (runs and tables: :mod:`toyspt.ucr.runs`)."""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pandas as pd
import torch

from toyspt.cli.flags import (add_arms_flag, add_config_flags, add_evaluate_flag, add_numerics_flag, add_seeds,
    add_sweep_flags, ascii_float, ascii_int, config_values, numerics_of, out_dir, split_arms, split_unique)
from toyspt.nn.model import ModelConfig
from toyspt.train.recipes import TrainConfig
from toyspt.ucr.data import ENV_ROOT, PAPER_DATASETS, SOURCES, UCRConfig, load_ucr
from toyspt.ucr.sources import describe_sources, format_sources
from toyspt.ucr.runs import UCR_TRAIN_DEFAULTS, UCRRunSpec, per_seed_frame, summary_table, write_outputs


def _data_config(args, name: str) -> UCRConfig:
    return UCRConfig(name=name, root=args.ucr_root, source=args.source,
                     val_fraction=args.val_fraction, split_seed=args.split_seed)


def _base_from_flags(args) -> UCRRunSpec:
    """The base spec from the model/train flags (UCR defaults where a flag is not given)."""
    model = config_values(args, "model")
    train = {**UCR_TRAIN_DEFAULTS, **config_values(args, "train")}
    try:
        return UCRRunSpec("scratch", model=ModelConfig(**{"d_in": 1, **model}), train=TrainConfig(**train),
                          evaluate=args.evaluate, numerics=numerics_of(args))
    except ValueError as e:
        raise ValueError(f"config: {e}") from None


def cmd_list(args) -> int:
    """Where each data set would be read from (archive, which package) or what to install."""
    names = [n for n in args.dataset.split(",") if n] if args.dataset else list(PAPER_DATASETS)
    print(format_sources(describe_sources(names, args.ucr_root, args.source)))
    return 0


def cmd_ucr(args) -> int:
    from toyspt.runs import RunCache, executor_scope

    if args.list:
        return cmd_list(args)
    torch.set_num_threads(1)
    seeds = args.seeds
    arms = split_arms(args.arms)
    names = split_unique(args.dataset or "GunPoint", "--dataset", "data set")
    base = _base_from_flags(args)
    max_len = base.model.max_len  # longer series are refused on their first row
    datasets = [load_ucr(_data_config(args, n), max_length=max_len) for n in names]
    swap = load_ucr(_data_config(args, args.swap_dataset), max_length=max_len) if args.swap_dataset else None
    for d in datasets:
        print(f"{d.config.name}: {d.source}; train {len(d.train)} / val {len(d.val)} / test "
              f"{len(d.test)}, length {d.length}, classes {d.n_classes} (labels {list(d.label_map)})")
    print(f"train config: {json.dumps(asdict(base.train))}")
    with executor_scope(args.workers, args.dask) as ex:
        per_seed = per_seed_frame(datasets, arms, seeds, base, RunCache(args.cache), workers=args.workers,
                                  recompute=args.recompute, swap=swap, probes=not args.no_probes, executor=ex,
                                  vectorize=not args.no_vectorize)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(summary_table(per_seed).to_string(index=False))
    if args.out:
        write_outputs(per_seed, Path(args.out))
        print(f"wrote {args.out}/<dataset>/compare.csv, compare.json, per_seed.csv")
    return 0


def register(subparsers) -> None:
    """Add ``toyspt ucr`` to the main parser (called by toyspt.cli.main)."""

    p = subparsers.add_parser("ucr", help="scratch vs SPT (and ablations) on UCR time-series data",
                              description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default=None,
                   help="comma-separated UCR names as the archive spells them (default GunPoint)")
    add_arms_flag(p, "scratch,spt,scratch_matched,qk_transfer,alibi")
    add_seeds(p)
    p.add_argument("--ucr-root", default=None,
                   help=f"UCR archive folder holding <Name>/<Name>_TRAIN.tsv (default ${ENV_ROOT}, "
                        "else a packaged copy)")
    p.add_argument("--source", default="auto", choices=SOURCES, help="where to read the data from")
    p.add_argument("--val-fraction", type=ascii_float, default=UCRConfig.val_fraction,
                   help="share of each class of train held out for validation")
    p.add_argument("--split-seed", type=ascii_int, default=UCRConfig.split_seed,
                   help="seed of the stratified validation split")
    p.add_argument("--swap-dataset", default=None, help="data_swap arm: the UCR set SPT runs on")
    p.add_argument("--no-probes", action="store_true",
                   help="skip the proximity index / displacement / blindness columns")
    p.add_argument("--list", action="store_true", help="say where each data set would be read from")
    p.add_argument("--out", type=out_dir, default=None, help="directory for <dataset>/compare.csv etc.")
    add_sweep_flags(p)
    add_evaluate_flag(p, "peak")
    add_numerics_flag(p)
    add_config_flags(p, parts=("model", "train"), defaults={"model": {"d_in": 1}, "train": UCR_TRAIN_DEFAULTS})
    p.set_defaults(func=cmd_ucr)


__all__ = ["register", "cmd_ucr", "cmd_list"]
