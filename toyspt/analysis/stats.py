"""A predictor against an outcome: pure functions on numpy / pandas values.

* :func:`hits_vs_base_rate`: a predictor against always answering the majority class on the
  same runs, exact McNemar on the runs where the two disagree (:func:`mcnemar_exact`);
* :func:`within_set_association`: a run-level predictor against an outcome *within* sets
  (stratified), so that differences between sets are not read as an association.

Paired differences are :mod:`toyspt.analysis.paired`, Holm :mod:`toyspt.analysis.multiplicity`,
shares of a gain :mod:`toyspt.analysis.shares`, pooling over sets :mod:`toyspt.analysis.pooling`.
Every function refuses bad input with a ValueError that names what is wrong. scipy does the
distributions and tests; only the stratified permutations are written here.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

MIN_PERMUTATIONS = 1000  # within_set_association refuses fewer permutations than this


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


def mcnemar_bound(correct: int, n: int, majority: int, classes: int = 2) -> float:
    """The largest exact McNemar p (:func:`mcnemar_exact`) a classifier's ``correct`` answers out
    of ``n`` can have against always answering the majority class (``majority`` of the ``n``
    examples, of ``classes`` classes): where only its accuracy was recorded, every split of its
    right answers between the majority class's examples and the others is possible, so a p at most
    alpha under every split is a valid test at alpha (conservative)."""
    for name, v in (("correct", correct), ("n", n), ("majority", majority), ("classes", classes)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise ValueError(f"{name}: expected a count >= 0, got {v!r}")
    if classes < 2 or correct > n or majority > n or classes * majority < n:
        raise ValueError(f"counts: need classes >= 2, correct <= n, n/{classes} <= majority <= n; got correct "
                         f"{correct}, n {n}, majority {majority}, classes {classes}")
    rest = n - majority  # right on one of these: right where the majority answer is wrong
    return max(mcnemar_exact(c0, majority - (correct - c0))
               for c0 in range(max(0, correct - majority), min(rest, correct) + 1))


def accuracy_bound(accuracy: float, n: int, majority: int, classes: int = 2) -> float:
    """:func:`mcnemar_bound` of a recorded accuracy on ``n`` examples (its right answers are
    ``round(accuracy * n)``): one run against always answering the majority class."""
    return mcnemar_bound(int(round(accuracy * n)), int(n), int(majority), classes)


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


__all__ = ["MIN_PERMUTATIONS", "mcnemar_exact", "mcnemar_bound", "accuracy_bound", "hits_vs_base_rate",
           "within_set_association"]
