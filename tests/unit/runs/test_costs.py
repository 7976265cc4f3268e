"""The cost model and the simulation behind the ETA: the prior sees what a run's cost is made
of (trackers, small batches, long test splits, a continued run's own phases only); calibrated
on observed seconds it estimates kinds it has seen; and on a mixed workload with synthetic
timings, the end it forecasts after 10% of the work is within 30% of the actual end."""
import math
import random
from dataclasses import replace

import pytest

import toyspt.runs.costs as costs
import toyspt.runs.pricing as pricing
from toyspt.data.tasks import TaskConfig
from toyspt.runs.costs import CostModel, prior, simulate
from toyspt.runs.specs import RunSpec
from toyspt.train.recipes import TrainConfig


@pytest.fixture(autouse=True)
def sizes_from_configs(monkeypatch):
    """A toy task's sizes from its config (no data generated)."""
    monkeypatch.setattr(pricing, "data_shape", lambda d: (d.n_train, d.n_val, d.n_test, d.T))


BASE = RunSpec("scratch", data=TaskConfig(), evaluate="peak")


def test_the_prior_sees_what_a_run_costs():
    big_test = replace(BASE, data=replace(BASE.data, n_test=20 * BASE.data.n_train))
    assert prior(replace(big_test, evaluate="all")) > 3 * prior(replace(BASE, evaluate="all"))  # long test splits
    assert prior(replace(big_test, evaluate="all")) > 2 * prior(big_test)  # ... measured where "peak" says only
    small = replace(BASE, train=replace(BASE.train, batch_size=8))
    assert prior(small) > 2 * prior(BASE)  # the same tokens in 8x the steps: the fixed cost per step
    probes = replace(BASE, trackers=("probes:every=10,n=128",))
    assert prior(probes) > 1.5 * prior(BASE)  # a float64 probe every 10 steps
    every = replace(BASE, recipe="spt_only", trackers=("beta", "profile:every=1000"))
    some = replace(every, trackers=("beta:at=1/2/3", "profile:every=1000,at=1/2/3"))
    assert prior(every) > prior(some) > prior(replace(every, trackers=()))
    spt = replace(BASE, recipe="spt")  # continues spt_only: its label phase only
    assert prior(spt) == pytest.approx(prior(BASE), rel=0.05)
    assert prior(replace(BASE, recipe="spt", trackers=("beta",))) > prior(spt) * 1.3  # tracked: both phases


def test_calibration_learns_a_kind_and_shrinks_towards_the_levels_above():
    m = CostModel()
    a, b = BASE, replace(BASE, recipe="spt_only")
    assert m.estimate(a) == pytest.approx(prior(a))
    for seed in range(20):  # this machine runs scratch 3x slower than the reference
        m.observe(replace(a, seed=seed), 3 * prior(a))
    assert m.estimate(replace(a, seed=99)) == pytest.approx(3 * prior(a), rel=0.02)
    assert 2.5 * prior(b) < m.estimate(b) < 3 * prior(b)  # another recipe: from the level above
    m.observe(a, None)  # unknown seconds are ignored
    m.observe(a, 0.0)
    assert m.observed() == 20


ERROR = math.log(4 / 3)  # the prior's error per kind of run, unknown to the model: up to 4/3 either way


def _workload(rng: random.Random) -> tuple[list[RunSpec], dict[str, str], dict[str, float], dict[str, int]]:
    """A mixed study: tasks of several lengths, sizes and batch sizes, tracked and untracked
    runs, both policies, runs continuing SPT-only parents; true seconds = the prior x a machine
    factor x a factor per kind of run (unknown to the model) x noise. Returns (specs in the
    sweep's order, the run each continues, true seconds, each spec's figure)."""
    tasks = [TaskConfig(T=T, n_train=n, n_val=n // 4, n_test=n * k) for T, n, k in
             ((32, 3000, 1), (64, 1000, 4), (150, 200, 8), (96, 400, 20), (32, 600, 2), (128, 120, 30))]
    specs, after, figure = [], {}, {}
    for f, task in enumerate(tasks):
        batch = 64 if task.n_train >= 1000 else 8
        base = RunSpec("scratch", data=task, train=TrainConfig(epochs=40, pre_epochs=60, batch_size=batch))
        for seed in range(8):
            s = replace(base, seed=seed)
            own = [s, replace(s, evaluate="peak", recipe="frozen_attention"),
                   replace(s, recipe="spt_only", trackers=("beta:at=1/2/5", "profile:every=1000,at=1/2/5"),
                           evaluate="peak")]
            parent = replace(s, recipe="spt_only")
            for recipe in ("spt", "qk_transfer"):
                child = replace(s, recipe=recipe, evaluate="peak")
                after[child.key()] = parent.key()
                own.append(child)
            own.insert(0, parent)
            if seed < 2:
                own.append(replace(s, trackers=("displacement", "probes:every=100,n=128")))
            for x in own:
                figure[x.key()] = f
            specs += own
    machine = 2.7
    kind = {}
    truth = {}
    for s in specs:
        k = costs.levels(s)[2]
        kind.setdefault(k, math.exp(rng.uniform(-ERROR, ERROR)))
        truth[s.key()] = prior(s) * machine * kind[k] * math.exp(rng.gauss(0, 0.2))
    return specs, after, truth, figure


@pytest.mark.parametrize("seed", range(12))
def test_the_forecast_after_a_tenth_of_the_work_holds_within_30_percent(seed):
    rng = random.Random(seed)
    specs, after, truth, figure = _workload(rng)
    by_key = {s.key(): s for s in specs}
    workers = 2

    def prio(s):  # as the sweep orders them: by figure, then longest first by the estimate it has
        return figure[s.key()], -prior(s)

    actual = simulate(specs, after, lambda s: truth[s.key()], workers, prio)  # what really happens
    end = max(actual.values())
    total = sum(truth.values())
    # the moment a tenth of the work is done: finished runs observed, the running ones known by their start
    order = sorted(actual, key=actual.get)
    done_work, now, finished = 0.0, 0.0, []
    for k in order:
        if done_work >= 0.1 * total:
            break
        done_work += truth[k]
        now = actual[k]
        finished.append(k)
    m = CostModel()
    for k in finished:
        m.observe(by_key[k], truth[k])
    running = [([by_key[k]], now - (actual[k] - truth[k])) for k in actual
               if k not in finished and actual[k] - truth[k] <= now]
    flying = {s.key() for job, _ in running for s in job}
    pending = [s for s in specs if s.key() not in finished and s.key() not in flying]
    left = {k: p for k, p in after.items() if p not in finished}
    forecast = simulate(pending, left, m.estimate, workers, prio, running)
    shown = now + max(forecast.values())
    assert 0.7 * end <= shown <= 1.3 * end, (shown, end)
