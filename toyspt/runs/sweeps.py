"""Sweeps: many specs through the cache, missing runs trained by an executor.

Specs that share a ``group()`` (toy runs that differ only by seed) are planned into jobs
of at most :data:`MAX_GROUP` that train together; every other spec is a job of its own.
Each job stores its runs as soon as it ends, so an interrupted sweep resumes where it
stopped, and two workers that train the same spec leave one sound entry.
"""
from __future__ import annotations

import concurrent.futures as cf
from pathlib import Path
from typing import Sequence

from tqdm.auto import tqdm

from ..train import RunResult
from .cache import RunCache
from .executors import make_executor, slots
from .specs import Spec

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


def run_job(specs: Sequence[Spec], root: str | Path) -> list[str]:
    """Worker entry point: train a job (one spec, or a group together) and store every run
    in the cache at ``root``; returns the spec keys."""
    specs = list(specs)
    results = [specs[0].execute()] if len(specs) == 1 else type(specs[0]).execute_group(specs)
    cache = RunCache(root)
    for s, r in zip(specs, results):
        cache.store(s, r)
    return [s.key() for s in specs]


def get_run(spec: Spec, cache: RunCache | None = None, recompute: bool = False,
            progress: bool = False) -> RunResult:
    """One run through the cache."""
    cache = cache or RunCache()
    if recompute:
        cache.remove(spec)
    hit = cache.load(spec)
    if hit is not None:
        return hit
    cache.check_writable()
    result = spec.execute(progress=progress)
    cache.store(spec, result)
    return result


def sweep(specs: Sequence[Spec], cache: RunCache | None = None, workers: int = 1,
          executor: cf.Executor | None = None, recompute: bool = False, progress: bool = True,
          desc: str = "runs", vectorize: bool = False, dask: str | None = None) -> list[RunResult]:
    """All ``specs`` through the cache, results in the order of ``specs``. Missing runs go to
    ``executor`` (any concurrent.futures.Executor), else to one made here only when something
    must train (:func:`toyspt.runs.executors.make_executor` of ``workers`` and ``dask``; in
    this process for one worker). ``vectorize``: specs of one group train together (bitwise
    equal to one at a time, so the cache never depends on it)."""
    _check_specs(specs)
    cache = cache or RunCache()
    unique = list({s.key(): s for s in specs}.values())
    if recompute:
        for s in unique:
            cache.remove(s)
    done = {s.key(): r for s in unique if (r := cache.load(s)) is not None}  # load once
    todo = [s for s in unique if s.key() not in done]
    if todo:
        cache.check_writable()
        own = executor is None
        ex = make_executor(workers, dask) if own else executor
        jobs = plan_jobs(todo, min_jobs=slots(ex, workers)) if vectorize else [[s] for s in todo]
        bar = tqdm(total=len(todo), desc=desc, disable=not progress)
        try:
            if ex is None:
                for job in jobs:
                    run_job(job, cache.root)
                    bar.update(len(job))
            else:
                futures = {ex.submit(run_job, job, str(cache.root)): len(job) for job in jobs}
                for fut in cf.as_completed(futures):
                    fut.result()
                    bar.update(futures[fut])
        finally:
            bar.close()
            if own and ex is not None:
                ex.shutdown(cancel_futures=True)
    for s in todo:
        res = cache.load(s)
        if res is None:
            raise RuntimeError(f"{s.label()} is missing from the cache after the sweep")
        done[s.key()] = res
    return [done[s.key()] for s in specs]


__all__ = ["MAX_GROUP", "plan_jobs", "run_job", "get_run", "sweep"]
