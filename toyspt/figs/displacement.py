"""Figure 4: how far each matrix moves. Relative Frobenius displacement from the global
initialisation, ||W_t - W_0||_F / ||W_0||_F, over training for every matrix of the block,
scratch vs SPT (both phases), with AdamW and with SGD."""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from toyspt.figs import SGD_LR
from toyspt.probe.tracking import records_frame
from toyspt.util.plots import color

NAME = "displacement"
TITLE = "Relative Frobenius displacement from initialisation"
COLUMNS = ["optimizer", "arm", "name", "step", "mean", "std", "n"]
MATRICES = {"blocks.0.attn.W_Q": "W_Q", "blocks.0.attn.W_K": "W_K", "blocks.0.attn.W_V": "W_V",
            "blocks.0.attn.W_O": "W_O", "blocks.0.mlp.0": "MLP in", "blocks.0.mlp.2": "MLP out",
            "embed": "embedding"}
ARMS = ("scratch", "spt")


def specs(ctx):
    return {(o, a, s): ctx.tracked_spec(a, s, o) for o in ("adamw", "sgd") for a in ARMS for s in ctx.seeds}


def draw(ctx, runs):
    parts = []
    for o in ("adamw", "sgd"):
        for a in ARMS:
            for s in ctx.seeds:
                f = records_frame(runs[o, a, s].records)
                f = f[(f.metric == "rel_disp_init") & f.name.isin(list(MATRICES))]
                parts.append(f.assign(optimizer=o, arm=a)[["optimizer", "arm", "seed", "name", "step", "value"]])
    data = pd.concat(parts).drop_duplicates(["optimizer", "arm", "seed", "name", "step"], keep="last")
    agg = (data.groupby(["optimizer", "arm", "name", "step"])["value"]
           .agg(mean="mean", std="std", n="count").reset_index())
    agg["std"] = agg["std"].fillna(0.0)
    fig, axes = plt.subplots(2, len(MATRICES), figsize=(18, 6), sharex="row", layout="constrained")
    for r, o in enumerate(("adamw", "sgd")):
        spt_runs = [runs[o, "spt", s] for s in ctx.seeds]
        pre_steps = max(h["step"] for h in spt_runs[0].history if h["phase"] == "pretrain")
        for c, m in enumerate(MATRICES):
            ax = axes[r, c]
            for a in ARMS:
                g = agg[(agg.optimizer == o) & (agg.arm == a) & (agg.name == m)]
                ax.plot(g.step, g["mean"], color=color(a), label=a)
                ax.fill_between(g.step, g["mean"] - g["std"], g["mean"] + g["std"], color=color(a), alpha=0.2)
            ax.axvline(pre_steps, color=color("spt"), ls=":", lw=0.8)
            ax.set_title(f"{MATRICES[m]} ({'AdamW' if o == 'adamw' else f'SGD lr {SGD_LR}, no decay'})")
            if r == 1:
                ax.set_xlabel("optimizer step (dotted: SPT ends)")
        axes[r, 0].set_ylabel("||W_t − W_0||_F / ||W_0||_F")
    axes[0, 0].legend()
    fig.suptitle(f"{TITLE} ({len(ctx.seeds)} seeds, band ±1 sd)")
    final = agg.sort_values("step").groupby(["optimizer", "arm", "name"]).tail(1)
    ctx.meta[NAME] = {f"{r['optimizer']}/{r['arm']}/{r['name']}": round(float(r["mean"]), 4)
                      for _, r in final.iterrows()}
    for o in ("adamw", "sgd"):  # how well each optimizer's runs classify (for the caption)
        for a in ARMS:
            summ = [runs[o, a, s].summary for s in ctx.seeds]
            for k in ("test_at_peak", "final_train_acc"):
                ctx.meta[NAME][f"{o}/{a}/{k}"] = round(sum(x[k] for x in summ) / len(summ), 4)
    return ctx.stamp_regime(fig), agg
