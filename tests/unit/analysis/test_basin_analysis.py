"""toyspt.analysis.basin on synthetic runs and tables: the basin rule, a basin row, predictor
tests against the majority basin, the basin against SPT's own accuracy within sets."""
import math
from types import SimpleNamespace

import numpy as np
import pandas as pd

from toyspt.analysis import basin as study


def _basin(pred, prox):
    return pd.DataFrame(dict(dataset=["A"] * len(pred), seed=range(len(pred)), basin_predictor=pred,
                             basin=["proximity" if p else "anti-local" for p in prox]))


def test_the_proximity_index_before_the_end_of_spt_is_persistence_not_prediction():
    assert study.predictor_kind("proximity_epoch100") == "persistence"
    assert study.predictor_kind("proximity_epoch1") == "persistence"
    for col in ("basin_predictor", "beta_unif", "beta_init", "beta_epoch100"):
        assert study.predictor_kind(col) == "prediction"


PRIMARY = "mean_test_last20"


def test_the_basin_rule_is_a_proximity_index_above_one():
    assert [study.basin_of(x) for x in (1.0001, 1.0, 0.5)] == ["proximity", "anti-local", "anti-local"]
    assert study.basins(pd.Series([2.0, 1.0, float("nan")])).tolist() == ["proximity", "anti-local", "anti-local"]


def test_basin_row_reads_the_tracked_series_along_spt():
    recs = [dict(phase="pretrain", epoch=e, metric="beta", value=0.1 * e, name="recon") for e in (0, 1, 3)]
    recs += [dict(phase="pretrain", epoch=e, metric="proximity_index", value=1 + e, name="a", head=h)
             for e in (0, 3) for h in (0, 1)]
    recs += [dict(phase="finetune", epoch=1, metric="beta", value=9.0, name="recon")]  # not SPT: ignored
    row = study.basin_row(SimpleNamespace(records=recs), 0.7, epochs=(1, 3, 5))
    assert list(row) == ["proximity_after_spt", "basin", "beta_init", "proximity_init", "beta_epoch1",
                         "proximity_epoch1", "beta_epoch3", "proximity_epoch3", "beta_epoch5", "proximity_epoch5"]
    assert (row["basin"], row["beta_epoch1"], row["proximity_epoch3"]) == ("anti-local", 0.1, 4.0)
    assert math.isnan(row["proximity_epoch1"]) and math.isnan(row["beta_epoch5"])
    beta_only = study.basin_row(SimpleNamespace(records=recs), 2.0, epochs=(1,), metrics=("beta",))
    assert list(beta_only) == ["proximity_after_spt", "basin", "beta_init", "beta_epoch1"]


def test_basin_accuracy_is_tested_within_sets_not_across():
    """Set A is better than set B and holds more proximity runs: pooled, proximity would look
    better; within sets the basin makes no difference, and the test must say so."""
    rng = np.random.default_rng(0)
    rows = []
    for ds, level, prox_share in (("A", 0.9, 0.8), ("B", 0.6, 0.2)):
        for k in range(20):
            rows.append(dict(dataset=ds, arm="spt", seed=k, **{PRIMARY: level + rng.normal(0, 0.02)},
                             proximity_after_spt=2.0 if k < 20 * prox_share else 0.5))
    out = study.basin_accuracy(pd.DataFrame(rows), PRIMARY)
    assert out["n"] == 40 and out["proximity"] == 20
    assert out["basin"]["perm_p"] > 0.05 and out["basin"]["ci_low"] < 0 < out["basin"]["ci_high"]
    planted = pd.DataFrame(rows)
    planted.loc[planted.proximity_after_spt > 1, PRIMARY] += 0.05
    assert study.basin_accuracy(planted, PRIMARY)["basin"]["perm_p"] < 0.01
