"""The figure job: every selected figure's runs through one sweep, each figure drawn as soon as
its runs are stored, metadata.json kept up to date (``python paper_figs.py``, ``toyspt figs``:
:mod:`toyspt.cli.figs` only parses the flags into a :class:`FigureJob` and calls :func:`run_job`).

The steps: each figure's specs (:func:`toyspt.figs.load`), one plan of all of them
(:func:`toyspt.runs.planning.make_plan` on the job's store: the run cache, before the results
ledger where there is one, :class:`toyspt.runs.store.LayeredStore`), a
:class:`toyspt.figs.schedule.Schedule` (the sweep's order, the real-data study's phases first,
and the ETA: :func:`cost_line` is printed before anything trains), a
:class:`toyspt.figs.schedule.Drawer` (each figure rendered the moment its last result arrives;
with a budget, no job starts after the deadline), the sweep, and :class:`toyspt.figs.metadata.Metadata`
(each figure as it is written, the run's facts at the end, on Ctrl-C/SIGTERM and when the budget
stops it: :func:`left_line` says what is left). With ``compare_to``, every CSV is then compared
with a reference folder's (:mod:`toyspt.figs.check`).
"""
from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tqdm.auto import tqdm

from toyspt.figs import CONTRAST, HEADLINE, STUDIES, FigContext, load, render
from toyspt.figs.metadata import Metadata, compute_by_figure, from_ledger, owners
from toyspt.figs.schedule import Drawer, Schedule, clock
from toyspt.runs import RunCache, RunSpec, sweep
from toyspt.runs.ledger import Ledger
from toyspt.runs.planning import Plan, make_plan
from toyspt.runs.store import Store, layered
from toyspt.runs.sweeps import Stopped, SweepOptions
from toyspt.util import plots
from toyspt.util.atomic import uninterrupted


@dataclass(frozen=True)
class FigureJob:
    """What one figure job draws and how it trains (the flags of ``python paper_figs.py``)."""

    names: tuple[str, ...]  # the figures, in the registry's order (toyspt.figs.FIGURES)
    out: Path  # where the figures and metadata.json go
    seeds: tuple[int, ...]
    quick: bool = False  # few seeds and epochs, stamped QUICK
    tier: str = "default"  # the job's tier (toyspt.figs.TIERS): which study it runs (toyspt.figs.STUDIES)
    contrast: bool = False  # also draw the CONTRAST figures in the zero-mean regime, into out/zero_mean/
    cache: str | None = None  # the run cache's folder (None: the default)
    numerics: str = "eager"  # eager | compiled (toyspt.train.compiled)
    workers: int = 1
    dask: str | None = None
    lockstep: bool = True
    recompute: bool = False
    budget: float | None = None  # seconds after which no run starts (None: no limit)
    ledger: Ledger | None = None  # the results ledger of the tier's study (None: none)
    compare_to: Path | None = None  # a reference folder every CSV is compared with at the end


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


def _contexts(job: FigureJob, cache: RunCache) -> tuple[list[tuple[str, FigContext, str]], FigContext]:
    """(label as metadata names it, context, figure) in drawing order: the registry's order of
    importance, then the contrast regime in the same order; and the contrast regime's context."""
    out, seeds = Path(job.out), tuple(job.seeds)
    ctx = FigContext(out=out, seeds=seeds, quick=job.quick, cache=cache, numerics=job.numerics, tier=job.tier)
    contrast = FigContext(out=out / "zero_mean", seeds=seeds, quick=job.quick, cache=cache, regime="zero_mean",
                          numerics=job.numerics)
    jobs = [(n, ctx, n) for n in job.names]
    if job.contrast:
        jobs += [(f"{contrast.regime}/{n}", contrast, n) for n in job.names if n in CONTRAST]
    return jobs, contrast


def _phases(study, planned: dict[str, dict]) -> dict[str, int]:
    """Key -> the tier's study's phase of each run (its Study.phase: the real-data study's whole
    comparisons first, the LRA study's whole seeds); other runs as they come."""
    phase: dict[str, int] = {}
    for specs in planned.values():
        for facts, s in specs.items():
            if (ph := study.phase(s, facts)) is not None:
                phase[s.key()] = min(phase.get(s.key(), math.inf), ph)
    return phase


@dataclass
class _Drawing:
    """A job's figures as they are drawn: when, the CSVs written, the metadata kept."""

    out: Path
    planned: dict[str, dict]  # label -> the figure's {facts: spec}
    mods: dict  # figure name -> its module
    pl: Plan
    schedule: Schedule
    meta: Metadata
    store: Store
    t0: float = field(default_factory=time.time)
    timings: dict[str, float] = field(default_factory=dict)
    csvs: list[str] = field(default_factory=list)  # the CSVs this call wrote, relative to out (--compare-to)

    def __post_init__(self):
        # each run counts for the first figure needing it
        self.owner = owners({label: list(specs.values()) for label, specs in self.planned.items()},
                            lambda s: [p.key() for p in self.pl.needs(s)])

    def credit(self) -> dict[str, dict]:
        return compute_by_figure({}, self.schedule.trained, owner=self.owner)

    def draw(self, label, c, mod, specs, results) -> None:
        t, t0 = time.time(), self.t0
        with uninterrupted():  # a figure's PNG, PDF, CSV and its metadata are written together
            self.csvs.extend(str(p.relative_to(self.out)) for p in render(c, mod, specs, results)
                             if p.suffix == ".csv")
            self.timings[label] = round(time.time() - t, 2)
            recorded = from_ledger(specs.values(), self.pl, self.store)  # entries answered by records: their kernels
            self.meta.figure(label, dict(draw_seconds=self.timings[label],
                                         written_after_seconds=round(time.time() - t0, 1),
                                         **self.credit().get(label, {}),
                                         **({"from_ledger": recorded} if recorded else {}),
                                         **c.meta.get(mod.NAME, {})))
        tqdm.write(f"{label:22s} {self.timings[label]:7.1f}s  -> {c.out / mod.NAME}.png/.pdf/.csv "
                   f"({time.time() - t0:.0f}s after start)")

    def last_run(self, **extra) -> dict:
        drawing, t0 = list(self.planned), self.t0
        train_s = time.time() - t0 - sum(self.timings.values())
        written = {k: v["written_after_seconds"] for k, v in self.meta.drawn().items()}
        tally = self.credit()
        first = min((written[k] for k in drawing if k in written and tally.get(k, {}).get("runs_trained")),
                    default=None)
        return dict(figures=list(self.mods), drawing_order=drawing, training_seconds=round(train_s, 1),
                    total_seconds=round(time.time() - t0, 1), first_trained_figure_seconds=first,
                    headline_figure=HEADLINE if HEADLINE in drawing else None,
                    headline_figure_seconds=written.get(HEADLINE),
                    runs_trained=len(self.schedule.trained),
                    run_seconds=round(sum(v or 0.0 for v in self.schedule.trained.values()), 1),
                    estimate=self.schedule.initial, **extra)


def _compare_to(job: FigureJob, out: Path, csvs: list[str]) -> int:
    """0 when every CSV this call wrote agrees with the reference folder's, else 1."""
    from toyspt.figs.check import ATOL, RTOL, compare_dirs, summary

    report = compare_dirs(out, Path(job.compare_to), drawn=csvs)
    plots.save_csv(report, out, "compare_to")
    print(f"arm means against {job.compare_to} (agree when |new - ref| <= {ATOL} + {RTOL} |ref|; the "
          f"{len(csvs)} CSVs this call wrote):")
    print(summary(report))
    return 0 if len(report) and bool(report.ok.all()) else 1  # nothing compared is no agreement


def run_job(job: FigureJob) -> int:
    """Train and draw ``job``'s figures; 0 when done (or stopped by the budget, what is left
    printed), 1 when ``compare_to`` finds a CSV that disagrees."""
    out, ledger, study, cache = Path(job.out), job.ledger, STUDIES[job.tier], RunCache(job.cache)
    jobs, contrast = _contexts(job, cache)
    plots.style()
    mods = {n: load(n) for n in job.names}
    t0 = time.time()
    planned = {label: mods[n].specs(c) for label, c, n in jobs}  # each figure's specs, once
    where = {label: (c, mods[n]) for label, c, n in jobs}
    every = [s for label in planned for s in planned[label].values()]
    store = layered(cache, ledger)  # entries recorded where the ledger covers them
    with main_threads(1 if job.workers > 1 or job.dask else None):
        pl = make_plan(every, store, job.recompute)
        schedule = Schedule(planned, pl, job.workers, phase=_phases(study, planned))
        if pl.todo:
            print(cost_line(schedule, job.tier), flush=True)
        meta = Metadata(out, job.quick, dict(seeds=list(job.seeds), tier=job.tier, workers=job.workers,
                                              dask=job.dask, lockstep=job.lockstep and study.lockstep,
                                              cache=str(job.cache),
                                              ledger=str(ledger.path) if ledger is not None else None,
                                              budget_seconds=job.budget),
                        contrast.regime if job.contrast else None)
        fig = _Drawing(out, planned, mods, pl, schedule, meta, store, t0)
        # each figure is drawn as soon as the sweep hands over its last result, while the rest trains
        drawer = Drawer({label: (*where[label], planned[label]) for label in planned}, fig.draw, schedule,
                        start=t0, deadline=t0 + job.budget if job.budget else None)
        try:
            # the LRA study trains seed by seed, which lockstep groups (one config over seeds) would undo
            options = SweepOptions(workers=job.workers, dask=job.dask, lockstep=job.lockstep and study.lockstep,
                                   desc=drawer.describe, priority=schedule.priority)
            sweep(every, store, options, on_result=drawer.add, watch=drawer, plan=pl)
        except KeyboardInterrupt:
            meta.finish(fig.last_run(interrupted=True))  # the figures written so far, and what trained
            raise
        except Stopped as stop:  # the budget is spent: say what is drawn, what is not, and what is left
            left = left_line(schedule, stop.left, drawer.progress())
            meta.finish(fig.last_run(stopped=left))
            print(left, flush=True)
            return 0
    unwritten = [label for label in planned if label not in drawer.written]
    if unwritten:
        raise RuntimeError(f"figures {unwritten} did not get all their results")
    meta.finish(fig.last_run())
    lr = meta.meta["last_run"]
    print(f"done in {lr['total_seconds']:.1f}s (training {lr['training_seconds']:.1f}s, {lr['runs_trained']} entries "
          f"computed); peak memory {lr['peak_rss_mb_main']:.0f} MB (this process), {lr['peak_rss_mb_worker']:.0f} MB "
          f"(largest worker); metadata in {meta.path}")
    return _compare_to(job, out, fig.csvs) if job.compare_to else 0


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
    c = schedule.totals()
    schedule.initial = dict(runs=c["runs"], cpu_hours=round(c["cpu_hours"], 3), wall_hours=round(c["wall_hours"], 3),
                            calibrated_on=c["observed"])
    first = HEADLINE if schedule.needs.get(HEADLINE) else next((k for k, v in schedule.needs.items() if v), None)
    head = schedule.eta(first)[0] if first is not None else None
    basis = f"calibrated on {c['observed']} cached entries" if c["observed"] else "not calibrated: no cached entry yet"
    cpu = f"{c['cpu_hours']:.1f} CPU-hours" if c["cpu_hours"] >= 1 else f"{c['cpu_hours'] * 60:.1f} CPU-minutes"
    wall = f"{c['wall_hours']:.1f} h" if c["wall_hours"] >= 1 else clock(c["wall_hours"] * 3600)
    runs = sum(isinstance(s, RunSpec) for s in schedule.plan.todo)
    what = "plan" if tier == "default" else f"{tier} tier"
    return (f"{what}: {runs} runs to train and {c['runs'] - runs} other entries "
            f"to compute ({c['cached']} answered from the cache), about {cpu}, {wall} wall at {c['workers']} "
            f"worker{'s' if c['workers'] > 1 else ''}; {first} in about {clock(head)} ({basis})")


__all__ = ["FigureJob", "run_job", "cost_line", "left_line", "main_threads"]
