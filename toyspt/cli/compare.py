"""``toyspt compare``: arms over seeds on any data, mean ± std tables (:mod:`toyspt.runs.tables`);
``toyspt ucr`` is the same front door with UCR defaults (``--data ucr:NAME`` and its flags).

``--data toy`` (default) is the toy task of the ``--task.*`` flags; ``--data ucr:GunPoint,ucr:ECG200``
names UCR sets (``--ucr-root``, ``--source``, ``--val-fraction``, ``--split-seed`` say where and how
they are read; the model and training defaults become the UCR ones: ``d_in`` 1,
:data:`toyspt.ucr.runs.UCR_TRAIN_DEFAULTS`). The tables have one row per data set, arm and seed.
"""
from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

from toyspt.cli.flags import (
    add_arms_flag,
    add_config_flags,
    add_evaluate_flag,
    add_numerics_flag,
    add_seeds,
    add_sweep_flags,
    ascii_float,
    ascii_int,
    base_spec,
    config_values,
    distinct_arms,
    out_dir,
    split_arms,
    split_unique,
)

DATA_HELP = "toy (the --task.* flags), or ucr:NAME[,ucr:NAME...] (UCR sets as the archive spells them)"


def add_data_flags(p, default: str = "toy") -> None:
    """``--data`` and how UCR sets are read."""
    from toyspt.ucr.data import ENV_ROOT, SOURCES, UCRConfig

    p.add_argument("--data", default=default, help=f"{DATA_HELP} (default {default})")
    p.add_argument("--ucr-root", default=None,
                   help=f"UCR archive folder holding <Name>/<Name>_TRAIN.tsv (default ${ENV_ROOT}, "
                        "else a packaged copy)")
    p.add_argument("--source", default="auto", choices=SOURCES, help="where to read UCR sets from")
    p.add_argument("--val-fraction", type=ascii_float, default=UCRConfig.val_fraction,
                   help="UCR: share of each class of train held out for validation")
    p.add_argument("--split-seed", type=ascii_int, default=UCRConfig.split_seed,
                   help="UCR: seed of the stratified validation split")
    p.add_argument("--swap-dataset", default=None, help="UCR data_swap arm: the UCR set SPT runs on")


def ucr_names(text: str) -> list[str] | None:
    """The UCR set names of ``--data`` (None for the toy task); anything else refused by name."""
    if text.strip() == "toy":
        return None
    items = split_unique(text, "--data", "data set")
    bad = [i for i in items if not i.startswith("ucr:") or not i[4:]]
    if bad:
        raise ValueError(f"--data: {bad[0]!r} is neither 'toy' nor 'ucr:NAME' ({DATA_HELP})")
    return [i[4:] for i in items]


def data_sources(args, names: list[str] | None, max_length: int | None = None):
    """(the data sources, the swap source or None) the flags describe; toy-only flags refused
    when the data are UCR sets and the other way round; series longer than ``max_length`` (the
    model's table) are refused on each file's first row."""
    from toyspt.ucr.data import UCRConfig, UCRSource, load_ucr

    if names is None:
        given = [f for f in ("ucr_root", "swap_dataset") if getattr(args, f, None)]
        if given:
            raise ValueError(f"--{given[0].replace('_', '-')} applies to UCR data (--data ucr:NAME)")
        return None, None
    if config_values(args, "task"):
        raise ValueError(f"--task.{next(iter(config_values(args, 'task')))}: task flags describe the toy task, "
                         "not UCR data")

    def cfg(name):
        return UCRConfig(name=name, root=args.ucr_root, source=args.source, val_fraction=args.val_fraction,
                         split_seed=args.split_seed)
    def source(name):
        return UCRSource.of(load_ucr(cfg(name), max_length=max_length))
    return [source(n) for n in names], source(args.swap_dataset) if args.swap_dataset else None


def ucr_configs(args):
    """(model, train) configs of UCR runs: the model/train flags over the UCR defaults."""
    from toyspt.cli.flags import make_config
    from toyspt.nn.model import ModelConfig
    from toyspt.train.recipes import TrainConfig
    from toyspt.ucr.runs import UCR_MODEL_DEFAULTS, UCR_TRAIN_DEFAULTS

    return (make_config("model", ModelConfig, {**UCR_MODEL_DEFAULTS, **config_values(args, "model")}),
            make_config("train", TrainConfig, {**UCR_TRAIN_DEFAULTS, **config_values(args, "train")}))


def ucr_base(args, model, train, data, swap):
    """The base spec of UCR runs (on the first set; each set replaces it)."""
    from toyspt.cli.flags import numerics_of
    from toyspt.runs.specs import RunSpec

    return RunSpec("scratch", data=data[0], model=data[0].fit(model), train=train, swap=swap,
                   evaluate=args.evaluate, numerics=numerics_of(args))


def cmd_compare(args) -> int:
    import pandas as pd
    import torch

    from toyspt.runs import RunCache, executor_scope
    from toyspt.runs.sweeps import SweepOptions
    from toyspt.runs.tables import compare, default_columns, write_tables

    torch.set_num_threads(1)
    arms = split_arms(args.arms)
    names = ucr_names(args.data)
    if names is None:
        data, swap = data_sources(args, None)
        base = base_spec(args)
    else:
        model, train = ucr_configs(args)
        data, swap = data_sources(args, names, model.max_len)
        base = ucr_base(args, model, train, data, swap)
    for d in data or []:
        ld = d.load()
        print(f"{d.name}: {ld.source}; train {len(ld.train)} / val {len(ld.val)} / test {len(ld.test)}, "
              f"length {ld.length}, classes {ld.n_classes} (labels {list(ld.label_map)})")
    distinct_arms(arms, base)  # two arms that are one run, or a run too large to store: refused before training
    print(f"train config: {json.dumps(asdict(base.train))}")
    columns = {} if args.no_probes else default_columns(blindness=args.blindness)
    with executor_scope(args.workers, args.dask) as ex:
        options = SweepOptions(workers=args.workers, executor=ex, lockstep=not args.no_lockstep, desc="compare")
        table, per_seed = compare(arms, args.seeds, base, RunCache(args.cache), data, options=options,
                                  recompute=args.recompute, columns=columns)
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        print(table.to_string(index=False))
    if args.out:
        write_tables(per_seed, Path(args.out))
        print(f"wrote {args.out}/compare.csv, compare.json, per_seed.csv")
    return 0


def add_compare_flags(p, arms: str, data: str = "toy", blindness: bool = False) -> None:
    add_arms_flag(p, arms)
    add_seeds(p)
    add_data_flags(p, data)
    add_sweep_flags(p)
    add_evaluate_flag(p, "peak")
    add_numerics_flag(p)
    p.add_argument("--no-probes", action="store_true",
                   help="skip the displacement / proximity / self-index columns")
    p.add_argument("--blindness", action=argparse.BooleanOptionalAction, default=blindness,
                   help=f"add the label/recon blindness columns (a float64 probe per run; default {blindness})")
    p.add_argument("--out", type=out_dir, default=None, help="directory for compare.csv, compare.json, per_seed.csv")
    add_config_flags(p)


def register(sub) -> None:
    """Add ``toyspt compare`` (called by toyspt.cli.main)."""
    from toyspt.cli.main import COMMANDS

    c = sub.add_parser("compare", help=COMMANDS["compare"][1], description=__doc__.splitlines()[0])
    add_compare_flags(c, "scratch,spt,scratch_matched")
    c.set_defaults(func=cmd_compare)


__all__ = ["register", "cmd_compare", "add_compare_flags", "add_data_flags", "ucr_names", "data_sources",
           "ucr_configs", "ucr_base"]
