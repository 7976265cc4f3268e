"""Figure 2: train and test accuracy over label epochs, mean and band (± 1 sd) over seeds,
for scratch, spt (after its SPT phase) and scratch_matched (same total epochs as spt)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from toyspt.analysis.basin import PROXIMITY, basin_of
from toyspt.analysis.gains import gain_and_share
from toyspt.runs.state_probes import ProximitySpec, proximities
from toyspt.util.plots import color

NAME = "accuracy"
TITLE = "Self-pretraining vs training from scratch on the local-shuffle task"
COLUMNS = ["arm", "split", "epoch", "mean", "std", "n"]
ARMS = ("scratch", "spt", "scratch_matched")
HEADLINE_ARMS = ("scratch", "spt", "qk_transfer")  # the headline comparison (metadata), proximity regime
HEADLINE_SEEDS = tuple(range(10))  # its seeds in full mode (quick: the figure's seeds)


def headline_seeds(ctx) -> tuple[int, ...]:
    return tuple(ctx.seeds) if ctx.quick else HEADLINE_SEEDS


def specs(ctx):
    out = {("curve", a, s): ctx.spec(a, s, evaluate="all") for a in ARMS for s in ctx.seeds}  # every epoch
    if ctx.regime == "proximity":
        out |= {("headline", a, s): ctx.spec(a, s) for a in HEADLINE_ARMS for s in headline_seeds(ctx)}
        out |= {("proximity", s): ProximitySpec.of(out["headline", "spt", s]) for s in headline_seeds(ctx)}
    return out


def headline(ctx, runs) -> dict:
    """SPT - scratch over the headline seeds (test at peak validation, final train accuracy),
    paired by seed with its 95% interval, and qk_transfer's share of that gain with Fieller's
    interval (:func:`toyspt.analysis.gains.gain_and_share`, as the real-data figures compute
    them); and which basin SPT's attention is in after SPT."""
    seeds = headline_seeds(ctx)
    summ = {a: [runs["headline", a, s].summary for s in seeds] for a in HEADLINE_ARMS}
    pis = [proximities(runs["proximity", s])["pretrained"] for s in seeds]  # cached probes of the SPT weights
    out = dict(seeds=list(seeds), proximity_index_after_spt=pis,
               share_proximity=sum(basin_of(p) == PROXIMITY for p in pis) / len(pis))
    for m in ("test_at_peak", "final_train_acc"):
        per_seed = {a: [r[m] for r in summ[a]] for a in HEADLINE_ARMS}
        out[m] = dict(mean={a: sum(v) / len(seeds) for a, v in per_seed.items()},
                      per_seed_spt_minus_scratch=[a - b for a, b in zip(per_seed["spt"], per_seed["scratch"])],
                      **_gain_entry(gain_and_share(per_seed, "qk_transfer")))
    return out


def _gain_entry(g: dict) -> dict:
    """The headline's keys (the docs quote them) from :func:`toyspt.analysis.gains.gain_and_share`:
    SPT's gain over scratch as ``spt_minus_scratch*``, Q/K-only's share as ``qk_share_of_gain*``."""
    names = dict(gain="spt_minus_scratch", gain_low="spt_minus_scratch_low", gain_high="spt_minus_scratch_high",
                 gain_p="spt_minus_scratch_p", gain_hl="spt_minus_scratch_hl", share="qk_share_of_gain",
                 share_low="qk_share_of_gain_low", share_high="qk_share_of_gain_high",
                 share_interval="qk_share_of_gain_interval")
    return {names[k]: v for k, v in g.items()}


def history_frame(ctx, runs, arms) -> pd.DataFrame:
    """Per (arm, seed, label epoch) accuracies from cached runs."""
    rows = []
    for a in arms:
        for s in ctx.seeds:
            res = runs["curve", a, s]
            for h in res.history:
                if h["phase"] == "finetune":
                    rows += [dict(arm=a, seed=s, epoch=h["epoch"], split=split, acc=h[f"{split}_acc"])
                             for split in ("train", "val", "test")]
    return pd.DataFrame(rows)


def draw(ctx, runs):
    hist = history_frame(ctx, runs, ARMS)
    agg = (hist.groupby(["arm", "split", "epoch"], sort=False)["acc"]
           .agg(mean="mean", std="std", n="count").reset_index())
    agg["std"] = agg["std"].fillna(0.0)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
    lines = {}
    for ax, split in zip(axes, ("train", "test")):
        for a in ARMS:
            g = agg[(agg.arm == a) & (agg.split == split)]
            # scratch_matched repeats scratch's first 60 epochs exactly (same seed): draw scratch
            # dashed and on top so both stay visible
            lines[split, a], = ax.plot(g.epoch, g["mean"], color=color(a), label=a,
                                       ls="--" if a == "scratch" else "-", zorder=3 if a == "scratch" else 2)
            ax.fill_between(g.epoch, g["mean"] - g["std"], g["mean"] + g["std"], color=color(a), alpha=0.2)
        ax.set_title(f"{split} accuracy")
        ax.set_xlabel("label epoch (spt: after its SPT epochs)")
        ax.axhline(0.5, color="0.5", lw=0.8, ls=":")
    axes[0].set_ylabel("accuracy")
    peaks = {}
    for a in ARMS:
        summ = [runs["curve", a, s].summary for s in ctx.seeds]
        peaks[a] = dict(test_at_peak=sum(x["test_at_peak"] for x in summ) / len(summ),
                        final_train_acc=sum(x["final_train_acc"] for x in summ) / len(summ))
    axes[1].legend([lines["test", a] for a in ARMS],
                   [f"{a}: test@peak-val {peaks[a]['test_at_peak']:.3f}" for a in ARMS], loc="lower right")
    axes[0].legend([lines["train", a] for a in ARMS],
                   [f"{a}: final train {peaks[a]['final_train_acc']:.3f}" for a in ARMS], loc="lower right")
    fig.suptitle(f"{TITLE} ({len(ctx.seeds)} seeds, band = ±1 sd)")
    ctx.meta[NAME] = dict(peaks=peaks)
    if ctx.regime == "proximity":
        ctx.meta[NAME]["headline"] = headline(ctx, runs)
    return ctx.stamp_regime(fig), agg
