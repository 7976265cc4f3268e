"""Where a sweep's training runs: in this process, in a local process pool, or on a
dask.distributed cluster, all behind :class:`concurrent.futures.Executor`.

The run cache is the only shared state. Every job writes its own entries, each atomically
(:meth:`toyspt.runs.cache.RunCache.store`), so two workers that train the same spec leave one
sound entry. On a cluster, every worker must import the same toyspt (same environment)
and reach the cache directory at the same path (a shared file system).
"""
from __future__ import annotations

import concurrent.futures as cf
import contextlib
import os
import signal
import threading
import time
from typing import Iterator

DASK_TIMEOUT = "5s"  # how long to wait for a dask scheduler before saying it is not there


def make_executor(workers: int = 1, dask: str | None = None) -> cf.Executor | None:
    """The executor a sweep should use: ``None`` (train in this process) for one worker and
    no dask, a process pool of ``workers``, or with ``dask`` a cluster: a scheduler address
    (``tcp://host:8786``) or ``"local"`` (a LocalCluster of ``workers`` one-thread
    processes here). The caller shuts it down (or uses :func:`executor_scope`)."""
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise ValueError(f"workers: must be an integer >= 1, got {workers!r}")
    if dask:
        return DaskExecutor(dask, workers)
    if workers > 1:
        return process_pool(workers)
    return None


def process_pool(workers: int) -> cf.ProcessPoolExecutor:
    """A process pool whose workers end when this process ends (even by ``kill -9``)."""
    return cf.ProcessPoolExecutor(workers, initializer=_die_with_parent, initargs=(os.getpid(),))


def _die_with_parent(parent: int, every: float = 0.5) -> None:
    """Worker initializer: a daemon thread exits the worker once its parent is gone. Ctrl-C
    is the parent's to handle (:func:`halt` ends the workers), so a worker ignores SIGINT
    and prints nothing of it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch():
        while os.getppid() == parent:
            time.sleep(every)
        os._exit(1)
    threading.Thread(target=watch, daemon=True, name="die-with-parent").start()


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
            try:
                self.client = Client(address, timeout=DASK_TIMEOUT)
            except (OSError, TimeoutError) as e:
                raise ConnectionError(f"dask: no scheduler answered at {address} within {DASK_TIMEOUT} "
                                      f"({type(e).__name__})") from None
        self._ex = self.client.get_executor(pure=False)
        self._max_workers = max(1, sum(self.client.nthreads().values()))  # as ProcessPoolExecutor

    def submit(self, fn, /, *args, **kwargs) -> cf.Future:
        return self._ex.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._ex.shutdown(wait=wait and not cancel_futures)
        self.client.close()
        if self._cluster is not None:
            self._cluster.close()


def halt(executor: cf.Executor) -> None:
    """Stop ``executor`` now (Ctrl-C, an error): queued jobs cancelled, a local pool's workers
    ended mid-job (what they were writing is a temporary entry, swept later; stored entries
    stay), without waiting for the jobs they run."""
    pool = getattr(executor, "_processes", None) if isinstance(executor, cf.ProcessPoolExecutor) else None
    for proc in list((pool or {}).values()):
        with contextlib.suppress(Exception):  # already gone
            proc.terminate()
    executor.shutdown(wait=False, cancel_futures=True)


def slots(executor: cf.Executor | None, default: int = 1) -> int:
    """How many jobs the executor runs at once (its worker count where it says)."""
    return getattr(executor, "_max_workers", None) or default


__all__ = ["make_executor", "executor_scope", "process_pool", "DaskExecutor", "slots", "halt"]
