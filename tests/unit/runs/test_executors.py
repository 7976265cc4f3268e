import concurrent.futures as cf
import multiprocessing as mp
import threading
from dataclasses import replace

import pytest
import torch
from conftest import SMALL_TASK

from toyspt.runs import RunCache, RunSpec, sweep
from toyspt.runs.executors import executor_scope, make_executor, slots
from toyspt.runs.sweeps import SweepOptions, plan_jobs
from toyspt.train.recipes import TrainConfig
from toyspt.train.run import RunResult

TC = TrainConfig(epochs=1, pre_epochs=1, batch_size=64)
BASE = RunSpec("spt", 0, SMALL_TASK, train=TC)
TRACKED = replace(BASE, recipe="scratch", trackers=("displacement",))


def assert_same_runs(a, b):
    for x, y in zip(a, b, strict=True):
        assert ((x.recipe, x.seed, x.history, x.summary, x.records)
                == (y.recipe, y.seed, y.history, y.summary, y.records))
        for which in x.states:
            for n, v in x.states[which].items():
                assert torch.equal(v, y.states[which][n]), (which, n)


def test_make_executor_kinds():
    assert make_executor(1) is None
    ex = make_executor(2)
    try:
        assert isinstance(ex, cf.ProcessPoolExecutor) and slots(ex) == 2
    finally:
        ex.shutdown()
    assert slots(None, 3) == 3
    with pytest.raises(ValueError, match="workers"):
        make_executor(0)
    with executor_scope(1) as ex:
        assert ex is None


def test_plan_jobs_groups_seeds_only():
    a = [replace(BASE, seed=s) for s in range(10)]
    b = [replace(BASE, recipe="scratch", seed=s) for s in range(2)]
    specs = [a[0], b[0], TRACKED, *a[1:], replace(TRACKED, seed=1), b[1]]
    jobs = plan_jobs(specs, max_group=8)
    assert [[(s.recipe, s.seed, bool(s.trackers)) for s in j] for j in jobs] == [
        [("spt", s, False) for s in range(8)], [("spt", 8, False), ("spt", 9, False)],
        [("scratch", 0, False), ("scratch", 1, False)], [("scratch", 0, True)], [("scratch", 1, True)]]
    assert sorted(s.key() for j in jobs for s in j) == sorted(s.key() for s in specs)
    split = plan_jobs(a[:5], min_jobs=3)  # every worker gets a job
    assert [[s.seed for s in j] for j in split] == [[0, 1], [2], [3, 4]]
    assert len(plan_jobs(a[:1], min_jobs=4)) == 1 and plan_jobs([]) == []
    with pytest.raises(ValueError, match="max_group"):
        plan_jobs(a, max_group=0)


def test_lockstep_sweep_fills_the_cache_as_one_at_a_time(tmp_path):
    specs = [replace(BASE, seed=s) for s in (0, 1, 2)] + [TRACKED]
    one = sweep(specs, RunCache(tmp_path / "one"), options=SweepOptions(progress=False))
    together = sweep(specs, RunCache(tmp_path / "vec"), options=SweepOptions(progress=False, lockstep=True))
    assert_same_runs(one, together)
    assert_same_runs(one, [RunCache(tmp_path / "vec").load(s) for s in specs])  # as stored


def test_lockstep_sweep_through_a_process_pool(tmp_path):
    specs = [replace(BASE, seed=s) for s in (0, 1, 2)]
    with executor_scope(2) as ex:
        out = sweep(specs, RunCache(tmp_path / "pool"),
                    options=SweepOptions(executor=ex, progress=False, lockstep=True))
    assert_same_runs(sweep(specs, RunCache(tmp_path / "here"), options=SweepOptions(progress=False)), out)


def test_sweep_on_a_dask_cluster(tmp_path):
    distributed = pytest.importorskip("distributed")
    specs = [replace(BASE, seed=s) for s in (0, 1)] + [TRACKED]
    # a scheduler and one worker thread in this process: the real client/scheduler path,
    # started and stopped by the test in a few seconds
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        ex = make_executor(1, cluster.scheduler_address)
        try:
            assert slots(ex) == 1
            out = sweep(specs, RunCache(tmp_path / "dask"),
                        options=SweepOptions(executor=ex, progress=False, lockstep=True))
        finally:
            ex.shutdown()
        assert ex.client.status == "closed"
    assert_same_runs(sweep(specs, RunCache(tmp_path / "here"), options=SweepOptions(progress=False)), out)


# the cache under concurrent writers ---------------------------------------------------------

SPEC = RunSpec("scratch", 0, SMALL_TASK)
RESULT = RunResult("scratch", 0, [dict(phase="finetune", epoch=1, val_acc=0.5)], dict(peak_val_acc=0.5), [],
                   {"final": {"w": torch.arange(50_000, dtype=torch.float32)}}, {})


def _writer(root, barrier, rounds, errors):
    cache = RunCache(root)
    try:
        for _ in range(rounds):
            barrier.wait()
            cache.store(SPEC, RESULT)
            barrier.wait()
    except BaseException as e:  # reported to the parent, which fails the test
        errors.put(repr(e))
        barrier.abort()


def _damage(cache):
    path = cache.path(SPEC) / "weights.pt"
    if path.exists():
        with open(path, "r+b") as f:
            f.seek(200)
            f.write(b"\x00damaged\x00")


@pytest.mark.parametrize("damaged", [False, True])
def test_two_processes_store_the_same_spec(tmp_path, damaged):
    """Both writers store the same entry at the same moment, round after round (with a
    damaged entry in place first, when asked): no error, one sound entry, no debris."""
    ctx = mp.get_context("fork")
    cache, rounds = RunCache(tmp_path), 15
    barrier, errors = ctx.Barrier(3, timeout=60), ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), barrier, rounds, errors)) for _ in range(2)]
    for p in procs:
        p.start()
    try:
        for _ in range(rounds):
            if damaged:
                _damage(cache)
            try:
                barrier.wait()  # both writers go
                barrier.wait()  # both are done
            except threading.BrokenBarrierError:
                pytest.fail(f"a writer failed: {errors.get(timeout=10)}")
            res = cache.load(SPEC)
            assert res is not None and res.history == RESULT.history
            assert torch.equal(res.states["final"]["w"], RESULT.states["final"]["w"])
    finally:
        for p in procs:
            p.join(30)
    assert errors.empty(), errors.get()
    assert [p.exitcode for p in procs] == [0, 0]
    assert not list(tmp_path.rglob(".tmp-*"))
