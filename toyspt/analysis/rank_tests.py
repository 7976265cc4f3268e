"""The Wilcoxon signed-rank test every verdict uses, with its effect estimate, interval and power.

* :func:`signed_rank`: the two-sided test of paired differences, its direction, the
  Hodges-Lehmann estimate (median of the Walsh averages) and the interval that inverts the same
  test (:func:`hl_interval`);
* :func:`mde_signed_rank`: the smallest normal shift the test detects with given power at a
  given level (infinite where the level cannot be reached at that n).

**Zero rule: "wilcox".** Zero differences are dropped before ranking (Wilcoxon's original
rule; Pratt's rule ranks them and then leaves them out of the statistic, which gives other
p-values, e.g. for ``[0, 0, 0.01, -0.02, 0.03, 0.04, 0.05]``). A dropped zero is reported
as a tie by :func:`toyspt.analysis.paired.paired`.

**Method, chosen here, never by scipy's "auto"** (whose choice with zeros and ties changed at
scipy 1.15): for up to :data:`EXACT_MAX` nonzero differences the exact permutation
distribution of T+ (the sum of the ranks of the positive differences) over all 2^n sign
flips, with tied magnitudes at their mid-ranks (the conditional distribution given the
ranks, computed by convolution: exact with ties and for any n up to the bound, which scipy's
``wilcoxon`` offers only by enumerating 2^n flips); beyond it the normal approximation with
the tie-corrected variance sum(r^2) / 4 and a continuity correction of 1/2. Two-sided p:
``min(1, 2 min(P(T+ <= t), P(T+ >= t)))``.

scipy has neither the exact distribution with ties beyond 13 differences, nor the
Hodges-Lehmann estimate and its interval, nor the signed-rank test's power: those are written
here. scipy gives the normal distribution.
"""
from __future__ import annotations

import functools
import math

import numpy as np
from scipy import optimize, stats

EXACT_MAX = 200  # exact sign-flip distribution up to this many nonzero differences, normal beyond
ZERO_RULE = "wilcox"  # zero differences are dropped before ranking
MDE_SIMULATIONS = 10_000  # normal samples per n behind mde_signed_rank (fixed seed MDE_SEED)
MDE_SEED = 20240533


def _null(r2: np.ndarray) -> np.ndarray:
    """P(2 T+ = k), k = 0..sum(r2), over the 2^n equally likely sign flips of doubled
    (integer) mid-ranks ``r2``: one convolution per difference."""
    dist = np.zeros(int(r2.sum()) + 1)
    dist[0] = 1.0
    for r in r2.astype(int):
        nxt = 0.5 * dist
        nxt[r:] += 0.5 * dist[:-r]
        dist = nxt
    return dist


@functools.lru_cache(maxsize=256)
def _untied_null(n: int) -> np.ndarray:
    """P(T+ = k), k = 0..n(n+1)/2, for ranks 1..n (no ties, no zeros)."""
    return _null(2 * np.arange(1, n + 1))[::2]


def signed_rank(d) -> dict:
    """Two-sided Wilcoxon signed-rank test of 1-D differences ``d`` (finite; the caller rounds
    and drops NaN): ``p``, ``method`` ("exact" or "normal", see the module docstring),
    ``n_used`` (nonzero differences), ``t_plus``, ``direction`` (+1 where T+ exceeds its null
    mean n(n+1)/4, i.e. the positive differences outrank the negative ones, -1 below, 0 at
    it: the side the same test's p is about), ``min_p`` (the smallest p these ranks allow:
    every sign alike), and the Hodges-Lehmann estimate ``hl`` with its 95% interval
    (:func:`hl_interval`). Every difference 0: p 1 (nothing to rank), direction 0."""
    a = np.asarray(d, dtype=np.float64)
    nz = a[a != 0]
    n = len(nz)
    hl = float(np.median(walsh(a))) if len(a) else math.nan
    lo, hi = hl_interval(a) if len(a) else (math.nan, math.nan)
    out = dict(n_used=n, hl=hl, hl_low=lo, hl_high=hi)
    if n == 0:
        return dict(out, p=1.0, method="none (every difference is 0)", t_plus=0.0, direction=0, min_p=1.0)
    r2 = np.rint(2 * stats.rankdata(np.abs(nz))).astype(int)  # doubled mid-ranks: integers
    t2 = int(r2[nz > 0].sum())
    centre2 = r2.sum() / 2  # E[2 T+]
    direction = int(np.sign(t2 - centre2))
    if n <= EXACT_MAX:
        dist = _null(r2)
        p = min(1.0, 2 * min(dist[:t2 + 1].sum(), dist[t2:].sum()))
        min_p, method = min(1.0, 2 * dist[-1]), "exact"
    else:
        r = r2 / 2.0
        sd = math.sqrt((r ** 2).sum() / 4)  # sd of T+ under the sign flips, ties included
        z = max(abs(t2 / 2 - r.sum() / 2) - 0.5, 0.0) / sd
        p, method = float(min(1.0, 2 * stats.norm.sf(z))), "normal"
        min_p = float(min(1.0, 2 * stats.norm.sf((r.sum() / 2 - 0.5) / sd)))
    return dict(out, p=float(p), method=method, t_plus=t2 / 2, direction=direction, min_p=float(min_p))


def walsh(a) -> np.ndarray:
    """The n(n+1)/2 Walsh averages (a_i + a_j) / 2, i <= j."""
    a = np.asarray(a, dtype=np.float64)
    i, j = np.triu_indices(len(a))
    return (a[i] + a[j]) / 2


def hl_interval(a, level: float = 0.95) -> tuple[float, float]:
    """The interval of shifts theta that the two-sided signed-rank test of ``a - theta`` does
    not reject at 1 - ``level``: [W_(c+1), W_(M-c)] of the M sorted Walsh averages, where c is
    the largest count with P(T+ <= c) <= (1 - level) / 2 under the exact no-ties distribution
    of n differences (#{W > theta} is T+ of a - theta). Coverage >= ``level`` for continuous
    symmetric differences; tied data (accuracies k/N) make Walsh averages coincide and the
    closed interval conservative. (-inf, inf) when no count qualifies (n <= 5 at 95%: the test
    cannot reject at that n)."""
    a = np.asarray(a, dtype=np.float64)
    n = len(a)
    cdf = np.cumsum(_untied_null(n))
    ok = np.flatnonzero(cdf <= (1 - level) / 2 + 1e-12)
    if len(ok) == 0:
        return -math.inf, math.inf
    c = int(ok[-1])
    w = np.sort(walsh(a))
    return float(w[c]), float(w[len(w) - 1 - c])


def _critical(n: int, level: float) -> int:
    """The largest c with 2 P(T+ <= c) <= level (no ties): reject when T+ <= c or T+ >= M - c;
    -1 when no c qualifies."""
    ok = np.flatnonzero(2 * np.cumsum(_untied_null(n)) <= level + 1e-12)
    return int(ok[-1]) if len(ok) else -1


@functools.lru_cache(maxsize=512)
def _mde_unit(n: int, level: float, power: float) -> float:
    c = _critical(n, level)
    if c < 0:
        return math.inf
    m = n * (n + 1) // 2
    z = np.random.default_rng(MDE_SEED).standard_normal((MDE_SIMULATIONS, n))
    ranks = np.arange(1, n + 1, dtype=float)

    def gap(delta: float) -> float:
        x = z + delta
        order = np.argsort(np.abs(x), axis=1)
        pos = np.take_along_axis(x, order, axis=1) > 0
        t = pos @ ranks
        return float(np.mean((t <= c) | (t >= m - c))) - power

    hi = 1.0
    while gap(hi) < 0:
        hi *= 2
    return float(optimize.brentq(gap, 0.0, hi, xtol=1e-4))


def mde_signed_rank(sd: float, n: int, level: float = 0.05, power: float = 0.8) -> float:
    """Minimal detectable effect of the two-sided exact signed-rank test at ``level`` (for a
    Holm family of m tests, alpha / m: the level its first step needs) with n nonzero
    differences: the mean shift delta at which differences N(delta, sd^2) are rejected with
    probability ``power``. Scale-free (delta = sd * delta_1), delta_1 found by root-finding on
    the power estimated from :data:`MDE_SIMULATIONS` standard normal samples of n drawn once
    with the fixed seed :data:`MDE_SEED` (common random numbers: the MC error of the power,
    about 0.004 at 80%, moves delta_1 by about 1%). ``inf`` when the test cannot reach
    ``level`` at that n whatever the effect (the smallest two-sided p is 2 / 2^n: 0.0625 at
    n = 5), NaN when sd is 0 (no spread: no power model)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n: need a positive integer, got {n!r}")
    if not (sd >= 0 and math.isfinite(sd)):
        raise ValueError(f"sd: must be finite and >= 0, got {sd}")
    if not (0 < power < 1 and 0 < level < 1):
        raise ValueError(f"power and level: must be in (0, 1), got {power}, {level}")
    unit = _mde_unit(int(n), float(level), float(power))
    if math.isinf(unit):
        return math.inf
    return math.nan if sd == 0 else unit * sd


__all__ = ["EXACT_MAX", "ZERO_RULE", "MDE_SIMULATIONS", "MDE_SEED", "signed_rank", "walsh", "hl_interval",
           "mde_signed_rank"]
