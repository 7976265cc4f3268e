"""Paired differences (arm - base, one per seed) and the one typed result every layer reads.

* :class:`PairedTest`: one test of paired differences as one value: the test, its method, n,
  its own estimate, the interval that belongs to that test, and its p (what scipy's
  ``TtestResult`` is for the t test). Every layer keeps these field names; a table or a
  metadata entry that spells them otherwise does so once, where it is written
  (:data:`toyspt.analysis.gains.T_COLUMNS`, :data:`toyspt.analysis.gains.RANK_COLUMNS`).
* :func:`paired`: :class:`Paired`, the differences described (n, sd, wins / ties / losses) and
  tested twice: the paired t test (``.t``: mean, 95% t interval, t p; descriptive) and the
  Wilcoxon signed-rank test (``.rank``: the Hodges-Lehmann estimate, the interval inverting the
  same test, the exact p; the verdict's test, :mod:`toyspt.analysis.rank_tests`), with the
  rank test's direction and its minimal detectable effect;
* :func:`tost`: equivalence of paired differences to 0 within a margin (two one-sided t tests),
  a :class:`PairedTest` whose interval is the 1 - 2 alpha one the TOST reads;
* :func:`mde`: the paired t test's minimal detectable effect (noncentral t).

Every function refuses bad input (too few values, NaN where none is allowed, infinities) with
a ValueError that names what is wrong. scipy does the distributions and the t test.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from scipy import optimize, stats

from toyspt.analysis import rank_tests

DECIMALS = 12  # differences are rounded to this many decimals before ties and signs are counted


@dataclass(frozen=True)
class PairedTest:
    """One test of paired differences: its estimate, the interval that inverts it, its p."""
    test: str  # "paired t", "signed-rank" or "TOST": which test made every number below
    method: str  # how its p was computed: "t"; "exact" / "normal" / "none (...)" (signed-rank); "t, margin ±m"
    n: int  # differences the test was given (NaN dropped; zero differences counted, whatever the test does)
    estimate: float  # the test's own estimate: the mean (t, TOST) or the Hodges-Lehmann estimate (signed-rank)
    low: float  # the interval that belongs to this test (NaN where undefined; ±inf where it cannot reject)
    high: float
    level: float  # the interval's confidence level (0.95; TOST: 1 - 2 alpha = 0.90)
    p: float  # two-sided p (TOST: the larger one-sided p; equivalent when p <= alpha); NaN where undefined

    def as_dict(self) -> dict:
        """The fields by their names (a metadata entry)."""
        return asdict(self)


@dataclass(frozen=True)
class Paired:
    """Paired differences described and tested (:func:`paired`)."""
    n: int  # non-NaN differences
    sd: float  # their standard deviation (ddof=1; 0.0 when every difference is equal)
    wins: int  # differences > 0 after rounding
    ties: int  # differences == 0 after rounding
    losses: int  # differences < 0 after rounding
    t: PairedTest  # the paired t test: mean, 95% t interval, two-sided p (descriptive)
    rank: PairedTest  # the signed-rank test: Hodges-Lehmann, its 95% interval, exact p (the verdict's test)
    direction: int  # +1 / -1 / 0: the side the signed-rank statistic falls on (the verdict's sign)
    min_p: float  # the smallest signed-rank p these ranks allow (0.0625 with 5 nonzero differences)
    mde80: float  # the signed-rank test's MDE at 80% power and the level asked (inf: unreachable; NaN: no spread)


def values(v, what: str, allow_nan: bool = True) -> np.ndarray:
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


def rounded(a: np.ndarray, decimals: int = DECIMALS) -> np.ndarray:
    """``a`` rounded to ``decimals`` (-0.0 made 0.0), so that float noise of subtracting
    accuracies (k/N) neither breaks ties nor makes a zero nonzero."""
    return np.round(a, decimals) + 0.0


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


def _differences(d, decimals: int) -> np.ndarray:
    a = values(d, "d")
    a = rounded(a[~np.isnan(a)], decimals)
    if len(a) < 2:
        raise ValueError(f"d: need at least 2 non-NaN differences, got {len(a)}")
    return a


def paired(d, decimals: int = DECIMALS, level: float = 0.05) -> Paired:
    """Paired differences ``d`` (arm - base, one per seed; NaN dropped, rounded to ``decimals``):
    a :class:`Paired`.

    * ``.t``, descriptive: the mean, the 95% t interval and the paired t test's two-sided p.
      With no spread (every difference equal) interval and p are NaN: undefined, not a certainty.
    * ``.rank``, verdict-bearing (:func:`toyspt.analysis.rank_tests.signed_rank`): the Wilcoxon
      signed-rank test, zero rule "wilcox" (zeros dropped from the ranks), exact sign-flip
      distribution with mid-ranks (method "exact", or "normal" beyond
      :data:`toyspt.analysis.rank_tests.EXACT_MAX`); its p two-sided; the Hodges-Lehmann
      estimate over the Walsh averages of *every* difference, zeros included, with the 95%
      interval that inverts the same test (±inf where it cannot reject at this n). Every
      difference 0: p 1. ``direction`` is the side that test is about, ``min_p`` the smallest p
      these ranks allow.
    * ``mde80``: :func:`toyspt.analysis.rank_tests.mde_signed_rank` at 80% power and ``level``
      (pass alpha / m for a Holm family of m): inf where the test cannot reach ``level`` at n,
      NaN with no spread."""
    a = _differences(d, decimals)
    n = len(a)
    spread = np.ptp(a) > 0  # not sd > 0: the sd of equal values can be an ulp above 0
    mean, sd = float(a.mean()), float(a.std(ddof=1)) if spread else 0.0
    if spread:
        tt = stats.ttest_1samp(a, 0.0)
        ci = tt.confidence_interval(0.95)
        lo, hi, t_p = float(ci.low), float(ci.high), float(tt.pvalue)
    else:  # every difference equal: no spread, so no t statistic, interval or power model
        lo = hi = t_p = math.nan
    w = rank_tests.signed_rank(a)
    return Paired(n=n, sd=sd, wins=int((a > 0).sum()), ties=int((a == 0).sum()), losses=int((a < 0).sum()),
                  t=PairedTest("paired t", "t", n, mean, lo, hi, 0.95, t_p),
                  rank=PairedTest("signed-rank", w["method"], n, w["hl"], w["hl_low"], w["hl_high"], 0.95, w["p"]),
                  direction=w["direction"], min_p=w["min_p"], mde80=rank_tests.mde_signed_rank(sd, n, level))


def tost(d, margin: float, decimals: int = DECIMALS) -> PairedTest:
    """Equivalence of paired differences ``d`` to 0 within ``±margin`` (Schuirmann's two one-sided
    t tests, NaN dropped, rounded as :func:`paired` does): ``p`` = max of the p of
    H0: mean <= -margin and of H0: mean >= +margin (equivalent at level alpha when p <= alpha,
    i.e. when the 1 - 2 alpha t interval lies inside ±margin), with the 90% interval. NaN with
    no spread (undefined, as in :func:`paired`)."""
    if not (margin > 0 and math.isfinite(margin)):
        raise ValueError(f"margin: must be finite and > 0, got {margin}")
    a = _differences(d, decimals)
    method = f"t, margin ±{margin:g}"
    if np.ptp(a) == 0:
        return PairedTest("TOST", method, len(a), float(a.mean()), math.nan, math.nan, 0.90, math.nan)
    lower = stats.ttest_1samp(a, -margin, alternative="greater").pvalue
    upper = stats.ttest_1samp(a, margin, alternative="less").pvalue
    ci = stats.ttest_1samp(a, 0.0).confidence_interval(0.90)
    return PairedTest("TOST", method, len(a), float(a.mean()), float(ci.low), float(ci.high), 0.90,
                      float(max(lower, upper)))


__all__ = ["DECIMALS", "PairedTest", "Paired", "values", "rounded", "mde", "paired", "tost"]
