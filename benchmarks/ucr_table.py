"""The UCR tables of docs/ucr.md, printed from the figure's CSVs (``figures/ucr.csv`` and
``figures/ucr_paired.csv``, written by ``python paper_figs.py``): per data set and arm the
mean ± sd over seeds of peak held-out accuracy (max test over epochs, where measured), test
at peak validation and final test accuracy, and the paired per-seed difference to scratch
with its 95% confidence interval, paired t-test p-value and wins/ties/losses.

    python benchmarks/ucr_table.py                 # reads figures/
    python benchmarks/ucr_table.py --dir /tmp/out
"""
from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

METRICS = ("peak_held_out", "test_at_peak", "final_test_acc")


def fmt_diff(r) -> str:
    if pd.isna(r.mean_diff):
        return ""
    if pd.isna(r.ci_low):
        return f"{r.mean_diff:+.3f} (n={r.n})"
    return f"{r.mean_diff:+.3f} [{r.ci_low:+.3f}, {r.ci_high:+.3f}] p={r.t_pvalue:.2g} ({r.wins}/{r.ties}/{r.losses})"


def ms(v: pd.Series) -> str:
    v = v.dropna()
    if not len(v):
        return ""
    return f"{v.mean():.3f} ± {v.std(ddof=1):.3f} (n={len(v)})" if len(v) > 1 else f"{v.iloc[0]:.3f} (n=1)"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dir", default="figures")
    args = p.parse_args(argv)
    per_seed = pd.read_csv(Path(args.dir) / "ucr.csv")
    paired = pd.read_csv(Path(args.dir) / "ucr_paired.csv")
    print("| data set | arm | peak held-out | test at peak val | final test | val at 1.0 | "
          "diff. to scratch: peak held-out | test at peak val | final test |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, g in per_seed.groupby("dataset", sort=False):
        for arm, a in g.groupby("arm", sort=False):
            diffs = []
            for m in METRICS:
                r = paired[(paired.dataset == name) & (paired.comparison == f"{arm} - scratch") & (paired.metric == m)]
                diffs.append(fmt_diff(r.iloc[0]) if len(r) else "")
            sat = f"{int((a.peak_val_acc == 1.0).sum())}/{len(a)}"
            print(f"| {name} | {arm} | {ms(a.peak_held_out)} | {ms(a.test_at_peak)} | {ms(a.final_test_acc)} | {sat} | "
                  + " | ".join(diffs) + " |")
    print("\ndifference: mean [95% CI] paired t-test p (wins/ties/losses over seeds)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
