"""Figure 3: what SPT does to attention. Positional score profile Pi(delta) (scores of the
mean input, row-centred, averaged along diagonals) and attention weight by offset on
validation data, at init, after scratch training, after SPT pretraining and after SPT
fine-tuning, split by the basin SPT lands in; attention maps of one sequence; and the
proximity index of every SPT attention option per seed (which basin each seed lands in)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from toyspt.analysis.basin import basin_of
from toyspt.probe.tracking import attention_maps, profile_rows
from toyspt.runs.state_probes import ProximitySpec, proximities
from toyspt.train.run import load_model
from toyspt.util.plots import color

NAME = "proximity"
TITLE = "SPT turns absolute positions into an offset-structured attention pattern"
COLUMNS = ["panel", "state", "arm", "basin", "seed", "offset", "i", "j", "value"]
SPT_OPTIONS = ("spt", "spt_no_self", "spt_no_masked_keys")
STATES = (("scratch", "init", "init"), ("scratch", "final", "scratch final"),
          ("spt", "pretrained", "SPT pretrained"), ("spt", "final", "SPT fine-tuned"))
MAX_OFFSET = 12  # offsets shown in the profiles


def specs(ctx):
    """``(arm, seed)``: the runs; ``("proximity", arm, seed)``: the proximity indices of the SPT
    options' stored weights (cached probes)."""
    runs = {(a, s): ctx.spec(a, s) for a in ("scratch",) + SPT_OPTIONS for s in ctx.seeds}
    return runs | {("proximity", a, s): ProximitySpec.of(runs[a, s]) for a in SPT_OPTIONS for s in ctx.seeds}


def draw(ctx, runs):
    x = ctx.base.data.probe_inputs()
    rows = []
    # basins: proximity index of the pretrained model, per SPT option and seed
    basins = {}
    for a in SPT_OPTIONS:
        for s in ctx.seeds:
            pi = proximities(runs["proximity", a, s])["pretrained"]
            basins[a, s] = basin_of(pi)
            rows.append(dict(panel="basin_index", state="SPT pretrained", arm=a, basin=basins[a, s], seed=s, value=pi))
    for arm, which, label in STATES:
        for s in ctx.seeds:
            res = runs[arm, s]
            b = basins[arm, s] if arm == "spt" else ""
            for r in profile_rows(load_model(res, which), x, profiles=True):
                if r["metric"] in ("pos_score", "attn_weight") and abs(r["offset"]) <= MAX_OFFSET and r["head"] == 0:
                    rows.append(dict(panel=r["metric"], state=label, arm=arm, basin=b, seed=s,
                                     offset=r["offset"], value=r["value"]))
    seed0 = ctx.seeds[0]
    for arm, which, label in STATES:
        A = next(iter(attention_maps(load_model(runs[arm, seed0], which), x[:1]).values()))[0]
        T = A.shape[0]
        rows += [dict(panel="map", state=label, arm=arm, seed=seed0, i=i, j=j, value=float(A[i, j]))
                 for i in range(T) for j in range(T)]
    frame = pd.DataFrame(rows, columns=COLUMNS)

    fig = plt.figure(figsize=(17, 8), layout="constrained")
    gs = fig.add_gridspec(2, 5)
    for cols, metric, title in ((slice(0, 2), "pos_score", "positional score profile Π(δ)"),
                                (slice(2, 5), "attn_weight", "attention weight by offset (data)")):
        ax = fig.add_subplot(gs[0, cols])
        for label, g in frame[frame.panel == metric].groupby(["state", "basin"], sort=False):
            state, b = label
            m = g.groupby("offset").value.agg(["mean", "std"]).reset_index()
            n = g.seed.nunique()
            name = f"{state}" + (f" [{b}, {n} seeds]" if b else f" [{n} seeds]")
            ax.plot(m.offset, m["mean"], "-o", ms=2.5, label=name)
            ax.fill_between(m.offset, m["mean"] - m["std"].fillna(0), m["mean"] + m["std"].fillna(0), alpha=0.15)
        ax.set_title(title)
        ax.set_xlabel("offset δ = j − i")
        if metric == "attn_weight":
            ax.axhline(1 / x.shape[1], color="0.5", ls=":", lw=0.8)
            ax.set_yscale("log")
        ax.legend(fontsize=7)
    for k, (arm, which, label) in enumerate(STATES):
        ax = fig.add_subplot(gs[1, k])
        g = frame[(frame.panel == "map") & (frame.state == label)]
        M = np.zeros((x.shape[1], x.shape[1]))
        M[g.i.to_numpy(int), g.j.to_numpy(int)] = g.value
        ax.imshow(M, cmap="viridis")
        ax.set_title(f"attention, {label}\n(seed {seed0}, one sequence)")
        ax.set_xlabel("key j")
        ax.set_ylabel("query i")
    ax = fig.add_subplot(gs[1, 4])
    g = frame[frame.panel == "basin_index"]
    for k, a in enumerate(SPT_OPTIONS):
        v = g[g.arm == a].value.to_numpy()
        ax.scatter(np.full(len(v), k), v, color=color(a), s=18)
    ax.axhline(1.0, color="0.5", ls=":", lw=0.8)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(plt.matplotlib.ticker.FormatStrFormatter("%.2g"))
    ax.yaxis.set_minor_formatter(plt.matplotlib.ticker.NullFormatter())
    ax.set_xticks(range(len(SPT_OPTIONS)), [a.replace("spt_", "") for a in SPT_OPTIONS])
    ax.set_title("proximity index after SPT (per seed)\n>1 proximity, <1 anti-local")
    fig.suptitle(TITLE)
    ctx.meta[NAME] = {a: {bn: sum(basins[a, s] == bn for s in ctx.seeds) for bn in ("proximity", "anti-local")}
                      for a in SPT_OPTIONS}
    return ctx.stamp_regime(fig), frame
