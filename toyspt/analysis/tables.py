"""Comparison tables: per-seed summaries of swept runs, mean ± std per data set and arm, CSV
and JSON. One set of tables whatever the data (``toyspt compare``, and ``toyspt ucr``, which
forwards to it); rows in, tables out: the caller sweeps the runs
(:func:`toyspt.runs.arms.arm_specs`, :func:`toyspt.runs.sweeps.sweep`).

:func:`run_row` is the one per-run row of toyspt, whatever the data: a run's labels, the
summary metrics asked for and per-run columns, functions ``fn(spec, result) -> float`` (or
``-> dict`` of several columns). The comparison's default columns are
:data:`toyspt.probe.columns.PROBE_COLUMNS` (displacement of W_Q/W_K, proximity and self
index of the final model on the data's probe inputs); the real-data figures' row
(:func:`toyspt.analysis.rows.label_row`) is this row with the label phase's columns.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Mapping, Sequence

import pandas as pd

from toyspt.runs.specs import Entry, Spec
from toyspt.util.atomic import write_text

# what a label run's summary reports (toyspt.train.evaluation.label_summary), in table order:
# the mean test accuracy over the last fifth of the label epochs (no selection) first
SUMMARY_METRICS = ("mean_test_last20", "test_at_min_val_loss", "final_test_acc", "test_at_peak", "peak_val_acc",
           "final_train_acc")
Column = Callable[[Spec, Entry], "float | dict[str, float]"]


def default_columns(blindness: bool = False) -> dict[str, Column]:
    """The comparison's probe columns (tracking is imported only when asked); ``blindness``
    adds the label/recon blindness columns (a float64 probe per run)."""
    from toyspt.probe.columns import PROBE_COLUMNS, blindness_columns

    return dict(PROBE_COLUMNS, **({"blindness": blindness_columns} if blindness else {}))


def run_row(labels: Mapping, result: Entry, metrics: Sequence[str] = SUMMARY_METRICS,
            columns: Mapping[str, Column] | None = None, spec: Spec | None = None) -> dict:
    """One run's row: its ``labels`` (e.g. dataset, arm, seed), the summary ``metrics`` of
    ``result`` and ``columns`` (each ``fn(spec, result)``; a dict result adds several columns)."""
    row = dict(labels, **{k: result.summary[k] for k in metrics})
    for name, fn in (columns or {}).items():
        v = fn(spec, result)
        row.update(v if isinstance(v, dict) else {name: v})
    return row


def rows(labelled: Sequence[tuple[dict, Spec]], results: Sequence[Entry], metrics: Sequence[str] = SUMMARY_METRICS,
         columns: Mapping[str, Column] | None = None) -> pd.DataFrame:
    """One :func:`run_row` per run: its labels, the summary ``metrics`` and ``columns``."""
    return pd.DataFrame([run_row(labels, res, metrics, columns, spec)
                         for (labels, spec), res in zip(labelled, results)])


def _spread(values: pd.Series) -> float | None:
    """Sample std (ddof=1), or None for a single seed (no spread to report)."""
    return float(values.std(ddof=1)) if len(values) > 1 else None


def summary_table(per_seed: pd.DataFrame, by: Sequence[str] = ("dataset", "arm")) -> pd.DataFrame:
    """Mean ± std over seeds per group (order kept), as strings; one seed shows the mean alone."""
    by = [b for b in by if b in per_seed.columns]
    cols = [c for c in per_seed.columns if c not in (*by, "seed")]
    out = []
    for key, g in per_seed.groupby(by, sort=False):
        row = dict(zip(by, key if isinstance(key, tuple) else (key,)), seeds=len(g))
        for c in cols:
            sd = _spread(g[c])
            row[c] = f"{g[c].mean():.3f}" + ("" if sd is None else f" ± {sd:.3f}")
        out.append(row)
    return pd.DataFrame(out)


def write_tables(per_seed: pd.DataFrame, out: Path) -> list[Path]:
    """compare.csv (mean ± std per data set and arm), per_seed.csv, and compare.json
    ({dataset: {arm: {column: mean, std, per-seed values}, seeds}})."""
    out = Path(out)
    cols = [c for c in per_seed.columns if c not in ("dataset", "arm", "seed")]
    blob: dict = {}
    for (name, arm), g in per_seed.groupby(["dataset", "arm"], sort=False):
        blob.setdefault(name, {})[arm] = {c: dict(mean=float(g[c].mean()), std=_spread(g[c]),
                                                  values=[float(v) for v in g[c]]) for c in cols}
        blob[name][arm]["seeds"] = [int(s) for s in g.seed]
    paths = [out / "compare.csv", out / "per_seed.csv", out / "compare.json"]
    write_text(paths[0], summary_table(per_seed).to_csv(index=False))
    write_text(paths[1], per_seed.to_csv(index=False))
    write_text(paths[2], json.dumps(blob, indent=1))
    return paths


def comparison(labelled: Sequence[tuple[dict, Spec]], results: Sequence[Entry],
               columns: Mapping[str, Column] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(mean ± std table, per-seed frame) of swept runs (``labelled``: (labels, spec) as
    :func:`toyspt.runs.arms.arm_specs` gives them, ``results`` their entries in that order); the
    per-seed frame is :func:`rows` with ``columns`` (default :func:`default_columns`)."""
    per_seed = rows(labelled, results, columns=default_columns() if columns is None else columns)
    return summary_table(per_seed), per_seed


__all__ = ["SUMMARY_METRICS", "Column", "default_columns", "run_row", "rows", "summary_table", "write_tables",
           "comparison"]
