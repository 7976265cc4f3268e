"""Sweeps: many specs through a store (a run cache, or a cache before a results ledger:
:mod:`toyspt.runs.store`), missing runs trained by an executor.

Specs that share a ``group()`` (toy runs that differ only by seed) are planned into jobs
of at most :data:`MAX_GROUP` that train together; every other spec is a job of its own.
Each job stores its runs as soon as it ends, so an interrupted sweep resumes where it
stopped, and two workers that train the same spec leave one sound entry.

Work is not done twice (:mod:`toyspt.runs.planning`): a spec whose ``alternatives()`` include
a spec also asked for (or cached) is answered by that one, a tracked run answers for its
untracked twin, and a spec with a ``parent()`` (the run its own run begins with) continues
the parent's stored end state (or its tracked twin's); a parent that is neither asked for nor
cached is trained first and stored too. ``--recompute`` recomputes parents as well.
"""
from __future__ import annotations

import concurrent.futures as cf
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from tqdm.auto import tqdm

from toyspt.runs.cache import RunCache
from toyspt.runs.executors import halt, make_executor, slots
from toyspt.runs.planning import Plan, load_answer, make_plan, store_with_twins, store_with_twins_only
from toyspt.runs.specs import Entry, Spec
from toyspt.runs.store import Store
from toyspt.util.hashing import jsonable

MAX_GROUP = 8  # seeds per lockstep job; more only delays the first stored result


def _check_specs(specs: Sequence[Spec]) -> None:
    bad = [type(s).__name__ for s in specs if not isinstance(s, Spec)]
    if bad:
        raise TypeError(f"sweep takes toyspt.runs.Spec objects, got {sorted(set(bad))}")


def plan_jobs(specs: Sequence[Spec], max_group: int = MAX_GROUP, min_jobs: int = 1) -> list[list[Spec]]:
    """Group specs by ``group()`` (at most ``max_group`` per job); specs without a group stay
    alone. Groups are halved until there are ``min_jobs`` jobs, so every worker has one.
    Order of first appearance is kept."""
    if max_group < 1:
        raise ValueError(f"max_group: must be >= 1, got {max_group}")
    groups: dict[str, list[Spec]] = {}
    for i, s in enumerate(specs):
        g = s.group()
        groups.setdefault(f"alone-{i}" if g is None else g, []).append(s)
    jobs = [g[i:i + max_group] for g in groups.values() for i in range(0, len(g), max_group)]
    while len(jobs) < min_jobs:
        big = max(range(len(jobs)), key=lambda j: len(jobs[j]), default=None)
        if big is None or len(jobs[big]) < 2:
            break
        job = jobs[big]
        jobs[big:big + 1] = [job[:len(job) // 2], job[len(job) // 2:]]
    return jobs


def as_stored(result: Entry) -> Entry:
    """``result`` as the cache gives it back (JSON's types: lists for tuples, string keys,
    ``"nan"``), so an entry computed in this process reads exactly as its stored one."""
    return type(result).from_stored(json.loads(json.dumps(jsonable(result.to_json()))), result.tensors())


def _start_of(spec: Spec, parent: Spec, store: Store, known: dict[str, Entry]) -> Entry | None:
    """The parent entry ``spec`` starts from: the parent's own, or for a spec that only reads its
    parent's weights, any entry answering the parent (an alternative's, a tracked twin's)."""
    if not spec.reads_parent():
        return known.get(parent.key()) or store.load(parent, weights=True)
    for c in (parent, *parent.alternatives()):
        if c.key() in known:
            return known[c.key()]
    return load_answer(store, parent, weights=True)


def train_job(specs: Sequence[Spec], store: Store, together: bool = False,
              known: dict[str, Entry] | None = None) -> list[Entry]:
    """Train a job (one spec, or with ``together`` specs of one group through the group's
    engine, even a single one: the lockstep engine is the faster), store every run in
    ``store`` (with its twins' entries) and return the results as stored; specs with a parent
    continue its run, taken from ``known`` (key -> result) or else from the store."""
    specs = list(specs)
    known = known or {}
    parents = [s.parent() for s in specs]
    starts = None
    if any(p is not None for p in parents):
        starts = [(_start_of(s, p, store, known)) if p is not None else None for s, p in zip(specs, parents)]
        missing = [s.label() for s, p, st in zip(specs, parents, starts) if p is not None and st is None]
        if missing:
            raise RuntimeError(f"the runs {missing[:3]} start from runs missing from the store {store!r}")
    t = time.perf_counter()
    if together and specs[0].group() is not None:  # through the group's engine, even alone
        results = type(specs[0]).execute_group(specs, starts)
    elif len(specs) == 1:
        results = [specs[0].execute(start=starts[0]) if starts else specs[0].execute()]
    else:
        raise ValueError("a job of several specs trains together (together=True, specs of one group)")
    per_run = (time.perf_counter() - t) / len(specs)
    for s, r in zip(specs, results):
        r.seconds = per_run
        store_with_twins(store, s, r)
    return [as_stored(r) for r in results]


def run_job(specs: Sequence[Spec], root: str | Path, together: bool = False) -> list[str]:
    """Worker entry point: :func:`train_job` into the cache at ``root``; returns the keys
    (the results travel through the cache, not back through the executor)."""
    train_job(specs, RunCache(root), together)
    return [s.key() for s in specs]


def get_run(spec: Spec, store: Store | None = None, recompute: bool = False,
            progress: bool = False, weights: bool = False) -> Entry:
    """One run through the store (default: the run cache; its parent run first, if it has one;
    ``weights``: answered only by an entry with its weights, as a parent's must be)."""
    store = store if store is not None else RunCache()  # (an empty ledger is falsy: it has a length)
    if recompute:
        for s in (spec, *spec.alternatives(), *spec.twins()):
            store.remove(s)
    hit = load_answer(store, spec, weights)
    if hit is not None:
        return hit
    store.check_writable()
    parent = spec.parent()
    start = get_run(parent, store, recompute, progress, weights=True) if parent is not None else None
    t = time.perf_counter()
    result = spec.execute(progress=progress, start=start) if start is not None else spec.execute(progress=progress)
    result.seconds = time.perf_counter() - t  # as a sweep times its runs: the cost model learns from it
    store_with_twins(store, spec, result)
    return as_stored(result)


class Watch:
    """What a sweep tells an observer (e.g. an ETA): ``planned(plan)`` once, before anything
    trains; ``started(job)`` when a job is handed to a worker; ``launched()`` once the first
    jobs are handed out (or when nothing trains), just before the cached results are reported;
    ``finished(job, results)`` when its runs are stored (``results``: the entries, with ``seconds``)."""

    def planned(self, plan: Plan) -> None: ...

    def launched(self) -> None: ...

    def started(self, job: list[Spec]) -> None: ...

    def finished(self, job: list[Spec], results: list[Entry]) -> None: ...

    def more(self) -> bool:
        """Whether another job may start (False: the sweep lets the jobs in flight finish, then
        raises :class:`Stopped`)."""
        return True


class Stopped(Exception):
    """A sweep its watch stopped (e.g. a time budget spent): ``left`` are the specs not trained;
    every run trained before is stored."""

    def __init__(self, left: list[Spec]):
        super().__init__(f"stopped with {len(left)} entries left to compute")
        self.left = left


@dataclass(frozen=True)
class SweepOptions:
    """How a sweep trains and reports (none of it changes a result)."""

    workers: int = 1  # processes that train (toyspt.runs.executors.make_executor)
    executor: cf.Executor | None = None  # any concurrent.futures.Executor (default: one made for workers, dask)
    dask: str | None = None  # a dask scheduler address
    lockstep: bool = False  # specs of one group train together (bitwise equal to one at a time)
    progress: bool = True  # a progress bar
    desc: str | Callable[[], str] = "runs"  # its text (a callable: re-read after every job)
    priority: Callable[[list[Spec]], Any] | None = None  # jobs start smallest first (default: the specs' order)


class _SweepRun:
    """One sweep's jobs while they train: the plan, the jobs ready and those waiting for a
    parent, what trained (``got``), and who hears of each result."""

    def __init__(self, pl: Plan, store: Store, options: SweepOptions,
                 on_result: Callable[[str, Entry], None] | None, watch: Watch | None):
        self.pl, self.store, self.o, self.on_result, self.watch = pl, store, options, on_result, watch
        self.askers: dict[str, list[str]] = {}  # answering key -> the asked keys it answers
        for k, a in pl.answer.items():
            self.askers.setdefault(a.key(), []).append(k)
        self.got: dict[str, Entry] = {}  # trained in this sweep, as stored, and their twins' entries
        self.waiting: list[Spec] = [s for s in pl.todo if s.key() in pl.after]  # for a parent to be stored
        self.pending: list[list[Spec]] = []  # jobs ready to start, best first
        self.n_slots = 1
        rank = {s.key(): i for i, s in enumerate(pl.todo)}
        self.order = options.priority or (lambda job: min(rank[s.key()] for s in job))
        self.bar: Any = None

    def more(self) -> bool:
        return self.watch is None or self.watch.more()

    def report(self, key: str, result: Entry) -> None:
        for k in self.askers.get(key, ()) if self.on_result is not None else ():
            self.on_result(k, result)

    def cached_results(self) -> None:
        if self.watch is not None:
            self.watch.launched()
        for key, res in list(self.pl.done.items()):
            self.report(key, res)

    def queue(self, batch: list[Spec]) -> None:
        jobs = plan_jobs(batch, min_jobs=self.n_slots) if self.o.lockstep else [[s] for s in batch]
        self.pending.extend(jobs)
        self.pending.sort(key=self.order)

    def started(self, job: list[Spec]) -> None:
        if self.watch is not None:
            self.watch.started(job)

    def stored(self, job: list[Spec], results: list[Entry]) -> None:
        """Record a finished job and queue the children it frees."""
        for s, r in zip(job, results):
            self.got[s.key()] = r
            self.got.update((t.key(), s.twin_result(t, r)) for t in s.twins())
        after = self.pl.after
        self.queue([s for s in self.waiting if after[s.key()] in self.got])
        self.waiting = [s for s in self.waiting if after[s.key()] not in self.got]

    def announce(self, job: list[Spec], results: list[Entry]) -> None:
        if self.watch is not None:
            self.watch.finished(job, results)
        self.bar.update(len(job))
        if callable(self.o.desc):
            self.bar.set_description(self.o.desc(), refresh=False)
        for s, r in zip(job, results):
            self.report(s.key(), r)
            for t in s.twins():
                self.report(t.key(), self.got[t.key()])

    def here(self) -> None:
        """Train every job in this process: results stay in memory, parents included."""
        self.cached_results()
        while self.pending and self.more():
            job = self.pending.pop(0)
            self.started(job)
            results = train_job(job, self.store, self.o.lockstep, self.got)
            self.stored(job, results)
            self.announce(job, results)

    def fill(self, ex: cf.Executor, futures: dict[cf.Future, list[Spec]]) -> None:
        """Hand out jobs: one per worker and one more queued."""
        while self.pending and len(futures) < self.n_slots + 1 and self.more():
            job = self.pending.pop(0)
            futures[ex.submit(run_job, job, str(self.store.root), self.o.lockstep)] = job
            self.started(job)

    def with_workers(self, ex: cf.Executor) -> None:
        """Train every job in worker processes, which store into the run cache."""
        futures: dict[cf.Future, list[Spec]] = {}
        self.fill(ex, futures)  # the workers start before this process uses the cached results
        self.cached_results()
        while futures:
            fut = next(cf.as_completed(futures))
            job = futures.pop(fut)
            fut.result()
            # trained in another process, stored in the run cache: read (and so written to
            # every other layer of the store), twins too
            results = [self.store.load(s, weights=True) for s in job]
            missing = [s.label() for s, r in zip(job, results) if r is None]
            if missing:
                raise RuntimeError(f"{missing[0]} is missing from the cache after training")
            for s, r in zip(job, results):
                store_with_twins_only(self.store, s, r)
            self.stored(job, results)
            self.fill(ex, futures)  # the workers go on while this process uses the results
            self.announce(job, results)

    def train(self) -> None:
        """Train the plan's todo specs (here or by an executor); raise :class:`Stopped` when the
        watch stopped it with runs left."""
        o, store, todo = self.o, self.store, self.pl.todo
        store.check_writable()
        if store.root is None and (o.executor is not None or o.workers > 1 or o.dask):
            raise ValueError(f"{store!r} keeps no weights: runs trained by workers are stored in a run cache")
        own = o.executor is None
        ex = make_executor(o.workers, o.dask) if own else o.executor
        self.n_slots = slots(ex, o.workers)
        self.queue([s for s in todo if s not in self.waiting])
        self.bar = tqdm(total=len(todo), desc=o.desc() if callable(o.desc) else o.desc, disable=not o.progress)
        try:
            self.here() if ex is None else self.with_workers(ex)
        except BaseException:  # Ctrl-C or an error: the workers stop now, the stored runs stay
            self.bar.close()
            if own and ex is not None:
                halt(ex)
            raise
        self.bar.close()
        if own and ex is not None:
            ex.shutdown(cancel_futures=True)
        if self.pending or (self.waiting and not self.more()):
            raise Stopped([s for s in todo if s.key() not in self.got])
        if self.waiting:
            raise RuntimeError(f"{self.waiting[0].label()} waited for a parent run that never trained")


def sweep(specs: Sequence[Spec], store: Store | None = None, options: SweepOptions | None = None,
          recompute: bool = False, on_result: Callable[[str, Entry], None] | None = None,
          watch: Watch | None = None, plan: Plan | None = None) -> list[Entry]:
    """All ``specs`` through ``store`` (default: the run cache at its default folder; a
    :class:`toyspt.runs.store.LayeredStore` of a cache and a results ledger also records every
    entry the ledger covers), results in the order of ``specs``. Missing runs go to
    ``options.executor``, else to one made here only when something must train
    (:func:`toyspt.runs.executors.make_executor` of ``workers`` and ``dask``; in this process
    for one worker); a run whose parent trains in the same sweep is sent when the parent is
    stored. With ``lockstep``, specs of one group train together (bitwise equal to one at a
    time, so the cache never depends on it).

    Jobs start in the order of ``options.priority(job)`` (smallest first; default: the order of
    ``specs``, a parent just before its first child, a lockstep group where its first member
    is), one per worker and one more queued, so a job freed by its parent's end waits behind
    at most one other. ``on_result(key, result)`` is called in this process for each asked
    key as soon as its result is at hand (the cached ones once the first jobs are handed out,
    the others as their job is stored), so a caller can use them while the rest trains;
    ``watch`` (a :class:`Watch`) hears of the plan and of every job (the trained entries'
    seconds among them); ``plan``: the plan of ``specs`` when the caller has made it already
    (:func:`toyspt.runs.planning.make_plan`)."""
    _check_specs(specs)
    store = store if store is not None else RunCache()  # (an empty ledger is falsy: it has a length)
    pl = plan if plan is not None else make_plan(specs, store, recompute)
    if watch is not None:
        watch.planned(pl)
    run = _SweepRun(pl, store, options or SweepOptions(), on_result, watch)
    if pl.todo:
        run.train()
    else:
        run.cached_results()
    pl.done.update(run.got)
    return [pl.done[pl.answer[s.key()].key()] for s in specs]


__all__ = ["MAX_GROUP", "plan_jobs", "as_stored", "SweepOptions", "train_job", "run_job", "load_answer", "get_run",
           "sweep",
           "Watch", "Stopped", "make_plan", "Plan"]
