"""The real-data study's plan and statistics (toyspt.ucr.study), on synthetic tables."""
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


