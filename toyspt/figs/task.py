"""Figure 1: the task. Example trajectories of both classes, evidence that the per-position
marginals match across classes, and the statistic that does differ (neighbour distance)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

NAME = "task"
TITLE = "Local-shuffle trajectories: same points, different local order"
COLUMNS = ["panel", "label", "series", "t", "value"]


def specs(ctx):
    return {}  # no training


def draw(ctx, runs):
    data = ctx.base.data.load()
    x, y = data.train.x.numpy(), data.train.y.numpy()
    T = x.shape[1]
    rows = []
    fig, axes = plt.subplots(1, 4, figsize=(13, 3.2))
    for c, ax in zip((0, 1), axes[:2]):
        for k, i in enumerate(np.flatnonzero(y == c)[:3]):
            ax.plot(x[i, :, 0], x[i, :, 1], "-o", ms=2.5, lw=1, label=f"example {k}")
            rows += [dict(panel="trajectory", label=c, series=f"example{k}_x{d}", t=t, value=float(x[i, t, d]))
                     for t in range(T) for d in range(2)]
        ax.set_title(f"class {c}: " + ("time order kept" if c == 0 else "locally shuffled"))
        ax.set_xlabel("x0")
        ax.set_ylabel("x1")
    ax = axes[2]
    for c, ls in ((0, "-"), (1, "--")):
        xc = x[y == c, :, 0]
        for stat, fn in (("mean", np.mean), ("std", np.std)):
            v = fn(xc, axis=0)
            ax.plot(np.arange(T), v, ls, label=f"class {c} {stat}")
            rows += [dict(panel="marginal", label=c, series=f"x0_{stat}", t=t, value=float(v[t])) for t in range(T)]
    ax.set_title("per-position marginal of x0")
    ax.set_xlabel("position t")
    ax.legend(fontsize=7)
    ax = axes[3]
    step = np.linalg.norm(np.diff(x, axis=1), axis=-1)  # (N, T-1) distance to the next point
    bins = np.linspace(0, np.quantile(step, 0.99), 40)
    for c in (0, 1):
        h, _ = np.histogram(step[y == c].ravel(), bins=bins, density=True)
        ax.stairs(h, bins, label=f"class {c}")
        rows += [dict(panel="neighbour_distance", label=c, series="density", t=float(b), value=float(v))
                 for b, v in zip(bins[:-1], h)]
    ax.set_title("distance to the next point (differs)")
    ax.set_xlabel("|x_t+1 - x_t| (standardised)")
    ax.legend(fontsize=7)
    fig.suptitle(TITLE)
    fig.tight_layout()  # room for the title above the panels' own
    ctx.meta[NAME] = dict(task=data.config.__dict__)
    return fig, pd.DataFrame(rows)
