"""Planning a sweep (toyspt.runs.planning): what must train before an asked spec is answered."""
from dataclasses import replace

from tests.conftest import SMALL_TASK
from toyspt.runs import RunCache, RunSpec, sweep
from toyspt.runs.ledger import Ledger, WeightsNotKept
from toyspt.runs.planning import make_plan
from toyspt.runs.store import LayeredStore
from toyspt.runs.sweeps import SweepOptions
from toyspt.train.recipes import TrainConfig

SPEC = RunSpec("scratch", 0, SMALL_TASK, train=TrainConfig(epochs=1, batch_size=64))


def test_an_answer_at_hand_waits_for_no_tracked_twin(tmp_path):
    """A run recorded in a ledger, asked beside its tracked twin (a twin's run stores the untracked
    run's entry too): the twin trains, since it is asked, but the run's answer is at hand, so
    nothing must train before it (a figure of the run is not held back by the twin, and the
    twin is not moved up to the run's place in the order)."""
    led = Ledger(tmp_path / "l.jsonl", kinds=("toy",), warn=lambda m: None)
    sweep([SPEC], LayeredStore((RunCache(tmp_path / "a"), led)), SweepOptions(progress=False))
    twin = replace(SPEC, trackers=("displacement",))
    assert SPEC in twin.twins()
    plan = make_plan([SPEC, twin], LayeredStore((RunCache(tmp_path / "empty"), led)))
    assert [s.key() for s in plan.todo] == [twin.key()] and SPEC.key() in plan.done
    assert plan.needs(SPEC) == [] and [s.key() for s in plan.needs(twin)] == [twin.key()]
    fresh = make_plan([SPEC, twin], RunCache(tmp_path / "empty2"))  # nothing at hand: the twin answers both
    assert [s.key() for s in fresh.needs(SPEC)] == [twin.key()]


def test_a_parent_only_a_ledger_records_is_trained_again_before_its_child(tmp_path):
    """A run asked beside a child that continues it (scratch_matched continues scratch), the run
    recorded in a ledger and the cache empty (a fresh machine): the record answers the run, but
    a child needs its parent's weights, so the parent trains first and the child waits for it;
    the sweep then completes, through workers too (they read the parent from the cache)."""
    led = Ledger(tmp_path / "l.jsonl", kinds=("toy",), warn=lambda m: None)
    sweep([SPEC], LayeredStore((RunCache(tmp_path / "a"), led)), SweepOptions(progress=False))
    child = replace(SPEC, recipe="scratch_matched")
    assert child.parent().key() == SPEC.key()
    store = LayeredStore((RunCache(tmp_path / "fresh"), led))
    plan = make_plan([SPEC, child], store)
    assert isinstance(plan.done[SPEC.key()].states, WeightsNotKept)  # answered by the record
    assert [s.key() for s in plan.todo] == [SPEC.key(), child.key()]
    assert plan.after == {child.key(): SPEC.key()}
    got = sweep([SPEC, child], store, SweepOptions(progress=False, workers=2))
    assert got[1].summary and RunCache(tmp_path / "fresh").load(SPEC, weights=True) is not None


def test_a_tracked_run_claims_no_every_epoch_alternative_of_its_twin(tmp_path):
    """A tracked run evaluated at its peak yields its untracked twin of that policy, never the
    twin's every-epoch alternative (``evaluate="all"``): it did not measure every epoch, so the
    untracked "all" run asked beside it is answered by itself and trains itself."""
    tracked = replace(SPEC, recipe="spt", trackers=("displacement",), evaluate="peak")
    twin, every = replace(tracked, trackers=()), replace(tracked, trackers=(), evaluate="all")
    assert tracked.twins() == [twin] and twin.alternatives() == [every]
    plan = make_plan([tracked, every, twin], RunCache(tmp_path / "empty"))
    assert plan.answer[every.key()] == every and plan.producer(every.key()) == every
    assert plan.answer[twin.key()] == twin and plan.producer(twin.key()) == tracked
    assert {tracked.key(), every.key()} <= {s.key() for s in plan.todo}
    assert [s.key() for s in plan.needs(every)][0] == every.key()
