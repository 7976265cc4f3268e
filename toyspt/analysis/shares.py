"""An arm's share of SPT's gain: the ratio of two mean paired gains with Fieller's interval,
which is exact for a ratio of correlated normal means and unbounded when the denominator is not
significantly different from 0 (a delta-method interval would then be finite and wrong).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from toyspt.analysis.paired import DECIMALS, rounded, values

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
    a, b = values(arm_diff, "arm_diff"), values(spt_diff, "spt_diff")
    if len(a) != len(b):
        raise ValueError(f"arm_diff and spt_diff: lengths differ ({len(a)} vs {len(b)}); pair them by seed")
    keep = ~(np.isnan(a) | np.isnan(b))
    if keep.sum() < 2:
        raise ValueError(f"arm_diff, spt_diff: need at least 2 seeds with both differences, got {int(keep.sum())}")
    return rounded(a[keep], decimals), rounded(b[keep], decimals)


def share_of_gain(arm_diff, spt_diff, level: float = 0.95, decimals: int = DECIMALS) -> dict:
    """An arm's share of SPT's gain: ``mean(arm_diff) / mean(spt_diff)``, both differences to
    scratch paired on the same seeds (two pandas Series are paired on their index; a seed missing
    or NaN in either is dropped), both rounded to ``decimals`` first as
    :func:`toyspt.analysis.paired.paired` rounds (so
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


__all__ = ["SHARE_KEYS", "fieller", "share_of_gain"]
