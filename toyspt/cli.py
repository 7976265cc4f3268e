"""toyspt: train recipes, compare arms over seeds, probe blindness, bridge LRA, run UCR.

Subcommands: ``train``, ``compare`` (here), ``probe`` (toyspt.probe_cli), ``lra``
(toyspt.lra.cli) and ``ucr`` (toyspt.ucr_cli).

Config fields are flags: ``--task.T 64``, ``--model.pos alibi``, ``--train.epochs 10``.
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys
from dataclasses import fields
from pathlib import Path

from .arms import ALIASES, parse_value
from .model import ModelConfig
from .runs import DEFAULT_CACHE, RunCache, RunSpec, get_run
from .tasks import TaskConfig
from .train import TrainConfig

CONFIGS = (("task", TaskConfig), ("model", ModelConfig), ("train", TrainConfig))
# subcommands that live beside their part: each module has register(subparsers)
PLUGINS = ("toyspt.probe_cli", "toyspt.lra.cli", "toyspt.ucr_cli")


def parse_seeds(text: str) -> list[int]:
    """``"0-4"`` -> [0..4]; ``"0,3,7"`` -> [0, 3, 7]; order kept, each seed at most once.

    Refused with a message: anything but non-negative ints and ``lo-hi`` ranges, a reversed
    (empty) range such as ``4-0``, a seed named twice (it would count twice in mean and std).
    """
    if not text.strip():
        raise argparse.ArgumentTypeError("no seeds given")
    seeds: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        lo, dash, hi = part.partition("-")
        if part.startswith("-") and part[1:].isdecimal():
            raise argparse.ArgumentTypeError(f"seeds must be >= 0, got {part} in {text!r}")
        if not lo.isdecimal() or (dash and not hi.isdecimal()):
            raise argparse.ArgumentTypeError(f"seeds must look like 0-4 or 0,2,5; got {text!r}")
        if dash and int(hi) < int(lo):
            raise argparse.ArgumentTypeError(f"empty range {part} in {text!r} (write lo-hi, lo <= hi)")
        for seed in range(int(lo), int(hi) + 1) if dash else [int(lo)]:
            if seed in seeds:
                raise argparse.ArgumentTypeError(f"seed {seed} appears twice in {text!r}")
            seeds.append(seed)
    return seeds


def add_config_flags(p: argparse.ArgumentParser) -> None:
    """One ``--part.field`` flag per config field (values parsed like the default)."""
    for part, cls in CONFIGS:
        g = p.add_argument_group(f"{part} config")
        for f in fields(cls):
            g.add_argument(f"--{part}.{f.name}", dest=f"{part}.{f.name}", default=None,
                           metavar=type(getattr(cls(), f.name)).__name__.upper(),
                           help=f"(default {getattr(cls(), f.name)!r})")


def base_spec(args: argparse.Namespace, recipe: str = "scratch", seed: int = 0) -> RunSpec:
    """The spec the config flags describe; a bad flag value exits with one line naming it
    (status 2 for a value that does not parse, 1 for one the config refuses)."""
    cfgs = {}
    for part, cls in CONFIGS:
        default = cls()
        kw = {}
        for f in fields(cls):
            if (v := getattr(args, f"{part}.{f.name}")) is None:
                continue
            try:
                kw[f.name] = parse_value(v, getattr(default, f.name))
            except ValueError as e:
                print(f"error: --{part}.{f.name}: {e}", file=sys.stderr)
                raise SystemExit(2) from None
        try:
            cfgs[part] = cls(**kw)
        except ValueError as e:
            # config errors start with the field ("T: ..."); name it as the flag if one set it
            name = str(e).split(":", 1)[0].split("[", 1)[0]
            prefix = f"--{part}." if name in kw else f"{part} config: "
            raise SystemExit(f"error: {prefix}{e}") from None
    return RunSpec(recipe=recipe, seed=seed, **cfgs)


def cmd_train(args) -> int:
    from .arms import arm_spec

    spec = arm_spec(args.recipe, base_spec(args, seed=args.seed))
    res = get_run(spec, RunCache(args.cache), recompute=args.recompute, progress=True)
    for h in res.history:
        print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in h.items()}))
    print(json.dumps({"recipe": args.recipe, "seed": args.seed, **res.summary}, indent=1))
    return 0


def cmd_compare(args) -> int:
    from .compare import compare, write_table

    arms = [a for a in args.recipes.split(",") if a]
    from .engines import executor_scope

    with executor_scope(args.workers, args.dask) as ex:
        table, per_seed = compare(arms, args.seeds, base_spec(args), RunCache(args.cache),
                                  workers=args.workers, recompute=args.recompute, executor=ex,
                                  vectorize=not args.no_vectorize)
    print(table.to_string(index=False))
    if args.out:
        write_table(table, per_seed, Path(args.out))
        print(f"wrote {args.out}/compare.csv, compare.json, per_seed.csv")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="toyspt", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)

    def common(sp):
        sp.add_argument("--cache", default=str(DEFAULT_CACHE), help="run cache directory")
        sp.add_argument("--recompute", action="store_true", help="ignore cached runs")
        add_config_flags(sp)

    t = sub.add_parser("train", help="train one recipe (or arm) with one seed")
    t.add_argument("--recipe", default="spt", help="recipe or arm, e.g. spt, scratch:pos=alibi")
    t.add_argument("--seed", type=int, default=0)
    common(t)
    t.set_defaults(func=cmd_train)

    c = sub.add_parser("compare", help="compare arms over seeds: mean ± std table, CSV and JSON")
    c.add_argument("--recipes", default="scratch,spt,scratch_matched",
                   help=f"comma-separated arms; aliases: {', '.join(sorted(ALIASES))}")
    c.add_argument("--seeds", type=parse_seeds, default=parse_seeds("0-4"), help="e.g. 0-4 or 0,2")
    c.add_argument("--workers", type=int, default=1, help="parallel training processes")
    c.add_argument("--dask", default=None, metavar="ADDRESS",
                   help="train on a dask.distributed scheduler (tcp://host:8786) or 'local' (dask extra)")
    c.add_argument("--no-vectorize", action="store_true",
                   help="train seeds one at a time (results are bitwise identical, only slower)")
    c.add_argument("--out", default=None, help="directory for compare.csv / compare.json")
    common(c)
    c.set_defaults(func=cmd_compare)

    for mod in PLUGINS:
        importlib.import_module(mod).register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
