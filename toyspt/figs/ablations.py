"""Figure 7: ablations. Per-seed test accuracy (at peak validation) and final training
accuracy, with means, for every recipe and positional variant."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from toyspt.util.plots import color

NAME = "ablations"
TITLE = "Which part of SPT helps, and what built-in locality does"
COLUMNS = ["arm", "seed", "metric", "value"]
ARMS = ("scratch", "spt", "scratch_matched", "qk_transfer", "all_but_qk_transfer", "frozen_attention",
        "data_swap", "alibi", "alibi_steep", "rope", "fire", "learned_pe", "depth2", "spt_depth2",
        "spt_no_self", "spt_no_masked_keys")
# the zero-mean contrast keeps the recipe ablations and the steep ALiBi baseline (the
# positional variants are drawn in the default regime only; they do not use SPT)
CONTRAST_ARMS = ("scratch", "spt", "scratch_matched", "qk_transfer", "all_but_qk_transfer", "frozen_attention",
                 "data_swap", "alibi_steep", "spt_no_self", "spt_no_masked_keys")
PANEL_METRICS = ("test_at_peak", "final_train_acc")  # one panel each


def arms(ctx) -> tuple[str, ...]:
    return ARMS if ctx.regime == "proximity" else CONTRAST_ARMS


def specs(ctx):
    return {(a, s): ctx.spec(a, s) for a in arms(ctx) for s in ctx.seeds}


def draw(ctx, runs):
    drawn = arms(ctx)
    rows = [dict(arm=a, seed=s, metric=m, value=runs[a, s].summary[m])
            for a in drawn for s in ctx.seeds for m in PANEL_METRICS]
    frame = pd.DataFrame(rows)
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.2), sharey=True)
    rng = np.random.default_rng(0)  # horizontal jitter only
    for ax, m in zip(axes, PANEL_METRICS):
        for i, a in enumerate(drawn):
            v = frame[(frame.arm == a) & (frame.metric == m)].value.to_numpy()
            ax.scatter(i + rng.uniform(-0.15, 0.15, len(v)), v, s=14, color=color(a), alpha=0.8)
            ax.hlines(v.mean(), i - 0.3, i + 0.3, color="k", lw=1.5)
        ax.set_xticks(range(len(drawn)), drawn, rotation=90)  # upright boxes: neighbours never overlap
        ax.axhline(0.5, color="0.5", lw=0.8, ls=":")
        ax.set_title({"test_at_peak": "test accuracy at peak validation",
                      "final_train_acc": "final training accuracy"}[m])
    axes[0].set_ylabel("accuracy (points: seeds, bar: mean)")
    fig.suptitle(f"{TITLE} ({len(ctx.seeds)} seeds)")
    fig.tight_layout()
    ctx.meta[NAME] = {a: {m: float(frame[(frame.arm == a) & (frame.metric == m)].value.mean()) for m in PANEL_METRICS}
                      for a in drawn}
    return ctx.stamp_regime(fig), frame
