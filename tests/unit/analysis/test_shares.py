"""toyspt.analysis.shares: an arm's share of SPT's gain, Fieller's interval."""
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from toyspt.analysis import shares as stats


def _draws(rng, n, mu_a, mu_b, sd=0.1, corr=0.6):
    cov = sd ** 2 * np.array([[1, corr], [corr, 1]])
    ab = rng.multivariate_normal([mu_a, mu_b], cov, size=n)
    return ab[:, 0], ab[:, 1]


def test_fieller_endpoints_solve_its_equation():
    rng = np.random.default_rng(2)
    a, b = _draws(rng, 10, 0.15, 0.3)
    r = stats.share_of_gain(a, b)
    assert r["bounded"] and r["ci_low"] < r["share"] < r["ci_high"] and set(r) == set(stats.SHARE_KEYS)
    c = np.cov(a, b, ddof=1) / 10
    t2 = sps.t.ppf(0.975, 9) ** 2
    for rho in (r["ci_low"], r["ci_high"]):
        lhs = (a.mean() - rho * b.mean()) ** 2
        assert lhs == pytest.approx(t2 * (c[0, 0] - 2 * rho * c[0, 1] + rho ** 2 * c[1, 1]), rel=1e-9)


def test_fieller_covers_the_true_share_at_n10():
    """2,000 seeded data sets of 10 correlated pairs, SPT's gain 3 sd from 0 per seed: the
    interval covers the true share 0.5 in >= 93% (nominal 95%)."""
    rng = np.random.default_rng(3)
    hits = 0
    for _ in range(2000):
        r = stats.share_of_gain(*_draws(rng, 10, 0.15, 0.3))
        hits += r["ci_low"] <= 0.5 <= r["ci_high"]
    assert 0.93 <= hits / 2000 <= 0.97


def test_fieller_is_unbounded_exactly_when_spt_gain_is_not_significant():
    rng = np.random.default_rng(4)
    kinds = set()
    for _ in range(300):
        r = stats.share_of_gain(*_draws(rng, 8, 0.02, 0.03, sd=0.05))
        assert r["bounded"] == (r["spt_p"] < 0.05)
        assert r["bounded"] or (r["ci_low"], r["ci_high"]) == (-math.inf, math.inf)
        kinds.add(r["interval"])
    assert kinds == {"bounded", "two rays", "whole line"}


def test_fieller_tends_to_the_delta_method_at_large_n():
    rng = np.random.default_rng(5)
    n = 20_000
    a, b = _draws(rng, n, 0.15, 0.3)
    r = stats.share_of_gain(a, b)
    c = np.cov(a, b, ddof=1) / n
    rho = a.mean() / b.mean()
    se = math.sqrt(c[0, 0] - 2 * rho * c[0, 1] + rho ** 2 * c[1, 1]) / abs(b.mean())
    half = sps.t.ppf(0.975, n - 1) * se
    assert r["share"] == pytest.approx(rho)
    assert r["ci_low"] == pytest.approx(rho - half, abs=0.01 * half)
    assert r["ci_high"] == pytest.approx(rho + half, abs=0.01 * half)


def test_share_pairs_series_by_seed_and_refuses_bad_input():
    a = pd.Series([0.1, 0.2, 0.15, 0.05, 0.12], index=[0, 1, 2, 3, 4])
    b = pd.Series([0.3, 0.35, 0.25, 0.3, 0.32, 0.9], index=[0, 1, 2, 3, 4, 5])  # seed 5: no arm run
    ref = stats.share_of_gain(a.to_numpy(), b.to_numpy()[:5])
    assert stats.share_of_gain(a.sample(frac=1, random_state=0), b) == ref
    with pytest.raises(ValueError, match="lengths differ"):
        stats.share_of_gain([0.1, 0.2, 0.3], [0.1, 0.2])
    with pytest.raises(ValueError, match="at least 2 seeds"):
        stats.share_of_gain([0.1, math.nan, 0.3], [0.1, 0.2, math.nan])




def test_share_rounds_as_paired_does_so_float_noise_cannot_bound_it():
    """SPT's gain is exactly 0 on every seed up to float noise (differences of accuracies k/N):
    rounded, no share is defined (the whole line); unrounded, the noise (5.6e-17 and 1.1e-16,
    "significant" at t p 0.005) made it bounded, with a share of 1.8e14."""
    a, b = (0.1 + 0.2) - 0.3, (0.2 + 0.4) - 0.6
    noise = [a, a, b, a, b]
    assert all(v > 0 for v in noise)
    r = stats.share_of_gain([0.01, 0.02, 0.0, 0.03, 0.01], noise)
    assert not r["bounded"] and r["interval"] == "whole line" and math.isnan(r["share"])
    assert math.isnan(r["spt_p"])

