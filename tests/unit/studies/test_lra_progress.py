"""The LRA study's progress (toyspt.studies.lra_progress) from planted ledger lines: runs and their
SPT-only parents counted once, whole seeds, measured seconds per group, and the remaining cost
from the measured means only (a group with nothing measured counted apart)."""
from types import SimpleNamespace

import pytest

from toyspt.runs.ledger_file import Line
from toyspt.studies.lra_design import Study
from toyspt.studies.lra_progress import entries, progress


def _ledger(recorded: dict[str, float]):
    lines = {k: Line(i + 1, dict(seconds=s, cpu="planted cpu")) for i, (k, s) in enumerate(recorded.items())}
    return SimpleNamespace(path="planted.jsonl", lines=lambda: lines)


def test_progress_counts_entries_seeds_and_the_remaining_cost():
    study = Study.for_tier("lra", quick=True, seeds=(0, 1))
    every = entries(study)
    groups = {g for g, _ in every.values()}
    assert {"listops/spt_only", "listops/spt_only_mask50", "image/depth2_spt_only", "image/spt"} <= groups
    assert len(every) == len({s.key() for s in study.specs().values()} | set(every))  # each entry once
    seed0 = {k: 10.0 for k, (g, s) in every.items() if s.seed == 0}
    seed0[next(k for k, (g, s) in every.items() if g == "pathfinder/scratch" and s.seed == 1)] = 30.0
    p = progress(_ledger(seed0), study)
    assert p["whole_seeds"] == [0] and p["n_whole_seeds"] == 1 and p["hosts"] == ["planted cpu"]
    assert p["records_by_host"] == {"planted cpu": len(seed0)}
    assert p["recorded"] == len(seed0) and p["entries"] == len(every) and p["runs"] == len(study.specs())
    assert p["cpu_seconds"] == pytest.approx(10.0 * (len(seed0) - 1) + 30.0)
    assert p["groups"]["pathfinder/scratch"]["mean_seconds"] == pytest.approx(20.0)
    want = sum((g["planned"] - g["recorded"]) * g["mean_seconds"] for g in p["groups"].values())
    assert p["remaining_cpu_hours"] * 3600 == pytest.approx(want) and p["unmeasured_entries"] == 0
    twins, untracked = study.mechanism(), study.specs()
    assert p["twins"]["planned"] == len(twins) and p["twins"]["recorded"] == 0
    of_runs = [k for k in twins if k in untracked]  # the rest: cause arms' twins, of no study run, not measured
    floor = sum(p["groups"][f"{t}/{a}"]["mean_seconds"] + (p["groups"][g]["mean_seconds"] if (
        par := untracked[t, a, s].parent()) is not None and (g := every[par.key()][0]) else 0.0) for t, a, s in of_runs)
    assert p["twins"]["remaining_cpu_hours_at_least"] * 3600 == pytest.approx(floor)
    assert p["twins"]["unmeasured"] == len(twins) - len(of_runs) > 0
    done = {**seed0, twins["image", "spt", 0].key(): 40.0}
    assert progress(_ledger(done), study)["twins"] == dict(
        planned=len(twins), recorded=1, cpu_hours=pytest.approx(40.0 / 3600),
        remaining_cpu_hours_at_least=pytest.approx((floor - 20.0) / 3600), unmeasured=len(twins) - len(of_runs))
    only = {k: 5.0 for k, (g, s) in every.items() if g == "image/scratch"}
    q = progress(_ledger(only), study)
    assert q["unmeasured_entries"] == len(every) - len(only) and q["remaining_cpu_hours"] == 0.0
    assert q["whole_seeds"] == [] and q["twins"]["unmeasured"] == len(twins) - 2  # image/scratch at seeds 0 and 1


def test_the_second_study_is_counted_apart_with_its_spt_only_parents():
    study = Study.for_tier("lra", quick=True, seeds=(0, 1))
    two = study.second()
    every = entries(study, two)
    parents = {k for k, (g, s) in every.items() if s.recipe == "spt_only"}
    assert len(every) == len(two) + len(parents)
    assert {g for g, _ in every.values()} >= {"image/spt_only", "listops/qk_transfer"}
    seed0 = {k: 4.0 for k, (g, s) in every.items() if s.seed == 0}
    p = progress(_ledger(seed0), study)["second"]
    assert p["runs"] == len(two) and p["entries"] == len(every) and p["recorded"] == len(seed0)
    assert p["whole_seeds"] == [0] and p["cpu_seconds"] == pytest.approx(4.0 * len(seed0))
    assert p["recorded_runs"] == sum(1 for s in two.values() if s.seed == 0)
    assert p["remaining_cpu_hours"] * 3600 == pytest.approx(4.0 * (len(every) - len(seed0)))
    twins = study.mechanism(2)  # every run at the mechanism's seeds, tracked: priced as its run and SPT parent
    assert len(twins) == sum(1 for k in two if k[2] in (0, 1, 2)) and p["twins"]["recorded"] == 0
    floor = sum(4.0 * (1 + (two[k].parent() is not None)) for k in twins)
    assert p["twins"]["remaining_cpu_hours_at_least"] * 3600 == pytest.approx(floor) and p["twins"]["unmeasured"] == 0
    with pytest.raises(ValueError, match="study: 1 or 2, got 3"):
        study.mechanism(3)


def test_a_missing_ledger_is_one_error_line(tmp_path, capsys):
    from toyspt.cli.main import main

    assert main(["study", "progress", "lra", "--ledger", str(tmp_path / "none.jsonl")]) == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_the_command_prints_the_progress_and_writes_its_json(tmp_path, capsys):
    import json

    from toyspt.cli.main import main

    assert main(["study", "progress", "lra", "--json", str(tmp_path / "p.json")]) == 0
    out = json.loads((tmp_path / "p.json").read_text())
    assert capsys.readouterr().out.startswith(f"{out['recorded_runs']} of {out['runs']} runs recorded")


def test_the_committed_status_is_what_the_committed_ledger_gives():
    """figures/studies/lra/progress.json (quoted by docs/reports/lra.md's Status) is the progress of
    figures/ledger/lra.jsonl."""
    import json
    from pathlib import Path

    from toyspt.studies.lra_design import LEDGER

    root = Path(__file__).resolve().parents[3]
    ledger = LEDGER.open(root / LEDGER.path, warn=lambda m: None)
    want = json.loads(json.dumps(Study.for_tier("lra").progress(ledger)))
    want["ledger"] = str(LEDGER.path)
    assert json.loads((root / "figures" / "studies" / "lra" / "progress.json").read_text()) == want
