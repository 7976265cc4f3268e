"""T5: measured training figures through the run cache, on a tiny configuration and a stored grid."""
import math
from pathlib import Path

import pytest
from toyspt.theory import t5_training as t5

from toyspt.data.tasks import TaskConfig
from toyspt.nn.model import ModelConfig
from toyspt.runs import RunCache
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
    assert "not checked on the quick config" in rows[2].checked and rows[2].detail("seeds") == [0]
    store = RunCache(tmp_path)
    assert all(store.has(s) for s in t5.specs(TINY))
    assert rows[0].detail("runs")["spt/s0"]["pretrained"] > 0
    phase = rows[3].detail("rows")  # one row per SPT-only run of the basin grid
    assert {r["seed"] for r in phase} == {0} and {r["sweep"] for r in phase} == {"offset", "freq"}
    assert all(r["basin"] in ("proximity", "anti-local") for r in phase)


def _table(pred, basin_prox, beta_unif=0.5):
    import pandas as pd
    return pd.DataFrame(dict(pred=pred, beta_unif=[beta_unif] * len(pred),
                             basin=["proximity" if b else "anti-local" for b in basin_prox]))


def test_share_verdict_fails_below_its_threshold_and_when_the_sign_is_flipped():
    t = _table([0.3, -0.2, 0.1, 0.4, -0.5, 0.2, -0.1, 0.3, 0.6, -0.3, 0.2, 0.9, -0.4, 0.5, 0.7, -0.2, 0.1, 0.2, 0.3,
                -0.6],
               [True, False, True, True, False, True, False, True, True, False, True, True, False, True, True,
                False, True, True, True, True])  # the last run is a miss: 19/20 = 0.95
    assert t5.share_verdict(t, lambda x: x.pred, 0.95, "ge") == (19, 20, "pass")
    assert t5.share_verdict(t, lambda x: -x.pred, 0.95, "ge") == (1, 20, "fail")
    assert t5.share_verdict(t, lambda x: x.pred, 0.96, "ge")[2] == "fail"
    assert t5.share_verdict(t, lambda x: -x.pred, 0.75, "le")[2] == "pass"
    assert t5.share_verdict(t, lambda x: x.pred, 0.75, "le")[2] == "fail"
    # runs whose beta_unif is not clear do not count; none clear: nothing supports the claim
    assert t5.share_verdict(_table([0.1], [True], beta_unif=0.05), lambda x: x.pred, 0.5, "ge") == (0, 0, "fail")


def test_full_config_rows_are_checked_and_can_fail(monkeypatch, tmp_path):
    """On the full configuration (here a tiny one) T5.1-T5.6 carry a threshold and
    a pass/fail verdict; the basin rows' verdicts are those of share_verdict on their table."""
    monkeypatch.setattr(t5, "FULL", TINY)
    monkeypatch.setattr(t5, "QUICK", t5.T5Config(TINY.task, TINY.model, TINY.train, (1,), TINY.recipes))
    t5._runs.cache_clear()
    t5._phase.cache_clear()
    try:
        rows = {r.check: r for r in (fn(quick=False, cache=str(tmp_path)) for fn in t5.CHECKS)}
    finally:
        t5._runs.cache_clear()
        t5._phase.cache_clear()
    for cid in ("T5.1", "T5.2", "T5.3", "T5.4", "T5.5", "T5.6"):
        assert rows[cid].verdict in ("pass", "fail") and rows[cid].tolerance is not None, cid
    assert rows["T5.1"].figure == rows["T5.1"].detail("scratch") / rows["T5.1"].detail("spt_final")
    import pandas as pd
    table = pd.DataFrame(rows["T5.4"].detail("rows"))
    assert rows["T5.4"].verdict == t5.share_verdict(table, lambda x: x.beta_unif, t5.BASIN_UNIF_SHARE, "ge")[2]
    margins = rows["T5.2"].detail("margins")
    assert rows["T5.2"].figure == min(margins.values()) and set(margins) == set(TINY.seeds)
    assert rows["T5.2"].verdict == ("pass" if rows["T5.2"].figure >= 0 else "fail")
    assert rows["T5.3"].verdict == "fail"  # one seed: no interval, nothing supports the claim


# The 55 SPT-only runs of the toy basin grid at the full configuration (11 settings x seeds 0-4), as
# figures/basin.csv stores them (per-run "cell" rows), plus T3's dL_rec[N] at init (_init_sign of
# each run's spec, computed once): both basins, 25/50 clear runs in each (offset sweep: 14/25
# proximity; frequency sweep: 11/25, so its majority is anti-local).
TOY_GRID = Path(__file__).resolve().parents[2] / "fixtures" / "toy_basin_runs.csv"


def _grid(monkeypatch, sweep=None):
    """The stored grid (one of its sweeps) as the table every T5 basin row reads."""
    import pandas as pd

    table = pd.read_csv(TOY_GRID)
    table = table if sweep is None else table[table.sweep == sweep].reset_index(drop=True)
    monkeypatch.setattr(t5, "_phase", lambda quick, cache: (t5.FULL, table))
    return table


@pytest.fixture
def toy_grid(monkeypatch):
    return _grid(monkeypatch)


# per table: (clear runs, proximity among them, majority) and the hits of T5.4, T5.5, T5.6's predictors
GRIDS = {None: ((50, 25, "proximity"), (48, 50, 25)), "offset": ((25, 14, "proximity"), (24, 25, 13)),
         "freq": ((25, 11, "anti-local"), (24, 25, 12))}
ROWS = [(t5.measure_basin, lambda t: t.beta_unif > 0), (t5.measure_basin_early, lambda t: t.beta_epoch1 > 0),
        (t5.measure_basin_init, lambda t: t.drec_N_init < 0)]


@pytest.mark.parametrize("sweep", list(GRIDS))
@pytest.mark.parametrize("row", range(3), ids=["T5.4", "T5.5", "T5.6"])
def test_basin_rows_report_the_share_of_their_own_predictor(monkeypatch, sweep, row):
    """Each row's figure is the share its own predictor names on the stored grid (recomputed
    here from the table), its text says the same count, and it carries the base rate of always
    answering the majority basin with the exact McNemar p on the same runs. A flipped predictor
    reports n - hits, which differs from hits on every table here but the whole grid's T5.6 (25/50)."""
    import numpy as np

    from toyspt.analysis.stats import hits_vs_base_rate

    table = _grid(monkeypatch, sweep)
    (n, n_prox, majority), hits = GRIDS[sweep][0], GRIDS[sweep][1][row]
    check, says = ROWS[row]
    clear = table[table.beta_unif.abs() > 0.1]
    truth = clear.basin == "proximity"
    assert (len(clear), int(truth.sum())) == (n, n_prox) and int((says(clear) == truth).sum()) == hits
    r = check(quick=False, cache=None)
    assert r.figure == hits / n and (r.detail("hits"), r.detail("n")) == (hits, n)
    threshold = (t5.BASIN_UNIF_SHARE, t5.BASIN_EARLY_SHARE, t5.BASIN_INIT_MAX_SHARE)[row]
    assert r.verdict == ("pass" if (hits / n <= threshold if row == 2 else hits / n >= threshold) else "fail")
    assert f"basin predicted in {hits}/{n} SPT-only runs" in r.checked and "all runs: " in r.checked
    top = max(n_prox, n - n_prox)
    base = hits_vs_base_rate(np.asarray(says(clear), bool), np.asarray(truth, bool))
    assert base["hits"] == hits and base["majority_hits"] == top
    assert r.detail("base_rate") == top / n and r.detail("p_base_rate") == pytest.approx(base["p"])
    assert f"({majority}) names {top}/{n}, exact McNemar p (one-sided) = {base['p']:.2g}" in r.checked


def test_share_verdict_leaves_out_runs_without_a_prediction():
    t = _table([0.3, float("nan"), -0.2], [True, False, False])
    assert t5.share_verdict(t, lambda x: x.pred, 0.95, "ge") == (2, 2, "pass")
    assert t5.share_base_rate(t, lambda x: x.pred)["n"] == 2


def test_grid_shares_carry_the_base_rate(toy_grid):
    from toyspt.analysis.basin_grid import predictor_shares

    sh = predictor_shares(toy_grid)
    assert (sh["beta_unif"]["hits"], sh["beta_unif"]["n"], sh["beta_init"]["hits"]) == (48, 50, 26)
    # 24 runs only the predictor names against 1 only "always proximity" names: P(X >= 24 | 25, 1/2)
    assert sh["beta_unif"]["base_rate"] == 0.5 and sh["beta_unif"]["p_base_rate"] == pytest.approx(26 / 2 ** 25)
    assert sh["beta_init"]["p_base_rate"] > 0.3  # the init gain: no better than always "proximity"


def _fake_runs(acc: dict[str, list[float]], seeds, order=None):
    """{(recipe, seed): a stand-in run with its summary} in ``order`` of (recipe, seed) keys."""
    from types import SimpleNamespace

    runs = {(rec, sd): SimpleNamespace(summary=dict(test_at_peak=v)) for rec, vals in acc.items()
            for sd, v in zip(seeds, vals)}
    return {k: runs[k] for k in (order or list(runs))}


def test_per_seed_accuracy_pairs_by_seed_whatever_the_order_of_the_runs():
    cfg = t5.T5Config(TINY.task, TINY.model, TINY.train, (3, 1, 2), ("scratch", "spt"))
    acc = {"scratch": [0.5, 0.6, 0.7], "spt": [0.9, 0.8, 0.75]}  # seeds 3, 1, 2
    shuffled = [("spt", 2), ("scratch", 1), ("spt", 3), ("scratch", 2), ("spt", 1), ("scratch", 3)]
    assert t5.per_seed_accuracy(cfg, _fake_runs(acc, cfg.seeds, shuffled)) == acc
    with pytest.raises(KeyError):  # a recipe without a run for one of the seeds
        t5.per_seed_accuracy(cfg, {k: v for k, v in _fake_runs(acc, cfg.seeds).items() if k != ("spt", 1)})


def _accuracy_row(monkeypatch, scratch, spt, qk=None):
    """T5.3 on the full configuration's seeds with planted accuracies (one per seed, seeds 0-4)."""
    acc = {"scratch": scratch, "spt": spt, "qk_transfer": qk or scratch, "frozen_attention": scratch}
    runs = _fake_runs(acc, t5.FULL.seeds)
    monkeypatch.setattr(t5, "_runs", lambda quick, cache: (t5.FULL, runs))
    return t5.measure_accuracy(quick=False, cache=None)


SCRATCH = [0.60, 0.62, 0.58, 0.61, 0.59]


def test_accuracy_row_passes_where_spt_beats_scratch_on_every_seed(monkeypatch):
    from toyspt.analysis.gains import gain_and_share

    spt, qk = [0.95, 0.90, 0.93, 0.96, 0.91], [0.85, 0.84, 0.80, 0.88, 0.79]
    r = _accuracy_row(monkeypatch, SCRATCH, spt, qk)
    g = gain_and_share({"scratch": SCRATCH, "spt": spt, "qk_transfer": qk}, "qk_transfer")
    assert r.verdict == "pass" and (r.tolerance, r.sense) == (t5.GAIN_LOW_MIN, "ge")
    assert r.figure == g["gain_low"] > 0 and r.detail("gain") == pytest.approx(0.33)
    assert r.detail("share") == pytest.approx(0.232 / 0.33) and r.detail("share_interval") == "bounded"
    assert r.detail("seeds") == [0, 1, 2, 3, 4] and r.detail("per_recipe")["spt"] == spt
    assert "seed(s) 0, 1, 2, 3, 4" in r.checked and "95% t interval" in r.checked and "Fieller 95%" in r.checked


@pytest.mark.parametrize("spt", [
    [0.55, 0.60, 0.50, 0.58, 0.52],  # scratch beats spt on every seed
    [0.65, 0.66, 0.64, 0.66, 0.44],  # higher mean gain (+0.010), but one seed loses: the interval reaches below 0
    [0.62, 0.64, 0.60, 0.63, 0.61],  # +0.02 on every seed: no spread, no interval (undefined, not certain)
    SCRATCH,  # no gain at all
], ids=["spt_worse", "interval_crosses_0", "no_spread", "tie"])
def test_accuracy_row_fails_where_spt_does_not_beat_scratch(monkeypatch, spt):
    r = _accuracy_row(monkeypatch, SCRATCH, spt)
    assert r.verdict == "fail" and r.tolerance == t5.GAIN_LOW_MIN
    assert not r.figure >= 0  # a lower end below 0, or NaN without an interval
