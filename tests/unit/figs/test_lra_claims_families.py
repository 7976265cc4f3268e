"""The lra_claims table's Holm families (toyspt.figs.lra_claims): a descriptive row is adjusted
within its arm and metric, over the tasks only; the two metrics never share a family."""
import numpy as np
import pandas as pd

from toyspt.analysis.multiplicity import holm
from toyspt.figs import lra_claims as lc
from toyspt.studies import lra_design as design

SEEDS = range(10)


def _frame() -> pd.DataFrame:
    rng = np.random.default_rng(4)
    arms = ["scratch", *design.CONFIRMATORY_ARMS, *design.DESCRIPTIVE_ARMS]
    rows = []
    for task in design.TASKS:
        base = 0.5 + rng.normal(0, 0.05, len(SEEDS))
        for arm in arms:
            v = base if arm == "scratch" else base + rng.normal(0.01, 0.02, len(SEEDS))
            w = base - 0.01 if arm == "scratch" else base + rng.normal(0.0, 0.03, len(SEEDS))  # the second metric
            rows += [dict(study=1, task=task, arm=arm, seed=s, peak_val_acc=v[s], mean_test_last20=w[s],
                          final_test_acc=v[s], final_train_acc=v[s], test_at_peak=v[s], stopped_by_rule=True,
                          seconds=1.0) for s in SEEDS]
    return pd.DataFrame(rows).reindex(columns=lc.RUN_COLUMNS)


def test_descriptive_rows_are_holm_adjusted_per_arm_and_metric():
    t = lc.claims_table(_frame())
    d = t[t.family == "descriptive"]
    n_tasks = len(design.TASKS)
    seen = 0
    for (arm, metric), g in d.groupby(["arm", "metric"]):
        assert len(g) == n_tasks and set(g.task) == set(design.TASKS)
        assert (g.holm_m == n_tasks).all(), (arm, metric, g.holm_m.tolist())
        assert np.allclose(g.p_holm, holm(g.p.to_numpy()), rtol=0, atol=1e-15), (arm, metric)
        assert g.holm_family.nunique() == 1
        seen += 1
    assert seen >= 2 * len(design.DESCRIPTIVE_ARMS)
    for arm, g in d.groupby("arm"):  # one arm's two metrics: two families
        assert g.groupby("metric").holm_family.first().nunique() == g.metric.nunique(), arm
