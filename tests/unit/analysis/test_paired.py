"""toyspt.analysis.paired: paired differences (the t and signed-rank tests as PairedTest values), MDE, TOST."""
import math
import warnings

import numpy as np
import pytest
from scipy import stats as sps

from toyspt.analysis.paired import Paired, PairedTest, mde, paired, tost


def test_paired_matches_scipy_and_drops_nan():
    d = [0.01, 0.035, -0.02, 0.05, 0.02, math.nan]
    r = paired(d)
    a = np.array(d[:5])
    t = sps.ttest_1samp(a, 0.0)
    assert isinstance(r, Paired) and isinstance(r.t, PairedTest) and r.n == r.t.n == r.rank.n == 5
    assert (r.t.test, r.rank.test, r.rank.method) == ("paired t", "signed-rank", "exact")
    assert r.t.estimate == pytest.approx(a.mean()) and r.sd == pytest.approx(a.std(ddof=1))
    assert (r.t.low, r.t.high) == pytest.approx(tuple(t.confidence_interval(0.95)))
    assert r.t.high - r.t.estimate == pytest.approx(2.7764451 * a.std(ddof=1) / math.sqrt(5))  # t_{.975, 4}
    assert r.t.p == pytest.approx(t.pvalue)
    assert r.rank.p == pytest.approx(sps.wilcoxon(a).pvalue)
    assert (r.wins, r.ties, r.losses) == (4, 0, 1)


def test_no_five_seed_signed_rank_test_gets_below_one_sixteenth():
    """All five differences positive, distinct magnitudes: the exact test's smallest two-sided
    p, 2 / 2^5."""
    r = paired([0.01, 0.02, 0.03, 0.04, 0.05])
    assert r.rank.method == "exact" and r.rank.p == pytest.approx(0.0625)


def test_zero_differences_are_dropped_before_ranking_and_ties_share_ranks():
    """zero_method="wilcox": a zero difference is dropped (p as if it were not there), counted
    as a tie; tied magnitudes get average ranks (Wilcoxon's rule, scipy's rankdata)."""
    with_zero = paired([0.0, 0.01, 0.03, 0.04, 0.05])
    assert with_zero.ties == 1 and with_zero.rank.p == pytest.approx(0.125)  # 2 / 2^4
    assert with_zero.rank.p == pytest.approx(sps.wilcoxon([0.01, 0.03, 0.04, 0.05]).pvalue)
    tied = paired([0.02, 0.02, -0.02, 0.04, 0.05, 0.01])
    ranks = sps.rankdata([0.02, 0.02, 0.02, 0.04, 0.05, 0.01])
    assert ranks[:3].tolist() == [3.0, 3.0, 3.0]  # the ranks the statistic uses
    assert tied.rank.p == pytest.approx(sps.wilcoxon([0.02, 0.02, -0.02, 0.04, 0.05, 0.01]).pvalue)


@pytest.mark.parametrize("d", [
    np.arange(1, 8) * 0.01,  # no ties, no zeros: scipy's exact
    [0.02, 0.02, -0.01, 0.03, 0.04],  # ties
    [0.0, 0.01, -0.02, 0.03, 0.04, 0.05, 0.06],  # a zero (dropped)
    [0.01, 0.01, -0.02, 0.03, 0.03, 0.03, -0.04, 0.05, 0.05, 0.06, 0.07, -0.08, 0.09],  # ties at n = 13
])
def test_the_exact_test_is_scipys_full_sign_flip_enumeration(d):
    """Up to 13 differences scipy's PermutationMethod enumerates all 2^n sign flips: the exact
    p, which the convolution here must reproduce with ties and zeros."""
    d = np.asarray(d, float)
    r = paired(d)
    assert r.rank.method == "exact"
    assert r.rank.p == pytest.approx(sps.wilcoxon(d, zero_method="wilcox", method=sps.PermutationMethod())
                                            .pvalue, rel=1e-12)


def test_the_method_is_chosen_here_not_by_scipys_auto():
    """20 differences with ties: scipy 1.17's "auto" takes the normal approximation (p below);
    the exact sign-flip distribution of the mid-ranks gives another p, pinned here (it is
    2 P(T+ >= 179) over the 2^20 flips, counted by convolution)."""
    d = np.r_[np.arange(1, 19), 3, 5] * 0.01
    d[[2, 7, 11]] *= -1
    r = paired(d)
    auto = sps.wilcoxon(d, method="auto").pvalue
    assert r.rank.method == "exact" and abs(r.rank.p - auto) > 1e-4
    from toyspt.analysis import rank_tests

    r2 = np.rint(2 * sps.rankdata(np.abs(d))).astype(int)
    t2 = int(r2[d > 0].sum())
    flips = np.array(np.meshgrid(*[[0, 1]] * 10)).reshape(10, -1).T  # brute force on the first 10 ...
    first = (flips * r2[:10]).sum(1)
    rest = rank_tests._null(r2[10:])  # ... convolved with the exact law of the other 10
    upper = sum(rest[max(t2 - f, 0):].sum() for f in first) / len(first)
    assert r.rank.p == pytest.approx(min(1.0, 2 * upper), rel=1e-12)


def test_the_zero_rule_is_wilcox_not_pratt():
    """One zero among mixed signs: Wilcoxon's rule (drop it) gives 2 x 37/128 = 0.578125 (T+ = 18
    of ranks 1..7); Pratt's rule (rank it, then leave it out of T+) gives 0.5."""
    d = [0.0, 0.01, 0.02, -0.03, 0.04, 0.05, 0.06, -0.07]
    wilcox = sps.wilcoxon(d, zero_method="wilcox", method=sps.PermutationMethod()).pvalue
    pratt = sps.wilcoxon(d, zero_method="pratt", method=sps.PermutationMethod()).pvalue
    assert wilcox == pytest.approx(0.578125) and pratt == pytest.approx(0.5)
    assert paired(d).rank.p == pytest.approx(0.578125, rel=1e-12)


def test_float_noise_of_accuracy_differences_neither_breaks_ties_nor_invents_nonzeros():
    """0.94 - 0.92 and 0.53 - 0.51 are both 0.02 to 12 decimals, (0.1 + 0.2) - 0.3 is 0."""
    raw = [0.94 - 0.92, 0.53 - 0.51, (0.1 + 0.2) - 0.3, 0.71 - 0.66, 0.5 - 0.49]
    assert raw[0] != raw[1] and raw[2] != 0
    r = paired(raw)
    assert (r.wins, r.ties, r.losses) == (4, 1, 0)
    exact = sps.wilcoxon([0.02, 0.02, 0.05, 0.01], method=sps.PermutationMethod())
    assert r.rank.p == pytest.approx(exact.pvalue)


def test_all_zero_differences_give_p_one_without_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = paired([0.0, 0.0, 0.0, 0.0, 0.0])
    assert r.rank.p == 1.0 and r.ties == 5 and r.direction == 0


def test_equal_differences_have_no_t_interval_p_or_mde():
    """[0.02, 0.02, 0.02]: no spread, so the t statistic, its interval and a power model are
    undefined (NaN), not a certainty (p 0, interval [0.02, 0.02], MDE 0). The signed-rank test
    is defined: three positives of equal rank, p = 2 / 2^3."""
    r = paired([0.02, 0.02, 0.02])
    assert all(math.isnan(v) for v in (r.t.p, r.t.low, r.t.high))
    assert r.mde80 == math.inf  # three seeds: p >= 0.25 whatever the effect
    assert r.t.estimate == pytest.approx(0.02) and r.rank.p == pytest.approx(0.25)
    for d in ([0.02] * 8, [0.0] * 8):  # reachable at 8 seeds, but no spread: no power model
        r = paired(d)
        assert all(math.isnan(v) for v in (r.t.p, r.t.low, r.t.high, r.mde80))


def test_direction_and_significance_come_from_one_test():
    """Nineteen wins of +0.01 and one loss of -0.5: the mean is negative, but the signed-rank
    test and its Hodges-Lehmann estimate say positive. The 19 tied wins share mid-rank 10, the
    loss has rank 20, T+ = 190; over the 2^20 flips T+ = 10 k + 20 s >= 190 for (k, s) = (19, 0),
    (19, 1), (18, 1) and (17, 1): 1 + 1 + 19 + 171 = 192 flips, p = 2 x 192 / 2^20."""
    d = [0.01] * 19 + [-0.5]
    r = paired(d)
    assert r.t.estimate < 0 and r.direction == 1 and r.rank.estimate == pytest.approx(0.01)
    assert r.rank.p == pytest.approx(2 * 192 / 2 ** 20, rel=1e-12)
    assert r.rank.low <= 0.01 <= r.rank.high


def test_hodges_lehmann_interval_inverts_the_signed_rank_test():
    """n = 8 distinct differences: the 95% interval is [W_(4), W_(33)] of the 36 Walsh averages
    (P(T+ <= 3) = 5/256 <= 0.025 < P(T+ <= 4) = 7/256), and a shift just inside it is not
    rejected, one just outside is."""
    d = np.array([0.031, -0.012, 0.054, 0.008, 0.022, 0.047, -0.003, 0.015])
    r = paired(d)
    w = np.sort((d[:, None] + d[None, :])[np.triu_indices(8)] / 2)
    assert (r.rank.low, r.rank.high) == (pytest.approx(w[3]), pytest.approx(w[32]))
    assert r.rank.estimate == pytest.approx(np.median(w))
    from toyspt.analysis import rank_tests

    for end, step in ((w[3], 1e-9), (w[32], -1e-9)):
        assert rank_tests.signed_rank(d - (end + step))["p"] > 0.05
        assert rank_tests.signed_rank(d - (end - step))["p"] <= 0.05
    assert paired(d[:5]).rank.low == -math.inf  # five differences: the test cannot reject


def test_mde_is_that_of_the_signed_rank_test_at_the_level_given():
    """Five seeds: the smallest two-sided p is 2 / 2^5 = 0.0625 > 0.05, so no effect is
    detectable (inf); at 20 seeds the MDE sits just above the t test's 0.6604 sd (Wilcoxon's
    efficiency 3 / pi against t under normality) and grows at the Holm level 0.05 / 4."""
    from toyspt.analysis import rank_tests

    assert paired([0.01, 0.03, -0.02, 0.05, 0.02]).mde80 == math.inf
    assert paired([0.01, 0.03, -0.02, 0.05, 0.02]).min_p == pytest.approx(0.0625)
    m20 = rank_tests.mde_signed_rank(1.0, 20, 0.05)
    assert mde(1.0, 20) < m20 < mde(1.0, 20) * 1.06
    assert rank_tests.mde_signed_rank(1.0, 20, 0.05 / 4) > m20
    assert rank_tests.mde_signed_rank(0.03, 20, 0.05) == pytest.approx(0.03 * m20)
    d = [0.01, 0.03, -0.02, 0.05, 0.02, 0.04, 0.0, 0.06, -0.01, 0.03]
    assert paired(d, level=0.0125).mde80 == pytest.approx(
        rank_tests.mde_signed_rank(np.std(d, ddof=1), 10, 0.0125))


def test_signed_rank_mde_has_eighty_percent_power_by_simulation():
    """Fresh normal samples (another seed than the MDE's) at the MDE: the exact test at 0.05
    rejects in 80% (4 binomial sd at 10,000 draws: 0.016)."""
    from toyspt.analysis import rank_tests

    n, reps = 12, 10_000
    rng = np.random.default_rng(99)
    x = rng.normal(rank_tests.mde_signed_rank(1.0, n, 0.05), 1.0, size=(reps, n))
    c = rank_tests._critical(n, 0.05)
    ranks = sps.rankdata(np.abs(x), axis=1)
    t = (ranks * (x > 0)).sum(1)
    power = np.mean((t <= c) | (t >= n * (n + 1) / 2 - c))
    assert power == pytest.approx(0.80, abs=0.016)


def test_mde_is_the_noncentral_t_solution():
    """n = 20: 0.6604 sd (the one-sample two-sided t at 80% power, as G*Power gives it),
    above the normal approximation's 2.8016 / sqrt(20) = 0.6265 sd; scales with sd."""
    assert mde(1.0, 20) == pytest.approx(0.66044, abs=1e-4)
    assert mde(1.0, 20) > (sps.norm.ppf(0.975) + sps.norm.ppf(0.8)) / math.sqrt(20)
    assert mde(0.03, 20) == pytest.approx(0.03 * mde(1.0, 20))
    assert mde(1.0, 2) > mde(1.0, 5) > mde(1.0, 50)


def test_mde_has_eighty_percent_power_by_simulation():
    rng = np.random.default_rng(0)
    n, reps = 10, 20_000
    d = rng.normal(mde(1.0, n), 1.0, size=(reps, n))
    t = d.mean(1) / (d.std(1, ddof=1) / math.sqrt(n))
    power = np.mean(np.abs(t) > sps.t.ppf(0.975, n - 1))
    assert power == pytest.approx(0.80, abs=0.012)  # 4 binomial sd at 20,000 draws


@pytest.mark.parametrize("bad,match", [([0.1], "at least 2"), ([0.1, math.nan], "at least 2"),
                                       ([[0.1, 0.2]], "1-D"), ([0.1, math.inf], "infinite"),
                                       (["a", "b"], "numbers")])
def test_paired_refuses_bad_input(bad, match):
    with pytest.raises(ValueError, match=match):
        paired(bad)


def test_mde_refuses_bad_input():
    with pytest.raises(ValueError, match="n"):
        mde(1.0, 1)
    with pytest.raises(ValueError, match="sd"):
        mde(-1.0, 5)



def test_tost_declares_equivalence_only_inside_the_margin():
    """Ten differences scattered +-0.002 around 0.001: the 90% interval lies inside +-0.01,
    TOST p is the larger one-sided t p; around 0.012 it is not equivalent; no spread is NaN."""
    base = np.array([-2, -1, 0, 1, 2, -2, -1, 0, 1, 2]) * 0.001
    r = tost(base + 0.001, 0.01)
    lower = sps.ttest_1samp(base + 0.001, -0.01, alternative="greater").pvalue
    upper = sps.ttest_1samp(base + 0.001, 0.01, alternative="less").pvalue
    assert r.p == pytest.approx(max(lower, upper)) and r.p < 1e-6
    assert -0.01 < r.low < r.high < 0.01
    assert tost(base + 0.012, 0.01).p > 0.5
    assert math.isnan(tost([0.0] * 5, 0.01).p)



def test_hodges_lehmann_keeps_zero_differences():
    """[0, 0, 0, 0.01, 0.02]: the 15 Walsh averages of all five are 0 (x6), 0.005 (x3), 0.01 (x4),
    0.015, 0.02, median 0.005. Dropping the zeros (the rank test's rule, not the estimate's)
    would give the median of 0.01, 0.015, 0.02: 0.015, and move the published ``hl`` values."""
    r = paired([0.0, 0.0, 0.0, 0.01, 0.02])
    assert r.rank.estimate == pytest.approx(0.005, abs=1e-15) and r.ties == 3


def test_tost_tests_the_lower_bound_with_negative_means():
    """Differences around -0.008 (inside the margin, near its lower edge) and around -0.012
    (outside): the TOST p is the larger one-sided p, here the one of H0 mean <= -margin."""
    base = np.array([-2, -1, 0, 1, 2, -2, -1, 0, 1, 2]) * 0.001
    inside = tost(base - 0.008, 0.01)
    lower = sps.ttest_1samp(base - 0.008, -0.01, alternative="greater").pvalue
    assert inside.p == pytest.approx(lower, rel=1e-12) and inside.p < 0.05 and inside.estimate == pytest.approx(-0.008)
    outside = tost(base - 0.012, 0.01)
    assert outside.p > 0.5 and outside.low < -0.01  # not equivalent: its 90% interval leaves the margin below


def test_the_normal_approximation_has_its_continuity_correction_beyond_the_exact_range():
    """EXACT_MAX + 1 distinct magnitudes: p from |T+ - n(n+1)/4| - 1/2 over the sd
    sqrt(n(n+1)(2n+1)/24), as scipy's approximation with correction=True gives it (and not
    what it gives without the correction)."""
    from toyspt.analysis import rank_tests

    n = rank_tests.EXACT_MAX + 1
    d = np.arange(1, n + 1) * 1e-4
    d[::3] *= -1
    r = rank_tests.signed_rank(d)
    t_plus = np.arange(1, n + 1)[d > 0].sum()
    z = (abs(t_plus - n * (n + 1) / 4) - 0.5) / math.sqrt(n * (n + 1) * (2 * n + 1) / 24)
    assert r["method"] == "normal" and r["p"] == pytest.approx(2 * sps.norm.sf(z), rel=1e-12)
    assert r["p"] == pytest.approx(sps.wilcoxon(d, method="approx", correction=True).pvalue, rel=1e-12)
    assert r["p"] != pytest.approx(sps.wilcoxon(d, method="approx", correction=False).pvalue, rel=1e-6)
