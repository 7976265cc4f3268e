"""toyspt.analysis.stats: a predictor against the base rate (exact McNemar), within-set association."""
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from toyspt.analysis import stats

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


def test_the_mcnemar_bound_covers_every_set_of_predictions_with_that_accuracy():
    """Binary labels, 7 of 12 in the majority class: for every prediction vector, its exact McNemar p
    is at most the bound of its number of right answers, and the bound is one of them (attained)."""
    import itertools

    y = np.array([1] * 7 + [0] * 5)
    seen: dict[int, list[float]] = {}
    for pred in itertools.product((0, 1), repeat=12):
        right = np.asarray(pred) == y
        p = stats.mcnemar_exact(int((right & (y == 0)).sum()), int((~right & (y == 1)).sum()))
        seen.setdefault(int(right.sum()), []).append(p)
    for correct, ps in seen.items():
        bound = stats.mcnemar_bound(correct, 12, 7)
        assert max(ps) == bound and all(p <= bound for p in ps)
    assert stats.mcnemar_bound(12, 12, 7) == pytest.approx(0.5 ** 5)  # all right: right where the rule is wrong on 5
    assert stats.mcnemar_bound(7, 12, 7) >= 0.5  # no better than the rule: never significant


def test_the_mcnemar_bound_covers_every_prediction_of_three_classes():
    """Three classes, 4 of 8 examples in the majority class (0): for every one of the 6,561 prediction
    vectors its exact McNemar p against always answering 0 is at most the bound of its number of right
    answers, and the bound is attained."""
    import itertools

    y = np.array([0, 0, 0, 0, 1, 1, 2, 2])
    seen: dict[int, list[float]] = {}
    for pred in itertools.product((0, 1, 2), repeat=8):
        right, base = np.asarray(pred) == y, y == 0
        seen.setdefault(int(right.sum()), []).append(stats.mcnemar_exact(int((right & ~base).sum()),
                                                                         int((~right & base).sum())))
    for correct, ps in seen.items():
        bound = stats.mcnemar_bound(correct, 8, 4, classes=3)
        assert max(ps) <= bound and bound in ps, correct


@pytest.mark.parametrize("args,match", [((13, 12, 7), "correct <= n"), ((3, 12, 5), "n/2 <= majority"),
                                        ((3, 12, 3, 3), "n/3 <= majority"), ((3, 12, 7, 1), "classes >= 2"),
                                        ((-1, 12, 7), "correct"), ((3, 12.0, 7), "n: expected a count")])
def test_the_mcnemar_bound_refuses_bad_counts(args, match):
    with pytest.raises(ValueError, match=match):
        stats.mcnemar_bound(*args)




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
