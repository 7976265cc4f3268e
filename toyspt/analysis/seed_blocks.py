"""Is a block of seeds special? The mean paired gain of some seeds (e.g. the first five, the
ones a default tier trains) against the mean of the others, tested by permutation: under the
null that seeds are exchangeable, every subset of the same size is as likely to be the block.

:func:`block_test` is the test of a block named in advance: its p says how often a block of
that size drawn at random differs this much (a Welch t test beside it assumes normal gains).
All subsets are enumerated when there are at most :data:`MAX_EXACT` of them (40 seeds, blocks
of 5: 658,008), otherwise a seeded Monte Carlo sample is drawn.

A block singled out because it looked different is not named in advance: the choice is part of
the data. :func:`scan_test` answers for that case: among the consecutive blocks of the seeds in
order (0-4, 5-9, ...: the blocks a look at runs trained in seed order picks out), how often
does the most extreme one differ this much when the gains are shuffled over the seeds?
"""
from __future__ import annotations

import math
import warnings
from itertools import combinations
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats

MAX_EXACT = 2_000_000  # enumerate every block when there are at most this many
N_RANDOM = 200_000  # otherwise, this many random blocks (seeded)


def _welch(a: np.ndarray, b: np.ndarray) -> float:
    """Welch's two-sided p; NaN where it is undefined (both groups constant). A constant group
    has variance exactly 0, so scipy's precision-loss warning for nearly identical data is
    spurious for it and silenced; the other group's variance carries the test."""
    constant = np.ptp(a) == 0, np.ptp(b) == 0
    if all(constant):
        return math.nan
    with warnings.catch_warnings():
        if any(constant):
            warnings.filterwarnings("ignore", "Precision loss occurred", RuntimeWarning)
        return float(stats.ttest_ind(a, b, equal_var=False).pvalue)


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
    welch = _welch(v[inside], v[~inside]) if k >= 2 else math.nan
    return dict(block=block, n_block=k, n_other=n - k, block_mean=float(v[inside].mean()),
                other_mean=float(v[~inside].mean()), difference=observed, perm_p=float(p), exact=exact,
                blocks=int(len(diffs)), welch_p=welch)


def scan_test(gains: pd.Series, size: int, n_random: int = N_RANDOM // 2, seed: int = 0) -> dict:
    """The most extreme of the consecutive blocks of ``size`` seeds (in seed order; a last
    partial block is left out): its seeds and difference from the others' mean, and the
    permutation p of that maximum |difference| when the gains are shuffled over the seeds
    (``n_random`` seeded shuffles), the p of a block picked out after looking."""
    g = gains.dropna().astype(float).sort_index()
    k = len(g) // size
    if size < 1 or k < 2:
        raise ValueError(f"scan: need at least two blocks of {size} seeds, got {len(g)} seeds")
    v = g.to_numpy()
    used, total, n = k * size, v.sum(), len(v)

    def diffs(x: np.ndarray) -> np.ndarray:  # rows of gains -> block mean minus the others' mean, per block
        sums = x[..., :used].reshape(*x.shape[:-1], k, size).sum(axis=-1)
        return sums / size - (total - sums) / (n - size)

    observed = diffs(v)
    j = int(np.argmax(np.abs(observed)))
    rng = np.random.default_rng(seed)
    shuffled = v[np.argsort(rng.random((n_random, n)), axis=1)]
    top = np.abs(diffs(shuffled)).max(axis=1)
    tol = 1e-12 * max(1.0, abs(observed[j]))
    p = (1 + int(np.sum(top >= abs(observed[j]) - tol))) / (1 + n_random)
    return dict(scan_block=[int(s) for s in g.index[j * size:(j + 1) * size]], scan_blocks=k,
                scan_difference=float(observed[j]), scan_p=float(p))


def block_rows(frame: pd.DataFrame, block: Sequence[int], arm: str, metric: str, base: str = "scratch") -> list[dict]:
    """:func:`block_test` of ``arm`` - ``base`` on ``metric``, paired by seed, on every set of
    ``frame`` (label rows: dataset, arm, seed, metrics) that has the whole block and at least
    two other seeds, and :func:`scan_test` over its consecutive blocks of the same size; one dict
    per set (its name, arm, metric, then both tests' fields)."""
    from toyspt.analysis.gains import diffs

    rows, size = [], len(set(block))
    for name in frame.dataset.unique():
        d = diffs(frame, name, arm, metric, base)
        if set(block) <= set(d.index) and len(d) - size >= 2:
            scan = scan_test(d, size) if len(d) >= 2 * size else {}
            rows.append(dict(dataset=name, arm=arm, metric=metric, **block_test(d, block), **scan))
    return rows


# one row per named block x set: what block_table returns and the figure writes
BLOCK_COLUMNS = ["block_name", "dataset", "arm", "metric", "seeds", "n_block", "n_other", "block_mean", "other_mean",
                 "difference", "perm_p", "exact", "blocks", "welch_p", "scan_seeds", "scan_blocks",
                 "scan_difference", "scan_p", "scan_p_holm"]


def seeds_text(seeds: Sequence[int]) -> str:
    """``0-4`` for a run of consecutive seeds, else the seeds with spaces (a CSV cell)."""
    s = sorted(int(x) for x in seeds)
    if not s:
        return ""
    return f"{s[0]}-{s[-1]}" if len(s) > 1 and s == list(range(s[0], s[-1] + 1)) else " ".join(map(str, s))


def block_table(frame: pd.DataFrame, blocks: Mapping[str, Sequence[int]], arm: str, metric: str,
                base: str = "scratch") -> pd.DataFrame:
    """:func:`block_rows` for every named block (``{name: seeds}``), one row per block x set
    (:data:`BLOCK_COLUMNS`; seeds as text), with the scan's p Holm-adjusted over the sets of its
    block (``scan_p_holm``: is any set's most extreme block more than chance?)."""
    from toyspt.analysis.multiplicity import holm

    parts = []
    for name, seeds in blocks.items():
        rows = pd.DataFrame(block_rows(frame, seeds, arm, metric, base))
        if rows.empty:
            continue
        rows = rows.assign(block_name=name, seeds=rows.block.map(seeds_text))
        if "scan_p" in rows:
            rows["scan_seeds"] = rows.scan_block.map(lambda b: seeds_text(b) if isinstance(b, list) else "")
            rows["scan_p_holm"] = holm(rows.scan_p.astype(float)).to_numpy()
        parts.append(rows.reindex(columns=BLOCK_COLUMNS))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=BLOCK_COLUMNS)


__all__ = ["block_test", "scan_test", "block_rows", "block_table", "seeds_text", "BLOCK_COLUMNS", "MAX_EXACT",
           "N_RANDOM"]
