"""The resampled-split table (toyspt.figs.real_gain_splits.gain_table): spt - scratch paired by
resample, the paired t test's interval and p (one test), Holm over the sets, the one split
beside it paired by seed."""
import numpy as np
import pandas as pd
from scipy import stats

from toyspt.analysis.multiplicity import holm
from toyspt.figs.real_gain_splits import COLUMNS, gain_table
from toyspt.ucr.design import PRIMARY


def _frame(gains: dict[str, list[float]], by: str) -> pd.DataFrame:
    rows = []
    for name, g in gains.items():
        for i, d in enumerate(g):
            base = 0.5 + 0.01 * i  # the pairing matters: scratch varies by unit
            rows += [dict(dataset=name, arm="scratch", **{by: i}, **{PRIMARY: base}),
                     dict(dataset=name, arm="spt", **{by: i}, **{PRIMARY: base + d})]
    return pd.DataFrame(rows)


def test_gains_are_paired_by_resample_with_the_t_tests_interval_and_p_holm_adjusted():
    rs = {"A": [0.02, 0.03, 0.01, 0.04, 0.025], "B": [0.01, -0.02, 0.0, 0.015, -0.01], "C": [-0.03, -0.01, -0.02,
                                                                                          -0.04, -0.015]}
    one = {"A": [0.01, 0.0, 0.02], "B": [0.0, 0.01, -0.01]}
    t = gain_table(_frame(rs, "resample"), _frame(one, "seed"))
    assert list(t.columns) == COLUMNS and list(t.dataset) == ["A", "B", "C"]
    p = [stats.ttest_1samp(np.round(v, 12), 0).pvalue for v in rs.values()]
    assert np.allclose(t.p, p) and np.allclose(t.p_holm, holm(np.array(p)))
    for (_, r), v in zip(t.iterrows(), rs.values()):
        ci = stats.ttest_1samp(np.round(v, 12), 0).confidence_interval(0.95)
        assert r.n_splits == 5 and np.isclose(r.mean_diff, np.mean(v))
        assert np.isclose(r.ci_low, ci.low) and np.isclose(r.ci_high, ci.high)
        assert (r.p < 0.05) == (r.ci_low > 0 or r.ci_high < 0)  # interval and p from one test
    assert t.one_split_n_seeds.tolist() == [3, 3, 0] and np.isnan(t.one_split_mean_diff[2])
    assert np.isclose(t.one_split_mean_diff[0], 0.01)
    # the one split's Holm family is the sets it has
    p1 = [stats.ttest_1samp(v, 0).pvalue for v in one.values()]
    assert np.allclose(t.one_split_p_holm[:2], holm(np.array(p1)))
