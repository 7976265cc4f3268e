"""toyspt.analysis.pooling: the random-effects pooled gain against a hand computation."""
import math

import numpy as np
import pytest
from scipy import stats as sps

from toyspt.analysis.pooling import random_effects


def test_random_effects_by_hand():
    """y = 0, 1, 3 with v = 1 each: fixed mean 4/3, Q = (16 + 1 + 25) / 9 = 14/3 on 2 df,
    C = 3 - 3/3 = 2, tau^2 = (14/3 - 2) / 2 = 4/3; weights 1 / (1 + 4/3) = 3/7 each, mean 4/3;
    Hartung-Knapp: q* = (3/7)(14/3) / 2 = 1, se = sqrt(1 / (9/7)) = sqrt(7/9), interval
    4/3 -+ t_{.975, 2} sqrt(7/9); I^2 = (14/3 - 2) / (14/3) = 4/7; Q p = exp(-Q/2) (chi^2, 2 df)."""
    r = random_effects([0.0, 1.0, 3.0], [1.0, 1.0, 1.0])
    half = sps.t.ppf(0.975, 2) * math.sqrt(7 / 9)  # t_{.975, 2} = 4.3027
    assert r.k == 3 and r.estimate == pytest.approx(4 / 3, rel=1e-14) and r.fixed == pytest.approx(4 / 3, rel=1e-14)
    assert r.q == pytest.approx(14 / 3, rel=1e-14) and r.tau2 == pytest.approx(4 / 3, rel=1e-14)
    assert (r.low, r.high) == (pytest.approx(4 / 3 - half, rel=1e-12), pytest.approx(4 / 3 + half, rel=1e-12))
    assert r.i2 == pytest.approx(4 / 7, rel=1e-14) and r.q_p == pytest.approx(math.exp(-7 / 3), rel=1e-12)
    assert r.p == pytest.approx(2 * sps.t.sf((4 / 3) / math.sqrt(7 / 9), 2), rel=1e-12)
    wald = sps.norm.ppf(0.975) * math.sqrt(7 / 9)  # DL's normal interval: se sqrt(1 / sum w*)
    assert (r.wald_low, r.wald_high) == (pytest.approx(4 / 3 - wald, rel=1e-12), pytest.approx(4 / 3 + wald, rel=1e-12))


def test_unequal_variances_weight_by_precision_and_no_heterogeneity_gives_the_fixed_mean():
    """y = 1, 2 with v = 1, 4: Q = 1 (0.2)^2 + 0.25 (0.8)^2 = 0.2 < 1 df, so tau^2 = 0, I^2 = 0 and the
    pooled mean is the inverse-variance mean (1 + 2/4) / (1 + 1/4) = 6/5."""
    r = random_effects([1.0, 2.0], [1.0, 4.0])
    assert r.tau2 == 0.0 and r.i2 == 0.0 and r.estimate == pytest.approx(6 / 5, rel=1e-14) == r.fixed
    w = np.array([1.0, 0.25])
    q = float(w @ (np.array([1.0, 2.0]) - 1.2) ** 2)
    se = math.sqrt(q / 1 / w.sum())  # Hartung-Knapp with 1 df
    assert r.high - r.estimate == pytest.approx(sps.t.ppf(0.975, 1) * se, rel=1e-12)


@pytest.mark.parametrize("y,v,match", [([1.0], [1.0], "at least 2"), ([1.0, 2.0], [1.0], "lengths"),
                                       ([1.0, 2.0], [1.0, 0.0], "> 0"), ([1.0, math.nan], [1.0, 1.0], "NaN")])
def test_random_effects_refuses_bad_input(y, v, match):
    with pytest.raises(ValueError, match=match):
        random_effects(y, v)
