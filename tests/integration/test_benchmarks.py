"""The benchmark scripts' own arithmetic: benchmarks/cache_compute.py sets each group's timed
seconds beside the cost model's prior for the same runs, and leaves untimed entries out of the ratio."""
import importlib.util
import json
from pathlib import Path

import pytest
from conftest import SMALL_TASK

from toyspt.runs import RunCache, RunSpec, get_run
from toyspt.runs.costs import prior
from toyspt.train.recipes import TrainConfig

ROOT = Path(__file__).resolve().parents[2]


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_cache_compute_sets_timed_seconds_beside_their_prior(tmp_path, capsys):
    cc = _script("cache_compute")
    cache = RunCache(tmp_path)
    train = TrainConfig(epochs=1, pre_epochs=1, batch_size=64)
    runs = [RunSpec("scratch", seed, SMALL_TASK, train=train, evaluate="peak") for seed in (0, 1)]
    for spec in runs:
        get_run(spec, cache)
    seconds = [json.loads((cache.path(s) / "result.json").read_text())["seconds"] for s in runs]
    assert all(x > 0 for x in seconds)
    untimed = RunSpec("scratch", 2, SMALL_TASK, train=train, evaluate="peak")
    get_run(untimed, cache)
    result = cache.path(untimed) / "result.json"
    result.write_text(json.dumps({**json.loads(result.read_text()), "seconds": None}))  # as a twin's copy is stored
    (group, (n, total, pri)), = cc.tally(tmp_path).items()
    assert group == ("toy", "scratch", "-", "peak") and n == 3
    assert total == pytest.approx(sum(seconds), rel=1e-12)
    assert pri == pytest.approx(sum(prior(s) for s in runs), rel=1e-12)  # the untimed run's prior left out
    assert cc.main(["--cache", str(tmp_path)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("toy"))
    assert line.split()[-1] == f"{sum(seconds) / pri:.2f}"
