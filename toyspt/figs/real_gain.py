"""Figure (study tier): what carries SPT's gain on the paper's four UCR sets, weight group by
weight group. Top: every arm against scratch on the primary metric (mean test accuracy over the
last fifth of the label epochs), paired by seed, mean and 95% t interval (descriptive), * where
the Holm-adjusted signed-rank p is <= 0.05 (the verdict's test, :mod:`toyspt.analysis.gains`;
confirmatory family: spt x the primary metric x the four sets; every other arm is descriptive,
all arms x sets one Holm family): one weight group from SPT (W_Q
W_K; W_V W_O; embedding; MLP; LayerNorms) or all but W_Q W_K; the controls (SPT's norms with
random directions; SPT's values permuted within each tensor; scratch for SPT's whole budget);
the baselines with built-in locality. Bottom: each arm's share of SPT's gain (Fieller 95%
interval; arrows where it is unbounded because SPT's own gain is not significant).

Writes ``real_gain.csv`` (one row per set x arm x metric: :data:`toyspt.analysis.gains.GAIN_COLUMNS`,
with ``family``, the contrasts spt - arm and the equivalence tests at
:data:`toyspt.analysis.gains.EQUIVALENCE_MARGIN`)
``real_gain_runs.csv`` (one row per run) and ``real_gain_seeds_20_39.csv`` (the confirmatory
comparison again on seeds 20-39 alone, the seeds no one had seen when the protocol was fixed).
``real_gain_seed_block.csv`` holds the seed-block tests on every set (:mod:`toyspt.analysis.seed_blocks`):
the default tier's seeds 0-4 against the others, and the seeds whose SPT-only parent is a tracked
run (the one code path that differs by seed) against the others; metadata ``seed_block`` the same.
Metadata ``leave_block_out``: the confirmatory comparison again without the default tier's seeds
0-4 (``without_default_tier``) and on the seeds before the unseen ones alone (``before_unseen``: 0-19; 20-39 are
``seeds_20_39``), each Holm over the four sets; ``arm_family``: the arms-vs-scratch family.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import MaxNLocator

from toyspt.analysis import gains
from toyspt.analysis.basin import basin_accuracy
from toyspt.analysis.rows import label_frame
from toyspt.analysis.seed_blocks import block_table, seeds_text
from toyspt.ucr import design
from toyspt.util.plots import color

NAME = "real_gain"
TITLE = "What carries SPT's gain on real series: every weight group, scale controls and baselines against scratch"
TIERS = ("study",)
ARMS = design.POWER_ARMS + design.DECOMPOSITION + design.CONTROLS + design.BASELINES
COLUMNS = gains.GAIN_COLUMNS
BLOCK_NOTE = ("SPT's gain on the primary metric of the default tier's seeds (sets) and of the seeds whose SPT-only "
              "parent is a tracked run (tracked.sets) against the study's other seeds: permutation p over blocks of "
              "that size (perm_p, the block named in advance), and scan_p, the p of the most extreme consecutive "
              "block of that size (scan_block) as if picked out after looking (toyspt.analysis.seed_blocks); sets "
              "where the block and two more seeds are paired")
SHARE_LIMITS = (-1.0, 2.0)  # shares drawn within these; an interval beyond is drawn as an arrow


def specs(ctx):
    """``(source, arm, seed)``: every arm of the study on every available paper set."""
    return ctx.study.label_specs(ARMS)


def draw(ctx, runs):
    datasets, skipped, t = ctx.study.datasets, ctx.study.skipped, ctx.study.tier
    default_seeds = design.tier("default").power_seeds
    runs_frame = label_frame(runs)
    compared = [a for a in ARMS if a != "scratch"]
    gain = gains.gain_table(runs_frame, compared, design.STUDY_METRICS, design.PRIMARY)
    blocks = block_table(runs_frame, {"default_tier": default_seeds, "tracked_parents": t.basin_seeds}, "spt",
                         design.PRIMARY)
    block_sets = {name: g.to_dict("records") for name, g in blocks.groupby("block_name", sort=False)}
    ctx.meta[NAME] = dict(tier=t.name, primary=design.PRIMARY, skipped=skipped,
                          seeds={a: len(design.arm_seeds(t, a)) for a in ARMS},
                          verdicts=gains.verdicts(gain, design.PRIMARY).to_dict("records"),
                          equivalence_margin=gains.EQUIVALENCE_MARGIN,
                          equivalences=gains.equivalences(gain, design.PRIMARY),
                          confirmatory=gain[gain.family == "confirmatory"].to_dict("records"),
                          saturation=gains.saturation(runs_frame).to_dict("records"),
                          basin_vs_own_accuracy=basin_accuracy(runs_frame, design.PRIMARY),
                          seed_block=dict(block=list(default_seeds), note=BLOCK_NOTE,
                                          sets=block_sets.get("default_tier", []),
                                          tracked=dict(block=list(t.basin_seeds),
                                                       sets=block_sets.get("tracked_parents", []))))
    # the replication on the seeds no one had seen when the protocol was fixed: the same test and family
    unseen = gains.gain_table(runs_frame[runs_frame.seed.isin(design.CONFIRMATORY_SEEDS)], ["spt"],
                              [design.PRIMARY], design.PRIMARY)
    ctx.meta[NAME]["seeds_20_39"] = unseen.to_dict("records")
    ctx.meta[NAME]["leave_block_out"] = leave_block_out(runs_frame, t.power_seeds, default_seeds)
    ctx.meta[NAME]["arm_family"] = gains.arm_family(gain, design.PRIMARY)
    n = max(1, len(datasets))
    fig, axes = plt.subplots(2, n, figsize=(2 + 4.2 * n, 9), squeeze=False)
    for j, d in enumerate(datasets):
        g = gain[(gain.dataset == d.config.name) & (gain.metric == design.PRIMARY)].set_index("arm").reindex(compared)
        y = np.arange(len(compared))[::-1]
        ax = axes[0, j]
        for yy, (arm, r) in zip(y, g.iterrows()):
            if np.isnan(r.mean_diff):
                continue
            ax.errorbar(r.mean_diff, yy, xerr=[[r.mean_diff - r.ci_low], [r.ci_high - r.mean_diff]], fmt="o",
                        color=color(arm), capsize=2, ms=4)
            if r.p_holm <= gains.ALPHA:
                ax.annotate("*", (r.ci_high, yy), xytext=(3, -3), textcoords="offset points")
        ax.axvline(0, color="0.5", lw=0.8)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=5, steps=[1, 2, 5, 10]))  # labels of 6 characters side by side
        ax.set_yticks(y, [f"{a} (n {int(k) if k == k else 0})" for a, k in zip(compared, g.n_seeds)], fontsize=7)
        ax.set(xlabel=f"{design.PRIMARY}:\narm - scratch (mean, 95% t CI)", title=d.config.name)
        ax = axes[1, j]
        lo, hi = SHARE_LIMITS
        for yy, (arm, r) in zip(y, g.iterrows()):
            if arm == "spt" or np.isnan(r.share):
                continue
            a, b = max(r.share_low, lo), min(r.share_high, hi)
            ax.plot([a, b], [yy, yy], color=color(arm), lw=1.5)
            ax.plot([min(max(r.share, lo), hi)], [yy], "o", color=color(arm), ms=4)
            for end, edge, mark in ((r.share_low, lo, "<"), (r.share_high, hi, ">")):
                if not lo <= end <= hi:
                    ax.plot([edge], [yy], mark, color=color(arm), ms=5)
        for v in (0.0, 1.0):
            ax.axvline(v, color="0.5", lw=0.8, ls=":" if v else "-")
        ax.set_xlim(lo - 0.1, hi + 0.1)
        ax.set_yticks(y, compared, fontsize=7)
        sp = g.loc["spt"]
        ax.set(xlabel="share of SPT's gain (Fieller 95% CI;\narrows: beyond the axis or unbounded)",
               title=f"SPT gain ({int(sp.n_seeds)} seeds) {sp.mean_diff:+.3f} [{sp.ci_low:+.3f}, {sp.ci_high:+.3f}], "
                     f"Holm p {sp.p_holm:.2g}\nshares: of SPT's gain at each arm's own seeds")
        ax.title.set_fontsize(8)
    fig.suptitle(f"{TITLE}\ntier {t.name}: scratch/spt {len(t.power_seeds)} seeds, other arms {len(t.arm_seeds)}, "
                 f"baselines {len(t.baseline_seeds)}; * Holm-adjusted signed-rank p <= 0.05 (confirmatory: spt on "
                 f"{design.PRIMARY}; other arms descriptive, one Holm family over arms x sets)", fontsize=9)
    fig.tight_layout()
    return fig, {NAME: gain, f"{NAME}_runs": runs_frame, f"{NAME}_seeds_20_39": unseen, f"{NAME}_seed_block": blocks}


def leave_block_out(frame, power_seeds, default_seeds) -> dict:
    """The confirmatory comparison (spt vs scratch, primary metric, Holm over the sets) on seed
    subsets, as :func:`toyspt.analysis.gains.gain_table` rows: without the default tier's seeds
    (the block the seed-block question flags) and on the power seeds before the unseen ones."""
    first = [s for s in power_seeds if s not in design.CONFIRMATORY_SEEDS]
    subsets = dict(without_default_tier=[s for s in power_seeds if s not in default_seeds], before_unseen=first)
    return {name: dict(seeds=seeds_text(seeds), rows=gains.gain_table(frame[frame.seed.isin(seeds)], ["spt"],
                                                                       [design.PRIMARY], design.PRIMARY)
                       .to_dict("records")) for name, seeds in subsets.items()}
