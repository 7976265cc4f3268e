"""toyspt.analysis.rows: one row per label run on any data source (the run summary's metrics
and the label phase's columns, toyspt.analysis.tables.run_row underneath), and the frame a figure
builds from its runs."""
import math
from types import SimpleNamespace

import pandas as pd
import pytest

from toyspt.analysis import rows
from toyspt.analysis.tables import SUMMARY_METRICS, run_row


def test_label_row_puts_each_metric_in_its_own_column():
    ft = [dict(phase="finetune", epoch=e, test_acc=0.5 + e / 100, val_acc=0.6 + (e % 3) / 10) for e in range(1, 8)]
    summary = dict(mean_test_last20=0.111, test_at_min_val_loss=0.222, final_test_acc=0.333, test_at_peak=0.444,
                   peak_val_acc=0.8, min_val_loss=0.666, final_train_acc=0.777)
    res = SimpleNamespace(history=[dict(phase="pretrain", epoch=1)] + ft, summary=summary,
                          config=dict(evaluate="all"), states={"final": None, "pretrained": None})
    source = SimpleNamespace(name="ECG200", load=lambda: SimpleNamespace(val=list(range(17))))
    row = rows.label_row(source, "spt", 3, res, pi=dict(final=1.5, pretrained=2.5))
    assert set(row) == set(rows.ROW_COLUMNS)
    for k, v in summary.items():
        assert row[k] == v, k
    assert row["peak_held_out"] == pytest.approx(0.57)  # max test over the label epochs
    assert row["epochs_at_peak_val"] == 2  # val 0.8 at epochs 2 and 5
    assert (row["n_val"], row["proximity_final"], row["proximity_after_spt"]) == (17, 1.5, 2.5)
    assert (row["dataset"], row["arm"], row["seed"], row["evaluate"]) == ("ECG200", "spt", 3, "all")
    other = SimpleNamespace(**{**vars(res), "config": dict(evaluate="peak")})
    peak = rows.label_row(source, "mlp_transfer", 3, other)
    assert math.isnan(peak["peak_held_out"]) and math.isnan(peak["proximity_final"])


def test_run_row_is_the_comparison_row_too():
    """toyspt compare's per-seed row and the label row are one function: labels, summary metrics,
    then the columns (a dict column adds several)."""
    res = SimpleNamespace(summary={m: float(i) for i, m in enumerate(SUMMARY_METRICS)})
    row = run_row(dict(dataset="d", arm="spt", seed=0), res,
                  columns={"one": lambda spec, r: spec, "two": lambda spec, r: dict(a=1, b=2)}, spec=7.0)
    assert list(row) == ["dataset", "arm", "seed", *SUMMARY_METRICS, "one", "a", "b"] and row["one"] == 7.0


def test_label_frame_reads_each_runs_cached_probe(monkeypatch):
    """Labels ending in (source, arm, seed), optionally behind a group; probes are not rows."""
    monkeypatch.setattr(rows, "label_row", lambda src, arm, seed, res, pi=None: dict(dataset=src, arm=arm, seed=seed,
                                                                                    proximity_final=pi))
    monkeypatch.setattr(rows, "probed", lambda runs, label: len(label))
    runs = {("g", "A", "spt", 0): None, ("h", "A", "spt", 0): None, ("proximity", "g", "A", "spt", 0): None}
    f = rows.label_frame(runs, group="g")
    assert list(f.columns) == rows.ROW_COLUMNS and f[["dataset", "arm", "seed", "proximity_final"]].values.tolist() == [
        ["A", "spt", 0, 4]]
    assert len(rows.label_frame(runs)) == 2
    assert isinstance(rows.label_frame({}), pd.DataFrame)
