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


def test_predictor_check_reports_exact_mcnemar_against_the_majority_basin():
    """27/40 named where always answering "proximity" names 26/40 (the UCR runs' figures): of
    the 27 runs where the two answers differ, the predictor is right on the 14 anti-local runs,
    the majority answer on 13 proximity runs: exact one-sided McNemar p = P(Bin(27, 1/2) >= 14)
    = 0.5 (the one-sample binomial against the share 26/40 said 0.44; against one half, < 0.02).
    The majority answer itself gets p 1 (it never disagrees with itself)."""
    from scipy.stats import binom

    prox = [True] * 26 + [False] * 14
    pred = [0.1] * 13 + [-0.1] * 13 + [-0.1] * 14  # 13 proximity named + 14 anti-local named = 27
    b = _basin(pred, prox)
    r = study.predictor_check(b)
    assert (r.detail("hits"), r.detail("n"), r.figure) == (27, 40, 27 / 40) and r.verdict == "fail"
    assert r.detail("majority") == "proximity" and r.detail("base_rate") == 26 / 40
    assert r.detail("p_base_rate") == pytest.approx(binom.sf(13, 27, 0.5)) and r.detail("p_base_rate") == 0.5
    assert ("always answering the majority basin (proximity) names 26/40, exact McNemar p = 0.5 (one-sided; "
            "runs only the predictor names 14, only the majority 13)") in r.checked
    always = study.predictor_test(b.assign(basin_predictor=1.0), "basin_predictor")
    assert always["hits"] == always["majority_hits"] == 26 and always["p"] == 1.0
    assert study.predictor_test(b.assign(basin_predictor=float("nan")), "basin_predictor")["n"] == 0


def test_the_proximity_index_before_the_end_of_spt_is_persistence_not_prediction():
    assert study.predictor_kind("proximity_epoch100") == "persistence"
    assert study.predictor_kind("proximity_epoch1") == "persistence"
    for col in ("basin_predictor", "beta_unif", "beta_init", "beta_epoch100"):
        assert study.predictor_kind(col) == "prediction"
