"""Resampled train/test splits of a UCR set: the "bake off" protocol of time-series
classification (Bagnall et al. 2017), where accuracy is reported over stratified resamples of
the pooled train and test data rather than over the archive's one split.

Resample ``r`` pools the archive's training and test series (training first, in file order)
and, class by class, draws as many training series as the archive's training split has of that
class, by a permutation from ``numpy.random.default_rng((RESAMPLE_STREAM, r))``; the rest are the
test split. So every resample keeps the archive's class counts in both splits, and a set's
resamples differ only in which series land where. Resample 0 is the archive's own split
(nothing is drawn). The validation split is then carved from each resample's training split
by the same rule as always (:func:`toyspt.ucr.data.stratified_split`, ``split_seed``).
"""
from __future__ import annotations

import numpy as np

# the stream of the resampling generator, apart from every other seeded draw (the validation
# split's default_rng(split_seed), model seeds): resample r draws from default_rng((RESAMPLE_STREAM, r))
RESAMPLE_STREAM = 20260513


def resample_split(y_train: np.ndarray, y_test: np.ndarray, resample: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices (train, test) into the pooled labels ``concatenate([y_train, y_test])`` of
    resample ``resample`` (sorted; 0: the archive's split). Each class keeps its archive count
    in both splits."""
    y_train, y_test = np.asarray(y_train), np.asarray(y_test)
    if resample < 0:
        raise ValueError(f"resample: must be >= 0, got {resample}")
    n_train = len(y_train)
    if resample == 0:
        return np.arange(n_train), np.arange(n_train, n_train + len(y_test))
    pooled = np.concatenate([y_train, y_test])
    rng = np.random.default_rng((RESAMPLE_STREAM, resample))
    tr, te = [], []
    for c in np.unique(pooled):
        idx = np.flatnonzero(pooled == c)
        idx = idx[rng.permutation(len(idx))]
        k = int(np.count_nonzero(y_train == c))
        tr.append(idx[:k])
        te.append(idx[k:])
    return np.sort(np.concatenate(tr)), np.sort(np.concatenate(te))


def resampled(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, y_test: np.ndarray, resample: int
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_train, y_train, x_test, y_test) of resample ``resample`` (the arrays themselves at 0).
    Series are z-normalised each on its own, so normalising before or after pooling is the same."""
    if resample == 0:
        return x_train, y_train, x_test, y_test
    tr, te = resample_split(y_train, y_test, resample)
    x, y = np.concatenate([x_train, x_test]), np.concatenate([y_train, y_test])
    return x[tr], y[tr], x[te], y[te]


__all__ = ["RESAMPLE_STREAM", "resample_split", "resampled"]
