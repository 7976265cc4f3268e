"""figs/real_data.py's predictor table: each predictor labelled as a prediction or as
persistence (the proximity index itself, read before the end of SPT), tested by exact McNemar
against always answering the majority basin; and the theory report's row R1 (predictor_check)."""
import numpy as np
import pandas as pd
import pytest
from scipy.stats import binom

from toyspt.analysis import basin
from toyspt.figs import real_data


def test_predictor_table_labels_persistence_and_tests_by_mcnemar():
    basin = pd.DataFrame(dict(dataset="A", seed=range(20), spt_epochs=300,
                              basin=["proximity"] * 13 + ["anti-local"] * 7,
                              basin_predictor=np.r_[np.full(13, 0.1), np.full(7, -0.1)],  # names every run
                              proximity_epoch100=np.r_[np.full(12, 2.0), 0.5, np.full(7, 2.0)]))  # 12 / 20
    t = real_data.predictor_table(basin).set_index("predictor")
    assert t.loc["proximity_epoch100", "kind"] == "persistence" and t.loc["basin_predictor", "kind"] == "prediction"
    assert t.loc["proximity_epoch100"].label.startswith("persistence:")
    # the perfect predictor: right on the 7 anti-local runs the majority answer misses, never wrong
    assert t.loc["basin_predictor", "p"] == pytest.approx(0.5 ** 7)
    # epoch 100 says proximity on 19 runs: differs from the majority answer on 1, where it is wrong
    assert (t.loc["proximity_epoch100", "only_predictor"], t.loc["proximity_epoch100", "only_majority"]) == (0, 1)
    assert t.loc["proximity_epoch100", "p"] == pytest.approx(binom.sf(-1, 1, 0.5)) == 1.0


def _basin(pred, prox):
    return pd.DataFrame(dict(dataset=["A"] * len(pred), seed=range(len(pred)), basin_predictor=pred,
                             basin=["proximity" if p else "anti-local" for p in prox]))


def test_predictor_check_fails_below_the_threshold_and_when_flipped():
    b = _basin([0.1] * 9 + [-0.1], [True] * 10)  # 9/10 named
    assert basin.predictor_share(b, "basin_predictor") == (9, 10)
    assert real_data.predictor_check(b).verdict == "pass"
    assert real_data.predictor_check(b.assign(basin_predictor=-b.basin_predictor)).verdict == "fail"
    assert real_data.predictor_check(b, threshold=0.95).verdict == "fail"
    assert "A 9/10" in real_data.predictor_check(b).checked


def test_predictor_check_reports_exact_mcnemar_against_the_majority_basin():
    """27/40 named where always answering "proximity" names 26/40 (the UCR runs' figures): of
    the 27 runs where the two answers differ, the predictor is right on the 14 anti-local runs,
    the majority answer on 13 proximity runs: exact one-sided McNemar p = P(Bin(27, 1/2) >= 14)
    = 0.5 (the one-sample binomial against the share 26/40 said 0.44; against one half, < 0.02).
    The majority answer itself gets p 1 (it never disagrees with itself)."""
    prox = [True] * 26 + [False] * 14
    pred = [0.1] * 13 + [-0.1] * 13 + [-0.1] * 14  # 13 proximity named + 14 anti-local named = 27
    b = _basin(pred, prox)
    r = real_data.predictor_check(b)
    assert (r.detail("hits"), r.detail("n"), r.figure) == (27, 40, 27 / 40) and r.verdict == "fail"
    assert r.detail("majority") == "proximity" and r.detail("base_rate") == 26 / 40
    assert r.detail("p_base_rate") == pytest.approx(binom.sf(13, 27, 0.5)) and r.detail("p_base_rate") == 0.5
    assert ("always answering the majority basin (proximity) names 26/40, exact McNemar p = 0.5 (one-sided; "
            "runs only the predictor names 14, only the majority 13)") in r.checked
    always = basin.predictor_test(b.assign(basin_predictor=1.0), "basin_predictor")
    assert always["hits"] == always["majority_hits"] == 26 and always["p"] == 1.0
    assert basin.predictor_test(b.assign(basin_predictor=float("nan")), "basin_predictor")["n"] == 0
