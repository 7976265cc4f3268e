"""Compare a fresh run's figure CSVs with reference ones (e.g. the committed figures/) at the
level of arm means, with stated tolerances (``python paper_figs.py --compare-to figures``).

Why not bytes: the same seed gives the same bytes on one machine (same CPU, torch build,
BLAS/oneDNN kernels, thread count; what decides it is recorded in metadata.json), but on
another machine float32 rounding differs in the last bits and training amplifies it: single
runs of the toy task have been seen 0.06 apart in accuracy and UCR runs 0.21, while arm
means stayed within 0.02. So each CSV is reduced to means over everything but its
categorical columns (arm, split, panel, ...), i.e. over seeds, epochs and offsets, and two
means agree when ``|new - ref| <= ATOL + RTOL * |ref|``; two NaN means agree, and two infinite
ones when they have the same sign (``+inf`` and ``-inf`` never do).

The reference folder is checked before any work (:func:`check_reference`, the type of
``--compare-to``): it must be a folder holding CSVs, each a regular file of at most
:data:`MAX_CSV_BYTES` (read bounded: :func:`toyspt.util.files.read_bounded`) that parses as a
CSV with a numeric column to compare; anything else is one line naming the folder or file.
"""
from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Iterable

import numpy as np
import pandas as pd

from toyspt.util.files import UnsafeFile, read_bounded

ATOL = 0.03  # absolute: 1.5x the largest arm-mean shift seen across machines (0.02)
RTOL = 0.10  # relative: for quantities not on a 0-1 scale (displacements, proximity indices)
# numeric columns that index a value rather than being one (averaged over, not compared)
INDEX_COLUMNS = ("seed", "epoch", "step", "offset", "i", "j", "layer", "head", "n", "example", "std")
MAX_CSV_BYTES = 64 << 20  # the largest figure CSV is ~2 MB
MAX_CSVS = 10_000  # CSVs in a reference folder (the figures have ~30)


REPORT_COLUMNS = ["file", "group", "column", "ref", "new", "diff", "tol", "ok", "note"]


class CompareError(ValueError):
    """A reference folder or CSV that cannot be compared with; the message names it."""


def read_csv(path: Path) -> pd.DataFrame:
    """A CSV read bounded, one :class:`CompareError` naming it when it is not a CSV."""
    try:
        data = read_bounded(path, "CSV", MAX_CSV_BYTES)
        return pd.read_csv(io.BytesIO(data))
    except UnsafeFile as e:
        raise CompareError(str(e)) from None
    except (ValueError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        first = (str(e).strip().splitlines() or [""])[0][:200]
        raise CompareError(f"{path}: not a CSV ({type(e).__name__}: {first})") from None


def check_reference(ref: str | os.PathLike) -> list[Path]:
    """The CSVs of a reference folder, each read and reduced once to check it (before any work);
    :class:`CompareError` naming the folder or file otherwise."""
    ref = Path(ref)
    if not ref.exists():
        raise CompareError(f"--compare-to {ref}: no such folder")
    if not ref.is_dir():
        raise CompareError(f"--compare-to {ref}: not a folder")
    csvs = []
    for path in ref.rglob("*.csv"):
        csvs.append(path)
        if len(csvs) > MAX_CSVS:
            raise CompareError(f"--compare-to {ref}: more than {MAX_CSVS} CSVs; not a folder of figures")
    if not csvs:
        raise CompareError(f"--compare-to {ref}: holds no CSV to compare with (a folder of figures, e.g. figures/)")
    for path in sorted(csvs):
        frame = read_csv(path)
        mixed = _mixed_column(frame)
        if mixed is not None:
            raise CompareError(f"--compare-to {path}: {mixed}; a damaged figure CSV")
        if _reduce(frame).empty:
            raise CompareError(f"--compare-to {path}: no numeric column to compare (a text CSV?)")
    return sorted(csvs)


def _mixed_column(f: pd.DataFrame) -> str | None:
    """Where a column holds numbers and text (a value column with a word in it: no figure writes
    one, and comparing it would fail only after drawing): the column, the row and the text."""
    for c in f.columns:
        if pd.api.types.is_numeric_dtype(f[c]) or pd.api.types.is_bool_dtype(f[c]):
            continue
        text = f[c].dropna().astype(str)
        number = pd.to_numeric(text, errors="coerce")
        if number.notna().any() and number.isna().any():
            row = number.index[number.isna()][0]
            return (f"column {str(c)[:60]!r} holds numbers and text ({str(text[row])[:40]!r} in data row "
                    f"{int(row) + 1})")
    return None


def reduce_csv(path: Path) -> pd.DataFrame:
    """Long table (group..., column, value): means of every value column per categorical group."""
    return _reduce(read_csv(path))


def _reduce(f: pd.DataFrame) -> pd.DataFrame:
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


def compare_dirs(new: Path, ref: Path, drawn: Iterable[str] | None = None) -> pd.DataFrame:
    """One row per (file, group, column) present in both directories, with the verdict; the
    reference is checked first (:func:`check_reference`). ``drawn``: the CSVs (paths relative to
    ``new``) that the run being checked wrote; the reference's other CSVs, of figures it did not
    draw (``--only``, another tier), are left out (None: every CSV of the reference is expected)."""
    rows = []
    keep = None if drawn is None else {str(Path(d)) for d in drawn}
    for rf in check_reference(ref):
        if keep is not None and str(rf.relative_to(ref)) not in keep:
            continue
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
            same = (np.isnan(r.value_ref) and np.isnan(r.value_new)) or (np.isinf(r.value_ref)
                                                                         and r.value_new == r.value_ref)
            ok = r._merge == "both" and (bool(same) or bool(diff <= tol))
            rows.append(dict(file=str(rf.relative_to(ref)), group=r.group, column=r.column, ref=r.value_ref,
                             new=r.value_new, diff=diff, tol=tol, ok=ok,
                             note="" if r._merge == "both" else
                             f"only in {'ref' if r._merge == 'left_only' else 'new'}"))
    return pd.DataFrame(rows, columns=REPORT_COLUMNS)


def summary(report: pd.DataFrame) -> str:
    """Per file: groups compared, how many agree, the largest difference (a line saying so when
    nothing was compared: none of the CSVs written is in the reference)."""
    if report.empty:
        return "nothing compared: the reference holds none of the CSVs this call wrote"
    lines = []
    for name, g in report.groupby("file", sort=True):
        worst = g.loc[g["diff"].idxmax()] if g["diff"].notna().any() else None
        lines.append(f"{name:28s} {int(g.ok.sum()):4d}/{len(g):<4d} agree"
                     + ("" if worst is None else f"  largest |diff| {worst['diff']:.3g} ({worst.group} {worst.column}, "
                                                  f"tol {worst.tol:.3g})"))
    return "\n".join(lines)


__all__ = ["ATOL", "RTOL", "MAX_CSV_BYTES", "CompareError", "read_csv", "check_reference", "reduce_csv",
           "compare_dirs", "summary"]
