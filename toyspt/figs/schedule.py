"""Figures while the job runs, in the order a reader wants them: the headline first.

``python paper_figs.py`` sends every figure's specs through one sweep. The figures are drawn
in the registry's order of importance (:data:`toyspt.figs.FIGURES`, then the contrast
regime); each is drawn the moment its last result arrives, while the rest trains
(:class:`Drawer`, the sweep's ``on_result``). :class:`Schedule` tells the sweep which job to
start next: the runs of the first figure still waiting come before any other figure's
(a run counts for the first figure that needs it, directly or as the run another continues),
and among them the longest chain of work first (the job's own estimated seconds plus the
longest chain of runs continuing it), so both workers stay busy and the figure's last run
does not start last. Estimates come from :class:`toyspt.runs.costs.CostModel`, calibrated on
the cached entries the plan read and on every run as it finishes; :meth:`Schedule.eta`
simulates the remaining work on the workers (:func:`toyspt.runs.costs.simulate`) for the
time to the next figure and to the end, shown in the progress bar by :meth:`Drawer.describe`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from toyspt.runs.costs import CostModel, busy_factor, simulate
from toyspt.runs.planning import Plan
from toyspt.runs.specs import Spec
from toyspt.runs.sweeps import Watch

ETA_EVERY = 1.0  # seconds between two simulations of the remaining work for the progress bar


def clock(seconds: float | None) -> str:
    """``m:ss`` or ``h:mm:ss`` (``?`` when unknown)."""
    if seconds is None:
        return "?"
    s = int(round(max(seconds, 0.0)))
    h, m = divmod(s // 60, 60)
    return f"{h}:{m:02d}:{s % 60:02d}" if h else f"{m}:{s % 60:02d}"


class Schedule(Watch):
    """The sweep's order and the ETA of a plan (:class:`toyspt.runs.planning.Plan`) whose
    asked specs belong to figures (``planned``: {label: {spec label: spec}}, in drawing
    order), trained by ``workers`` workers."""

    def __init__(self, planned: dict[str, dict], plan: Plan, workers: int = 1, model: CostModel | None = None,
                 now: Callable[[], float] = time.time, phase: dict[str, int] | None = None):
        self.figures, self.plan, self.workers, self.now = planned, plan, max(1, workers), now
        self.model = model or CostModel(speed=busy_factor(self.workers))
        for spec, entry in plan.loaded:  # what the cache already records
            self.model.observe(spec, getattr(entry, "seconds", None))
        self.todo = {s.key(): s for s in plan.todo}
        self.stage: dict[str, int] = {}
        # todo key -> the earliest phase of the asked specs needing it (``phase``: asked key -> phase,
        # e.g. the real-data study's: whole comparisons first); before the figure's stage in the order
        self.phase: dict[str, int] = {}
        self.needs: dict[str, set[str]] = {}  # figure label -> todo keys it waits for
        for i, (label, specs) in enumerate(planned.items()):
            keys = self.needs.setdefault(label, set())
            for s in specs.values():
                ph = (phase or {}).get(s.key(), 0)
                for p in plan.needs(s):
                    keys.add(p.key())
                    self.stage[p.key()] = min(self.stage.get(p.key(), i), i)
                    self.phase[p.key()] = min(self.phase.get(p.key(), ph), ph)
        self.kids = {k: [c.key() for c in v] for k, v in plan.children().items()}
        self.rank = {s.key(): i for i, s in enumerate(plan.todo)}
        self.in_flight: list[tuple[list[Spec], float | None]] = []  # submitted jobs, (specs, start or None)
        self.stored: set[str] = set()  # todo keys whose runs are stored
        self.trained: dict[str, float | None] = {}  # todo key -> training seconds, as runs are stored
        self.initial: dict[str, Any] = {}  # the estimate made before training (for metadata)
        self.start = now()
        self._cp: dict[str, float] | None = None

    # ---- the order -------------------------------------------------------------------------
    def estimate(self, spec: Spec) -> float:
        return self.model.estimate(spec)

    def chain(self) -> dict[str, float]:
        """todo key -> its estimated seconds plus the longest chain of todo runs continuing it."""
        if self._cp is None:
            cp: dict[str, float] = {}
            for s in reversed(self.plan.todo):  # parents come before children: children first here
                k = s.key()
                cp[k] = self.estimate(s) + max((cp[c] for c in self.kids.get(k, ())), default=0.0)
            self._cp = cp
        return self._cp

    def spec_priority(self, spec: Spec) -> tuple:
        k = spec.key()
        return (self.phase.get(k, 0), self.stage.get(k, len(self.figures)), -self.chain().get(k, 0.0),
                self.rank.get(k, 0))

    def priority(self, job: list[Spec]) -> tuple:
        """The sweep's order of jobs: the first phase's first, then the first figure's, the longest
        chain of work first."""
        cp = self.chain()
        phase = min(self.phase.get(s.key(), 0) for s in job)
        stage = min(self.stage.get(s.key(), len(self.figures)) for s in job)
        own = sum(self.estimate(s) for s in job)
        longest = max((cp[c] for s in job for c in self.kids.get(s.key(), ())), default=0.0)
        return phase, stage, -(own + longest), min(self.rank.get(s.key(), 0) for s in job)

    # ---- what the sweep says -----------------------------------------------------------------
    def started(self, job: list[Spec]) -> None:
        running = sum(st is not None for _, st in self.in_flight)
        self.in_flight.append((list(job), self.now() if running < self.workers else None))

    def finished(self, job: list[Spec], results: list) -> None:
        keys = {s.key() for s in job}
        self.in_flight = [(j, st) for j, st in self.in_flight if {s.key() for s in j} != keys]
        for s, r in zip(job, results):
            self.stored.add(s.key())
            self.trained[s.key()] = getattr(r, "seconds", None)
            self.model.observe(s, getattr(r, "seconds", None))
        self._cp = None
        now = self.now()
        for i, (j, st) in enumerate(self.in_flight):  # a queued job starts where a worker freed
            if st is None and sum(x is not None for _, x in self.in_flight) < self.workers:
                self.in_flight[i] = (j, now)

    # ---- the ETA ---------------------------------------------------------------------------
    def forecast(self) -> dict[str, float]:
        """todo key -> seconds from now until it is stored (the finished ones: 0)."""
        now = self.now()
        flying = {s.key() for j, _ in self.in_flight for s in j}
        running = [(j, (now - st) if st is not None else 0.0) for j, st in self.in_flight]
        pending = [s for k, s in self.todo.items() if k not in self.stored and k not in flying]
        after = {k: p for k, p in self.plan.after.items() if p not in self.stored}
        out = simulate(pending, after, self.estimate, self.workers, self.spec_priority, running)
        out.update((k, 0.0) for k in self.stored)
        return out

    def eta(self, label: str | None = None) -> tuple[float | None, float]:
        """(seconds until figure ``label``'s runs are stored, None without a label; seconds
        until every run is)."""
        f = self.forecast()
        end = max(f.values(), default=0.0)
        if label is None:
            return None, end
        return max((f.get(k, 0.0) for k in self.needs.get(label, ())), default=0.0), end

    def totals(self) -> dict[str, Any]:
        """What training this plan costs by the estimates: runs, CPU-hours, wall hours at the workers."""
        cpu = sum(self.estimate(s) for s in self.plan.todo)
        wall = max(self.forecast().values(), default=0.0)
        return dict(runs=len(self.plan.todo), cached=len(self.plan.done), cpu_hours=cpu / 3600,
                    wall_hours=wall / 3600, workers=self.workers, observed=self.model.observed())


@dataclass
class Drawer(Watch):
    """Draws each figure of ``figures`` ({label: (context, module, specs)}, in drawing
    order) once every result it needs has arrived through :meth:`add` (the sweep's
    ``on_result``); ``draw(label, ctx, module, specs, results)`` does the drawing. As the
    sweep's ``watch`` it draws the figures that need no run once the workers have their first
    jobs, and passes what the sweep says on to ``schedule`` (the ETA of the progress bar)."""

    figures: dict[str, tuple]
    draw: Callable[..., Any]
    schedule: Schedule | None = None
    results: dict[str, Any] = field(default_factory=dict)  # spec key -> RunResult
    written: dict[str, float] = field(default_factory=dict)  # label -> seconds after start
    start: float = field(default_factory=time.time)
    deadline: float | None = None  # time.time() after which no job starts (a time budget); None: none

    def more(self) -> bool:
        """No new job once the time budget is spent (the jobs in flight finish)."""
        return self.deadline is None or time.time() < self.deadline

    def progress(self) -> dict[str, tuple[int, int]]:
        """label -> (entries at hand, entries it needs) of every figure not drawn."""
        out = {}
        for label, (_, _, specs) in self.figures.items():
            if label not in self.written:
                n = len({s.key() for s in specs.values()})
                out[label] = (n - len(self.need[label]), n)
        return out

    def __post_init__(self):
        self.need = {label: {s.key() for s in specs.values()} for label, (_, _, specs) in self.figures.items()}
        self._eta = None  # (label, when, seconds to it, seconds to the end) of the last simulation

    def planned(self, plan) -> None:
        if self.schedule is not None:
            self.schedule.planned(plan)

    def started(self, job) -> None:
        if self.schedule is not None:
            self.schedule.started(job)

    def finished(self, job, results) -> None:
        if self.schedule is not None:
            self.schedule.finished(job, results)

    def launched(self) -> None:
        self.draw_ready()

    def add(self, key: str, result) -> None:
        """One spec's result: draw every figure that now has all of its results."""
        self.results[key] = result
        for keys in self.need.values():
            keys.discard(key)
        self.draw_ready()

    def draw_ready(self) -> None:
        """Draw, in order, every figure whose results are all at hand and that is not drawn yet."""
        for label, (ctx, mod, specs) in self.figures.items():
            if label not in self.written and not self.need[label]:
                self.draw(label, ctx, mod, specs, self.results)
                self.written[label] = round(time.time() - self.start, 1)

    def current(self) -> str | None:
        """The first figure, in drawing order, still waiting for runs."""
        return next((label for label in self.figures if label not in self.written and self.need[label]), None)

    def describe(self) -> str:
        """``training <figure> (k/n figures) · next in m:ss · all in m:ss`` for the progress bar."""
        label = self.current()
        if label is None:
            return "training"
        k = list(self.figures).index(label) + 1
        text = f"training {label} ({k}/{len(self.figures)} figures"
        if self.schedule is None:
            return text + ")"
        now = time.time()
        if self._eta is None or self._eta[0] != label or now - self._eta[1] >= ETA_EVERY:
            self._eta = (label, now, *self.schedule.eta(label))  # the simulation, at most once a second
        _, then, nxt, end = self._eta
        ago = now - then
        return text + f"; it in {clock(nxt - ago if nxt is not None else None)}, all in {clock(end - ago)})"


__all__ = ["Schedule", "Drawer", "clock"]
