"""toyspt.analysis.stats: paired differences, Holm, Fieller shares, base rates, within-set association."""
import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from toyspt.analysis import stats

# ---------------------------------------------------------------------------------------
# paired

def test_paired_matches_scipy_and_drops_nan():
    d = [0.01, 0.035, -0.02, 0.05, 0.02, math.nan]
    r = stats.paired(d)
    a = np.array(d[:5])
    t = sps.ttest_1samp(a, 0.0)
    assert set(r) == set(stats.PAIRED_KEYS) and r["n"] == 5
    assert r["mean_diff"] == pytest.approx(a.mean()) and r["sd_diff"] == pytest.approx(a.std(ddof=1))
    assert (r["ci_low"], r["ci_high"]) == pytest.approx(tuple(t.confidence_interval(0.95)))
    assert r["ci_high"] - r["mean_diff"] == pytest.approx(2.7764451 * a.std(ddof=1) / math.sqrt(5))  # t_{.975, 4}
    assert r["t_p"] == pytest.approx(t.pvalue)
    assert r["wilcoxon_p"] == pytest.approx(sps.wilcoxon(a).pvalue)
    assert (r["wins"], r["ties"], r["losses"]) == (4, 0, 1)


def test_no_five_seed_signed_rank_test_gets_below_one_sixteenth():
    """All five differences positive, distinct magnitudes: the exact test's smallest two-sided
    p, 2 / 2^5."""
    r = stats.paired([0.01, 0.02, 0.03, 0.04, 0.05])
    assert r["wilcoxon_method"] == "exact" and r["wilcoxon_p"] == pytest.approx(0.0625)


def test_zero_differences_are_dropped_before_ranking_and_ties_share_ranks():
    """zero_method="wilcox": a zero difference is dropped (p as if it were not there), counted
    as a tie; tied magnitudes get average ranks (Wilcoxon's rule, scipy's rankdata)."""
    with_zero = stats.paired([0.0, 0.01, 0.03, 0.04, 0.05])
    assert with_zero["ties"] == 1 and with_zero["wilcoxon_p"] == pytest.approx(0.125)  # 2 / 2^4
    assert with_zero["wilcoxon_p"] == pytest.approx(sps.wilcoxon([0.01, 0.03, 0.04, 0.05]).pvalue)
    tied = stats.paired([0.02, 0.02, -0.02, 0.04, 0.05, 0.01])
    ranks = sps.rankdata([0.02, 0.02, 0.02, 0.04, 0.05, 0.01])
    assert ranks[:3].tolist() == [3.0, 3.0, 3.0]  # the ranks the statistic uses
    assert tied["wilcoxon_p"] == pytest.approx(sps.wilcoxon([0.02, 0.02, -0.02, 0.04, 0.05, 0.01]).pvalue)


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
    r = stats.paired(d)
    assert r["wilcoxon_method"] == "exact"
    assert r["wilcoxon_p"] == pytest.approx(sps.wilcoxon(d, zero_method="wilcox", method=sps.PermutationMethod())
                                            .pvalue, rel=1e-12)


def test_the_method_is_chosen_here_not_by_scipys_auto():
    """20 differences with ties: scipy 1.17's "auto" takes the normal approximation (p below);
    the exact sign-flip distribution of the mid-ranks gives another p, pinned here (it is
    2 P(T+ >= 179) over the 2^20 flips, counted by convolution)."""
    d = np.r_[np.arange(1, 19), 3, 5] * 0.01
    d[[2, 7, 11]] *= -1
    r = stats.paired(d)
    auto = sps.wilcoxon(d, method="auto").pvalue
    assert r["wilcoxon_method"] == "exact" and abs(r["wilcoxon_p"] - auto) > 1e-4
    from toyspt.analysis import rank_tests

    r2 = np.rint(2 * sps.rankdata(np.abs(d))).astype(int)
    t2 = int(r2[d > 0].sum())
    flips = np.array(np.meshgrid(*[[0, 1]] * 10)).reshape(10, -1).T  # brute force on the first 10 ...
    first = (flips * r2[:10]).sum(1)
    rest = rank_tests._null(r2[10:])  # ... convolved with the exact law of the other 10
    upper = sum(rest[max(t2 - f, 0):].sum() for f in first) / len(first)
    assert r["wilcoxon_p"] == pytest.approx(min(1.0, 2 * upper), rel=1e-12)


def test_the_zero_rule_is_wilcox_not_pratt():
    """One zero among mixed signs: Wilcoxon's rule (drop it) gives 2 x 37/128 = 0.578125 (T+ = 18
    of ranks 1..7); Pratt's rule (rank it, then leave it out of T+) gives 0.5."""
    d = [0.0, 0.01, 0.02, -0.03, 0.04, 0.05, 0.06, -0.07]
    wilcox = sps.wilcoxon(d, zero_method="wilcox", method=sps.PermutationMethod()).pvalue
    pratt = sps.wilcoxon(d, zero_method="pratt", method=sps.PermutationMethod()).pvalue
    assert wilcox == pytest.approx(0.578125) and pratt == pytest.approx(0.5)
    assert stats.paired(d)["wilcoxon_p"] == pytest.approx(0.578125, rel=1e-12)


def test_float_noise_of_accuracy_differences_neither_breaks_ties_nor_invents_nonzeros():
    """0.94 - 0.92 and 0.53 - 0.51 are both 0.02 to 12 decimals, (0.1 + 0.2) - 0.3 is 0."""
    raw = [0.94 - 0.92, 0.53 - 0.51, (0.1 + 0.2) - 0.3, 0.71 - 0.66, 0.5 - 0.49]
    assert raw[0] != raw[1] and raw[2] != 0
    r = stats.paired(raw)
    assert (r["wins"], r["ties"], r["losses"]) == (4, 1, 0)
    exact = sps.wilcoxon([0.02, 0.02, 0.05, 0.01], method=sps.PermutationMethod())
    assert r["wilcoxon_p"] == pytest.approx(exact.pvalue)


def test_all_zero_differences_give_p_one_without_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = stats.paired([0.0, 0.0, 0.0, 0.0, 0.0])
    assert r["wilcoxon_p"] == 1.0 and r["ties"] == 5 and r["direction"] == 0


def test_equal_differences_have_no_t_interval_p_or_mde():
    """[0.02, 0.02, 0.02]: no spread, so the t statistic, its interval and a power model are
    undefined (NaN), not a certainty (p 0, interval [0.02, 0.02], MDE 0). The signed-rank test
    is defined: three positives of equal rank, p = 2 / 2^3."""
    r = stats.paired([0.02, 0.02, 0.02])
    assert all(math.isnan(r[k]) for k in ("t_p", "ci_low", "ci_high"))
    assert r["mde80"] == math.inf  # three seeds: p >= 0.25 whatever the effect
    assert r["mean_diff"] == pytest.approx(0.02) and r["wilcoxon_p"] == pytest.approx(0.25)
    for d in ([0.02] * 8, [0.0] * 8):  # reachable at 8 seeds, but no spread: no power model
        assert all(math.isnan(stats.paired(d)[k]) for k in ("t_p", "ci_low", "ci_high", "mde80"))


def test_direction_and_significance_come_from_one_test():
    """Nineteen wins of +0.01 and one loss of -0.5: the mean is negative, but the signed-rank
    test and its Hodges-Lehmann estimate say positive. The 19 tied wins share mid-rank 10, the
    loss has rank 20, T+ = 190; over the 2^20 flips T+ = 10 k + 20 s >= 190 for (k, s) = (19, 0),
    (19, 1), (18, 1) and (17, 1): 1 + 1 + 19 + 171 = 192 flips, p = 2 x 192 / 2^20."""
    d = [0.01] * 19 + [-0.5]
    r = stats.paired(d)
    assert r["mean_diff"] < 0 and r["direction"] == 1 and r["hl"] == pytest.approx(0.01)
    assert r["wilcoxon_p"] == pytest.approx(2 * 192 / 2 ** 20, rel=1e-12)
    assert r["hl_low"] <= 0.01 <= r["hl_high"]


def test_hodges_lehmann_interval_inverts_the_signed_rank_test():
    """n = 8 distinct differences: the 95% interval is [W_(4), W_(33)] of the 36 Walsh averages
    (P(T+ <= 3) = 5/256 <= 0.025 < P(T+ <= 4) = 7/256), and a shift just inside it is not
    rejected, one just outside is."""
    d = np.array([0.031, -0.012, 0.054, 0.008, 0.022, 0.047, -0.003, 0.015])
    r = stats.paired(d)
    w = np.sort((d[:, None] + d[None, :])[np.triu_indices(8)] / 2)
    assert (r["hl_low"], r["hl_high"]) == (pytest.approx(w[3]), pytest.approx(w[32]))
    assert r["hl"] == pytest.approx(np.median(w))
    from toyspt.analysis import rank_tests

    for end, step in ((w[3], 1e-9), (w[32], -1e-9)):
        assert rank_tests.signed_rank(d - (end + step))["p"] > 0.05
        assert rank_tests.signed_rank(d - (end - step))["p"] <= 0.05
    assert stats.paired(d[:5])["hl_low"] == -math.inf  # five differences: the test cannot reject


def test_mde_is_that_of_the_signed_rank_test_at_the_level_given():
    """Five seeds: the smallest two-sided p is 2 / 2^5 = 0.0625 > 0.05, so no effect is
    detectable (inf); at 20 seeds the MDE sits just above the t test's 0.6604 sd (Wilcoxon's
    efficiency 3 / pi against t under normality) and grows at the Holm level 0.05 / 4."""
    from toyspt.analysis import rank_tests

    assert stats.paired([0.01, 0.03, -0.02, 0.05, 0.02])["mde80"] == math.inf
    assert stats.paired([0.01, 0.03, -0.02, 0.05, 0.02])["wilcoxon_min_p"] == pytest.approx(0.0625)
    m20 = rank_tests.mde_signed_rank(1.0, 20, 0.05)
    assert stats.mde(1.0, 20) < m20 < stats.mde(1.0, 20) * 1.06
    assert rank_tests.mde_signed_rank(1.0, 20, 0.05 / 4) > m20
    assert rank_tests.mde_signed_rank(0.03, 20, 0.05) == pytest.approx(0.03 * m20)
    d = [0.01, 0.03, -0.02, 0.05, 0.02, 0.04, 0.0, 0.06, -0.01, 0.03]
    assert stats.paired(d, level=0.0125)["mde80"] == pytest.approx(
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
    assert stats.mde(1.0, 20) == pytest.approx(0.66044, abs=1e-4)
    assert stats.mde(1.0, 20) > (sps.norm.ppf(0.975) + sps.norm.ppf(0.8)) / math.sqrt(20)
    assert stats.mde(0.03, 20) == pytest.approx(0.03 * stats.mde(1.0, 20))
    assert stats.mde(1.0, 2) > stats.mde(1.0, 5) > stats.mde(1.0, 50)


def test_mde_has_eighty_percent_power_by_simulation():
    rng = np.random.default_rng(0)
    n, reps = 10, 20_000
    d = rng.normal(stats.mde(1.0, n), 1.0, size=(reps, n))
    t = d.mean(1) / (d.std(1, ddof=1) / math.sqrt(n))
    power = np.mean(np.abs(t) > sps.t.ppf(0.975, n - 1))
    assert power == pytest.approx(0.80, abs=0.012)  # 4 binomial sd at 20,000 draws


@pytest.mark.parametrize("bad,match", [([0.1], "at least 2"), ([0.1, math.nan], "at least 2"),
                                       ([[0.1, 0.2]], "1-D"), ([0.1, math.inf], "infinite"),
                                       (["a", "b"], "numbers")])
def test_paired_refuses_bad_input(bad, match):
    with pytest.raises(ValueError, match=match):
        stats.paired(bad)


def test_mde_refuses_bad_input():
    with pytest.raises(ValueError, match="n"):
        stats.mde(1.0, 1)
    with pytest.raises(ValueError, match="sd"):
        stats.mde(-1.0, 5)


# ---------------------------------------------------------------------------------------
# holm

def test_holm_by_hand():
    # sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1: 0.02, 0.03, 0.06, 0.04 -> running max
    got = stats.holm([0.01, 0.04, 0.03, math.nan, 0.005])
    assert got[:3] == pytest.approx([0.03, 0.06, 0.06]) and math.isnan(got[3]) and got[4] == pytest.approx(0.02)
    assert stats.holm([0.5, 0.6]).tolist() == [1.0, 1.0]  # capped at 1, monotone
    s = pd.Series([0.04, 0.01], index=["b", "a"], name="p")
    out = stats.holm(s)
    assert out.index.tolist() == ["b", "a"] and out.tolist() == pytest.approx([0.04, 0.02]) and out.name == "p"


def _step_down(p, alpha):
    """Holm's procedure: reject the k-th smallest while p_(k) <= alpha / (m - k + 1)."""
    order = np.argsort(p, kind="stable")
    reject = np.zeros(len(p), bool)
    for k, i in enumerate(order):
        if p[i] > alpha / (len(p) - k):
            break
        reject[i] = True
    return reject


def test_rejecting_at_adjusted_p_is_holms_step_down():
    rng = np.random.default_rng(1)
    for _ in range(500):
        m = int(rng.integers(1, 13))
        p = np.where(rng.random(m) < 0.5, rng.random(m) * 0.05, rng.random(m))
        adj = stats.holm(p)
        assert (adj >= p - 1e-15).all() and (adj <= 1).all()
        assert (np.diff(adj[np.argsort(p, kind="stable")]) >= -1e-15).all()  # monotone in p
        for alpha in (0.01, 0.05, 0.1):
            assert ((adj <= alpha) == _step_down(p, alpha)).all()


def test_holm_refuses_values_outside_zero_one():
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        stats.holm([0.2, 1.2])


# ---------------------------------------------------------------------------------------
# share of gain: Fieller

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


# ---------------------------------------------------------------------------------------
# base rate

def _pair(only_predictor, only_majority, both_right, both_wrong, majority=True):
    """Per-run booleans (predicted, actual) with the four cells of the McNemar table; the
    majority answer is ``majority`` (the caller keeps it the majority)."""
    pred, act = [], []
    for k, (p_right, m_right) in ((only_predictor, (True, False)), (only_majority, (False, True)),
                                  (both_right, (True, True)), (both_wrong, (False, False))):
        a = majority if m_right else not majority
        pred += [a if p_right else not a] * k
        act += [a] * k
    return np.array(pred), np.array(act)


def test_base_rate_is_exact_mcnemar_on_the_discordant_runs():
    """The epoch-100 proximity index on the 40 UCR runs: right where always answering the
    majority basin is wrong in 14 runs, wrong where it is right in 4: exact one-sided McNemar
    p = P(Bin(18, 1/2) >= 14) = 0.01544 (not the one-sample binomial against the majority share,
    which treats that share as known: p < 0.001 there)."""
    pred, act = _pair(14, 4, 22, 0)
    r = stats.hits_vs_base_rate(pred, act)
    assert (r["hits"], r["n"], r["majority_hits"], r["only_predictor"], r["only_majority"]) == (36, 40, 26, 14, 4)
    assert r["majority"] is True and r["base_rate"] == 26 / 40 and r["share"] == 36 / 40
    assert r["p"] == pytest.approx(sps.binom.sf(13, 18, 0.5)) and r["p"] == pytest.approx(0.0154419, abs=1e-6)
    assert sps.binomtest(36, 40, 26 / 40, alternative="greater").pvalue < 0.001  # the old test's answer
    assert r["test"] == "exact McNemar, one-sided"


@pytest.mark.parametrize("n,majority", [(10, 5), (10, 7), (40, 26), (55, 55)])
def test_always_answering_the_majority_cannot_pass(n, majority):
    act = np.array([True] * majority + [False] * (n - majority))
    r = stats.hits_vs_base_rate(np.ones(n, bool), act)
    assert r["p"] == 1.0 and r["share"] == r["base_rate"] and r["only_predictor"] == r["only_majority"] == 0


def test_mcnemar_counts_only_discordant_runs():
    """The same hits (30 of 40) and base rate (26) with more disagreement give a larger p."""
    few = stats.hits_vs_base_rate(*_pair(4, 0, 26, 10))
    many = stats.hits_vs_base_rate(*_pair(12, 8, 18, 2))
    assert few["hits"] == many["hits"] == 30 and few["majority_hits"] == many["majority_hits"] == 26
    assert few["p"] == pytest.approx(1 / 16) and many["p"] == pytest.approx(sps.binom.sf(11, 20, 0.5))
    assert many["p"] > few["p"]


@pytest.mark.parametrize("args,match", [((-1, 3), "only_predictor"), ((2, 1.0), "only_majority"),
                                        ((True, 3), "only_predictor")])
def test_mcnemar_refuses_bad_counts(args, match):
    with pytest.raises(ValueError, match=match):
        stats.mcnemar_exact(*args)


# ---------------------------------------------------------------------------------------
# share rounding, equivalence

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


def test_tost_declares_equivalence_only_inside_the_margin():
    """Ten differences scattered +-0.002 around 0.001: the 90% interval lies inside +-0.01,
    TOST p is the larger one-sided t p; around 0.012 it is not equivalent; no spread is NaN."""
    base = np.array([-2, -1, 0, 1, 2, -2, -1, 0, 1, 2]) * 0.001
    r = stats.tost(base + 0.001, 0.01)
    lower = sps.ttest_1samp(base + 0.001, -0.01, alternative="greater").pvalue
    upper = sps.ttest_1samp(base + 0.001, 0.01, alternative="less").pvalue
    assert r["p"] == pytest.approx(max(lower, upper)) and r["p"] < 1e-6
    assert -0.01 < r["ci90_low"] < r["ci90_high"] < 0.01
    assert stats.tost(base + 0.012, 0.01)["p"] > 0.5
    assert math.isnan(stats.tost([0.0] * 5, 0.01)["p"])


# ---------------------------------------------------------------------------------------
# within-set association

def _runs(rng, effect=0.0, slope=0.0, confound=True, sets=4, seeds=10):
    """Runs of ``sets`` data sets: set levels far apart; with ``confound`` the share of
    proximity runs rises with the set's level (a between-set association, nothing within)."""
    rows = []
    for g in range(sets):
        p = (g + 0.5) / sets if confound else 0.5
        basin = rng.random(seeds) < p
        basin[:2] = [True, False]  # both levels in every set
        pi = np.exp(rng.normal(size=seeds) + (g if confound else 0))
        acc = 0.6 + 0.1 * g + rng.normal(0, 0.03, seeds) + effect * basin + slope * np.log(pi)
        rows += [dict(dataset=f"S{g}", seed=s, basin="proximity" if b else "anti-local", pi=v, acc=a)
                 for s, (b, v, a) in enumerate(zip(basin, pi, acc))]
    return pd.DataFrame(rows)


def test_planted_within_set_associations_are_found():
    rng = np.random.default_rng(6)
    f = _runs(rng, effect=0.06)
    r = stats.within_set_association(f, x="basin", y="acc")
    assert r["kind"] == "binary" and r["positive"] == "proximity" and r["n_perm"] == 10_000
    assert r["perm_p"] < 0.001 and r["mwu_p"] < 0.001 and r["auc"] > 0.75
    assert r["ci_low"] < 0.06 < r["ci_high"] and r["n_sets"] == 4 and r["n"] == 40
    c = stats.within_set_association(_runs(rng, slope=0.02), x="pi", y="acc")
    assert c["kind"] == "continuous" and c["perm_p"] < 0.001 and c["ci_low"] > 0 and len(c["rho_per_set"]) == 4


def test_between_set_differences_are_not_read_as_association():
    """Set levels and basin shares move together, nothing within: a pooled test sees it, the
    stratified ones do not; over 400 such null data sets each rejects at 0.05 in <= 7%."""
    rng = np.random.default_rng(7)
    f = _runs(rng)
    pooled = sps.mannwhitneyu(f.acc[f.basin == "proximity"], f.acc[f.basin == "anti-local"])
    assert pooled.pvalue < 0.01 and sps.spearmanr(f.pi, f.acc).pvalue < 1e-6
    rejects = np.zeros(3)
    for _ in range(400):
        f = _runs(rng)
        b = stats.within_set_association(f, x="basin", y="acc", n_perm=1000, seed=int(rng.integers(1 << 30)))
        c = stats.within_set_association(f, x="pi", y="acc", n_perm=1000, seed=int(rng.integers(1 << 30)))
        rejects += [b["perm_p"] <= 0.05, b["mwu_p"] <= 0.05, c["perm_p"] <= 0.05]
    assert (rejects / 400 <= 0.07).all(), rejects / 400
    assert (rejects / 400 >= 0.02).all(), rejects / 400  # a test that never rejects is no test either


def test_association_is_seeded_and_leaves_out_one_level_sets():
    rng = np.random.default_rng(8)
    f = _runs(rng, effect=0.01)
    one = pd.DataFrame(dict(dataset="X", seed=range(5), basin="proximity", pi=1.0, acc=np.linspace(0.5, 0.9, 5)))
    both = pd.concat([f, one])
    a = stats.within_set_association(both, x="basin", y="acc", n_perm=2000, seed=1)
    assert a == stats.within_set_association(both, x="basin", y="acc", n_perm=2000, seed=1)
    assert a == stats.within_set_association(f, x="basin", y="acc", n_perm=2000, seed=1)  # X carries nothing
    assert a["n_sets"] == 4 and 1 / 2001 <= a["perm_p"] <= 1


@pytest.mark.parametrize("change,kw,match", [
    (lambda f: f.drop(columns="acc"), {}, "no column"),
    (lambda f: f.assign(acc=np.where(f.seed == 3, np.nan, f.acc)), {}, "missing value"),
    (lambda f: f.assign(basin="proximity"), {}, "single value"),
    (lambda f: f, {"n_perm": 100}, "n_perm"),
    (lambda f: f, {"kind": "ordinal"}, "kind"),
    (lambda f: f.assign(acc="high"), {}, "not numeric"),
    (lambda f: f.assign(basin=np.where(f.dataset == "S0", "proximity", "anti-local")), {}, "both"),
    (lambda f: f, {"positive": "local"}, "positive"),
])
def test_association_refuses_bad_input(change, kw, match):
    f = change(_runs(np.random.default_rng(9)))
    with pytest.raises(ValueError, match=match):
        stats.within_set_association(f, x="basin", y="acc", **kw)


def test_one_perfect_set_does_not_decide_the_pooled_rho():
    """Four sets of 5 runs, x = 0..4: set A has rho = 1, the others rho = 0 (y ranks 0 4 3 2 1).
    The pool is the mean of the rhos weighted by n - 1: 0.25, with the permutation-null
    interval 0.25 ± 1.96 / sqrt(16); a Fisher-z mean with a clipped atanh gave 0.991."""
    y = np.r_[np.arange(5.0), np.tile([0.0, 4.0, 3.0, 2.0, 1.0], 3)]
    f = pd.DataFrame(dict(dataset=np.repeat(list("ABCD"), 5), x=np.tile(np.arange(5.0), 4), y=y))
    r = stats.within_set_association(f, x="x", y="y", kind="continuous", n_perm=2000)
    assert r["rho_per_set"] == pytest.approx(dict(A=1.0, B=0.0, C=0.0, D=0.0), abs=1e-12)
    assert r["rho"] == pytest.approx(0.25, abs=1e-12)
    half = sps.norm.ppf(0.975) / 4
    assert (r["ci_low"], r["ci_high"]) == (pytest.approx(0.25 - half), pytest.approx(0.25 + half))
    assert r["perm_p"] > 0.05


def test_pooled_rho_is_calibrated_under_the_null_at_five_runs_per_set():
    """400 seeded null data sets of 6 sets x 5 runs (x, y independent normal): the interval
    excludes 0, and perm_p <= 0.05, each in at most 7.75% of them: the 99% upper binomial limit
    of 400 draws at a true rate of 5% (binom.ppf(0.99, 400, 0.05) / 400). The Fisher-z pool with
    a clipped atanh excluded 0 in 10-13% (a set of 5 has |rho| = 1 with probability 1/60)."""
    rng = np.random.default_rng(11)
    n, excl, rej = 400, 0, 0
    for i in range(n):
        f = pd.DataFrame(dict(dataset=np.repeat([f"S{g}" for g in range(6)], 5), x=rng.normal(size=30),
                              y=rng.normal(size=30)))
        r = stats.within_set_association(f, x="x", y="y", kind="continuous", n_perm=1000, seed=i)
        excl += not r["ci_low"] <= 0 <= r["ci_high"]
        rej += r["perm_p"] <= 0.05
    bound = sps.binom.ppf(0.99, n, 0.05) / n
    assert bound == 0.0775
    assert excl / n <= bound and rej / n <= bound, (excl / n, rej / n)
    assert excl / n >= 0.02 and rej / n >= 0.02  # and they do reject: 2% is below the 0.1% binomial limit


def test_the_binary_permutation_stays_within_sets():
    """Two sets of 4 runs, 2 'proximity' in each, and the two best runs of each set are the
    proximity ones. Within sets, 6 x 6 equally likely arrangements, 2 as extreme as observed:
    p = 1/18; permuting the labels across the 8 runs would give 2 / C(8, 4) = 1/35."""
    import itertools

    f = pd.DataFrame(dict(dataset=list("AAAABBBB"), basin=["proximity", "proximity", "anti-local", "anti-local"] * 2,
                          acc=[0.9, 0.9, 0.8, 0.8, 0.6, 0.6, 0.5, 0.5]))
    c = np.array([0.5, 0.5, -0.5, -0.5] * 2)
    obs = 2.0
    within = np.mean([abs(c[list(a)].sum() + c[[4 + j for j in b]].sum()) >= obs
                      for a in itertools.combinations(range(4), 2) for b in itertools.combinations(range(4), 2)])
    across = np.mean([abs(c[list(k)].sum()) >= obs for k in itertools.combinations(range(8), 4)])
    assert within == pytest.approx(1 / 18) and across == pytest.approx(1 / 35)
    r = stats.within_set_association(f, x="basin", y="acc", n_perm=10_000, seed=3)
    se = math.sqrt(within * (1 - within) / 10_000)
    assert r["perm_p"] == pytest.approx(within, abs=4 * se)  # 4 binomial sd of 10,000 permutations


def test_the_continuous_permutation_stays_within_sets():
    """Two sets of 4 runs with rho = 1 in each, on very different levels: the pooled rho is 1,
    reached within sets only when both sets are in order or both reversed, 2 of 24 x 24
    arrangements: p = 1/288."""
    f = pd.DataFrame(dict(dataset=list("AAAABBBB"), x=[0.0, 1, 2, 3, 10, 11, 12, 13],
                          y=[0.1, 0.2, 0.3, 0.4, 5.1, 5.2, 5.3, 5.4]))
    r = stats.within_set_association(f, x="x", y="y", kind="continuous", n_perm=20_000, seed=4)
    assert r["rho"] == pytest.approx(1.0)
    p = 2 / 576
    assert r["perm_p"] == pytest.approx(p, abs=4 * math.sqrt(p / 20_000) + 1 / 20_001)
