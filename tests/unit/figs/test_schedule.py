"""Figures while the job runs: cheapest figure first, each drawn as soon as its runs are
stored (before another figure's last run ends), in this process and through a process pool;
parents first and the cache as before."""
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from toyspt.figs.schedule import Drawer, order
from toyspt.runs import RunCache, sweep
from toyspt.runs.executors import executor_scope
from toyspt.runs.specs import Spec
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

    def execute(self, progress: bool = False, start: RunResult | None = None) -> RunResult:
        if (self.after is None) != (start is None) or (start is not None and start.recipe != self.after):
            raise AssertionError(f"{self.name} started from {start and start.recipe!r}, not {self.after!r}")
        _log(self.log, "start", self.name)
        time.sleep(self.sleep)
        _log(self.log, "end", self.name)
        return RunResult(self.name, 0, [], {"value": 1.0}, [], {}, {})


def _log(path: str, what: str, name: str) -> None:
    with open(path, "a") as f:
        f.write(f"{time.time():.6f} {what} {name}\n")


def _events(path: Path) -> list[tuple[float, str, str]]:
    return [(float(t), w, n) for t, w, n in (line.split() for line in path.read_text().splitlines())]


def _figures(log: Path):
    """A cheap figure (two quick runs, one continuing the other) and a dear one (three slow
    runs): the dear one is listed first, the schedule must still train the cheap one first."""
    L = str(log)
    dear = {f"d{i}": Step(f"d{i}", sleep=0.6, log=L) for i in range(3)}
    cheap = {"c0": Step("c0", log=L), "c1": Step("c1", after="c0", log=L)}
    return {"dear": dear, "cheap": cheap}


@pytest.mark.parametrize("workers", [1, 2])
def test_a_figure_is_written_before_the_last_run_of_another_ends(tmp_path, monkeypatch, workers):

    log = tmp_path / "events.log"
    planned = _figures(log)
    monkeypatch.setattr(Step, "cost", lambda s: s.sleep + 0.01)  # the fake runs' cost
    labels, charges = order(planned, lambda s: False)
    assert labels == ["cheap", "dear"]
    drawn = []

    def draw(label, ctx, mod, specs, results):
        assert {s.key() for s in specs.values()} <= set(results)
        drawn.append(label)
        _log(str(log), "draw", label)

    drawer = Drawer({k: (None, None, planned[k]) for k in labels}, draw, charges)
    assert drawer.describe().startswith("training cheap (1/2 figures")
    with executor_scope(workers) as ex:
        sweep([s for k in labels for s in planned[k].values()], RunCache(tmp_path / "c"), executor=ex,
              progress=False, desc=drawer.describe, on_result=drawer.add)
    assert drawn == ["cheap", "dear"] and set(drawer.written) == {"cheap", "dear"}
    ev = _events(log)
    when = {(w, n): t for t, w, n in ev}
    assert when["start", "c1"] >= when["end", "c0"]  # parents first
    last_dear_end = max(t for t, w, n in ev if w == "end" and n.startswith("d"))
    assert when["draw", "cheap"] < last_dear_end  # drawn while the dear figure still trains
    if workers == 1:  # one at a time: the released child goes before the dear runs queued earlier
        assert when["draw", "cheap"] < min(t for t, w, n in ev if w == "start" and n.startswith("d"))
    # a warm rerun draws both at once and trains nothing
    log.write_text("")
    drawn.clear()
    drawer = Drawer({k: (None, None, planned[k]) for k in labels}, draw, charges)
    sweep([s for k in labels for s in planned[k].values()], RunCache(tmp_path / "c"), progress=False,
          on_result=drawer.add)
    assert drawn == ["cheap", "dear"] and [w for _, w, _ in _events(log)] == ["draw", "draw"]


def test_order_charges_shared_and_cached_runs_once(monkeypatch):
    a, b, c, p = (Step(n) for n in "abcp")
    child = Step("x", after="p")
    costs = dict(a=5.0, b=1.0, c=2.0, p=4.0, x=1.0)
    monkeypatch.setattr(Step, "cost", lambda s: costs[s.name])
    planned = {"one": {"a": a, "b": b}, "two": {"b": b, "c": c}, "three": {"x": child}, "none": {}}
    labels, charges = order(planned, lambda s: s.name == "c")  # c is cached
    # one 6, two 1 (c cached) -> two first, then one costs 5 (b charged), three 5 (x + p)
    assert labels == ["none", "two", "one", "three"]
    assert charges["two"] == {b.key(): 1.0, c.key(): 0.0}
    assert charges["one"] == {a.key(): 5.0, b.key(): 0.0}
    assert charges["three"] == {child.key(): 5.0}  # its parent charged to the spec needing it


def test_run_cost_counts_own_phases_only():  # Spec.cost of a run
    from dataclasses import replace

    from toyspt.runs import RunSpec
    from toyspt.train.recipes import TrainConfig

    base = RunSpec("scratch", train=TrainConfig(epochs=6, pre_epochs=2))
    scratch, spt_only, spt = (replace(base, recipe=r) for r in ("scratch", "spt_only", "spt"))
    assert spt.parent() == replace(spt_only, evaluate="all")
    unit = base.data.n_train * base.data.T * base.model.n_layers * base.model.d_model
    assert (scratch.cost(), spt_only.cost(), spt.cost()) == (6 * unit, 2 * unit, 6 * unit)
    matched = replace(base, recipe="scratch_matched")  # 8 label epochs, continuing scratch's 6
    assert matched.parent() == scratch and matched.cost() == 2 * unit
    assert Spec.cost(Step("z")) == 0.0  # no training loop known: nothing
