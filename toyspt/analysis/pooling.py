"""One gain across sets, with its weighting stated: a random-effects pooled mean.

:func:`random_effects` pools per-set mean gains ``y_i`` with their sampling variances ``v_i``
(sd_i^2 / n_i of the paired differences): DerSimonian and Laird's moment estimate of the
between-set variance tau^2, the inverse-variance weights 1 / (v_i + tau^2), and the
Hartung-Knapp(-Sidik-Jonkman) interval and test (a t distribution with k - 1 degrees of freedom
and the weighted residual variance in place of the known-variance normal: the normal DL interval
is too narrow at a dozen sets). Heterogeneity: Cochran's Q with its chi-square p on k - 1
degrees of freedom, tau^2, and I^2 = max(0, (Q - (k - 1)) / Q).

This answers "the mean gain of a set drawn like these", each set weighted by its precision and
the heterogeneity; the signed-rank test over units (:func:`toyspt.analysis.gains.across_sets`)
answers "do sets lean one way", each unit one vote. Both are reported; neither replaces the other.
Written here from the formulas (scipy has no meta-analysis).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from scipy import stats

from toyspt.analysis.paired import values


@dataclass(frozen=True)
class Pooled:
    """A random-effects pooled mean (:func:`random_effects`)."""
    k: int  # sets pooled
    estimate: float  # the pooled mean, weights 1 / (v_i + tau^2)
    low: float  # its Hartung-Knapp interval at ``level``
    high: float
    level: float  # the interval's confidence level
    p: float  # the Hartung-Knapp t test of mean 0 (two-sided, k - 1 df)
    method: str  # "DerSimonian-Laird tau^2, Hartung-Knapp t interval"
    tau2: float  # between-set variance (DerSimonian-Laird; 0 when Q <= k - 1)
    i2: float  # share of the variation between sets beyond sampling error, in [0, 1)
    q: float  # Cochran's Q (fixed-effect weights 1 / v_i)
    q_p: float  # its chi-square p on k - 1 df (heterogeneity)
    fixed: float  # the fixed-effect (inverse-variance) mean, for comparison
    wald_low: float  # the DerSimonian-Laird normal (Wald) interval, for comparison: too narrow at few sets
    wald_high: float

    def as_dict(self) -> dict:
        """The fields by their names (a metadata entry)."""
        return asdict(self)


def random_effects(y, v, level: float = 0.95) -> Pooled:
    """Pool estimates ``y`` (one per set) with sampling variances ``v`` (> 0): see the module
    docstring. Refuses fewer than 2 sets, mismatched lengths, NaN and variances <= 0 (a set whose
    differences do not vary has no weight to give: drop it or say why)."""
    y, v = values(y, "y", allow_nan=False), values(v, "v", allow_nan=False)
    if len(y) != len(v):
        raise ValueError(f"y and v: lengths differ ({len(y)} vs {len(v)})")
    k = len(y)
    if k < 2:
        raise ValueError(f"y: need at least 2 sets to pool, got {k}")
    if (v <= 0).any():
        raise ValueError(f"v: sampling variances must be > 0, got {v[v <= 0][:3].tolist()}")
    if not 0 < level < 1:
        raise ValueError(f"level: must be in (0, 1), got {level}")
    w = 1.0 / v
    fixed = float(w @ y / w.sum())
    q = float(w @ (y - fixed) ** 2)
    df = k - 1
    c = w.sum() - (w @ w) / w.sum()
    tau2 = max(0.0, (q - df) / c)
    ws = 1.0 / (v + tau2)
    mu = float(ws @ y / ws.sum())
    se = math.sqrt(float(ws @ (y - mu) ** 2) / df / ws.sum())
    half = stats.t.ppf(0.5 + level / 2, df) * se
    wald = stats.norm.ppf(0.5 + level / 2) / math.sqrt(ws.sum())
    p = float(2 * stats.t.sf(abs(mu) / se, df)) if se > 0 else (1.0 if mu == 0 else 0.0)
    return Pooled(k=k, estimate=mu, low=mu - half, high=mu + half, level=level, p=p,
                  method="DerSimonian-Laird tau^2, Hartung-Knapp t interval", tau2=float(tau2),
                  i2=max(0.0, (q - df) / q) if q > 0 else 0.0, q=q, q_p=float(stats.chi2.sf(q, df)), fixed=fixed,
                  wald_low=mu - wald, wald_high=mu + wald)


__all__ = ["Pooled", "random_effects"]
