"""Figure (study tier): SPT's gain on the paper's four UCR sets over resampled train/test
splits, beside its gain on the archive's one split.

Resampled splits (:mod:`toyspt.ucr.resample`, the design's :attr:`toyspt.ucr.design.Tier.resamples`):
scratch and spt on each stratified resample of the pooled train+test series (class counts
kept; resample 0 is the archive's split), one seed per resample
(:func:`toyspt.ucr.design.resample_seed`), paired by resample. The one split: the study's power
runs (scratch and spt at :attr:`toyspt.ucr.design.Tier.power_seeds` on the archive's split),
paired by seed. Each gain is on the primary metric, with the paired t test's 95% interval and
its p (interval and p from one test), Holm-adjusted over the four sets; beside them the
Hodges-Lehmann estimate and interval with the Holm-adjusted signed-rank p (the other test,
again interval and p from one test).

What each interval covers: the one-split interval, the variance of the gain over model seeds
(initialisation and data order) on one fixed split; the resampled interval, the variance over
splits and seeds together (each resample has its own seed), i.e. how the gain would vary had
the archive drawn another split of the same series. Neither covers other data sets.

Writes ``real_gain_splits.csv`` (one row per set: :data:`COLUMNS`) and
``real_gain_splits_runs.csv`` (one row per resampled run, with its ``resample``).
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from toyspt.analysis.multiplicity import holm
from toyspt.analysis.paired import paired
from toyspt.analysis.rows import ROW_COLUMNS, label_row
from toyspt.ucr import design
from toyspt.ucr.data import UCRSource
from toyspt.util.plots import color

NAME = "real_gain_splits"
TITLE = "SPT's gain over resampled train/test splits, beside its gain on the archive's one split"
TIERS = ("study",)
TEST = "paired t"  # the test behind mean_diff's interval and p_holm (the rank test's columns beside it)
COLUMNS = ["dataset", "n_splits", "mean_diff", "ci_low", "ci_high", "p_holm", "test", "sd_diff", "p",
           "hl", "hl_low", "hl_high", "p_signed_rank_holm", "one_split_n_seeds", "one_split_mean_diff",
           "one_split_ci_low", "one_split_ci_high", "one_split_p_holm"]
ONE_SPLIT = "one_split"  # label group of the study's power runs on the archive's split
RESAMPLE = "resample"  # label group of the resampled runs: (RESAMPLE, r, source of resample r, arm, seed)


def specs(ctx):
    """``("resample", r, source, arm, seed)``: scratch and spt on every resample;
    ``("one_split", source, arm, seed)``: the study's power runs on the archive's split."""
    t = ctx.study.tier
    datasets = list(ctx.study.datasets)
    out = {(RESAMPLE, r, s.data, a, s.seed): s for d, a, r, s in design.resample_specs(datasets, t)}
    out.update({(ONE_SPLIT, UCRSource.of(d), a, s.seed): s
                for d, a, s in design.paper_specs(datasets, t, design.POWER_ARMS)})
    return out


NOT_PROBED = {"final": np.nan, "pretrained": np.nan}  # these runs' proximity indices are not probed


def _frame(runs: dict) -> pd.DataFrame:
    """One label row per run of ``{(source, arm, seed): result}`` (no proximity probes: the
    figure reads accuracies only)."""
    rows = [label_row(src, arm, seed, res, NOT_PROBED) for (src, arm, seed), res in runs.items()]
    return pd.DataFrame(rows, columns=ROW_COLUMNS)


def _gains(frame: pd.DataFrame, by: str) -> dict:
    """{set: :func:`toyspt.analysis.paired.paired` of spt - scratch on the primary metric, paired by ``by``}."""
    out = {}
    for name, g in frame.groupby("dataset", sort=False):
        w = g.pivot_table(index=by, columns="arm", values=design.PRIMARY, aggfunc="first")
        if {"scratch", "spt"} <= set(w.columns) and w[["scratch", "spt"]].notna().all(axis=1).sum() >= 2:
            out[name] = paired((w["spt"] - w["scratch"]).to_numpy())
    return out


def gain_table(resampled: pd.DataFrame, one_split: pd.DataFrame) -> pd.DataFrame:
    """One row per set in :data:`COLUMNS`: the gain over resamples (paired by resample) and on
    the one split (paired by seed), each test Holm-adjusted over the sets."""
    rs, one = _gains(resampled, "resample"), _gains(one_split, "seed")
    names = list(rs)
    p_t, p_w = holm(np.array([rs[n].t.p for n in names])), holm(np.array([rs[n].rank.p for n in names]))
    p_one = holm(np.array([one[n].t.p if n in one else np.nan for n in names]))
    rows = []
    for i, n in enumerate(names):
        r, o = rs[n], one.get(n)
        rows.append(dict(dataset=n, n_splits=r.n, mean_diff=r.t.estimate, ci_low=r.t.low, ci_high=r.t.high,
                         p_holm=p_t[i], test=TEST, sd_diff=r.sd, p=r.t.p, hl=r.rank.estimate, hl_low=r.rank.low,
                         hl_high=r.rank.high, p_signed_rank_holm=p_w[i], one_split_n_seeds=o.n if o else 0,
                         one_split_mean_diff=o.t.estimate if o else np.nan,
                         one_split_ci_low=o.t.low if o else np.nan, one_split_ci_high=o.t.high if o else np.nan,
                         one_split_p_holm=p_one[i]))
    return pd.DataFrame(rows, columns=COLUMNS)


def draw(ctx, runs):
    t = ctx.study.tier
    resampled = _frame({k[2:]: v for k, v in runs.items() if k[0] == RESAMPLE})
    resampled.insert(3, "resample", resampled.seed - design.RESAMPLE_SEED_BASE)
    one_split = _frame({k[1:]: v for k, v in runs.items() if k[0] == ONE_SPLIT})
    table = gain_table(resampled, one_split)
    ctx.meta[NAME] = dict(tier=t.name, primary=design.PRIMARY, test=TEST, resamples=list(t.resamples),
                          seed_of_resample=f"{design.RESAMPLE_SEED_BASE} + r", one_split_seeds=len(t.power_seeds),
                          evaluate="peak", holm_family="the paper's sets, per test and per split design",
                          covers=dict(resampled="the gain's variance over train/test splits and model seeds "
                                                "together (one seed per resample)",
                                      one_split="the gain's variance over model seeds on the archive's one split"),
                          sets=table.to_dict("records"))
    fig, ax = plt.subplots(figsize=(7.5, 1.2 + 0.9 * max(1, len(table))))
    y = np.arange(len(table))[::-1]
    for yy, (_, r) in zip(y, table.iterrows()):
        for dy, (m, lo, hi, p, what) in ((0.15, (r.mean_diff, r.ci_low, r.ci_high, r.p_holm,
                                                 f"{r.n_splits} resampled splits")),
                                          (-0.15, (r.one_split_mean_diff, r.one_split_ci_low, r.one_split_ci_high,
                                                   r.one_split_p_holm, f"one split, {r.one_split_n_seeds} seeds"))):
            if np.isfinite(m):
                xerr = [[m - lo], [hi - m]] if np.isfinite(lo) else None
                ax.errorbar(m, yy + dy, xerr=xerr, fmt="o" if dy > 0 else "s", capsize=2, ms=4,
                            color=color("spt") if dy > 0 else "0.45")
                ax.annotate(f"{what}: Holm p {p:.2g}", (m, yy + dy), xytext=(0, 5), textcoords="offset points",
                            fontsize=6, ha="center")
    ax.axvline(0, color="0.5", lw=0.8)
    ax.set_yticks(y, table.dataset)
    ax.set_ylim(-0.6, len(table) - 0.4)
    ax.set(xlabel=f"{design.PRIMARY}: spt - scratch (mean, 95% paired t interval)",
           title=f"{TITLE}\ncircles: resampled splits (split and seed variance); squares: the archive's split "
                 f"(seed variance only)")
    ax.title.set_fontsize(8)
    fig.tight_layout()
    return fig, {NAME: table, f"{NAME}_runs": resampled}
