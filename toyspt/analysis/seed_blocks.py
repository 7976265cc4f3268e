"""Is a block of seeds special? The mean paired gain of some seeds (e.g. the first five, the
ones a default tier trains) against the mean of the others, tested by permutation: under the
null that seeds are exchangeable, every subset of the same size is as likely to be the block.

A block chosen because it looked different is the worst case for a Welch t test on it (the
choice is part of the data); the permutation p says how often *some* block of that size drawn
at random differs this much. All subsets are enumerated when there are at most
:data:`MAX_EXACT` of them (40 seeds, blocks of 5: 658,008), otherwise a seeded Monte Carlo
sample is drawn.
"""
from __future__ import annotations

import math
from itertools import combinations
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats

MAX_EXACT = 2_000_000  # enumerate every block when there are at most this many
N_RANDOM = 200_000  # otherwise, this many random blocks (seeded)


def block_test(gains: pd.Series, block: Sequence[int], seed: int = 0) -> dict:
    """``gains``: one paired gain per seed (index: seed; NaN dropped). The block's mean minus the
    others' mean, its two-sided permutation p over all blocks of the same size (``exact`` says
    whether every block was enumerated), and Welch's t test of the same difference for
    comparison (which ignores that the block may have been chosen after looking)."""
    g = gains.dropna().astype(float)
    block = sorted(set(int(s) for s in block))
    missing = [s for s in block if s not in g.index]
    if missing:
        raise ValueError(f"block: seeds {missing[:5]} have no gain")
    k, n = len(block), len(g)
    if not 1 <= k <= n - 2 or n - k < 2:
        raise ValueError(f"block: need 1 <= size and at least 2 other seeds, got {k} of {n}")
    v = g.to_numpy()
    inside = g.index.isin(block)
    observed = float(v[inside].mean() - v[~inside].mean())
    total = v.sum()
    count = math.comb(n, k)
    if count <= MAX_EXACT:
        idx = np.fromiter((i for c in combinations(range(n), k) for i in c), np.int64, count=count * k)
        sums = v[idx.reshape(count, k)].sum(axis=1)
        exact = True
    else:
        rng = np.random.default_rng(seed)
        idx = np.argsort(rng.random((N_RANDOM, n)), axis=1)[:, :k]
        sums = v[idx].sum(axis=1)
        exact = False
    diffs = sums / k - (total - sums) / (n - k)
    tol = 1e-12 * max(1.0, abs(observed))
    extreme = int(np.sum(np.abs(diffs) >= abs(observed) - tol))
    p = extreme / len(diffs) if exact else (1 + extreme) / (1 + len(diffs))
    welch = stats.ttest_ind(v[inside], v[~inside], equal_var=False) if k >= 2 else None
    return dict(block=block, n_block=k, n_other=n - k, block_mean=float(v[inside].mean()),
                other_mean=float(v[~inside].mean()), difference=observed, perm_p=float(p), exact=exact,
                blocks=int(len(diffs)), welch_p=float(welch.pvalue) if welch is not None else math.nan)


def block_rows(frame: pd.DataFrame, block: Sequence[int], arm: str, metric: str, base: str = "scratch") -> list[dict]:
    """:func:`block_test` of ``arm`` - ``base`` on ``metric``, paired by seed, on every set of
    ``frame`` (label rows: dataset, arm, seed, metrics) that has the whole block and at least
    two other seeds; one dict per set (its name, arm, metric, then the test's fields)."""
    from toyspt.analysis.gains import diffs

    rows = []
    for name in frame.dataset.unique():
        d = diffs(frame, name, arm, metric, base)
        if set(block) <= set(d.index) and len(d) - len(set(block)) >= 2:
            rows.append(dict(dataset=name, arm=arm, metric=metric, **block_test(d, block)))
    return rows


__all__ = ["block_test", "block_rows", "MAX_EXACT", "N_RANDOM"]
