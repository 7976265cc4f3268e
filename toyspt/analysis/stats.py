"""The statistics every comparison of arms uses: pure functions on numpy / pandas values.

* :func:`paired`: paired differences (arm - base, one per seed): the mean with its 95% t
  interval and t p (descriptive), and the verdict's one test: Wilcoxon signed-rank (exact,
  zeros dropped) with its direction, the Hodges-Lehmann estimate and the interval inverting
  it, and its minimal detectable effect at a given level (:mod:`toyspt.analysis.rank_tests`);
* :func:`tost`: equivalence of paired differences to 0 within a margin (two one-sided t tests);
* :func:`holm`: Holm's step-down adjustment over a family of p-values;
* :func:`share_of_gain`: an arm's share of SPT's gain (ratio of mean gains) with Fieller's
  interval, which is exact for a ratio of correlated normal means and unbounded when the
  denominator is not significantly different from 0 (a delta-method interval would then be
  finite and wrong);
* :func:`hits_vs_base_rate`: a predictor against always answering the majority class on the
  same runs, exact McNemar on the runs where the two disagree (:func:`mcnemar_exact`);
* :func:`within_set_association`: a run-level predictor against an outcome *within* sets
  (stratified), so that differences between sets are not read as an association.

Every function refuses bad input (too few values, mismatched lengths, NaN where none is
allowed) with a ValueError that names what is wrong. scipy does the distributions and tests;
only Holm's adjustment, the stratified permutations and what :mod:`toyspt.analysis.rank_tests`
lists are written here (scipy has none of them).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import optimize, stats

from toyspt.analysis import rank_tests

DECIMALS = 12  # differences are rounded to this many decimals before ties and signs are counted
MIN_PERMUTATIONS = 1000  # within_set_association refuses fewer permutations than this


def _values(v, what: str, allow_nan: bool = True) -> np.ndarray:
    """A 1-D float array of finite values (NaN allowed when ``allow_nan``)."""
    try:
        a = np.asarray(v, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{what}: expected numbers, got {type(v).__name__}") from None
    if a.ndim != 1:
        raise ValueError(f"{what}: expected a 1-D sequence, got shape {a.shape}")
    if np.isinf(a).any():
        raise ValueError(f"{what}: {int(np.isinf(a).sum())} infinite value(s)")
    if not allow_nan and np.isnan(a).any():
        raise ValueError(f"{what}: {int(np.isnan(a).sum())} NaN value(s) where none is allowed")
    return a


# ---------------------------------------------------------------------------------------
# paired differences

def mde(sd: float, n: int, power: float = 0.8, alpha: float = 0.05) -> float:
    """Minimal detectable effect of a two-sided paired (one-sample) t-test at level ``alpha``:
    the mean difference that is rejected with probability ``power`` when the differences are
    normal with standard deviation ``sd``. Exact under that model: the t statistic is then
    noncentral t with n - 1 degrees of freedom and noncentrality ``delta sqrt(n) / sd``, and
    power(delta) = P(|T| > t_crit) is solved for delta with ``scipy.stats.nct`` (the normal
    approximation ``(z_{1-alpha/2} + z_power) sd / sqrt(n)`` is too small at few seeds)."""
    if n < 2:
        raise ValueError(f"n: need at least 2 differences, got {n}")
    if not (sd >= 0 and math.isfinite(sd)):
        raise ValueError(f"sd: must be finite and >= 0, got {sd}")
    if not (0 < power < 1 and 0 < alpha < 1):
        raise ValueError(f"power and alpha: must be in (0, 1), got {power}, {alpha}")
    if sd == 0:
        return 0.0
    df = n - 1
    crit = stats.t.ppf(1 - alpha / 2, df)

    def gap(d):  # power at standardised effect d, minus the target
        nc = d * math.sqrt(n)
        # the lower tail as sf at -nc (by symmetry): nct.cdf returns NaN far in its left tail
        return stats.nct.sf(crit, df, nc) + stats.nct.sf(crit, df, -nc) - power

    hi = 1.0
    while gap(hi) < 0:
        hi *= 2
    return float(optimize.brentq(gap, 0.0, hi, xtol=1e-12)) * sd


PAIRED_KEYS = ("n", "mean_diff", "sd_diff", "ci_low", "ci_high", "t_p", "hl", "hl_low", "hl_high", "wilcoxon_p",
               "wilcoxon_method", "direction", "wilcoxon_min_p", "wins", "ties", "losses", "mde80")


def _rounded(a: np.ndarray, decimals: int) -> np.ndarray:
    return np.round(a, decimals) + 0.0  # + 0.0 turns -0.0 into 0.0


def paired(d, decimals: int = DECIMALS, level: float = 0.05) -> dict:
    """Paired differences ``d`` (arm - base, one per seed; NaN dropped): a dict of
    :data:`PAIRED_KEYS`. Differences are rounded to ``decimals`` first, so that float noise of
    subtracting accuracies (k/N) neither breaks ties nor makes a zero nonzero.

    * Descriptive: ``mean_diff``, ``sd_diff`` (ddof=1), the 95% t interval ``ci_low, ci_high``
      and the paired t-test's two-sided ``t_p``. With no spread (every difference equal) all
      three are NaN: undefined, not a certainty.
    * Verdict-bearing, one test (:func:`toyspt.analysis.rank_tests.signed_rank`): the Wilcoxon
      signed-rank test, zero rule "wilcox" (zeros dropped), exact sign-flip distribution with
      mid-ranks (``wilcoxon_method`` "exact", or "normal" beyond
      :data:`toyspt.analysis.rank_tests.EXACT_MAX`); ``wilcoxon_p`` two-sided; ``direction`` the
      side that test is about (+1: positive differences outrank negative ones); the
      Hodges-Lehmann estimate ``hl`` with the 95% interval ``hl_low, hl_high`` that inverts
      the same test (±inf where it cannot reject at this n); ``wilcoxon_min_p``, the smallest p
      these ranks allow (0.0625 with 5 nonzero differences). Every difference 0: p 1.
    * ``wins, ties, losses``: differences > 0, == 0, < 0 (after the rounding).
    * ``mde80``: :func:`toyspt.analysis.rank_tests.mde_signed_rank` at 80% power and ``level``
      (pass alpha / m for a Holm family of m) from ``sd_diff`` and n: inf where the test
      cannot reach ``level`` at n, NaN with no spread."""
    a = _values(d, "d")
    a = _rounded(a[~np.isnan(a)], decimals)
    n = len(a)
    if n < 2:
        raise ValueError(f"d: need at least 2 non-NaN differences, got {n}")
    spread = np.ptp(a) > 0  # not sd > 0: the sd of equal values can be an ulp above 0
    mean, sd = float(a.mean()), float(a.std(ddof=1)) if spread else 0.0
    if spread:
        t = stats.ttest_1samp(a, 0.0)
        ci = t.confidence_interval(0.95)
        lo, hi, t_p = float(ci.low), float(ci.high), float(t.pvalue)
    else:  # every difference equal: no spread, so no t statistic, interval or power model
        lo = hi = t_p = math.nan
    w = rank_tests.signed_rank(a)
    return dict(n=n, mean_diff=mean, sd_diff=sd, ci_low=lo, ci_high=hi, t_p=t_p, hl=w["hl"], hl_low=w["hl_low"],
                hl_high=w["hl_high"], wilcoxon_p=w["p"], wilcoxon_method=w["method"], direction=w["direction"],
                wilcoxon_min_p=w["min_p"], wins=int((a > 0).sum()), ties=int((a == 0).sum()),
                losses=int((a < 0).sum()), mde80=rank_tests.mde_signed_rank(sd, n, level))


def tost(d, margin: float, decimals: int = DECIMALS) -> dict:
    """Equivalence of paired differences ``d`` to 0 within ``±margin`` (Schuirmann's two one-sided
    t tests, NaN dropped, rounded as :func:`paired` does): ``p`` = max of the p of
    H0: mean <= -margin and of H0: mean >= +margin (equivalent at level alpha when p <= alpha,
    i.e. when the 1 - 2 alpha t interval lies inside ±margin), with the 90% interval
    ``ci90_low, ci90_high``. NaN with no spread (undefined, as in :func:`paired`)."""
    if not (margin > 0 and math.isfinite(margin)):
        raise ValueError(f"margin: must be finite and > 0, got {margin}")
    a = _values(d, "d")
    a = _rounded(a[~np.isnan(a)], decimals)
    if len(a) < 2:
        raise ValueError(f"d: need at least 2 non-NaN differences, got {len(a)}")
    if np.ptp(a) == 0:
        return dict(n=len(a), margin=margin, p=math.nan, ci90_low=math.nan, ci90_high=math.nan)
    lower = stats.ttest_1samp(a, -margin, alternative="greater").pvalue
    upper = stats.ttest_1samp(a, margin, alternative="less").pvalue
    ci = stats.ttest_1samp(a, 0.0).confidence_interval(0.90)
    return dict(n=len(a), margin=margin, p=float(max(lower, upper)), ci90_low=float(ci.low),
                ci90_high=float(ci.high))


# ---------------------------------------------------------------------------------------
# multiple comparisons

def holm(pvalues):
    """Holm-Bonferroni adjusted p-values: the i-th smallest of m p-values becomes
    ``max_{j <= i} min(1, (m - j + 1) p_(j))`` (monotone in p, capped at 1). Rejecting where the
    adjusted p <= alpha is Holm's step-down procedure at family-wise level alpha. NaN stays NaN
    and does not count in m. A pandas Series keeps its index; anything else gives an array."""
    a = _values(pvalues, "pvalues")
    if ((a < 0) | (a > 1)).any():
        raise ValueError(f"pvalues: must lie in [0, 1], got {a[(a < 0) | (a > 1)][:3].tolist()}")
    out = np.full(a.shape, np.nan)
    idx = np.flatnonzero(~np.isnan(a))
    order = idx[np.argsort(a[idx], kind="stable")]
    m = len(order)
    out[order] = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * a[order]))
    return pd.Series(out, index=pvalues.index, name=pvalues.name) if isinstance(pvalues, pd.Series) else out


# ---------------------------------------------------------------------------------------
# ratios of mean gains

SHARE_KEYS = ("n", "share", "ci_low", "ci_high", "bounded", "interval", "arm_mean", "spt_mean", "spt_p")


def fieller(a_mean: float, b_mean: float, v_aa: float, v_bb: float, v_ab: float, df: int,
            level: float = 0.95) -> tuple[float, float, str]:
    """Fieller's interval for ``a_mean / b_mean`` from the variances and covariance of the two
    means and the t degrees of freedom: the rho with ``(a - rho b)^2 <= t^2 var(a - rho b)``.
    (low, high, 'bounded') when b is significantly different from 0 at ``level``; otherwise
    the set is two rays or the whole line, returned as (-inf, inf, 'two rays' | 'whole line')."""
    t2 = stats.t.ppf(0.5 + level / 2, df) ** 2
    A = b_mean ** 2 - t2 * v_bb
    B = a_mean * b_mean - t2 * v_ab
    C = a_mean ** 2 - t2 * v_aa
    disc = B * B - A * C
    if A <= 0:
        return -math.inf, math.inf, "two rays" if disc > 0 else "whole line"
    root = math.sqrt(max(disc, 0.0))
    return float((B - root) / A), float((B + root) / A), "bounded"


def _pairs(arm_diff, spt_diff, decimals: int = DECIMALS) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(arm_diff, pd.Series) and isinstance(spt_diff, pd.Series):
        arm_diff, spt_diff = (s.sort_index() for s in arm_diff.align(spt_diff, join="inner"))
    a, b = _values(arm_diff, "arm_diff"), _values(spt_diff, "spt_diff")
    if len(a) != len(b):
        raise ValueError(f"arm_diff and spt_diff: lengths differ ({len(a)} vs {len(b)}); pair them by seed")
    keep = ~(np.isnan(a) | np.isnan(b))
    if keep.sum() < 2:
        raise ValueError(f"arm_diff, spt_diff: need at least 2 seeds with both differences, got {int(keep.sum())}")
    return _rounded(a[keep], decimals), _rounded(b[keep], decimals)


def share_of_gain(arm_diff, spt_diff, level: float = 0.95, decimals: int = DECIMALS) -> dict:
    """An arm's share of SPT's gain: ``mean(arm_diff) / mean(spt_diff)``, both differences to
    scratch paired on the same seeds (two pandas Series are paired on their index; a seed missing
    or NaN in either is dropped), both rounded to ``decimals`` first as :func:`paired` rounds (so
    float noise cannot make a zero gain "significant" and the share bounded). A dict of
    :data:`SHARE_KEYS`: the share, its Fieller interval (:func:`fieller`, from the sample
    covariance of the pairs, n - 1 degrees of freedom), ``bounded`` False and ±inf when SPT's
    gain is not significantly different from 0 at ``level`` (then no share is meaningful), the
    two means and ``spt_p`` (SPT's gain, paired t; NaN when its differences do not vary)."""
    a, b = _pairs(arm_diff, spt_diff, decimals)
    n = len(a)
    cov = np.cov(a, b, ddof=1) / n
    lo, hi, kind = fieller(a.mean(), b.mean(), cov[0, 0], cov[1, 1], cov[0, 1], n - 1, level)
    spt_p = float(stats.ttest_1samp(b, 0.0).pvalue) if np.ptp(b) > 0 else math.nan
    return dict(n=n, share=float(a.mean() / b.mean()) if b.mean() != 0 else math.nan, ci_low=lo, ci_high=hi,
                bounded=kind == "bounded", interval=kind, arm_mean=float(a.mean()), spt_mean=float(b.mean()),
                spt_p=spt_p)


# ---------------------------------------------------------------------------------------
# a predictor's hit rate

def mcnemar_exact(only_predictor: int, only_majority: int) -> float:
    """Exact McNemar p of a predictor against always answering the majority class, scored on
    the same runs: of the discordant runs (one of the two right, the other wrong), the
    predictor is right on ``only_predictor`` and the majority answer on ``only_majority``;
    under H0 (equally accurate) each discordant run goes either way with probability 1/2.
    One-sided (``scipy.stats.binomtest``, alternative "greater"): the claim tested is that the
    predictor beats the base rate. No discordant run: p 1 (the two answers never differ)."""
    for name, v in (("only_predictor", only_predictor), ("only_majority", only_majority)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise ValueError(f"{name}: expected a count >= 0, got {v!r}")
    k = int(only_predictor) + int(only_majority)
    return 1.0 if k == 0 else float(stats.binomtest(int(only_predictor), k, 0.5, alternative="greater").pvalue)


def hits_vs_base_rate(predicted, actual) -> dict:
    """A binary predictor against always answering the majority class *on the same runs*:
    ``predicted`` and ``actual`` are boolean per run (e.g. "predicts proximity", "landed in
    proximity"; runs where the predictor has no value must be left out by the caller). The
    paired comparison is exact McNemar (:func:`mcnemar_exact`) on the runs where the two
    answers disagree, not a binomial test against the observed majority share (which treats
    that share as known and ignores that both are scored on the same runs). Returns hits, n,
    share, majority (the majority value, True on a tie), majority_hits, base_rate,
    only_predictor, only_majority (the discordant runs each gets right), p, and test."""
    p, a = np.asarray(predicted), np.asarray(actual)
    if p.dtype != bool or a.dtype != bool or p.ndim != 1 or p.shape != a.shape:
        raise ValueError(f"predicted, actual: need two boolean 1-D arrays of one length, got "
                         f"{p.dtype}{p.shape} and {a.dtype}{a.shape}")
    if len(a) < 2:
        raise ValueError(f"predicted, actual: need at least 2 runs, got {len(a)}")
    k = int(a.sum())
    majority = bool(k >= len(a) - k)
    hit, base = p == a, a == majority
    b, c = int((hit & ~base).sum()), int((~hit & base).sum())
    return dict(hits=int(hit.sum()), n=len(a), share=float(hit.mean()), majority=majority,
                majority_hits=int(base.sum()), base_rate=float(base.mean()), only_predictor=b, only_majority=c,
                p=mcnemar_exact(b, c), test="exact McNemar, one-sided")


# ---------------------------------------------------------------------------------------
# association within sets

def _frame(frame: pd.DataFrame, group: str, x: str, y: str) -> pd.DataFrame:
    missing = [c for c in (group, x, y) if c not in frame.columns]
    if missing:
        raise ValueError(f"frame: no column(s) {missing}; it has {list(frame.columns)}")
    for c in (group, x, y):
        if frame[c].isna().any():
            raise ValueError(f"{c}: {int(frame[c].isna().sum())} missing value(s); drop those runs first")
    if not pd.api.types.is_numeric_dtype(frame[y]) or pd.api.types.is_bool_dtype(frame[y]):
        raise ValueError(f"y: column {y!r} is not numeric")
    if len(frame) < 4:
        raise ValueError(f"frame: need at least 4 runs, got {len(frame)}")
    return frame[[group, x, y]]


def _perm_p(observed: float, perm: np.ndarray) -> float:
    """Two-sided permutation p, counting the observed arrangement: (1 + #|T*| >= |T|) / (1 + B)."""
    tol = 1e-12 * max(1.0, abs(observed))
    return float((1 + np.sum(np.abs(perm) >= abs(observed) - tol)) / (1 + len(perm)))


def _binary(f: pd.DataFrame, group: str, x: str, y: str, positive, n_perm: int, rng) -> dict:
    levels = sorted(f[x].unique())
    positive = levels[-1] if positive is None else positive
    if positive not in levels:
        raise ValueError(f"positive: {positive!r} is not a value of {x!r} ({levels})")
    other = next(v for v in levels if v != positive)
    used = f.groupby(group, sort=False).filter(lambda g: g[x].nunique() == 2)
    if used[x].nunique() < 2:
        raise ValueError(f"{x}: no {group} holds runs of both {positive!r} and {other!r}; nothing to compare within")
    sets = used.groupby(group, sort=False)
    c = (used[y] - sets[y].transform("mean")).to_numpy(float)  # y centred within its set
    pos = (used[x] == positive).to_numpy()
    xc = pos - (used[x] == positive).groupby(used[group], sort=False).transform("mean").to_numpy()
    s_obs = c[pos].sum()  # = xc @ c, since c sums to 0 within each set
    s_perm = np.zeros(n_perm)
    for rows in sets.indices.values():
        s_perm += (rng.permuted(np.tile(pos[rows], (n_perm, 1)), axis=1) * c[rows]).sum(1)
    # the fixed-effects (one level per set) regression of y on x: diff = xc.c / xc.xc, its t interval
    w = float(xc @ xc)
    diff = s_obs / w
    resid = c - diff * xc
    df = len(c) - sets.ngroups - 1
    half = stats.t.ppf(0.975, df) * math.sqrt((resid @ resid) / df / w) if df > 0 else math.inf
    k1, k0 = int(pos.sum()), int((~pos).sum())
    u = stats.mannwhitneyu(c[pos], c[~pos], alternative="two-sided")
    return dict(kind="binary", positive=positive, other=other, n=len(used), n_sets=sets.ngroups,
                n_positive=k1, n_other=k0, diff=float(diff), ci_low=float(diff - half), ci_high=float(diff + half),
                auc=float(u.statistic / (k1 * k0)), mwu_p=float(u.pvalue), perm_p=_perm_p(s_obs, s_perm))


def _continuous(f: pd.DataFrame, group: str, x: str, y: str, n_perm: int, rng) -> dict:
    if not pd.api.types.is_numeric_dtype(f[x]) or pd.api.types.is_bool_dtype(f[x]):
        raise ValueError(f"x: column {x!r} has more than two values and is not numeric")
    rhos, ws, per_set, perm = [], [], {}, []
    for name, g in f.groupby(group, sort=False):
        if len(g) < 3 or g[x].nunique() < 2 or g[y].nunique() < 2:
            continue  # no within-set rank correlation
        rx, ry = (stats.rankdata(g[c].to_numpy(float)) for c in (x, y))
        rx, ry = rx - rx.mean(), ry - ry.mean()
        norm = np.sqrt((rx @ rx) * (ry @ ry))
        per_set[name] = float(rx @ ry / norm)
        rhos.append(per_set[name])
        ws.append(len(g) - 1)  # 1 / the exact permutation variance of Spearman's rho, 1 / (n - 1)
        perm.append(rng.permuted(np.tile(rx, (n_perm, 1)), axis=1) @ ry / norm)
    if not per_set:
        raise ValueError(f"frame: no {group} has >= 3 runs with varying {x!r} and {y!r}")
    w = np.asarray(ws, float)
    rho = float(np.dot(w, rhos) / w.sum())
    rho_perm = (w[:, None] * np.asarray(perm)).sum(0) / w.sum()
    # the exact permutation-null sd of the pooled rho: sqrt(sum w^2 / (n - 1)) / sum w = 1 / sqrt(sum w)
    half = stats.norm.ppf(0.975) / math.sqrt(w.sum())
    return dict(kind="continuous", n=int(w.sum() + len(w)), n_sets=len(w), rho=rho, ci_low=float(max(-1.0, rho - half)),
                ci_high=float(min(1.0, rho + half)), perm_p=_perm_p(rho, rho_perm), rho_per_set=per_set)


def within_set_association(frame: pd.DataFrame, group: str = "dataset", x: str = "basin",
                           y: str = "final_test_acc", kind: str = "auto", positive=None,
                           n_perm: int = 10_000, seed: int = 0) -> dict:
    """Association of a run-level predictor ``x`` with an outcome ``y`` (e.g. SPT's own
    accuracy, not the paired gain, which carries the base arm's noise) *within* each ``group``.

    * binary x (two values; ``kind="binary"``, or "auto" with two distinct values): y centred on
      its set's mean; ``diff``, ``positive`` runs minus the others (``positive`` defaults to the
      larger value: "proximity" over "anti-local", True over False), is the within-set
      difference pooled with weights n1 n0 / n per set (the coefficient of x in a regression
      with one level per set; a plain difference of pooled centred means would shrink it when
      sets differ in their share of positives), with that regression's 95% t interval;
      Mann-Whitney U on the centred values (``auc`` = U / (n1 n0), ``mwu_p``); and ``perm_p``:
      a stratified permutation test of the same statistic that permutes the labels only within
      sets (``n_perm`` seeded permutations, two-sided). Sets holding one level only carry no
      within-set contrast and are left out (``n_sets`` counts the rest).
    * continuous x: Spearman's rho within each set (``rho_per_set``; sets with < 3 runs or a
      constant x or y left out), pooled as the mean of the rhos weighted by n - 1 (``rho``: the
      inverse of each rho's exact null variance 1 / (n - 1); a mean of rhos, not of Fisher z,
      which at 5 runs per set lets one perfect correlation, atanh 1 = inf, decide the pool),
      ``perm_p`` from permuting x within sets, and the interval ``rho ± 1.96 sd0`` (clipped to
      [-1, 1]) with sd0 = 1 / sqrt(sum(n - 1)), the exact permutation-null sd of the pooled rho
      (the permutation variance of a Pearson correlation of ranks is 1 / (n - 1) whatever the
      ties): it excludes 0 about as often as perm_p <= 0.05 under the null, and is conservative
      away from it, where the variance of rho shrinks like (1 - rho^2)^2. A stratified
      bootstrap was not chosen: at 5 runs per set resamples repeat runs, tie ranks and often
      make a set constant.

    ``perm_p`` is the primary p: it needs no distributional assumption and respects the strata."""
    if kind not in ("auto", "binary", "continuous"):
        raise ValueError(f"kind: choose auto, binary or continuous, got {kind!r}")
    if isinstance(n_perm, bool) or not isinstance(n_perm, int) or n_perm < MIN_PERMUTATIONS:
        raise ValueError(f"n_perm: need an integer >= {MIN_PERMUTATIONS}, got {n_perm!r}")
    f = _frame(frame, group, x, y)
    n_levels = f[x].nunique()
    if n_levels < 2:
        raise ValueError(f"x: column {x!r} takes a single value; nothing to associate")
    if kind == "auto":
        kind = "binary" if n_levels == 2 else "continuous"
    if kind == "binary" and n_levels != 2:
        raise ValueError(f"x: kind binary needs exactly 2 values in {x!r}, got {n_levels}")
    rng = np.random.default_rng(seed)
    out = (_binary(f, group, x, y, positive, n_perm, rng) if kind == "binary"
           else _continuous(f, group, x, y, n_perm, rng))
    return dict(x=x, y=y, group=group, n_perm=n_perm, **out)


__all__ = ["DECIMALS", "MIN_PERMUTATIONS", "PAIRED_KEYS", "SHARE_KEYS", "mde", "paired", "tost", "holm",
           "fieller", "share_of_gain", "mcnemar_exact", "hits_vs_base_rate", "within_set_association"]
