"""``toyspt compare``: arms over seeds on any data, mean ± std tables (:mod:`toyspt.analysis.tables`);
``toyspt ucr`` is the same front door with UCR defaults (``--data ucr:NAME`` and its flags).

``--data KIND[:NAME,...]`` names the data through the data-source registry
(:mod:`toyspt.data.source`): ``toy`` (default) is the toy task of the ``--task.*`` flags,
``ucr:GunPoint,ucr:ECG200`` UCR sets (:mod:`toyspt.ucr.kind`: their flags, their model and
training defaults); any registered kind works the same way, with nothing here to change. The
tables have one row per data set, arm and seed.
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
    add_ledger_flag,
    add_numerics_flag,
    add_seeds,
    add_sweep_flags,
    config_values,
    distinct_arms,
    out_dir,
    split_arms,
    split_unique,
)

# the modules above the data layer that register a kind of data (toyspt.data.source.register):
# --data kind:NAME offers every kind they and toyspt.data register
DATA_KINDS = ("toyspt.ucr.kind", "toyspt.kinds")


def kinds() -> dict:
    """Every kind of data ``--data`` takes (:func:`toyspt.data.source.kinds`, :data:`DATA_KINDS` loaded first)."""
    import importlib

    from toyspt.data.source import kinds as registered

    for module in DATA_KINDS:
        importlib.import_module(module)
    return registered()


def add_data_flags(p, default: str = "toy") -> None:
    """``--data`` and every registered kind's own flags (:func:`kinds`)."""
    known = kinds()
    usage = ", or ".join(k.usage or f"{k.kind}:NAME" for k in known.values())
    p.add_argument("--data", default=default, help=f"{usage} (default {default})")
    for k in known.values():
        if k.add_flags is not None:
            k.add_flags(p)


def parse_data(text: str) -> tuple[str, list[str]]:
    """(kind, names) of ``--data``: ``toy`` -> ("toy", []), ``ucr:A,ucr:B`` -> ("ucr", ["A", "B"]);
    an unknown kind, or two kinds at once, refused by name."""
    items = split_unique(text.strip(), "--data", "data set")
    parts = [i.partition(":") for i in items]
    kind = parts[0][0]
    if kind not in kinds():
        raise ValueError(f"--data: {items[0]!r}: unknown kind of data {kind!r}; known: {', '.join(sorted(kinds()))}")
    other = next((i for i, (k, _, _) in zip(items, parts) if k != kind), None)
    if other is not None:
        raise ValueError(f"--data: {other!r} is not {kind} data; one kind of data per comparison")
    empty = next((i for i, (_, colon, n) in zip(items, parts) if colon and not n), None)
    if empty is not None or (len(items) > 1 and any(not colon for _, colon, _ in parts)):
        raise ValueError(f"--data: {empty or items[0]!r}: expected {kind}:NAME")
    return kind, [n for _, _, n in parts if n]


def base_of(args):
    """(the base spec, the data sources, the swap source) of ``--data``: the registered kind
    parses its names and flags, its model/training defaults under the ``--model.*``/``--train.*``
    flags; another kind's flags are refused."""
    from toyspt.cli.flags import CONFIGS, check_storable, make_config, numerics_of
    from toyspt.data.source import kind_of
    from toyspt.runs.specs import RunSpec

    kind, names = parse_data(args.data)
    dk = kind_of(kind)
    for other in kinds().values():
        set_flags = other.given(args) if other.kind != kind and other.given is not None else []
        if set_flags:
            raise ValueError(f"{set_flags[0]}: applies to {other.kind} data (--data {other.usage or other.kind}), "
                             f"not to {kind} data")
    defaults = dict(model=dk.model_defaults, train=dk.train_defaults)
    configs = {part: make_config(part, cls, {**defaults.get(part, {}), **config_values(args, part)})
               for part, cls in CONFIGS}
    data, swap = dk.from_args(args, names, configs)
    base = RunSpec("scratch", data=data[0], model=data[0].fit(configs["model"]), train=configs["train"], swap=swap,
                   evaluate=args.evaluate, numerics=numerics_of(args))
    check_storable(base)
    return base, data, swap


def cmd_compare(args) -> int:
    import pandas as pd
    import torch

    from toyspt.analysis.tables import comparison, default_columns, write_tables
    from toyspt.cli.flags import open_ledger, store_of
    from toyspt.runs import executor_scope
    from toyspt.runs.arms import arm_specs
    from toyspt.runs.sweeps import SweepOptions, sweep

    torch.set_num_threads(1)
    from toyspt.data.source import kind_of

    arms = split_arms(args.arms)
    base, data, swap = base_of(args)
    describe = kind_of(base.data.kind).describe
    for d in data if describe is not None else ():
        print(describe(d))
    distinct_arms(arms, base)  # two arms that are one run, or a run too large to store: refused before training
    print(f"train config: {json.dumps(asdict(base.train))}")
    columns = {} if args.no_probes else default_columns(blindness=args.blindness)
    # the runs' data kinds are what the ledger covers; with probe columns (they read weights) it only records
    kinds = tuple(dict.fromkeys(d.kind for d in data)) if data else (base.data.kind,)
    ledger = open_ledger(args.ledger, kinds, answers=not columns)
    with executor_scope(args.workers, args.dask) as ex:
        options = SweepOptions(workers=args.workers, executor=ex, lockstep=not args.no_lockstep, desc="compare")
        labelled = arm_specs(arms, args.seeds, base, data)
        results = sweep([s for _, s in labelled], store_of(args.cache, ledger), options, recompute=args.recompute)
        table, per_seed = comparison(labelled, results, columns)
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
    add_ledger_flag(p)
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


__all__ = ["register", "cmd_compare", "add_compare_flags", "add_data_flags", "parse_data", "base_of", "kinds",
           "DATA_KINDS"]
