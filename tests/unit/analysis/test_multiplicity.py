"""toyspt.analysis.multiplicity: Holm's step-down adjustment."""
import math

import numpy as np
import pandas as pd
import pytest

from toyspt.analysis.multiplicity import holm


def test_holm_by_hand():
    # sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1: 0.02, 0.03, 0.06, 0.04 -> running max
    got = holm([0.01, 0.04, 0.03, math.nan, 0.005])
    assert got[:3] == pytest.approx([0.03, 0.06, 0.06]) and math.isnan(got[3]) and got[4] == pytest.approx(0.02)
    assert holm([0.5, 0.6]).tolist() == [1.0, 1.0]  # capped at 1, monotone
    s = pd.Series([0.04, 0.01], index=["b", "a"], name="p")
    out = holm(s)
    assert out.index.tolist() == ["b", "a"] and out.tolist() == pytest.approx([0.04, 0.02]) and out.name == "p"


def _step_down(p, alpha):
    """Holm's procedure: reject the k-th smallest while p_(k) <= alpha / (m - k + 1)."""
    order = np.argsort(p, kind="stable")
    reject = np.zeros(len(p), bool)
    for k, i in enumerate(order):
        if p[i] > alpha / (len(p) - k):
            break
        reject[i] = True
    return reject


def test_rejecting_at_adjusted_p_is_holms_step_down():
    rng = np.random.default_rng(1)
    for _ in range(500):
        m = int(rng.integers(1, 13))
        p = np.where(rng.random(m) < 0.5, rng.random(m) * 0.05, rng.random(m))
        adj = holm(p)
        assert (adj >= p - 1e-15).all() and (adj <= 1).all()
        assert (np.diff(adj[np.argsort(p, kind="stable")]) >= -1e-15).all()  # monotone in p
        for alpha in (0.01, 0.05, 0.1):
            assert ((adj <= alpha) == _step_down(p, alpha)).all()


def test_holm_refuses_values_outside_zero_one():
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        holm([0.2, 1.2])


