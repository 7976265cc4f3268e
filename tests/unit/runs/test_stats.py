"""toyspt.runs.stats: paired differences, Holm, Fieller shares, base rates, within-set association."""
import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from toyspt.runs import stats

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


@pytest.mark.parametrize("d,method", [
    (np.arange(1, 8) * 0.01, "exact"),  # n <= 50, no ties, no zeros
    ([0.02, 0.02, -0.01, 0.03, 0.04], "permutation"),  # ties, n <= 13: all 2^n sign flips
    ([0.0, 0.01, -0.02, 0.03, 0.04, 0.05, 0.06], "permutation"),  # a zero, n <= 13
    (np.r_[np.arange(1, 19), 3, 5] * 0.01, "normal"),  # ties at n = 20
    (np.linspace(-0.2, 1, 60) + 0.001, "normal"),  # n > 50
])
def test_the_reported_wilcoxon_method_is_the_one_scipy_ran(d, method):
    d = np.asarray(d, float)
    r = stats.paired(d)
    assert r["wilcoxon_method"] == method
    run = {"exact": "exact", "normal": "asymptotic", "permutation": sps.PermutationMethod()}[method]
    assert r["wilcoxon_p"] == pytest.approx(sps.wilcoxon(d, method=run).pvalue, rel=1e-12)


def test_float_noise_of_accuracy_differences_neither_breaks_ties_nor_invents_nonzeros():
    """0.94 - 0.92 and 0.53 - 0.51 are both 0.02 to 12 decimals, (0.1 + 0.2) - 0.3 is 0."""
    raw = [0.94 - 0.92, 0.53 - 0.51, (0.1 + 0.2) - 0.3, 0.71 - 0.66, 0.5 - 0.49]
    assert raw[0] != raw[1] and raw[2] != 0
    r = stats.paired(raw)
    assert (r["wins"], r["ties"], r["losses"]) == (4, 1, 0)
    assert r["wilcoxon_method"] == "permutation"  # the tie and the zero were seen
    exact = sps.wilcoxon([0.02, 0.02, 0.05, 0.01], method=sps.PermutationMethod())
    assert r["wilcoxon_p"] == pytest.approx(exact.pvalue)


def test_all_zero_differences_give_p_one_without_warning_or_nan():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = stats.paired([0.0, 0.0, 0.0, 0.0, 0.0])
    assert r["wilcoxon_p"] == 1.0 and r["t_p"] == 1.0 and r["ties"] == 5
    assert (r["ci_low"], r["ci_high"], r["mde80"]) == (0.0, 0.0, 0.0)
    const = stats.paired([0.02] * 4)
    assert (const["ci_low"], const["ci_high"], const["t_p"]) == (0.02, 0.02, 0.0)


def test_mde_is_the_noncentral_t_solution():
    """n = 20: 0.6604 sd (the one-sample two-sided t at 80% power, as G*Power gives it),
    above the normal approximation's 2.8016 / sqrt(20) = 0.6265 sd; scales with sd."""
    assert stats.mde(1.0, 20) == pytest.approx(0.66044, abs=1e-4)
    assert stats.mde(1.0, 20) > (sps.norm.ppf(0.975) + sps.norm.ppf(0.8)) / math.sqrt(20)
    assert stats.mde(0.03, 20) == pytest.approx(0.03 * stats.mde(1.0, 20))
    assert stats.mde(1.0, 2) > stats.mde(1.0, 5) > stats.mde(1.0, 50)
    assert stats.paired([0.01, 0.03, -0.02, 0.05, 0.02])["mde80"] == pytest.approx(
        stats.mde(np.std([0.01, 0.03, -0.02, 0.05, 0.02], ddof=1), 5))


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

def test_base_rate_is_the_majority_class_not_one_half():
    r = stats.base_rate_test(27, 40, 26)  # the init gain on the UCR runs vs always "proximity"
    assert r["share"] == 27 / 40 and r["base_rate"] == 26 / 40
    assert r["p"] == pytest.approx(sps.binom.sf(26, 40, 0.65)) and r["p"] == pytest.approx(0.4408, abs=1e-4)
    assert sps.binomtest(27, 40, 0.5, alternative="greater").pvalue < 0.02  # what the wrong null would say


@pytest.mark.parametrize("n,majority", [(10, 5), (10, 7), (40, 26), (50, 48), (55, 55)])
def test_always_answering_the_majority_cannot_pass(n, majority):
    r = stats.base_rate_test(majority, n, majority)
    assert r["p"] >= 0.5 and r["share"] == r["base_rate"]


def test_a_perfect_predictor_passes():
    assert stats.base_rate_test(40, 40, 26)["p"] == pytest.approx(0.65 ** 40)


@pytest.mark.parametrize("args,match", [((5, 10, 4), "majority_hits"), ((11, 10, 6), "hits"),
                                        ((1, 1, 1), "n"), ((5.0, 10, 6), "integer"), ((True, 10, 6), "integer")])
def test_base_rate_refuses_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        stats.base_rate_test(*args)


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
