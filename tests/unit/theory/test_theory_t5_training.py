"""T5: measured training figures through the run cache, on a tiny configuration."""
import math

import pytest

from toyspt.theory import t5_training as t5
from toyspt.nn.model import ModelConfig
from toyspt.runs import RunCache
from toyspt.data.tasks import TaskConfig
from toyspt.train.recipes import TrainConfig

TINY = t5.T5Config(TaskConfig(T=16, n_train=64, n_val=32, n_test=32, seed=5),
                   ModelConfig(d_model=16, d_mlp=32), TrainConfig(epochs=1, pre_epochs=1, batch_size=32),
                   (0,), ("scratch", "spt"))


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setattr(t5, "QUICK", TINY)
    t5._runs.cache_clear()
    t5._phase.cache_clear()
    yield
    t5._runs.cache_clear()
    t5._phase.cache_clear()


def test_measured_rows_and_cache(tiny, tmp_path):
    rows = [fn(quick=True, cache=str(tmp_path)) for fn in t5.CHECKS]
    assert [r.check for r in rows] == ["T5.1", "T5.2", "T5.3", "T5.4", "T5.5", "T5.6"]
    for r in rows:
        assert r.verdict == "measured" and r.tolerance is None
        assert r.figure is not None and math.isfinite(r.figure)
        assert r.checked.startswith("[quick config]")
    store = RunCache(tmp_path)
    assert all(store.has(s) for s in t5.specs(TINY))
    assert rows[0].detail("runs")["spt/s0"]["pretrained"] > 0
    phase = rows[3].detail("rows")  # one row per SPT-only run of the basin grid
    assert {r["seed"] for r in phase} == {0} and {r["sweep"] for r in phase} == {"offset", "freq"}
    assert all(r["basin"] in ("proximity", "anti-local") for r in phase)
