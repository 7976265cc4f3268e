"""figs/real_data.py's predictor table: each predictor labelled as a prediction or as
persistence (the proximity index itself, read before the end of SPT), tested by exact McNemar
against always answering the majority basin."""
import numpy as np
import pandas as pd
import pytest
from scipy.stats import binom

from toyspt.figs import real_data


def test_predictor_table_labels_persistence_and_tests_by_mcnemar():
    basin = pd.DataFrame(dict(dataset="A", seed=range(20), spt_epochs=300,
                              basin=["proximity"] * 13 + ["anti-local"] * 7,
                              basin_predictor=np.r_[np.full(13, 0.1), np.full(7, -0.1)],  # names every run
                              proximity_epoch100=np.r_[np.full(12, 2.0), 0.5, np.full(7, 2.0)]))  # 12 / 20
    t = real_data.predictor_table(basin).set_index("predictor")
    assert t.loc["proximity_epoch100", "kind"] == "persistence" and t.loc["basin_predictor", "kind"] == "prediction"
    assert t.loc["proximity_epoch100"].label.startswith("persistence:")
    # the perfect predictor: right on the 7 anti-local runs the majority answer misses, never wrong
    assert t.loc["basin_predictor", "p"] == pytest.approx(0.5 ** 7)
    # epoch 100 says proximity on 19 runs: differs from the majority answer on 1, where it is wrong
    assert (t.loc["proximity_epoch100", "only_predictor"], t.loc["proximity_epoch100", "only_majority"]) == (0, 1)
    assert t.loc["proximity_epoch100", "p"] == pytest.approx(binom.sf(-1, 1, 0.5)) == 1.0
