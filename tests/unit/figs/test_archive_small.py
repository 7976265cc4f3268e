"""The small-set stratum's table (toyspt.figs.archive_small.table): spt - scratch paired by seed,
the paired t test's interval and p, descriptive (no Holm)."""
import numpy as np
import pandas as pd
from scipy import stats

from toyspt.figs.archive_small import COLUMNS, table
from toyspt.ucr.design import PRIMARY


def test_one_row_per_set_paired_by_seed():
    d = [0.05, 0.0, 0.1, 0.02]
    rows = [dict(dataset="S", arm=a, seed=i, min_class=3, classes=4, train=24,
                 **{PRIMARY: 0.5 + 0.1 * i + (d[i] if a == "spt" else 0.0)})
            for i in range(4) for a in ("scratch", "spt")]
    t = table(pd.DataFrame(rows))
    assert list(t.columns) == COLUMNS and len(t) == 1
    r = t.iloc[0]
    tt = stats.ttest_1samp(np.round(d, 12), 0)
    assert r.n_seeds == 4 and np.isclose(r.mean_diff, np.mean(d)) and np.isclose(r.p, tt.pvalue)
    assert np.isclose(r.ci_low, tt.confidence_interval().low) and r.min_class == 3
    assert np.isclose(r.spt - r.scratch, np.mean(d))
