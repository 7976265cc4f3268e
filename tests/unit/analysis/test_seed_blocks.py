"""The seed-block test: exact over every block, pinned on small cases, and calibrated."""
import math

import numpy as np
import pandas as pd
import pytest

from toyspt.analysis.multiplicity import holm
from toyspt.analysis.seed_blocks import block_test


def test_the_most_extreme_block_of_two_among_six_has_p_two_in_fifteen():
    g = pd.Series([10.0, 9.0, 1.0, 2.0, 3.0, 4.0], index=range(6))
    r = block_test(g, [0, 1])
    # C(6,2) = 15 blocks; only {0,1} reaches |9.5 - 2.5| = 7 (the next, {2,3}: |1.5 - 6.5| = 5)
    assert r["exact"] and r["blocks"] == 15 and r["difference"] == pytest.approx(7.0)
    assert r["perm_p"] == pytest.approx(1 / 15)


def test_two_sided_counts_blocks_as_far_below():
    g = pd.Series([0.0, 0.0, 5.0, 5.0], index=[3, 4, 7, 9])
    r = block_test(g, [3])
    # 4 blocks of one: {3} and {4} give 0 - 10/3, {7} and {9} give 5 - 5/3: the same size, so all count
    assert r["difference"] == pytest.approx(0.0 - 10 / 3) and r["perm_p"] == 1.0


def test_every_block_is_enumerated_at_forty_seeds_and_five():
    g = pd.Series(np.linspace(0, 1, 40), index=range(40))
    r = block_test(g, range(5))
    assert r["exact"] and r["blocks"] == math.comb(40, 5)
    assert r["perm_p"] == pytest.approx(2 / math.comb(40, 5))  # the 5 smallest and the 5 largest


def test_calibrated_under_exchangeable_seeds():
    rng = np.random.default_rng(1)
    rejections = sum(block_test(pd.Series(rng.normal(size=12), index=range(12)), range(3))["perm_p"] <= 0.05
                     for _ in range(200))
    assert rejections <= 20  # binomial(200, 0.05): P(X > 20) < 0.01


def test_missing_seeds_and_tiny_groups_are_refused():
    g = pd.Series([1.0, 2.0, 3.0], index=[0, 1, 2])
    with pytest.raises(ValueError, match="no gain"):
        block_test(g, [5])
    with pytest.raises(ValueError, match="at least 2 other"):
        block_test(g, [0, 1])


def test_block_rows_pair_by_seed_and_skip_a_set_without_the_whole_block():
    from toyspt.analysis.seed_blocks import block_rows

    gains = {0: 0.05, 1: 0.04, 2: 0.0, 3: 0.01, 4: -0.01}
    frame = pd.DataFrame([dict(dataset=d, arm=a, seed=s, acc=0.5 + (g if a == "spt" else 0.0))
                          for d in ("A", "B") for a in ("scratch", "spt") for s, g in gains.items()
                          if not (d == "B" and s == 1)])
    (row,) = block_rows(frame, [0, 1], "spt", "acc")
    assert row["dataset"] == "A" and row["blocks"] == 10 and row["difference"] == pytest.approx(0.045)
    assert row["perm_p"] == pytest.approx(1 / 10)  # {0, 1} is the only pair that far above the rest


def test_the_scan_takes_the_most_extreme_consecutive_block_and_pays_for_the_choice():
    from toyspt.analysis.seed_blocks import scan_test

    g = pd.Series([10.0, 10.0, 0.0, 0.0, 0.0, 0.0], index=range(6))
    r = scan_test(g, 2)
    assert r["scan_block"] == [0, 1] and r["scan_blocks"] == 3 and r["scan_difference"] == 10.0
    # as far apart only when the two 10s share a block: 3 of the C(6, 2) = 15 placements; one named
    # block in advance would have p 1/15 (block_test); Monte Carlo error at 100,000 shuffles ~0.0013
    assert r["scan_p"] == pytest.approx(3 / 15, abs=0.006)
    assert block_test(g, [0, 1])["perm_p"] == pytest.approx(1 / 15)


def test_the_scan_is_calibrated_under_exchangeable_seeds():
    from toyspt.analysis.seed_blocks import scan_test

    rng = np.random.default_rng(2)
    rejections = sum(scan_test(pd.Series(rng.normal(size=20), index=range(20)), 5, n_random=2000)["scan_p"] <= 0.05
                     for _ in range(200))
    assert rejections <= 20  # binomial(200, 0.05): P(X > 20) < 0.01


def test_the_scan_needs_two_blocks():
    from toyspt.analysis.seed_blocks import scan_test

    with pytest.raises(ValueError, match="two blocks of 5"):
        scan_test(pd.Series(np.arange(9.0)), 5)


def test_block_table_names_each_block_and_holm_adjusts_the_scan_over_sets():
    from toyspt.analysis.seed_blocks import BLOCK_COLUMNS, block_table, seeds_text

    rng = np.random.default_rng(3)
    frame = pd.DataFrame([dict(dataset=d, arm=a, seed=s, acc=0.5 + (rng.normal() if a == "spt" else 0.0))
                          for d in ("A", "B", "C") for a in ("scratch", "spt") for s in range(12)])
    t = block_table(frame, {"first": range(4), "odd": [1, 3, 5]}, "spt", "acc")
    assert list(t.columns) == BLOCK_COLUMNS and len(t) == 6
    assert t.block_name.tolist() == ["first"] * 3 + ["odd"] * 3 and set(t.seeds) == {"0-3", "1 3 5"}
    for _, g in t.groupby("block_name"):  # Holm over the three sets of each block
        np.testing.assert_array_equal(g.scan_p_holm.to_numpy(), holm(g.scan_p.to_numpy()))
    assert seeds_text([4, 2, 3]) == "2-4" and seeds_text([7]) == "7" and seeds_text([]) == ""
    assert block_table(frame, {"too many": range(11)}, "spt", "acc").empty  # one other seed: no test


def test_welch_beside_the_permutation_is_undefined_only_when_both_groups_are_constant(recwarn):
    r = block_test(pd.Series([1.0, 1.0, 0.0, 0.0, 0.0, 0.0], index=range(6)), [0, 1])
    assert math.isnan(r["welch_p"]) and r["perm_p"] == pytest.approx(1 / 15)
    r = block_test(pd.Series([1.0, 1.0, 0.0, 0.5, 0.2, 0.1], index=range(6)), [0, 1])
    assert not [w for w in recwarn if "Precision loss" in str(w.message)]  # a constant group's variance is exact
    # Welch from the other group's variance alone: t = (1 - 0.2) / sqrt(var / 4), 3 degrees of freedom
    other = np.array([0.0, 0.5, 0.2, 0.1])
    t = (1.0 - other.mean()) / math.sqrt(other.var(ddof=1) / 4)
    from scipy import stats as sps
    assert r["welch_p"] == pytest.approx(2 * sps.t.sf(t, 3), rel=1e-12)
