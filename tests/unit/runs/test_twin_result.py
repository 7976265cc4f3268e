"""The entry a tracked run stores for its untracked twin names the twin's own evaluation policy
(an SPT-only run tracked under "peak" answers for the "all" twin, and says "all"), carries no
tracker records and no seconds of its own; a spec of another policy is refused."""
from dataclasses import replace

import pytest

from toyspt.runs.specs import RunSpec
from toyspt.train.run import RunResult


def _result(policy):
    return RunResult("spt_only", 2, [{"epoch": 1}], {"x": 1.0}, [{"metric": "beta"}], {}, {"evaluate": policy}, 3.0)


def test_the_twin_entry_carries_the_twins_policy_and_nothing_tracked():
    tracked = RunSpec("spt_only", seed=2, trackers=("beta",), evaluate="peak")
    (twin,) = tracked.twins()
    r = tracked.twin_result(twin, _result("peak"))
    assert twin.evaluate == "all" and r.config["evaluate"] == "all"
    assert r.records == [] and r.seconds is None and r.history == [{"epoch": 1}]
    with pytest.raises(ValueError, match="is not a twin"):
        tracked.twin_result(replace(twin, evaluate="peak"), _result("peak"))
