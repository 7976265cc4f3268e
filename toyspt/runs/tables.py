"""Comparison tables: per-seed summaries of swept runs, mean ± std per arm, CSV and JSON.

Used by ``toyspt compare`` (toy arms) and ``toyspt ucr`` (one table per data set). The
per-run columns beyond the run summary are functions ``fn(spec, result) -> float``; the
toy's default set is :data:`toyspt.probe.tracking.COMPARE_COLUMNS` (displacement of W_Q/W_K,
proximity index of the final model).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Mapping, Sequence

import pandas as pd

from toyspt.util.atomic import write_text
from toyspt.train.loop import RunResult
from toyspt.runs.specs import RunSpec, Spec

METRICS = ("test_at_peak", "peak_val_acc", "final_train_acc", "final_test_acc")
Column = Callable[[Spec, RunResult], float]


def default_columns() -> dict[str, Column]:
    """The toy comparison's extra columns (tracking is imported only when asked)."""
    from toyspt.probe.tracking import COMPARE_COLUMNS

    return dict(COMPARE_COLUMNS)


def toy_specs(arms: Sequence[str], seeds: Sequence[int], base: RunSpec) -> list[tuple[str, RunSpec]]:
    """(arm, spec) for every arm and seed on top of ``base``."""
    from toyspt.runs.arms import arm_spec
    from dataclasses import replace

    return [(arm, arm_spec(arm, replace(base, seed=s))) for arm in arms for s in seeds]


def rows(labelled: Sequence[tuple[dict, Spec]], results: Sequence[RunResult],
         metrics: Sequence[str] = METRICS, columns: Mapping[str, Column] | None = None) -> pd.DataFrame:
    """One row per run: its labels (e.g. arm, seed), the summary ``metrics`` and ``columns``."""
    out = []
    for (labels, spec), res in zip(labelled, results):
        row = dict(labels, **{k: res.summary[k] for k in metrics})
        for name, fn in (columns or {}).items():
            row[name] = fn(spec, res)
        out.append(row)
    return pd.DataFrame(out)


def per_seed_frame(arms: Sequence[str], seeds: Sequence[int], base: RunSpec, cache,
                   workers: int = 1, recompute: bool = False, progress: bool = True,
                   executor=None, vectorize: bool = True, dask: str | None = None,
                   columns: Mapping[str, Column] | None = None) -> pd.DataFrame:
    """One row per (arm, seed) with the run summary and the extra columns (default
    :func:`default_columns`); runs go through :func:`toyspt.runs.sweeps.sweep`."""
    from toyspt.runs.sweeps import sweep

    specs = toy_specs(arms, seeds, base)
    results = sweep([s for _, s in specs], cache, workers=workers, executor=executor, recompute=recompute,
                    progress=progress, desc="compare", vectorize=vectorize, dask=dask)
    labelled = [(dict(arm=arm, seed=spec.seed), spec) for arm, spec in specs]
    return rows(labelled, results, columns=default_columns() if columns is None else columns)


def _spread(values: pd.Series) -> float | None:
    """Sample std (ddof=1), or None for a single seed (no spread to report)."""
    return float(values.std(ddof=1)) if len(values) > 1 else None


def summary_table(per_seed: pd.DataFrame, by: Sequence[str] = ("arm",)) -> pd.DataFrame:
    """Mean ± std over seeds per group (order kept), as strings; one seed shows the mean alone."""
    cols = [c for c in per_seed.columns if c not in (*by, "seed")]
    out = []
    for key, g in per_seed.groupby(list(by), sort=False):
        row = dict(zip(by, key if isinstance(key, tuple) else (key,)), seeds=len(g))
        for c in cols:
            sd = _spread(g[c])
            row[c] = f"{g[c].mean():.3f}" + ("" if sd is None else f" ± {sd:.3f}")
        out.append(row)
    return pd.DataFrame(out)


def write_table(table: pd.DataFrame, per_seed: pd.DataFrame, out: Path) -> None:
    """compare.csv (mean ± std), compare.json (means, stds and per-seed values), per_seed.csv."""
    out = Path(out)
    write_text(out / "compare.csv", table.to_csv(index=False))
    write_text(out / "per_seed.csv", per_seed.to_csv(index=False))
    cols = [c for c in per_seed.columns if c not in ("arm", "seed")]
    blob = {arm: {c: dict(mean=float(g[c].mean()), std=_spread(g[c]),
                          values=[float(v) for v in g[c]]) for c in cols} | {"seeds": [int(s) for s in g.seed]}
            for arm, g in per_seed.groupby("arm", sort=False)}
    write_text(out / "compare.json", json.dumps(blob, indent=1))


def compare(arms, seeds, base, cache, workers=1, recompute=False, progress=True, executor=None,
            vectorize=True, dask=None):
    """(mean ± std table, per-seed frame) of ``arms`` over ``seeds``."""
    per_seed = per_seed_frame(arms, seeds, base, cache, workers, recompute, progress, executor, vectorize, dask)
    return summary_table(per_seed), per_seed


__all__ = ["METRICS", "default_columns", "toy_specs", "rows", "per_seed_frame", "summary_table",
           "write_table", "compare"]
