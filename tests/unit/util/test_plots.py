"""toyspt.util.plots: seeded strip-plot jitter."""
import numpy as np

from toyspt.util.plots import seeded_jitter


def test_seeded_jitter_repeats_and_restores_the_global_generator():
    np.random.seed(123)
    expected_after = np.random.uniform(size=3)
    np.random.seed(123)
    with seeded_jitter(7):
        a = np.random.uniform(size=4)
    with seeded_jitter(7):
        b = np.random.uniform(size=4)
    assert np.array_equal(a, b)  # the same jitter on every redraw
    assert np.array_equal(np.random.uniform(size=3), expected_after)  # the caller's stream is untouched
