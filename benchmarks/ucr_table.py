"""The README's UCR table, printed from the figure's CSVs (``figures/ucr.csv`` and
``figures/ucr_paired.csv``, written by ``python paper_figs.py``): per data set and arm the
mean ± sd over seeds of test at peak validation and final test accuracy, and the paired
per-seed difference to scratch with its 95% confidence interval and paired t-test p-value.

    python benchmarks/ucr_table.py                 # reads figures/
    python benchmarks/ucr_table.py --dir /tmp/out
"""
from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd


def fmt_diff(r) -> str:
    if pd.isna(r.ci_low):
        return f"{r.mean_diff:+.3f} (n={r.n}, no spread)"
    return (f"{r.mean_diff:+.3f} [{r.ci_low:+.3f}, {r.ci_high:+.3f}] p={r.t_pvalue:.2g} "
            f"({r.wins}/{r.ties}/{r.losses})")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dir", default="figures")
    args = p.parse_args(argv)
    per_seed = pd.read_csv(Path(args.dir) / "ucr.csv")
    paired = pd.read_csv(Path(args.dir) / "ucr_paired.csv")
    print("| data set (train/val/test seeds) | beta_unif | proximity after SPT | arm | test at peak val | "
          "final test | diff. to scratch: test at peak | final test |")
    print("|---|---|---|---|---|---|---|---|")
    for name, g in per_seed.groupby("dataset", sort=False):
        for arm, a in g.groupby("arm", sort=False):
            cells = [f"{a[m].mean():.3f} ± {a[m].std(ddof=1):.3f}" for m in ("test_at_peak", "final_test_acc")]
            if arm == "scratch":
                diffs = ["", ""]
            else:
                q = paired[(paired.dataset == name) & (paired.comparison == f"{arm} - scratch")].set_index("metric")
                diffs = [fmt_diff(q.loc[m]) for m in ("test_at_peak", "final_test_acc")]
            head = (f"{name} ({len(a)} seeds, val {int(a.n_val.iloc[0])})", f"{g.beta_unif.iloc[0]:+.3f}",
                    f"{g.proximity_after_spt.mean():.2f}") if arm == "scratch" else ("", "", "")
            print("| " + " | ".join([*head, arm, *cells, *diffs]) + " |")
    print("\ndifference: mean [95% CI] paired t-test p (wins/ties/losses over seeds)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
