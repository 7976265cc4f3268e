import concurrent.futures as cf
import json
from dataclasses import replace

import pytest
import torch

from toyspt.runs.arms import arm_spec, default_swap
from toyspt.runs import RunCache, RunSpec, get_run, spec_from_dict, sweep, with_overrides
from toyspt.train.recipes import TrainConfig

from conftest import SMALL_TASK

BASE = RunSpec("scratch", 0, SMALL_TASK, train=TrainConfig(epochs=1, pre_epochs=1, batch_size=64))


@pytest.fixture
def counted(monkeypatch):
    """Count the runs that really train."""
    calls = []
    real = RunSpec.execute

    def spy(spec, progress=False):
        calls.append(spec.key())
        return real(spec, progress)

    monkeypatch.setattr(RunSpec, "execute", spy)
    return calls


def test_key_is_stable_and_sensitive():
    assert BASE.key() == RunSpec("scratch", 0, SMALL_TASK, train=BASE.train).key()
    assert BASE.key() != replace(BASE, seed=1).key()
    assert BASE.key() != with_overrides(BASE, model__pos="alibi").key()
    assert spec_from_dict(json.loads(json.dumps(BASE.to_dict()))) == BASE


def test_second_call_trains_nothing(tmp_path, counted):
    cache = RunCache(tmp_path)
    a = get_run(BASE, cache)
    b = get_run(BASE, cache)
    assert len(counted) == 1
    assert a.history == b.history and a.summary == b.summary
    for k, v in a.states["final"].items():
        assert torch.equal(v, b.states["final"][k])


def test_corrupted_entry_is_recomputed(tmp_path, counted):
    cache = RunCache(tmp_path)
    get_run(BASE, cache)
    path = cache.path(BASE)
    with open(path / "weights.pt", "r+b") as f:  # flip bytes in the middle of the weights
        f.seek(100)
        f.write(b"\x00garbage\x00")
    assert cache.load(BASE) is None and not path.exists()
    get_run(BASE, cache)
    assert len(counted) == 2 and cache.load(BASE) is not None
    (cache.path(BASE) / "result.json").unlink()  # a missing file counts as damage too
    assert cache.load(BASE) is None


def test_killed_sweep_resumes_without_redoing_finished_runs(tmp_path, counted, monkeypatch):
    cache = RunCache(tmp_path)
    specs = [replace(BASE, seed=s) for s in range(3)]
    real = RunSpec.execute

    def dies_on_third(spec, progress=False):
        if spec.seed == 2:
            raise KeyboardInterrupt  # the process is killed half way through the sweep
        return real(spec, progress)

    monkeypatch.setattr(RunSpec, "execute", dies_on_third)
    with pytest.raises(KeyboardInterrupt):
        sweep(specs, cache, progress=False)
    assert [cache.has(s) for s in specs] == [True, True, False]
    assert not list(tmp_path.rglob(".tmp-*"))  # nothing half-written stays
    monkeypatch.setattr(RunSpec, "execute", real)
    counted.clear()
    calls = []
    monkeypatch.setattr(RunSpec, "execute", lambda spec, progress=False: calls.append(spec.seed) or real(spec))
    out = sweep(specs, cache, progress=False)
    assert calls == [2] and [r.seed for r in out] == [0, 1, 2]


def test_sweep_through_a_process_pool(tmp_path):
    cache = RunCache(tmp_path)
    specs = [replace(BASE, seed=s) for s in range(2)]
    with cf.ProcessPoolExecutor(2) as ex:
        out = sweep(specs, cache, executor=ex, progress=False)
    inline = get_run(specs[1], RunCache(tmp_path / "other"))
    assert out[1].history == inline.history  # same seed, same numbers in another process


def test_arm_parsing():
    s = arm_spec("scratch:pos=alibi,train.lr=0.01", BASE)
    assert s.recipe == "scratch" and s.model.pos == "alibi" and s.train.lr == 0.01
    assert arm_spec("alibi", BASE).model.pos == "alibi"
    d = arm_spec("data_swap", BASE)
    assert d.swap_task == default_swap(BASE.task) and d.swap_task.family == "freq_band"
    assert arm_spec("data_swap:swap.seed=42", BASE).swap_task.seed == 42
    assert arm_spec("spt:band0=1/2", BASE).task.band0 == (1, 2)
    with pytest.raises(ValueError, match="unknown recipe"):
        arm_spec("pretrain", BASE)
    with pytest.raises(ValueError, match="cannot place"):
        arm_spec("scratch:nonsense=1", BASE)
    with pytest.raises(ValueError, match="key=value"):
        arm_spec("scratch:pos", BASE)
    with pytest.raises(ValueError, match="swap"):
        arm_spec("spt:swap.seed=1", BASE)
