"""The LRA study's progress counts exactly (toyspt.studies.lra_progress): a ledger recording every
entry leaves nothing missing; one recorded entry fewer leaves exactly that one missing, costed at its
group's mean; a run recorded as its every-epoch alternative (``evaluate="all"``) counts as recorded;
and the pre-registered seeds per task and arm (toyspt.studies.lra_design)."""
from types import SimpleNamespace

import pytest

from toyspt.runs.ledger_file import Line
from toyspt.studies.lra_design import CONFIRMATORY_ARMS, TASKS, Study, study_specs
from toyspt.studies.lra_progress import entries, progress


def _ledger(recorded: dict[str, float]):
    lines = {k: Line(i + 1, dict(seconds=s, cpu="planted cpu")) for i, (k, s) in enumerate(recorded.items())}
    return SimpleNamespace(path="planted.jsonl", lines=lambda: lines)


@pytest.fixture(scope="module")
def study():
    return Study.for_tier("lra", quick=True, seeds=(0, 1))


def test_a_ledger_of_every_entry_leaves_nothing_missing(study):
    every = entries(study)
    p = progress(_ledger({k: 10.0 for k in every}), study)
    assert p["recorded"] == p["entries"] == len(every) and p["recorded_runs"] == p["runs"] == len(study.specs())
    assert all(g["planned"] == g["recorded"] > 0 for g in p["groups"].values())
    assert sum(g["planned"] for g in p["groups"].values()) == len(every)
    assert p["remaining_cpu_hours"] == 0.0 and p["unmeasured_entries"] == 0
    assert p["whole_seeds"] == [0, 1] and p["n_whole_seeds"] == 2


def test_one_entry_short_is_one_missing_entry_of_its_group(study):
    every = entries(study)
    drop = next(k for k, (g, s) in every.items() if g == "image/spt" and s.seed == 1)
    seconds = {k: (7.0 if g == "image/spt" else 10.0) for k, (g, _) in every.items() if k != drop}
    p = progress(_ledger(seconds), study)
    g = p["groups"]["image/spt"]
    assert (g["planned"], g["recorded"]) == (2, 1) and g["mean_seconds"] == 7.0
    assert [name for name, v in p["groups"].items() if v["planned"] != v["recorded"]] == ["image/spt"]
    assert p["recorded"] == len(every) - 1 and p["remaining_cpu_hours"] * 3600 == pytest.approx(7.0)
    assert p["unmeasured_entries"] == 0 and p["whole_seeds"] == [0]


def test_a_run_recorded_as_its_every_epoch_alternative_is_recorded(study):
    every = entries(study)
    alt = {}
    for k, (_, s) in every.items():
        others = s.alternatives()
        alt[others[0].key() if others else k] = 10.0
    assert any(k not in every for k in alt)  # some entries are recorded under their alternative's key
    p = progress(_ledger(alt), study)
    assert p["recorded"] == len(every) and p["remaining_cpu_hours"] == 0.0 and p["unmeasured_entries"] == 0
    assert all(g["planned"] == g["recorded"] for g in p["groups"].values())
    assert p["whole_seeds"] == [0, 1]


def test_the_preregistered_seeds_per_task_and_arm():
    """ListOps' main arms (scratch, spt, qk_transfer) at seeds 0-9; PathFinder's and the image
    task's at 0-19; every other arm at 0-9."""
    assert TASKS["listops"].main_seeds == tuple(range(10))
    assert TASKS["pathfinder"].main_seeds == TASKS["image"].main_seeds == tuple(range(20))
    seeds: dict = {}
    for label in study_specs():
        task, arm, seed = label.split("/")
        seeds.setdefault((task, arm), set()).add(int(seed))
    for (task, arm), s in seeds.items():
        main = arm in ("scratch", "spt", "qk_transfer")
        want = set(range(20)) if main and task in ("pathfinder", "image") else set(range(10))
        assert s == want, (task, arm, sorted(s))
    assert {a for t, a in seeds if t == "listops"} >= {"scratch", "spt", "qk_transfer", *CONFIRMATORY_ARMS}
