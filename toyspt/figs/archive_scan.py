"""Figure (study tier): SPT beyond the paper's four sets. scratch, spt and qk_transfer on the
first sets the archive rule admits, in its stated order (:mod:`toyspt.ucr.archive`): per set,
SPT's gain over scratch on the primary metric (paired by seed, 95% interval, Holm across the
archive sets; direction from the same signed-rank test), the paper's four sets beside them for
reference (from the same tier), and the share of the gain that Q/K-only transfer keeps (Fieller
interval). Related sets (:data:`toyspt.ucr.archive.RELATED_SETS`: sets sharing recordings) are
marked with their unit's name and a square marker; the across-set test (Wilcoxon over the
per-unit mean gains of the archive and paper sets together, :func:`toyspt.analysis.gains.across_sets`)
is in the metadata and the title. Right: where these models stand, per set, scratch's and
SPT's mean accuracy on the primary metric beside two standard non-Transformer classifiers on
the same z-normalised splits, fitted on the whole training split (the reference classifiers
1-NN DTW and ROCKET, :mod:`toyspt.ucr.reference`; not in quick mode, where their compile time would dominate).

Writes ``archive_scan.csv`` (one row per archive set: :data:`toyspt.analysis.gains.ARCHIVE_COLUMNS`,
with ``unit``, the related-set unit)
``archive_scan_runs.csv`` (one row per run), ``archive_scan_baselines.csv`` (one row per set,
reference classifier and protocol: :data:`toyspt.ucr.reference.COLUMNS`) and ``archive_scan_standing.csv``
(per archive and paper set, the Transformers' accuracy beside the baselines': :data:`STANDING_COLUMNS`).

Metadata beside the signed-rank test over units (``across_sets``; ``across_archive``: the archive
sets alone): the random-effects pooled gain over every set, archive and paper
(:func:`toyspt.analysis.gains.pooled_gain`: ``pooled``, ``pooled_low``, ``pooled_high`` (Hartung-Knapp
95%), ``i2``, and the rest in ``pooling``); Spearman's rho of each set's mean gain with its training
series (train + validation) per class (``gain_vs_per_class``) and with its smallest class's
(``gain_vs_smallest_class``, the quantity the archive rule bounds below by 5). The sets below
that bound are a descriptive stratum of their own, the ``archive_small`` figure
(:mod:`toyspt.figs.archive_small`).
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy import stats

from toyspt.analysis import gains
from toyspt.analysis.rows import label_frame, probe_specs
from toyspt.ucr import design
from toyspt.ucr.archive import DEFAULT_RULE, RELATED_SETS, take, unit_of
from toyspt.ucr.data import PAPER_DATASETS, UCRSource, load_ucr
from toyspt.ucr.reference import COLUMNS as REFERENCE_COLUMNS
from toyspt.ucr.reference import PROTOCOLS, REFERENCE_CLASSIFIERS, ReferenceSpec

NAME = "archive_scan"
TITLE = "SPT beyond the paper's sets: its gain per UCR set, and how much of it Q/K-only transfer keeps"
TIERS = ("study",)
COLUMNS = gains.ARCHIVE_COLUMNS


def specs(ctx):
    """``(group, source, arm, seed)``: the archive sets' runs (group "archive") and the paper
    sets' scratch, spt and qk_transfer (group "paper", the same runs as the other figures');
    ``("reference", source, classifier)``: each reference classifier on each of those sets (not
    in quick mode)."""
    t = ctx.study.tier
    arch = [load_ucr(n) for n in take(DEFAULT_RULE, t.archive_sets)] if t.archive_sets else []
    out = {("archive", UCRSource.of(d), a, s.seed): s for d, a, s in design.archive_specs(arch, t)}
    paper = list(ctx.study.datasets)
    out.update({("paper", UCRSource.of(d), a, s.seed): s
                for d, a, s in design.paper_specs(paper, t, design.ARCHIVE_ARMS)})
    reference = {} if ctx.quick else {("reference", src, c): ReferenceSpec(src, c) for d in arch + paper
                                      for src in [UCRSource.of(d)] for c in REFERENCE_CLASSIFIERS}
    return out | probe_specs(out) | reference


# per set, the Transformers' mean primary metric beside each reference classifier x protocol's test accuracy
SCORE_COLUMNS = [f"{b}_{p}" for b in REFERENCE_CLASSIFIERS for p in PROTOCOLS]  # one per classifier x protocol
STANDING_COLUMNS = ["dataset", "group", "unit", "n_seeds", "scratch", "spt", *SCORE_COLUMNS]
REFERENCE_MARKS = {"1nn_dtw": ("v", "#9467bd", "1-NN DTW"), "rocket": ("^", "#8c564b", "ROCKET")}


def reference_frame(runs) -> pd.DataFrame:
    """One row per set, reference classifier and protocol from the figure's ``("reference", source,
    classifier)`` entries."""
    rows = [r for label, res in runs.items() if label[0] == "reference" for r in res.rows]
    return pd.DataFrame(rows, columns=REFERENCE_COLUMNS)


def sizes_of(runs, group: str) -> dict[str, tuple[int, int, int]]:
    """Per set of ``group``: (training series (train + validation), length, classes)."""
    return {src.name: (len(d.train) + len(d.val), d.length, d.n_classes) for (g, src, *_) in runs if g == group
            for d in [src.load()]}


def per_class(runs) -> dict[str, tuple[float, int]]:
    """Per set: training series (train + validation) per class, and those of its smallest class."""
    out = {}
    for src in {label[1] for label in runs}:
        d = src.load()
        counts = np.bincount(np.concatenate([d.train.y.numpy(), d.val.y.numpy()]))
        out[src.name] = (float(counts.mean()), int(counts.min()))
    return out


def _spearman(x, y) -> dict:
    rho = stats.spearmanr(x, y)
    return dict(rho=float(rho.statistic), p=float(rho.pvalue), n=len(x))


def _across(both: pd.DataFrame) -> dict:
    try:
        return dict(gains.across_sets(both, unit_of), rule={u: list(s) for u, (s, _) in RELATED_SETS.items()})
    except ValueError as e:  # fewer than 2 units with a gain
        return dict(error=str(e))


def across_meta(both: pd.DataFrame, frame: pd.DataFrame, runs) -> dict:
    """The across-set answers: the signed-rank test over units (all sets; the archive alone), the
    random-effects pooled gain over sets with its heterogeneity, and the gain against the
    smallest class's training series (Spearman over sets)."""
    try:
        pooled = gains.pooled_gain(frame, design.PRIMARY)
    except ValueError as e:  # fewer than 2 sets whose differences vary (quick runs can tie)
        pooled = dict(estimate=None, low=None, high=None, i2=None, error=str(e))
    sizes = per_class(runs)
    g = both.set_index("dataset").gain
    mean, least = ([sizes[n][i] for n in g.index] for i in (0, 1))
    return dict(across_sets=_across(both), across_archive=_across(both[both.group == "archive"]),
                pooled=pooled["estimate"], pooled_low=pooled["low"], pooled_high=pooled["high"], i2=pooled["i2"],
                pooling=pooled,
                gain_vs_per_class=dict(_spearman(mean, g.to_numpy()), per_class=dict(zip(g.index, mean))),
                gain_vs_smallest_class=dict(_spearman(least, g.to_numpy()), smallest_class=dict(zip(g.index, least))))


def draw(ctx, runs):
    t = ctx.study.tier
    base = reference_frame(runs)
    runs = {label: r for label, r in runs.items() if label[0] != "reference"}
    arch = label_frame(runs, group="archive")
    table = gains.archive_table(arch, sizes_of(runs, "archive"), design.PRIMARY, unit_of)
    paper_frame = label_frame(runs, group="paper")
    paper = gains.archive_table(paper_frame, {n: (0, 0, 0) for n in PAPER_DATASETS}, design.PRIMARY, unit_of)
    ctx.meta[NAME] = dict(tier=t.name, rule=DEFAULT_RULE.__dict__ | {"exclude": list(DEFAULT_RULE.exclude)},
                          sets=list(table.dataset), seeds=len(t.archive_seeds), primary=design.PRIMARY,
                          counts=gains.archive_counts(table))
    both = pd.concat([table.assign(group="archive"), paper.assign(group="paper")], ignore_index=True)
    main = {label: r for label, r in runs.items() if label[0] in ("archive", "paper")}
    ctx.meta[NAME].update(across_meta(both, pd.concat([arch, paper_frame], ignore_index=True), main))
    across = ctx.meta[NAME]["across_sets"]
    fig, axes = plt.subplots(1, 3, figsize=(18, 1.8 + 0.32 * max(1, len(both))), squeeze=False)
    y = np.arange(len(both))[::-1]
    ax = axes[0, 0]
    for yy, r in zip(y, both.itertuples()):
        sig = r.p_holm <= gains.ALPHA if r.group == "archive" else False
        c = ("#2ca02c" if r.gain > 0 else "#d62728") if sig else ("0.2" if r.group == "archive" else "0.55")
        ax.errorbar(r.gain, yy, xerr=[[r.gain - r.ci_low], [r.ci_high - r.gain]], fmt="s" if r.unit in RELATED_SETS
                    else "o", color=c, capsize=2, ms=4)
    ax.axvline(0, color="0.5", lw=0.8)
    ax.set_yticks(y, [f"{r.dataset}{' (paper)' if r.group == 'paper' else ''}"
                      f"{f' [{r.unit}]' if r.unit in RELATED_SETS else ''}" for r in both.itertuples()], fontsize=7)
    cnt = ctx.meta[NAME]["counts"]
    ax.set(xlabel=f"spt - scratch, {design.PRIMARY} (mean, 95% CI)",
           title=f"SPT helps on {cnt['helps']}, hurts on {cnt['hurts']} of {cnt['sets']} archive sets\n"
                 "(Holm across them; green/red); squares: related sets [unit]\n" + (
                     f"across {across['n_units']} units ({across['n_sets']} sets): signed-rank p {across['p']:.2g}, "
                     f"HL {across['hl']:+.3f}" if "p" in across else across["error"]))
    ax.title.set_fontsize(8)
    ax = axes[0, 1]
    for yy, r in zip(y, both.itertuples()):
        if np.isnan(r.qk_share):
            continue
        lo, hi = max(r.qk_share_low, -1.0), min(r.qk_share_high, 2.0)
        ax.plot([lo, hi], [yy, yy], color="C0" if r.group == "archive" else "0.55")
        ax.plot([min(max(r.qk_share, -1.0), 2.0)], [yy], "o", color="C0" if r.group == "archive" else "0.55", ms=4)
    for v in (0.0, 0.5, 1.0):
        ax.axvline(v, color="0.5", lw=0.8, ls="-" if v == 0 else ":")
    ax.set_xlim(-1.1, 2.1)
    ax.set_yticks(y, [""] * len(y))
    ax.set(xlabel="qk_transfer's share of SPT's gain (Fieller 95% CI, clipped to [-1, 2])",
           title=f"of the {cnt['gain_positive']} archive sets where SPT's mean gain is positive, Q/K-only keeps >= "
                 f"half of it on {cnt['qk_keeps_half_where_gain_positive']}\n"
                 f"({cnt['qk_keeps_half_lower_bound_where_gain_positive']} with the interval's lower end >= 1/2)")
    # two lines: the left panel's three-line title reaches into this one's when it is one line
    ax.title.set_fontsize(8)
    standing = standing_frame(both, base)
    _standing(axes[0, 2], standing, y)
    fig.suptitle(f"{TITLE}\ntier {t.name}: {len(t.archive_seeds)} seeds per archive set; the paper's sets at "
                 f"{len(t.power_seeds)} (scratch, spt) and {len(t.qk_seeds)} (qk_transfer)", fontsize=9)
    fig.tight_layout()
    ctx.meta[NAME]["baselines"] = base.groupby(["baseline", "protocol"]).test_acc.mean().round(4).reset_index().to_dict(
        "records")
    ctx.meta[NAME]["standing"] = standing_counts(standing)
    return fig, {NAME: table, f"{NAME}_runs": arch, f"{NAME}_baselines": base, f"{NAME}_standing": standing}


def standing_frame(both: pd.DataFrame, base: pd.DataFrame) -> pd.DataFrame:
    """Per set of ``both`` (archive sets, then the paper's): scratch's and SPT's mean primary
    metric over its seeds and each baseline's test accuracy under each protocol (NaN where not
    computed): :data:`STANDING_COLUMNS`, what the right panel draws."""
    acc = base.set_index(["dataset", "baseline", "protocol"]).test_acc
    rows = [dict(dataset=r.dataset, group=r.group, unit=r.unit, n_seeds=r.n_seeds, scratch=r.scratch_mean,
                 spt=r.spt_mean, **{f"{b}_{p}": acc.get((r.dataset, b, p), np.nan) for b in REFERENCE_CLASSIFIERS
                                    for p in PROTOCOLS}) for r in both.itertuples()]
    return pd.DataFrame(rows, columns=STANDING_COLUMNS)


def standing_counts(standing: pd.DataFrame) -> dict:
    """Per baseline and protocol (``<baseline>_<protocol>``), of the sets where it was computed:
    how many there are and on how many its test accuracy is above SPT's mean primary metric, and
    above scratch's (a description of where the models stand; each set's numbers in the table)."""
    out = {}
    for col in SCORE_COLUMNS:
        have = standing[standing[col].notna()]
        out[col] = dict(sets=int(len(have)), above_spt=int((have[col] > have.spt).sum()),
                        above_scratch=int((have[col] > have.scratch).sum()))
    return out


def _standing(ax, standing: pd.DataFrame, y) -> None:
    """Per set: scratch's and SPT's mean primary metric, and the baselines fitted on the whole
    training split (the archive's protocol), on one accuracy axis."""
    for yy, r in zip(y, standing.to_dict("records")):
        ax.plot([r["scratch"]], [yy], "o", mfc="none", color="0.4", ms=5)
        ax.plot([r["spt"]], [yy], "o", color="C1", ms=4)
        for b, (mark, col, _) in REFERENCE_MARKS.items():
            if not np.isnan(r[f"{b}_train+val"]):
                ax.plot([r[f"{b}_train+val"]], [yy], mark, color=col, ms=5)
    handles = [plt.Line2D([], [], ls="", marker="o", mfc="none", color="0.4", label="scratch"),
               plt.Line2D([], [], ls="", marker="o", color="C1", label="spt")]
    handles += [plt.Line2D([], [], ls="", marker=m, color=c, label=lab) for m, c, lab in REFERENCE_MARKS.values()]
    ax.legend(handles=handles, fontsize=6, loc="lower left")
    ax.set_yticks(y, [""] * len(y))
    ax.set(xlabel=f"accuracy ({design.PRIMARY} for the Transformers;\ntest accuracy for the baselines)",
           title="where these models stand" + ("" if standing.filter(like="_train").notna().any(axis=None)
                                                else " (baselines not computed: quick mode)"))
    ax.title.set_fontsize(8)
