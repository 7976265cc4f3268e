"""Figures while the job runs: trained and drawn in the order given (the registry's order of
importance), each figure's runs longest chain first, each figure drawn as soon as its runs are
stored (before another figure's last run ends), in this process and through a process pool;
parents first and the cache as before."""
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from toyspt.figs.schedule import Drawer, Schedule, clock
from toyspt.runs import RunCache, sweep
from toyspt.runs.costs import CostModel
from toyspt.runs.executors import executor_scope
from toyspt.runs.planning import make_plan
from toyspt.runs.specs import Spec
from toyspt.runs.sweeps import SweepOptions
from toyspt.train.run import RunResult


@dataclass(frozen=True)
class Step(Spec):
    """A fake run: sleeps ``sleep`` seconds, logs its start and end (with wall times) to
    ``log``, continues ``after`` (another Step's name) when given."""

    kind: ClassVar[str] = "step"

    name: str
    sleep: float = 0.0
    after: str | None = None
    log: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dict(kind=self.kind, name=self.name, sleep=self.sleep, after=self.after, log=self.log)

    def parent(self):
        return None if self.after is None else Step(self.after, log=self.log)

    def seconds(self) -> float:
        return self.sleep + 0.01

    def execute(self, progress: bool = False, start: RunResult | None = None) -> RunResult:
        if (self.after is None) != (start is None) or (start is not None and start.recipe != self.after):
            raise AssertionError(f"{self.name} started from {start and start.recipe!r}, not {self.after!r}")
        _log(self.log, "start", self.name)
        time.sleep(self.sleep)
        _log(self.log, "end", self.name)
        return RunResult(self.name, 0, [], {"value": 1.0}, [], {}, {})


def _log(path: str, what: str, name: str) -> None:
    if path:
        with open(path, "a") as f:
            f.write(f"{time.time():.6f} {what} {name}\n")


def _events(path: Path) -> list[tuple[float, str, str]]:
    return [(float(t), w, n) for t, w, n in (line.split() for line in path.read_text().splitlines())]


def _run(planned, cache, workers, log=None):
    """The sweep as paper_figs.py runs it: plan, schedule, drawer; returns (drawn labels, drawer)."""
    every = [s for specs in planned.values() for s in specs.values()]
    pl = make_plan(every, cache)
    sched = Schedule(planned, pl, workers)
    drawn = []

    def draw(label, ctx, mod, specs, results):
        assert {s.key() for s in specs.values()} <= set(results)
        drawn.append(label)
        if log is not None:
            _log(str(log), "draw", label)

    drawer = Drawer({k: (None, None, v) for k, v in planned.items()}, draw, sched)
    with executor_scope(workers) as ex:
        sweep(every, cache, on_result=drawer.add, watch=drawer, plan=pl,
              options=SweepOptions(executor=ex, progress=False, desc=drawer.describe, priority=sched.priority))
    return drawn, drawer


def _figures(log: Path):
    """A dear figure (three slow runs) listed first and a cheap one (two quick runs, one
    continuing the other): the dear one must train and be drawn first, as given."""
    L = str(log)
    dear = {f"d{i}": Step(f"d{i}", sleep=0.3 + 0.1 * i, log=L) for i in range(3)}
    cheap = {"c0": Step("c0", log=L), "c1": Step("c1", after="c0", log=L)}
    return {"dear": dear, "cheap": cheap}


@pytest.mark.parametrize("workers", [1, 2])
def test_figures_train_in_the_order_given_and_are_drawn_as_their_runs_arrive(tmp_path, workers):
    log = tmp_path / "events.log"
    planned = {"none": {}, **_figures(log)}
    drawn, drawer = _run(planned, RunCache(tmp_path / "c"), workers, log)
    assert drawn[0] == "none" and sorted(drawn) == sorted(planned) and set(drawer.written) == set(planned)
    ev = _events(log)
    when = {(w, n): t for t, w, n in ev}
    assert when["start", "c1"] >= when["end", "c0"]  # parents first
    starts = [n for _, w, n in ev if w == "start"]
    if workers == 1:  # one at a time: the first figure's runs, longest first, then the next figure's
        assert starts == ["d2", "d1", "d0", "c0", "c1"] and drawn == ["none", "dear", "cheap"]
    else:  # both workers on the first figure's longest runs; the cheap figure fills in where one is free
        assert set(starts[:2]) == {"d2", "d1"} and starts[2] == "d0"  # the two start at once
    assert when["draw", "none"] < min(t for t, w, n in ev if w == "end")  # drawn while the first runs train
    # a warm rerun draws every figure at once and trains nothing
    log.write_text("")
    drawn, _ = _run(planned, RunCache(tmp_path / "c"), workers, log)
    assert drawn == ["none", "dear", "cheap"] and [w for _, w, _ in _events(log)] == ["draw"] * 3


def test_a_figure_is_written_before_the_last_run_of_a_later_one_ends(tmp_path):
    log = tmp_path / "events.log"
    f = _figures(log)
    planned = {"cheap": f["cheap"], "dear": f["dear"]}
    drawn, _ = _run(planned, RunCache(tmp_path / "c"), 2, log)
    ev = _events(log)
    when = {(w, n): t for t, w, n in ev}
    assert drawn == ["cheap", "dear"]
    assert when["draw", "cheap"] < max(t for t, w, n in ev if w == "end" and n.startswith("d"))


def test_longest_chain_first_within_a_figure_and_a_shared_run_counts_for_the_first(tmp_path):
    a, a2 = Step("a"), Step("a2", sleep=3.0, after="a")  # a: 0.01 s, and its child 3 s
    b, c = Step("b", sleep=2.0), Step("c", sleep=5.0)
    planned = {"first": {"a2": a2, "b": b}, "second": {"b": b, "c": c}}
    pl = make_plan([a2, b, b, c], RunCache(tmp_path))
    s = Schedule(planned, pl, workers=1)
    assert s.stage == {a.key(): 0, a2.key(): 0, b.key(): 0, c.key(): 1}
    # a and its child (3.02 s of work) before b (2 s); the second figure's c (5 s) after both
    order = sorted([[a], [b], [c]], key=s.priority)
    assert order == [[a], [b], [c]]
    assert s.needs["first"] == {a.key(), a2.key(), b.key()} and s.needs["second"] == {b.key(), c.key()}


def test_eta_of_the_next_figure_and_of_the_end(tmp_path):
    """Estimates from the specs' hints: one worker runs a, a2, b (0.01 + 3.01 + 2.01 s) for the
    first figure, then c (5.01 s); two workers run a, a2 beside b, then c."""
    a2, b, c = Step("a2", sleep=3.0, after="a"), Step("b", sleep=2.0), Step("c", sleep=5.0)
    planned = {"first": {"a2": a2, "b": b}, "second": {"c": c}}
    t = [100.0]
    for workers, first, end in ((1, 5.03, 10.04), (2, 3.02, 7.02)):
        s = Schedule(planned, make_plan([a2, b, c], RunCache(tmp_path)), workers, CostModel(), now=lambda: t[0])
        nxt, total = s.eta("first")
        assert (nxt, total) == (pytest.approx(first), pytest.approx(end))
        assert s.totals()["runs"] == 4 and s.totals()["cpu_hours"] * 3600 == pytest.approx(10.04)
    s.started([b])  # two workers: b runs, and has run for 1 s
    t[0] += 1.0
    assert s.eta("first")[0] == pytest.approx(3.02)  # a, a2 on the other worker
    assert s.eta("second")[0] == pytest.approx(6.02)  # c where b's worker is free
    s.finished([b], [RunResult("b", 0, [], {}, [], {}, {}, seconds=4.02)])  # twice as slow as thought
    assert s.eta("first")[0] > 3.02  # the estimates of the other step specs moved up
    assert clock(59.6) == "1:00" and clock(3725) == "1:02:05" and clock(None) == "?"


def test_the_registry_is_in_the_order_a_reader_wants():
    from toyspt.cli.figs import select
    from toyspt.figs import CONTRAST, FIGURES, HEADLINE

    main = [n for n in FIGURES if n not in ("task", "lra")]
    assert main[:7] == ["accuracy", "proximity", "ablations", "displacement", "blindness", "basin", "theory"]
    assert main[7:] == ["ucr", "real_data", "real_gain", "archive_scan", "archive_small", "real_gain_splits",
                        "lra_claims", "lra_mechanism", "lra_claims2", "lra_mechanism2"]  # the lra tier last
    assert HEADLINE == main[0]
    assert FIGURES.index("lra") == FIGURES.index("theory") + 1  # after the toy figures, before the real data
    assert list(CONTRAST) == [n for n in FIGURES if n in CONTRAST]
    assert select("ablations,accuracy") == ("accuracy", "ablations")  # --only keeps the order of importance


def test_the_cost_is_printed_before_training(tmp_path):
    from toyspt.figs.job import cost_line

    a2, b, c = Step("a2", sleep=3.0, after="a"), Step("b", sleep=2.0), Step("c", sleep=5.0)
    planned = {"accuracy": {"a2": a2}, "second": {"b": b, "c": c}}
    s = Schedule(planned, make_plan([a2, b, c], RunCache(tmp_path)), 2, CostModel())
    line = cost_line(s, "study")
    assert line.startswith("study tier: 0 runs to train and 4 other entries to compute (0 answered from the cache)")
    assert "0.2 CPU-minutes, 0:05 wall at 2 workers; accuracy in about 0:03 (not calibrated" in line
    assert s.initial["runs"] == 4 and s.initial["cpu_hours"] == pytest.approx(10.04 / 3600, abs=1e-3)
    assert cost_line(s, "default").startswith("plan: ")


def test_a_phase_comes_before_the_figure_order_and_a_deadline_stops_new_jobs(tmp_path):
    """The real-data study's order: a later figure's phase-0 runs train before an earlier
    figure's phase-1 runs; with a deadline already past, the sweep starts nothing, stops, and
    every undrawn figure says how many of its entries are at hand."""
    from toyspt.runs.sweeps import Stopped

    log = tmp_path / "log"
    L = str(log)
    planned = {"first": {"late": Step("late", log=L)}, "second": {"early": Step("early", log=L)}}
    every = [s for specs in planned.values() for s in specs.values()]
    cache = RunCache(tmp_path / "c")
    pl = make_plan(every, cache)
    sched = Schedule(planned, pl, 1, phase={planned["first"]["late"].key(): 1})
    order = sorted(pl.todo, key=lambda s: sched.priority([s]))
    assert [s.name for s in order] == ["early", "late"]
    drawer = Drawer({k: (None, None, v) for k, v in planned.items()}, lambda *a: None, sched, deadline=0.0)
    with pytest.raises(Stopped) as e:
        sweep(every, cache, on_result=drawer.add, watch=drawer, plan=pl,
              options=SweepOptions(progress=False, priority=sched.priority))
    assert {s.name for s in e.value.left} == {"early", "late"} and not log.exists()
    assert drawer.progress() == {"first": (0, 1), "second": (0, 1)}


@pytest.mark.parametrize("text,seconds", [("2h", 7200), ("90m", 5400), ("1h30m", 5400), ("45s", 45)])
def test_budgets_parse(text, seconds):
    from toyspt.cli.figs import duration

    assert duration(text) == seconds


@pytest.mark.parametrize("text", ["", "0h", "2 h", "1.5h", "h", "٢h", "-1h"])
def test_bad_budgets_are_refused(text):
    import argparse

    from toyspt.cli.figs import duration

    with pytest.raises(argparse.ArgumentTypeError, match="budget|duration"):
        duration(text)
