"""How long the specs of a sweep will take: a cost model calibrated on the seconds the cache
records, and a simulation of the sweep's workers that turns it into times of arrival.

:func:`prior` is what a spec costs on one idle core of the reference machine, as every spec
states it the one way, :meth:`toyspt.runs.specs.Spec.seconds` (a run's, by its structure:
:mod:`toyspt.runs.pricing`). :class:`CostModel` multiplies the prior by factors learned from entries whose
seconds are known (``Entry.seconds`` of cached entries, and of each run as it finishes), per
kind at four levels -- everything, the kind of entry, its data set and policy, the same spec
on another seed -- each level shrunk towards the one above, so one observation of a kind
moves its estimate part of the way and many move it all the way.

:func:`simulate` plays the remaining work on ``workers`` workers in the sweep's own order
(dependencies first, then priority), from the jobs running now: when each spec will be
stored, hence when each figure can be drawn and when the job ends.
"""
from __future__ import annotations

import heapq
import math
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from toyspt.runs.specs import RunSpec, Spec
from toyspt.util.hashing import digest

SHRINK = 2.0  # observations a level's factor counts as, pulling it towards the level above


def prior(spec: Spec) -> float:
    """Seconds ``spec`` takes on one idle core of the reference machine: its own estimate (``Spec.seconds``)."""
    return float(spec.seconds())


def busy_factor(workers: int) -> float:
    """A first guess, before any run is timed, of how much slower than the reference each worker
    runs here: the processes that will want a core (the load average now, plus ``workers``) per
    core, at least 1."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        return 1.0
    return max(1.0, (load + workers) / max(1, os.cpu_count() or 1))


def levels(spec: Spec) -> tuple[tuple, ...]:
    """The calibration levels of ``spec``, coarse to fine."""
    d = dict(spec.to_dict())
    d.pop("seed", None)
    same = ("same", type(spec).__name__, digest(d))
    if isinstance(spec, RunSpec):
        kind = ("run", spec.data.kind)
        return ("all",), kind, kind + (spec.data.name, bool(spec.trackers), spec.evaluate), same
    return ("all",), ("other", spec.kind), ("other", spec.kind), same


@dataclass
class CostModel:
    """Estimated seconds of a spec: :func:`prior` times factors learned from observed seconds
    (:meth:`observe`), per level of :func:`levels`. ``speed``: a first guess of how this
    machine compares with the reference (seconds here / seconds there) before anything is observed."""

    speed: float = 1.0
    sums: dict[tuple, list[float]] = field(default_factory=dict)  # level -> [sum of log ratios, count]
    _prior: dict[str, tuple[float, tuple]] = field(default_factory=dict)  # spec key -> (prior, levels)

    def _known(self, spec: Spec) -> tuple[float, tuple]:
        key = spec.key()
        if key not in self._prior:
            self._prior[key] = (prior(spec), levels(spec))
        return self._prior[key]

    def prior(self, spec: Spec) -> float:
        return self._known(spec)[0]

    def observe(self, spec: Spec, seconds: float | None) -> None:
        """One entry of ``spec`` that took ``seconds`` (None or not positive: ignored)."""
        if seconds is None or not seconds > 0 or not math.isfinite(seconds):
            return
        p, lvs = self._known(spec)
        r = math.log(seconds / max(p, 1e-6))
        for lv in lvs:
            s = self.sums.setdefault(lv, [0.0, 0])
            s[0] += r
            s[1] += 1

    def factor(self, spec: Spec) -> float:
        log_f = math.log(self.speed)
        for lv in self._known(spec)[1]:
            total, n = self.sums.get(lv, (0.0, 0))
            log_f = (total + SHRINK * log_f) / (n + SHRINK)
        return math.exp(log_f)

    def estimate(self, spec: Spec) -> float:
        return self.prior(spec) * self.factor(spec)

    def observed(self) -> int:
        return int(self.sums.get(("all",), (0.0, 0))[1])


def simulate(pending: Sequence[Spec], after: dict[str, str], estimate: Callable[[Spec], float], workers: int,
             priority: Callable[[Spec], Any], running: Iterable[tuple[list[Spec], float]] = ()) -> dict[str, float]:
    """When each spec will be stored, in seconds from now: ``running`` jobs (their specs and
    the seconds they have run) occupy workers first; a ``pending`` spec starts once the run
    it waits for (``after``: spec key -> key) is stored and a worker is free, the smallest
    ``priority`` among those ready first. A spec waiting for a key neither pending nor
    running can start at once."""
    workers = max(1, workers)
    finish: dict[str, float] = {}
    free = [0.0] * workers  # when each worker is next free
    for job, ran in sorted(running, key=lambda jr: -jr[1]):
        total = sum(estimate(s) for s in job)
        w = min(range(workers), key=lambda i: free[i])
        free[w] += max(total - ran, 0.05 * total)
        for s in job:
            finish[s.key()] = free[w]
    pend = {s.key(): s for s in pending if s.key() not in finish}
    children: dict[str, list[str]] = {}
    later: list = []  # (earliest start, key): ready once a running job ends
    ready: list = []  # (priority, key)
    for key, s in pend.items():
        dep = after.get(key)
        if dep in pend:
            children.setdefault(dep, []).append(key)
        elif dep in finish:
            heapq.heappush(later, (finish[dep], key))
        else:
            heapq.heappush(ready, (priority(s), key))
    heapq.heapify(free)
    while ready or later:
        t = heapq.heappop(free)
        while later and later[0][0] <= t:
            key = heapq.heappop(later)[1]
            heapq.heappush(ready, (priority(pend[key]), key))
        if not ready:  # idle until the next run is freed
            heapq.heappush(free, later[0][0])
            continue
        key = heapq.heappop(ready)[1]
        finish[key] = end = t + estimate(pend[key])
        heapq.heappush(free, end)
        for kid in children.pop(key, ()):
            heapq.heappush(later, (end, kid))
    return finish


__all__ = ["prior", "levels", "busy_factor", "CostModel", "simulate"]
