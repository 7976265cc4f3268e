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
"""
from __future__ import annotations

import argparse
import contextlib
import re
import time
from pathlib import Path

import torch
from tqdm.auto import tqdm

from toyspt.cli.flags import (
    add_numerics_flag,
    add_seeds,
    add_sweep_flags,
    default_workers,
    numerics_of,
    out_dir,
    reference_dir,
    run_main,
)
from toyspt.figs import CONTRAST, FIGURES, HEADLINE, TIERS, FigContext, in_tier, load, render
from toyspt.figs.metadata import Metadata, compute_by_figure, owners
from toyspt.figs.schedule import Drawer, Schedule, clock
from toyspt.runs import RunCache, RunSpec, sweep
from toyspt.runs.ledger import DEFAULT_LEDGER, Ledger, data_kind
from toyspt.runs.planning import make_plan
from toyspt.runs.sweeps import Stopped
from toyspt.ucr.plan import phase_of
from toyspt.util import plots
from toyspt.util.atomic import uninterrupted


@contextlib.contextmanager
def main_threads(n: int | None):
    """This process on ``n`` torch threads for a ``with`` block (None: unchanged): drawing while
    workers train, more threads only fight them for the cores (and give the same numbers)."""
    before = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)

def add_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--only", default=None, help=f"comma-separated subset of {','.join(FIGURES)}")
    p.add_argument("--quick", action="store_true", help="few seeds and epochs: a smoke test, stamped QUICK")
    p.add_argument("--tier", choices=TIERS, default="default",
                   help="the real-data study's tier: 'study' trains its powered runs (hours; the cost is printed "
                        "before training starts) and adds the real_gain and archive_scan figures (default: default)")
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
                   help=f"the results ledger of the UCR runs (default {DEFAULT_LEDGER}, none with --quick; "
                        "'none': no ledger): finished runs are recorded there, and figures are drawn from its "
                        "records where the run cache has no entry (docs/ledger.md)")
    add_sweep_flags(p, workers=default_workers())
    add_numerics_flag(p)


def duration(text: str) -> float:
    """Seconds of ``2h``, ``90m``, ``45s``, ``1h30m`` (ASCII digits; > 0)."""
    m = re.fullmatch(r"(?:([0-9]{1,4})h)?(?:([0-9]{1,6})m)?(?:([0-9]{1,8})s)?", text)
    if not text or m is None:
        raise argparse.ArgumentTypeError(f"expected a duration such as 2h, 90m or 1h30m, got {text!r}")
    h, mi, se = (int(g or 0) for g in m.groups())
    total = 3600 * h + 60 * mi + se
    if total <= 0:
        raise argparse.ArgumentTypeError(f"a budget must be more than 0 seconds, got {text!r}")
    return float(total)


def ledger_of(args: argparse.Namespace) -> Ledger | None:
    """The ledger the flags name (None: no ledger)."""
    path = args.ledger if args.ledger is not None else (None if args.quick else str(DEFAULT_LEDGER))
    if path is None or path == "none":
        return None
    if not path.strip():
        raise ValueError("--ledger: an empty path (give a file, or 'none' for no ledger)")
    return Ledger(Path(path), tier=args.tier)


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
        raise ValueError(f"--only: {other[0]} is drawn in the {' or '.join(load(other[0]).TIERS)} tier only "
                         f"(--tier {load(other[0]).TIERS[0]})")
    return tuple(n for n in FIGURES if n in names)


def make(args: argparse.Namespace) -> int:
    names = select(args.only, args.tier)
    out = Path(args.out or ("figures-quick" if args.quick else "figures"))
    seeds = tuple(args.seeds or ((0, 1) if args.quick else (0, 1, 2, 3, 4)))
    cache = RunCache(args.cache)
    numerics = numerics_of(args)
    ctx = FigContext(out=out, seeds=seeds, quick=args.quick, cache=cache, numerics=numerics, tier=args.tier)
    contrast = FigContext(out=out / "zero_mean", seeds=seeds, quick=args.quick, cache=cache, regime="zero_mean",
                          numerics=numerics)
    with_contrast = (not args.quick) if args.contrast is None else args.contrast
    # (label as metadata names it, context, figure), in drawing order: the registry's order of
    # importance, then the contrast regime in the same order
    jobs = [(n, ctx, n) for n in names] + ([(f"{contrast.regime}/{n}", contrast, n) for n in names if n in CONTRAST]
                                           if with_contrast else [])
    plots.style()
    mods = {n: load(n) for n in names}
    t0 = time.time()
    planned = {label: mods[n].specs(c) for label, c, n in jobs}  # each figure's specs, once
    drawing = list(planned)
    where = {label: (c, mods[n]) for label, c, n in jobs}
    every = [s for label in drawing for s in planned[label].values()]
    ledger = ledger_of(args)
    # the real-data study's order: whole comparisons first (toyspt.ucr.plan.phase_of), other runs as they come
    phase: dict[str, int] = {}
    for label in drawing:
        for facts, s in planned[label].items():
            if data_kind(s) == "ucr":
                phase[s.key()] = min(phase.get(s.key(), 9), phase_of(facts if isinstance(facts, tuple) else (facts,)))
    with main_threads(1 if args.workers > 1 or args.dask else None):
        pl = make_plan(every, cache, args.recompute, ledger)
        schedule = Schedule(planned, pl, args.workers, phase=phase)
        if pl.todo:
            print(cost_line(schedule, args.tier), flush=True)
        meta = Metadata(out, args.quick, dict(seeds=list(seeds), tier=args.tier, workers=args.workers, dask=args.dask,
                                              lockstep=not args.no_lockstep, cache=str(args.cache),
                                              ledger=str(ledger.path) if ledger is not None else None,
                                              budget_seconds=args.budget),
                        contrast.regime if with_contrast else None)
        owner = owners({label: list(planned[label].values()) for label in drawing},
                       lambda s: [p.key() for p in pl.needs(s)])  # each run counts for the first figure needing it

        def credit() -> dict[str, dict]:
            return compute_by_figure({}, schedule.trained, owner=owner)

        timings: dict[str, float] = {}

        def draw(label, c, mod, specs, results):
            t = time.time()
            with uninterrupted():  # a figure's PNG, PDF, CSV and its metadata are written together
                render(c, mod, specs, results)
                timings[label] = round(time.time() - t, 2)
                meta.figure(label, dict(draw_seconds=timings[label], written_after_seconds=round(time.time() - t0, 1),
                                        **credit().get(label, {}), **c.meta.get(mod.NAME, {})))
            tqdm.write(f"{label:22s} {timings[label]:7.1f}s  -> {c.out / mod.NAME}.png/.pdf/.csv "
                       f"({time.time() - t0:.0f}s after start)")

        # each figure is drawn as soon as the sweep hands over its last result, while the rest trains
        drawer = Drawer({label: (*where[label], planned[label]) for label in drawing}, draw, schedule, start=t0,
                        deadline=t0 + args.budget if args.budget else None)

        def last_run(**extra) -> dict:
            train_s = time.time() - t0 - sum(timings.values())
            written = {k: v["written_after_seconds"] for k, v in meta.drawn().items()}
            tally = credit()
            first = min((written[k] for k in drawing if k in written and tally.get(k, {}).get("runs_trained")),
                        default=None)
            return dict(figures=list(mods), drawing_order=drawing, training_seconds=round(train_s, 1),
                        total_seconds=round(time.time() - t0, 1), first_trained_figure_seconds=first,
                        headline_figure=HEADLINE if HEADLINE in drawing else None,
                        headline_figure_seconds=written.get(HEADLINE),
                        runs_trained=len(schedule.trained),
                        run_seconds=round(sum(v or 0.0 for v in schedule.trained.values()), 1),
                        estimate=schedule.initial, **extra)

        try:
            sweep(every, cache, workers=args.workers, dask=args.dask, desc=drawer.describe,
                  lockstep=not args.no_lockstep, on_result=drawer.add, priority=schedule.priority, watch=drawer,
                  plan_=pl)
        except KeyboardInterrupt:
            meta.finish(last_run(interrupted=True))  # the figures written so far, and what trained
            raise
        except Stopped as stop:  # the budget is spent: say what is drawn, what is not, and what is left
            left = left_line(schedule, stop.left, drawer.progress())
            meta.finish(last_run(stopped=left))
            print(left, flush=True)
            return 0
    unwritten = [label for label in drawing if label not in drawer.written]
    if unwritten:
        raise RuntimeError(f"figures {unwritten} did not get all their results")
    meta.finish(last_run())
    lr = meta.meta["last_run"]
    print(f"done in {lr['total_seconds']:.1f}s (training {lr['training_seconds']:.1f}s, {lr['runs_trained']} entries "
          f"computed); peak memory {lr['peak_rss_mb_main']:.0f} MB (this process), {lr['peak_rss_mb_worker']:.0f} MB "
          f"(largest worker); metadata in {meta.path}")
    if args.compare_to:
        from toyspt.figs.check import ATOL, RTOL, compare_dirs, summary

        report = compare_dirs(out, Path(args.compare_to))
        plots.save_csv(report, out, "compare_to")
        print(f"arm means against {args.compare_to} (agree when |new - ref| <= {ATOL} + {RTOL} |ref|):")
        print(summary(report))
        return 0 if bool(report.ok.all()) else 1
    return 0


def left_line(schedule: Schedule, left: list, progress: dict[str, tuple[int, int]]) -> str:
    """What a budget left undone: the figures not drawn (k of n entries at hand) and the runs
    still to train with their estimated cost."""
    runs = sum(isinstance(s, RunSpec) for s in left)
    cpu = sum(schedule.estimate(s) for s in left) / 3600
    figs = "; ".join(f"{label}: {k} of {n} entries done, not drawn" for label, (k, n) in progress.items())
    return (f"budget spent: {runs} runs and {len(left) - runs} other entries left, about {cpu:.1f} CPU-hours "
            f"({cpu / max(1, schedule.workers):.1f} h at {schedule.workers} workers); {figs or 'every figure drawn'}; "
            "the same command goes on from here")


def cost_line(schedule: Schedule, tier: str) -> str:
    """What training costs by the estimates (before anything trains): runs, CPU time, wall time
    at the workers, and when the headline (or the first figure that trains) will be written."""
    c = schedule.cost()
    schedule.initial = dict(runs=c["runs"], cpu_hours=round(c["cpu_hours"], 3), wall_hours=round(c["wall_hours"], 3),
                            calibrated_on=c["observed"])
    first = HEADLINE if schedule.needs.get(HEADLINE) else next((k for k, v in schedule.needs.items() if v), None)
    head = schedule.eta(first)[0] if first is not None else None
    basis = f"calibrated on {c['observed']} cached entries" if c["observed"] else "not calibrated: no cached entry yet"
    cpu = f"{c['cpu_hours']:.1f} CPU-hours" if c["cpu_hours"] >= 1 else f"{c['cpu_hours'] * 60:.1f} CPU-minutes"
    wall = f"{c['wall_hours']:.1f} h" if c["wall_hours"] >= 1 else clock(c["wall_hours"] * 3600)
    runs = sum(isinstance(s, RunSpec) for s in schedule.plan.todo)
    return (f"{'study tier' if tier == 'study' else 'plan'}: {runs} runs to train and {c['runs'] - runs} other entries "
            f"to compute ({c['cached']} answered from the cache), about {cpu}, {wall} wall at {c['workers']} "
            f"worker{'s' if c['workers'] > 1 else ''}; {first} in about {clock(head)} ({basis})")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python paper_figs.py", description=__doc__.splitlines()[0])
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


__all__ = ["main", "make", "register", "select", "build_parser", "cost_line", "main_threads"]
