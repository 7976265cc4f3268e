"""toyspt: train recipes, compare arms over seeds, probe blindness, bridge LRA, run UCR,
make the figures, check the theory.

Subcommands: ``train``, ``compare`` (here), ``probe`` (toyspt.cli.probe), ``lra``
(toyspt.cli.lra), ``ucr`` (toyspt.cli.ucr), ``figs`` (toyspt.cli.figs, the same as
``python paper_figs.py``) and ``theory`` (the same as ``python -m theory``).

Config fields are flags: ``--task.T 64``, ``--model.pos alibi``, ``--train.epochs 10``.
Exit codes: see :mod:`toyspt.cli.flags`.
"""
from __future__ import annotations

import argparse
import importlib
import json
from pathlib import Path

from toyspt import __version__
from toyspt.cli.flags import (add_arms_flag, add_cache_flags, add_config_flags, add_evaluate_flag,
    add_numerics_flag, add_seeds, add_sweep_flags, base_spec, run_main, split_arms)
from toyspt.runs import RunCache, executor_scope, get_run

# subcommands that live beside their part: each module has register(subparsers)
PLUGINS = ("toyspt.cli.probe", "toyspt.cli.lra", "toyspt.cli.ucr", "toyspt.cli.figs")


def cmd_train(args) -> int:
    from toyspt.runs.arms import arm_spec

    spec = arm_spec(args.recipe, base_spec(args, seed=args.seed))
    res = get_run(spec, RunCache(args.cache), recompute=args.recompute, progress=True)
    for h in res.history:
        print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in h.items()}))
    print(json.dumps({"recipe": args.recipe, "seed": args.seed, **res.summary}, indent=1))
    return 0


def cmd_compare(args) -> int:
    from toyspt.runs.tables import compare, write_table

    arms = split_arms(args.arms)
    base = base_spec(args)
    with executor_scope(args.workers, args.dask) as ex:
        table, per_seed = compare(arms, args.seeds, base, RunCache(args.cache), workers=args.workers,
                                  recompute=args.recompute, executor=ex, vectorize=not args.no_vectorize)
    print(table.to_string(index=False))
    if args.out:
        write_table(table, per_seed, Path(args.out))
        print(f"wrote {args.out}/compare.csv, compare.json, per_seed.csv")
    return 0


def cmd_theory(args) -> int:
    from toyspt.theory.__main__ import main as theory_main

    return theory_main(args.theory_args)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="toyspt", description=__doc__.splitlines()[0])
    p.add_argument("--version", action="version", version=f"toyspt {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True)

    t = sub.add_parser("train", help="train one recipe (or arm) with one seed")
    t.add_argument("--recipe", "--arm", dest="recipe", default="spt", help="recipe or arm, e.g. spt, scratch:pos=alibi")
    t.add_argument("--seed", type=int, default=0)
    add_cache_flags(t)
    add_evaluate_flag(t, "all")
    add_numerics_flag(t)
    add_config_flags(t)
    t.set_defaults(func=cmd_train)

    c = sub.add_parser("compare", help="compare arms over seeds: mean ± std table, CSV and JSON")
    add_arms_flag(c, "scratch,spt,scratch_matched")
    add_seeds(c)
    add_sweep_flags(c)
    add_evaluate_flag(c, "peak")
    add_numerics_flag(c)
    c.add_argument("--out", default=None, help="directory for compare.csv / compare.json")
    add_config_flags(c)
    c.set_defaults(func=cmd_compare)

    th = sub.add_parser("theory", help="check the theory (the same as python -m theory; flags after --)",
                        add_help=False)
    th.add_argument("theory_args", nargs=argparse.REMAINDER)
    th.set_defaults(func=cmd_theory)

    for mod in PLUGINS:
        importlib.import_module(mod).register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # argparse: usage errors exit 2 (--help and --version exit 0)
        return e.code if isinstance(e.code, int) else 2
    return run_main(lambda: args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
