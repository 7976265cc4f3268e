"""Multiplicity: Holm's step-down adjustment over a family of p-values (scipy has none).

Which tests form a family is the caller's (a study's design, :mod:`toyspt.analysis.gains`);
here only the arithmetic, once.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from toyspt.analysis.paired import values


def holm(pvalues):
    """Holm-Bonferroni adjusted p-values: the i-th smallest of m p-values becomes
    ``max_{j <= i} min(1, (m - j + 1) p_(j))`` (monotone in p, capped at 1). Rejecting where the
    adjusted p <= alpha is Holm's step-down procedure at family-wise level alpha. NaN stays NaN
    and does not count in m. A pandas Series keeps its index; anything else gives an array."""
    a = values(pvalues, "pvalues")
    if ((a < 0) | (a > 1)).any():
        raise ValueError(f"pvalues: must lie in [0, 1], got {a[(a < 0) | (a > 1)][:3].tolist()}")
    out = np.full(a.shape, np.nan)
    idx = np.flatnonzero(~np.isnan(a))
    order = idx[np.argsort(a[idx], kind="stable")]
    m = len(order)
    out[order] = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * a[order]))
    return pd.Series(out, index=pvalues.index, name=pvalues.name) if isinstance(pvalues, pd.Series) else out


__all__ = ["holm"]
