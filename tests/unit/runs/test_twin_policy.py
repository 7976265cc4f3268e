"""A tracked run answers only for the untracked twin of its own evaluation policy (a run with a
label phase), or for the "all" twin (an SPT-only run, which evaluates nothing): never for a
twin evaluated otherwise, whose summary it did not measure."""
from dataclasses import replace

import pytest

from toyspt.runs.specs import RunSpec


@pytest.mark.parametrize("policy", ["all", "peak"])
def test_a_tracked_label_run_answers_for_its_own_policy_only(policy):
    tracked = RunSpec("spt", seed=1, trackers=("beta",), evaluate=policy)
    own = replace(tracked, trackers=(), evaluate=policy)
    other = replace(tracked, trackers=(), evaluate="peak" if policy == "all" else "all")
    assert tracked.twins() == [own]
    assert own.key() in {t.key() for t in tracked.twins()} and other.key() not in {t.key() for t in tracked.twins()}
    with pytest.raises(ValueError, match="is not a twin"):
        tracked.twin_result(other, None)


def test_a_tracked_spt_only_run_answers_for_the_all_policy():
    tracked = RunSpec("spt_only", seed=2, trackers=("beta",), evaluate="peak")
    assert tracked.twins() == [replace(tracked, trackers=(), evaluate="all")]
    assert RunSpec("spt", seed=2).twins() == []  # untracked: answers for no one
