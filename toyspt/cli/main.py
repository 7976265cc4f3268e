"""toyspt: train recipes, compare arms over seeds, probe blindness, bridge LRA, run UCR,
make the figures, check the theory.

Subcommands: ``train`` (here), ``compare`` (toyspt.cli.compare), ``probe`` (toyspt.cli.probe),
``lra`` (toyspt.cli.lra), ``ucr`` (toyspt.cli.ucr, which forwards to compare), ``figs`` (toyspt.cli.figs, the same as
``python paper_figs.py``), ``ledger`` (toyspt.cli.ledger: check or merge a results ledger), ``study``
(toyspt.cli.study: a study's progress and pilot), ``data`` (toyspt.cli.data: checks of the generated
data kinds), ``docs``
(toyspt.cli.docs: the docs' tables from the figures' CSVs) and
``theory`` (the same as ``python -m theory``: ``toyspt theory --quick``; ``toyspt theory -- --quick`` works too).

Config fields are flags: ``--task.T 64``, ``--model.pos alibi``, ``--train.epochs 10``.
Exit codes: see :mod:`toyspt.cli.flags`.

``toyspt --version`` and ``toyspt --help`` import neither torch nor pandas: only the
subcommand named on the command line is imported and gets its full parser; the others are
listed by name and one line of help (:data:`COMMANDS`).
"""
from __future__ import annotations

import argparse
import importlib
import json

from toyspt import __version__

# name -> ("module:function" that adds it to the subparsers, its line in ``toyspt --help``);
# tests/integration/test_cli.py holds each line equal to the help the function registers
COMMANDS = {
    "train": ("toyspt.cli.main:register_train", "train one recipe (or arm) with one seed"),
    "compare": ("toyspt.cli.compare:register", "compare arms over seeds on any data: mean ± std table, CSV and JSON"),
    "probe": ("toyspt.cli.probe:register", "label/recon gradient-blindness table of a run's weights"),
    "lra": ("toyspt.cli.lra:register", "LRA checkpoints: inspect, probe per layer/head, offline demo"),
    "ucr": ("toyspt.cli.ucr:register", "scratch vs SPT (and ablations) on UCR time-series data"),
    "figs": ("toyspt.cli.figs:register", "regenerate the paper figures (the same as python paper_figs.py)"),
    "ledger": ("toyspt.cli.ledger:register", "check, merge, repair or seal a results ledger"),
    "study": ("toyspt.cli.study:register", "a study's progress in its ledger, and its pilot"),
    "data": ("toyspt.cli.data:register", "check the data kinds the toolkit makes"),
    "docs": ("toyspt.cli.docs:register", "rewrite the docs' tables and quoted numbers (--check: only compare)"),
    "theory": ("toyspt.cli.main:register_theory",
               "check the theory (the same as python -m theory), e.g. toyspt theory --quick"),
}


def cmd_train(args) -> int:
    from toyspt.cli.flags import base_spec
    from toyspt.runs import RunCache, get_run
    from toyspt.runs.arms import arm_spec

    spec = arm_spec(args.recipe, base_spec(args, seed=args.seed))
    res = get_run(spec, RunCache(args.cache), recompute=args.recompute, progress=True)
    for h in res.history:
        print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in h.items()}))
    print(json.dumps({"recipe": args.recipe, "seed": args.seed, **res.summary}, indent=1))
    return 0


def cmd_theory(args) -> int:
    from toyspt.theory.__main__ import main as theory_main

    return theory_main(args.theory_args, prog="toyspt theory")


def register_train(sub) -> None:
    from toyspt.cli.flags import add_cache_flags, add_config_flags, add_evaluate_flag, add_numerics_flag, ascii_int

    t = sub.add_parser("train", help=COMMANDS["train"][1])
    t.add_argument("--recipe", "--arm", dest="recipe", default="spt", help="recipe or arm, e.g. spt, scratch:pos=alibi")
    t.add_argument("--seed", type=ascii_int, default=0)
    add_cache_flags(t)
    add_evaluate_flag(t, "all")
    add_numerics_flag(t)
    add_config_flags(t)
    t.set_defaults(func=cmd_train)


def register_theory(sub) -> None:
    # every argument after `theory` goes to python -m theory's own parser (its --help too)
    th = sub.add_parser("theory", help=COMMANDS["theory"][1], add_help=False)
    th.set_defaults(func=cmd_theory, theory_args=[])


def _command(argv: list[str]) -> str | None:
    """The subcommand named on the command line (its first non-option word), if known."""
    word = next((a for a in argv if not a.startswith("-")), None)
    return word if word in COMMANDS else None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``toyspt`` parser. Only ``command`` (None: none) gets its full parser, which
    imports its module; every other subcommand is a one-line stub, so ``--help`` and
    ``--version`` stay free of torch."""
    from toyspt.cli.parser import Parser

    p = Parser(prog="toyspt", description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--version", action="version", version=f"toyspt {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="{" + ",".join(COMMANDS) + "}")
    for name, (where, help) in COMMANDS.items():
        if name == command:
            module, _, function = where.partition(":")
            getattr(importlib.import_module(module), function)(sub)
        else:
            sub.add_parser(name, help=help, add_help=False)
    return p


def main(argv: list[str] | None = None) -> int:
    """``toyspt ...``: Ctrl-C while the subcommand's module loads (seconds: torch) is one line too."""
    from toyspt.util.exits import interruptible

    return interruptible(lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    import sys

    argv = sys.argv[1:] if argv is None else list(argv)
    command = _command(argv)
    try:
        if command == "theory":  # the rest, a leading `--` dropped, is python -m theory's
            at = argv.index("theory")
            rest = argv[at + 1:]
            args = build_parser("theory").parse_args(argv[:at + 1])
            args.theory_args = rest[1:] if rest[:1] == ["--"] else rest
        else:
            args = build_parser(command).parse_args(argv)
    except SystemExit as e:  # argparse: usage errors exit 2 (--help and --version exit 0)
        return e.code if isinstance(e.code, int) else 2
    from toyspt.cli.flags import run_main

    try:
        return run_main(lambda: args.func(args))
    except SystemExit as e:  # python -m theory's own parser: --help exits 0, bad flags 2
        return e.code if isinstance(e.code, int) else 2


if __name__ == "__main__":
    raise SystemExit(main())
