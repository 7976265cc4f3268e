"""Regenerate every mechanistic figure of toyspt from real, cached runs
(``python paper_figs.py`` or ``toyspt figs``; the same flags).

    python paper_figs.py                 # full figures into figures/ (5 seeds)
    python paper_figs.py --quick         # small smoke version into figures-quick/ (stamped QUICK)
    python paper_figs.py --only accuracy,ablations --workers 2

Each figure is written as PNG and PDF with a CSV of the plotted numbers beside it;
``metadata.json`` records the git revision, torch version, device, seeds, quick or not and
the time each figure took (rewritten after every figure). Every figure's runs (toy, UCR, LRA
demo) go through one sweep and the run cache (``--cache``, ``--recompute``, ``--workers``,
``--dask``). Figures are trained and drawn in the order a reader wants them, the headline
first (:data:`toyspt.figs.FIGURES`), each written as soon as its runs are stored while the
rest trains (:mod:`toyspt.figs.schedule`); before training, the estimated cost is printed,
and the progress bar shows the time to the next figure and to the end.

This module parses the flags; the job itself is :func:`toyspt.figs.job.run_job`.
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path

from toyspt.cli.flags import (
    add_numerics_flag,
    add_seeds,
    add_sweep_flags,
    default_workers,
    numerics_of,
    open_ledger,
    out_dir,
    reference_dir,
    run_main,
)
from toyspt.figs import CONTRAST, FIGURES, STUDIES, TIERS, in_tier, load, tiers_of
from toyspt.runs.ledger import Ledger


def add_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--only", default=None, help=f"comma-separated subset of {','.join(FIGURES)}")
    p.add_argument("--quick", action="store_true", help="few seeds and epochs: a smoke test, stamped QUICK")
    p.add_argument("--tier", choices=TIERS, default="default",
                   help="which study the job runs: 'default' and 'study' the real-data study ('study' trains its "
                        "powered runs, hours, the cost printed before training starts, and adds the real_gain, "
                        "archive_scan, archive_small and real_gain_splits figures); 'lra' the LRA study alone "
                        "(toyspt.studies.lra_design: hours; its lra_claims and lra_mechanism figures) "
                        "(default: default)")
    add_seeds(p, None, help="seeds, e.g. 0-4 or 0,2 (default 0-4, quick 0-1)")
    p.add_argument("--out", type=out_dir, default=None,
                   help="output directory (default figures/, quick figures-quick/)")
    p.add_argument("--compare-to", type=reference_dir, default=None, metavar="DIR",
                   help="after drawing, compare every CSV with DIR's at the level of arm means "
                        "(toyspt.figs.check: stated tolerances); exit 1 when one disagrees")
    p.add_argument("--contrast", action=argparse.BooleanOptionalAction, default=None,
                   help=f"draw the zero-mean contrast of {', '.join(CONTRAST)} into OUT/zero_mean/ "
                        "(default: yes, except with --quick)")
    p.add_argument("--budget", type=duration, default=None, metavar="TIME",
                   help="stop starting runs after TIME (e.g. 2h, 90m, 1h30m): the runs in flight finish, every "
                        "finished run is stored and recorded, figures whose runs are all done are drawn, and what "
                        "is left is printed with its estimated cost; the same command goes on from there")
    p.add_argument("--ledger", default=None, metavar="PATH",
                   help="the results ledger of the tier's study (default: the study's, "
                        f"{', '.join(sorted({f'{s.ledger.path} ({t})' for t, s in STUDIES.items()}))}; none with "
                        "--quick; 'none': no ledger): finished runs are recorded there, and figures are drawn from "
                        "its records where the run cache has no entry (docs/ledger.md)")
    add_sweep_flags(p, workers=default_workers())
    add_numerics_flag(p)


def duration(text: str) -> float:
    """Seconds of ``2h``, ``90m``, ``45s``, ``1h30m`` (ASCII digits; > 0)."""
    if text.startswith("-"):
        raise argparse.ArgumentTypeError(f"a budget must be more than 0 seconds, got {text!r}")
    m = re.fullmatch(r"(?:([0-9]{1,4})h)?(?:([0-9]{1,6})m)?(?:([0-9]{1,8})s)?", text)
    if not text or m is None:
        raise argparse.ArgumentTypeError(f"expected a duration such as 2h, 90m or 1h30m, got {text!r}")
    h, mi, se = (int(g or 0) for g in m.groups())
    total = 3600 * h + 60 * mi + se
    if total <= 0:
        raise argparse.ArgumentTypeError(f"a budget must be more than 0 seconds, got {text!r}")
    return float(total)


def ledger_of(args: argparse.Namespace) -> Ledger | None:
    """The ledger the flags name (None: no ledger), as the tier's study declares it
    (:data:`toyspt.figs.STUDIES`: ``Study.ledger``, e.g. :data:`toyspt.ucr.design.LEDGER`,
    :data:`toyspt.studies.lra_design.LEDGER`): by default the study's own file, none with ``--quick``."""
    study = STUDIES[args.tier].ledger
    path = args.ledger if args.ledger is not None else (None if args.quick else str(study.path))
    return open_ledger(path, study, tier=args.tier)


def select(only: str | None, tier: str = "default") -> tuple[str, ...]:
    """The figures ``--only`` names (all of the tier when None), in the registry's order of
    importance; a clear error for unknown or no names, and for a figure the tier does not draw."""
    if only is None:
        return tuple(n for n in FIGURES if in_tier(load(n), tier))
    names = tuple(n for n in only.split(",") if n)
    if not names:
        raise ValueError(f"--only: no figure named in {only!r}; figures are {', '.join(FIGURES)}")
    unknown = [n for n in names if n not in FIGURES]
    if unknown:
        raise ValueError(f"--only: unknown figure(s) {unknown}; figures are {', '.join(FIGURES)}")
    other = [n for n in names if not in_tier(load(n), tier)]
    if other:
        tiers = tiers_of(load(other[0]))
        raise ValueError(f"--only: {other[0]} is drawn in the {' or '.join(tiers)} tier only (--tier {tiers[0]})")
    return tuple(n for n in FIGURES if n in names)


def make(args: argparse.Namespace) -> int:
    """The figure job the flags describe (:func:`toyspt.figs.job.run_job`)."""
    from toyspt.figs.job import FigureJob, run_job

    numerics = numerics_of(args)
    STUDIES[args.tier].refuse(args.quick, args.seeds, numerics, args.contrast)  # a flag the tier's study ignores
    return run_job(FigureJob(
        names=select(args.only, args.tier), out=Path(args.out or ("figures-quick" if args.quick else "figures")),
        seeds=tuple(args.seeds or ((0, 1) if args.quick else (0, 1, 2, 3, 4))), quick=args.quick, tier=args.tier,
        contrast=(not args.quick) if args.contrast is None else args.contrast, cache=args.cache,
        numerics=numerics, workers=args.workers, dask=args.dask, lockstep=not args.no_lockstep,
        recompute=args.recompute, budget=args.budget, ledger=ledger_of(args), compare_to=args.compare_to))


def build_parser() -> argparse.ArgumentParser:
    from toyspt.cli.parser import Parser

    p = Parser(prog="python paper_figs.py", description=__doc__.splitlines()[0])
    add_flags(p)
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # argparse: usage errors exit 2 (--help exits 0)
        return e.code if isinstance(e.code, int) else 2
    return run_main(lambda: make(args))


def register(sub) -> None:
    """``toyspt figs``: the same as ``python paper_figs.py``."""
    p = sub.add_parser("figs", help="regenerate the paper figures (the same as python paper_figs.py)",
                       description=__doc__.splitlines()[0])
    add_flags(p)
    p.set_defaults(func=make)


__all__ = ["main", "make", "register", "select", "build_parser", "duration", "ledger_of"]
