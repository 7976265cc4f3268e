"""Compare a fresh run's figure CSVs with reference ones (e.g. the committed figures/) at the
level of arm means, with stated tolerances (``python paper_figs.py --compare-to figures``).

Why not bytes: the same seed gives the same bytes on one machine (same CPU, torch build,
BLAS/oneDNN kernels, thread count; what decides it is recorded in metadata.json), but on
another machine float32 rounding differs in the last bits and training amplifies it: single
runs of the toy task have been seen 0.06 apart in accuracy and UCR runs 0.21, while arm
means stayed within 0.02. So each CSV is reduced to means over everything but its
categorical columns (arm, split, panel, ...), i.e. over seeds, epochs and offsets, and two
means agree when ``|new - ref| <= ATOL + RTOL * |ref|``.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

ATOL = 0.03  # absolute: 1.5x the largest arm-mean shift seen across machines (0.02)
RTOL = 0.10  # relative: for quantities not on a 0-1 scale (displacements, proximity indices)
# numeric columns that index a value rather than being one (averaged over, not compared)
INDEX_COLUMNS = ("seed", "epoch", "step", "offset", "i", "j", "layer", "head", "n", "example", "std")


def reduce_csv(path: Path) -> pd.DataFrame:
    """Long table (group..., column, value): means of every value column per categorical group."""
    f = pd.read_csv(path)
    numeric = {c for c in f.columns if pd.api.types.is_numeric_dtype(f[c]) and not pd.api.types.is_bool_dtype(f[c])}
    cats = [c for c in f.columns if c not in numeric]
    vals = [c for c in f.columns if c in numeric and c not in INDEX_COLUMNS]
    if not vals:
        return pd.DataFrame(columns=["group", "column", "value"])
    for c in cats:  # categorical values as plain strings ("" for a missing one)
        f[c] = [("" if pd.isna(v) else str(v)) for v in f[c]]
    g = f.groupby(cats, dropna=False, sort=True)[vals].mean() if cats else f[vals].mean().to_frame().T
    long = g.reset_index().melt(id_vars=cats, value_vars=vals, var_name="_column", value_name="_value")
    long["group"] = ["/".join(map(str, row)) for row in long[cats].itertuples(index=False)] if cats else "all"
    return long.rename(columns={"_column": "column", "_value": "value"})[["group", "column", "value"]]


def compare_dirs(new: Path, ref: Path) -> pd.DataFrame:
    """One row per (file, group, column) present in both directories, with the verdict."""
    rows = []
    for rf in sorted(Path(ref).rglob("*.csv")):
        nf = Path(new) / rf.relative_to(ref)
        if not nf.exists():
            rows.append(dict(file=str(rf.relative_to(ref)), group="", column="", ref=np.nan, new=np.nan,
                             diff=np.nan, tol=np.nan, ok=False, note="missing in the new run"))
            continue
        a, b = reduce_csv(rf), reduce_csv(nf)
        m = a.merge(b, on=["group", "column"], how="outer", suffixes=("_ref", "_new"), indicator=True)
        for _, r in m.iterrows():
            tol = ATOL + RTOL * abs(r.value_ref) if np.isfinite(r.value_ref) else np.nan
            diff = abs(r.value_new - r.value_ref)
            both_nan = not np.isfinite(r.value_ref) and not np.isfinite(r.value_new)
            ok = r._merge == "both" and (both_nan or bool(diff <= tol))
            rows.append(dict(file=str(rf.relative_to(ref)), group=r.group, column=r.column, ref=r.value_ref,
                             new=r.value_new, diff=diff, tol=tol, ok=ok,
                             note="" if r._merge == "both" else
                             f"only in {'ref' if r._merge == 'left_only' else 'new'}"))
    return pd.DataFrame(rows)


def summary(report: pd.DataFrame) -> str:
    """Per file: groups compared, how many agree, the largest difference."""
    lines = []
    for name, g in report.groupby("file", sort=True):
        worst = g.loc[g["diff"].idxmax()] if g["diff"].notna().any() else None
        lines.append(f"{name:28s} {int(g.ok.sum()):4d}/{len(g):<4d} agree"
                     + ("" if worst is None else f"  largest |diff| {worst['diff']:.3g} ({worst.group} {worst.column}, "
                                                  f"tol {worst.tol:.3g})"))
    return "\n".join(lines)


__all__ = ["ATOL", "RTOL", "reduce_csv", "compare_dirs", "summary"]
