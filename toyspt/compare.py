"""Compare experiment arms over seeds: per-seed summaries and a mean ± std table."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Callable, Sequence

import pandas as pd

from .arms import arm_spec
from .runs import RunCache, RunSpec, sweep
from .train import RunResult

METRICS = ("test_at_peak", "peak_val_acc", "final_train_acc", "final_test_acc")

# extra per-run columns (name -> fn(spec, result) -> float); the trackers add theirs
EXTRA_COLUMNS: dict[str, Callable[[RunSpec, RunResult], float]] = {}

from . import tracking  # noqa: E402,F401  (registers displacement and proximity columns)


def per_seed_frame(arms: Sequence[str], seeds: Sequence[int], base: RunSpec, cache: RunCache,
                   workers: int = 1, recompute: bool = False, progress: bool = True,
                   executor=None, vectorize: bool = True) -> pd.DataFrame:
    """One row per (arm, seed) with the run summary and the extra columns. The seeds of an
    arm train together (``vectorize``, bitwise equal to one at a time); ``executor``: any
    concurrent.futures.Executor (toyspt.engines.make_executor), default ``workers`` processes."""
    specs = [(arm, arm_spec(arm, RunSpec(**{**base.__dict__, "seed": s}))) for arm in arms for s in seeds]
    results = sweep([s for _, s in specs], cache, workers=workers, executor=executor, recompute=recompute,
                    progress=progress, desc="compare", vectorize=vectorize)
    rows = []
    for (arm, spec), res in zip(specs, results):
        row = dict(arm=arm, seed=spec.seed, **{k: res.summary[k] for k in METRICS})
        for name, fn in EXTRA_COLUMNS.items():
            row[name] = fn(spec, res)
        rows.append(row)
    return pd.DataFrame(rows)


def summary_table(per_seed: pd.DataFrame) -> pd.DataFrame:
    """Mean ± std over seeds per arm (arm order kept), as strings and numbers."""
    cols = [c for c in per_seed.columns if c not in ("arm", "seed")]
    out = []
    for arm, g in per_seed.groupby("arm", sort=False):
        row = {"arm": arm, "seeds": len(g)}
        for c in cols:
            row[c] = f"{g[c].mean():.3f} ± {g[c].std(ddof=1) if len(g) > 1 else 0.0:.3f}"
        out.append(row)
    return pd.DataFrame(out)


def compare(arms, seeds, base, cache, workers=1, recompute=False, progress=True, executor=None,
            vectorize=True):
    per_seed = per_seed_frame(arms, seeds, base, cache, workers, recompute, progress, executor, vectorize)
    return summary_table(per_seed), per_seed


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def write_table(table: pd.DataFrame, per_seed: pd.DataFrame, out: Path) -> None:
    """compare.csv (mean ± std), compare.json (means, stds and per-seed values), per_seed.csv."""
    _atomic_write(out / "compare.csv", table.to_csv(index=False))
    _atomic_write(out / "per_seed.csv", per_seed.to_csv(index=False))
    cols = [c for c in per_seed.columns if c not in ("arm", "seed")]
    blob = {arm: {c: dict(mean=float(g[c].mean()), std=float(g[c].std(ddof=1)) if len(g) > 1 else 0.0,
                          values=[float(v) for v in g[c]]) for c in cols} | {"seeds": [int(s) for s in g.seed]}
            for arm, g in per_seed.groupby("arm", sort=False)}
    _atomic_write(out / "compare.json", json.dumps(blob, indent=1))
