"""The store protocol and the layered store: read from the first layer that has an entry (and
written to the later layers that cover it and lack it), written to every layer that covers it,
each answer named by its layer; a sweep takes any store."""
from dataclasses import replace

import pytest

from tests.conftest import SMALL_TASK
from toyspt.runs import RunCache, RunSpec, sweep
from toyspt.runs.ledger import Ledger, StudyLedger, WeightsNotKept
from toyspt.runs.planning import make_plan
from toyspt.runs.store import LayeredStore, Store
from toyspt.runs.sweeps import SweepOptions
from toyspt.train.recipes import TrainConfig

SPEC = RunSpec("scratch", 0, SMALL_TASK, train=TrainConfig(epochs=1, batch_size=64))
QUIET = SweepOptions(progress=False)


def toy_ledger(path, **kw):
    return Ledger(path, kinds=("toy",), warn=kw.pop("warn", lambda m: None), **kw)


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """A cache and a ledger after one sweep of two runs through both."""
    root = tmp_path_factory.mktemp("store")
    specs = [SPEC, replace(SPEC, seed=1)]
    results = sweep(specs, LayeredStore((RunCache(root / "cache"), toy_ledger(root / "l.jsonl"))), QUIET)
    return root, specs, results


def test_the_cache_and_the_ledger_are_stores():
    assert isinstance(RunCache("x"), Store) and isinstance(toy_ledger("l.jsonl"), Store)
    assert RunCache("x").keeps_weights and not toy_ledger("l.jsonl").keeps_weights
    with pytest.raises(TypeError, match="made of stores"):
        LayeredStore((RunCache("x"), "figures/ledger/ucr.jsonl"))


def test_a_sweep_writes_every_layer_that_covers_the_entry(stored, tmp_path):
    root, specs, _ = stored
    assert {s.key() for s in specs} == set(toy_ledger(root / "l.jsonl").lines())
    assert all(RunCache(root / "cache").load(s) is not None for s in specs)
    other = Ledger(tmp_path / "ucr.jsonl", kinds=("ucr",))  # covers other data: nothing written there
    sweep(specs, LayeredStore((RunCache(root / "cache"), other)), QUIET)
    assert not (tmp_path / "ucr.jsonl").exists()


def test_the_first_layer_that_has_an_entry_answers_and_says_so(stored, tmp_path):
    root, specs, results = stored
    store = LayeredStore((RunCache(tmp_path / "empty"), toy_ledger(root / "l.jsonl")))
    got = sweep(specs, store, QUIET)
    assert [g.summary for g in got] == [r.summary for r in results]
    assert store.answered == {s.key(): "ledger" for s in specs} and isinstance(got[0].states, WeightsNotKept)
    assert store.load(specs[0], weights=True) is None  # a record has no weights: a child retrains its parent
    cached = LayeredStore((RunCache(root / "cache"), toy_ledger(root / "l.jsonl")))
    assert cached.load(specs[0]) is not None and cached.answered == {specs[0].key(): "cache"}


def test_an_entry_read_from_the_cache_is_recorded_where_the_ledger_lacks_it(stored, tmp_path):
    root, specs, _ = stored
    store = LayeredStore((RunCache(root / "cache"), toy_ledger(tmp_path / "new.jsonl")))
    make_plan(specs, store)
    assert set(toy_ledger(tmp_path / "new.jsonl").lines()) == {s.key() for s in specs}


def test_removed_entries_answer_nowhere_and_the_record_stays(stored, tmp_path):
    root, specs, _ = stored
    led = toy_ledger(root / "l.jsonl")
    store = LayeredStore((RunCache(tmp_path / "c"), led))
    store.remove(specs[0])
    assert store.load(specs[0]) is None and store.load(specs[1]) is not None
    assert specs[0].key() in led.lines()  # the file is not rewritten
    plan = make_plan(specs, store, recompute=True)
    assert [s.key() for s in plan.todo] == [s.key() for s in specs]


def test_a_store_without_weights_cannot_take_runs_from_workers(tmp_path):
    with pytest.raises(ValueError, match="keeps no weights"):
        sweep([replace(SPEC, seed=7)], toy_ledger(tmp_path / "l.jsonl"), SweepOptions(progress=False, workers=2))


def test_a_study_declares_its_ledger():
    study = StudyLedger("figures/ledger/lra.jsonl", kinds=("pathfinder", "listops"))
    led = study.open(tier="study")
    assert (str(led.path), led.kinds, led.tier) == ("figures/ledger/lra.jsonl", ("pathfinder", "listops"), "study")
    assert not led.covers(SPEC) and study.open("elsewhere.jsonl").path.name == "elsewhere.jsonl"
