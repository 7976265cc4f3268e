"""The headline claims of the README, re-measured (long: run with ``pytest -m slow``)."""
import pytest

from toyspt.analysis.tables import default_columns, rows
from toyspt.runs import RunCache, RunSpec
from toyspt.runs.arms import arm_specs
from toyspt.runs.sweeps import SweepOptions, sweep


@pytest.mark.slow
def test_spt_beats_scratch_by_eight_points_over_five_seeds():
    """Default task, 5 seeds: SPT beats scratch (same label epochs) by >= 8 points in mean test
    accuracy at peak validation and in mean final training accuracy; scratch_matched stays
    below SPT. Uses the default run cache, so it is fast once paper_figs.py has run."""
    labelled = arm_specs(["scratch", "spt", "scratch_matched"], range(5), RunSpec("scratch"))
    results = sweep([s for _, s in labelled], RunCache(), SweepOptions(lockstep=True, desc="compare"))
    f = rows(labelled, results, columns=default_columns())
    mean = f.groupby("arm")[["test_at_peak", "final_train_acc"]].mean()
    assert mean.loc["spt", "test_at_peak"] - mean.loc["scratch", "test_at_peak"] >= 0.08
    assert mean.loc["spt", "final_train_acc"] - mean.loc["scratch", "final_train_acc"] >= 0.08
    assert mean.loc["scratch_matched", "test_at_peak"] < mean.loc["spt", "test_at_peak"]
