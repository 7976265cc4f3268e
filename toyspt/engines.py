"""Where a sweep's training runs: in this process, in a local process pool, or on a
dask.distributed cluster, all behind :class:`concurrent.futures.Executor`; and how runs
are grouped into jobs (seeds of one recipe go together through :mod:`toyspt.vectorized`).

The run cache is the only shared state. Every job writes its own entries, each atomically
(:meth:`toyspt.runs.RunCache.store`), so two workers that train the same spec leave one
sound entry. On a cluster, every worker must import the same toyspt (same environment)
and reach the cache directory at the same path (a shared file system).
"""
from __future__ import annotations

import concurrent.futures as cf
import contextlib
from dataclasses import replace
from pathlib import Path
from typing import Iterator, Sequence

from . import runs
from .runs import RunCache, RunSpec
from .vectorized import execute_seeds

MAX_GROUP = 8  # seeds per lockstep job; more only delays the first stored result


def make_executor(workers: int = 1, dask: str | None = None) -> cf.Executor | None:
    """The executor a sweep should use: ``None`` (train in this process) for one worker and
    no dask, a process pool of ``workers``, or with ``dask`` a cluster: a scheduler address
    (``tcp://host:8786``) or ``"local"`` (a LocalCluster of ``workers`` one-thread
    processes here). The caller shuts it down (or uses :func:`executor_scope`)."""
    if workers < 1:
        raise ValueError(f"workers: must be >= 1, got {workers}")
    if dask:
        return DaskExecutor(dask, workers)
    if workers > 1:
        return cf.ProcessPoolExecutor(workers)
    return None


@contextlib.contextmanager
def executor_scope(workers: int = 1, dask: str | None = None) -> Iterator[cf.Executor | None]:
    """``make_executor`` for the length of a ``with`` block, shut down on the way out."""
    ex = make_executor(workers, dask)
    try:
        yield ex
    finally:
        if ex is not None:
            ex.shutdown(cancel_futures=True)


class DaskExecutor(cf.Executor):
    """A dask.distributed client as an Executor; ``shutdown`` also closes the client and
    the LocalCluster it started, if any. Tasks are impure (each submission runs)."""

    def __init__(self, address: str, workers: int = 1):
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            raise RuntimeError("dask needs the optional extra: pip install 'toyspt[dask]' "
                               "(dask and distributed)") from None
        self._cluster = None
        if address == "local":
            self._cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                         dashboard_address=None)
            self.client = Client(self._cluster)
        else:
            self.client = Client(address, timeout="30s")
        self._ex = self.client.get_executor(pure=False)
        self._max_workers = max(1, sum(self.client.nthreads().values()))  # as ProcessPoolExecutor

    def submit(self, fn, /, *args, **kwargs) -> cf.Future:
        return self._ex.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._ex.shutdown(wait=wait and not cancel_futures)
        self.client.close()
        if self._cluster is not None:
            self._cluster.close()


def slots(executor: cf.Executor | None, default: int = 1) -> int:
    """How many jobs the executor runs at once (its worker count where it says)."""
    return getattr(executor, "_max_workers", None) or default


def plan_jobs(specs: Sequence[RunSpec], max_group: int = MAX_GROUP, min_jobs: int = 1) -> list[list[RunSpec]]:
    """Group toy specs that differ only by seed and have no trackers (at most ``max_group``
    per job); tracked specs and specs of other kinds (UCR) stay alone. Groups are halved until there are ``min_jobs`` jobs,
    so every worker has one. Order of first appearance is kept."""
    if max_group < 1:
        raise ValueError(f"max_group: must be >= 1, got {max_group}")
    groups: dict[str, list[RunSpec]] = {}
    for i, s in enumerate(specs):
        alone = s.trackers or not isinstance(s, RunSpec)  # other kinds bring their own execute
        groups.setdefault(f"alone-{i}" if alone else replace(s, seed=0).key(), []).append(s)
    jobs = [g[i:i + max_group] for g in groups.values() for i in range(0, len(g), max_group)]
    while len(jobs) < min_jobs:
        big = max(range(len(jobs)), key=lambda j: len(jobs[j]), default=None)
        if big is None or len(jobs[big]) < 2:
            break
        job = jobs[big]
        jobs[big:big + 1] = [job[:len(job) // 2], job[len(job) // 2:]]
    return jobs


def run_job(specs: Sequence[RunSpec], root: str | Path) -> list[str]:
    """Worker entry point: train a job (one spec, or a seed group together; both on one
    thread) and store every run in the cache at ``root``; returns the spec keys."""
    specs = list(specs)
    results = [runs.execute(specs[0])] if len(specs) == 1 else execute_seeds(specs)
    cache = RunCache(root)
    for s, r in zip(specs, results):
        cache.store(s, r)
    return [s.key() for s in specs]


__all__ = ["MAX_GROUP", "make_executor", "executor_scope", "DaskExecutor", "slots", "plan_jobs", "run_job"]
