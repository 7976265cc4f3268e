"""Figure (study tier): the archive scan's excluded small sets as their own stratum,
descriptively. The scan's rule refuses sets with a class of fewer than 5 training series
(:mod:`toyspt.ucr.archive`, rule 5); those that the loader can still run
(:func:`toyspt.ucr.archive.small_sets`) train scratch and spt at the scan's seeds
(:func:`toyspt.ucr.design.small_specs`), so whether SPT helps where labels are scarcest is
measured, not assumed. Per set: SPT's gain over scratch on the primary metric, paired by seed,
mean with the paired t test's 95% interval and its p (one test). Descriptive: no confirmatory
family (the stratum was not in the protocol), no Holm; a few sets with few series per class.

Writes ``archive_small.csv`` (one row per set: :data:`COLUMNS`) and ``archive_small_runs.csv``.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from toyspt.analysis.paired import paired
from toyspt.analysis.rows import ROW_COLUMNS, label_row
from toyspt.ucr import design
from toyspt.ucr.archive import small_sets
from toyspt.ucr.data import UCRSource, load_ucr

NAME = "archive_small"
TITLE = "SPT on the archive's small sets (a class with fewer than 5 training series): descriptive"
TIERS = ("study",)
COLUMNS = ["dataset", "n_seeds", "min_class", "classes", "train", "scratch", "spt", "mean_diff", "ci_low", "ci_high",
           "p", "test"]
NOT_PROBED = {"final": np.nan, "pretrained": np.nan}  # accuracies only: no proximity probes


def sets(quick: bool) -> list[str]:
    """The small sets, in the scan's order (quick: the cheapest one)."""
    names = small_sets()
    return names[:1] if quick else names


def specs(ctx):
    """``("small", source, arm, seed)``: scratch and spt on each small set at the scan's seeds."""
    data = [load_ucr(n) for n in sets(ctx.quick)]
    return {("small", UCRSource.of(d), a, s.seed): s for d, a, s in design.small_specs(data, ctx.study.tier)}


def table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per set of :data:`COLUMNS` from the runs' rows (``dataset, arm, seed``, the primary
    metric, ``min_class``, ``classes``, ``train``)."""
    rows = []
    for name, g in frame.groupby("dataset", sort=False):
        w = g.pivot_table(index="seed", columns="arm", values=design.PRIMARY, aggfunc="first")
        r = paired((w["spt"] - w["scratch"]).to_numpy())
        rows.append(dict(dataset=name, n_seeds=r.n, min_class=int(g.min_class.iloc[0]),
                         classes=int(g.classes.iloc[0]), train=int(g.train.iloc[0]), scratch=w["scratch"].mean(),
                         spt=w["spt"].mean(), mean_diff=r.t.estimate, ci_low=r.t.low, ci_high=r.t.high,
                         p=r.t.p, test="paired t (descriptive)"))
    return pd.DataFrame(rows, columns=COLUMNS)


def draw(ctx, runs):
    rows = []
    for (_, src, arm, seed), res in runs.items():
        d = src.load()
        counts = np.bincount(np.concatenate([d.train.y.numpy(), d.val.y.numpy()]), minlength=d.n_classes)
        rows.append(dict(label_row(src, arm, seed, res, NOT_PROBED), min_class=int(counts.min()),
                         classes=d.n_classes, train=int(counts.sum())))
    frame = pd.DataFrame(rows, columns=[*ROW_COLUMNS, "min_class", "classes", "train"])
    t = table(frame)
    ctx.meta[NAME] = dict(tier=ctx.study.tier.name, primary=design.PRIMARY, seeds=list(ctx.study.tier.archive_seeds),
                          descriptive=True, sets=t.to_dict("records"))
    fig, ax = plt.subplots(figsize=(7, 1.4 + 0.8 * max(1, len(t))))
    y = np.arange(len(t))[::-1]
    for yy, (_, r) in zip(y, t.iterrows()):
        xerr = [[r.mean_diff - r.ci_low], [r.ci_high - r.mean_diff]] if np.isfinite(r.ci_low) else None
        ax.errorbar(r.mean_diff, yy, xerr=xerr, fmt="o", capsize=2, ms=4, color="C1")
    ax.axvline(0, color="0.5", lw=0.8)
    ax.set_yticks(y, [f"{r.dataset} ({r.classes} classes, smallest {r.min_class} series)" for _, r in t.iterrows()],
                  fontsize=7)
    ax.set_ylim(-0.6, len(t) - 0.4)
    ax.set(xlabel=f"{design.PRIMARY}: spt - scratch (mean, 95% paired t interval; descriptive)", title=TITLE)
    ax.title.set_fontsize(8)
    fig.tight_layout()
    return fig, {NAME: t, f"{NAME}_runs": frame}
