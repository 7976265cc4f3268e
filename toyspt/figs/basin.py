"""Figure: what decides the SPT basin. SPT-only runs over a grid of task settings (a
per-sequence offset; the number of cycles per sequence), five or more seeds per cell.
Top: the proximity index after SPT per seed (> 1 proximity, < 1 anti-local) against the
setting, with the data statistic beta_unif (the least-squares gain of a masked value on
the uniform mean of the visible tokens) on the same axis and the predicted boundary
beta_unif = 0. Bottom: the model's recon gain beta along the SPT epochs, by basin. See
:mod:`toyspt.basin` and :mod:`toyspt.basin_runs`."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..basin_runs import phase_specs, phase_table, predictor_shares
from ..plots import save_figure
from ..tracking import records_frame

NAME = "basin"
TITLE = "The SPT basin follows the sign of the reconstruction gain on the uniform mean"
COLUMNS = ["panel", "sweep", "offset", "freq_lo", "freq_hi", "seed", "epoch", "metric", "value", "basin"]
BASIN_COLORS = {"proximity": "#2ca02c", "anti-local": "#d62728"}


def _pairs(ctx):
    return phase_specs(ctx.base, ctx.seeds)


def specs(ctx):
    return [s for _, s in _pairs(ctx)]


def _crossing(x: np.ndarray, y: np.ndarray) -> float | None:
    """Where the piecewise-linear y(x) first crosses 0 (None if it does not)."""
    for i in range(len(x) - 1):
        if y[i] == 0:
            return float(x[i])
        if y[i] * y[i + 1] < 0:
            return float(x[i] - y[i] * (x[i + 1] - x[i]) / (y[i + 1] - y[i]))
    return None


def _panel(ax, t: pd.DataFrame, xcol: str, labels, title: str) -> None:
    xs = np.arange(len(labels))
    for k, (_, g) in enumerate(t.groupby(xcol, sort=False)):
        jitter = np.linspace(-0.15, 0.15, len(g)) if len(g) > 1 else np.zeros(1)
        ax.scatter(k + jitter, g.proximity_index, c=[BASIN_COLORS[b] for b in g.basin], s=18, zorder=3)
    ax.axhline(1.0, color="0.5", lw=0.8, ls=":")
    ax.set_yscale("log")
    ax.set_xticks(xs, labels, fontsize=7)
    ax.set_ylabel("proximity index after SPT (log)")
    ax.set_title(title)
    bu = t.groupby(xcol, sort=False).beta_unif.mean().to_numpy()
    tw = ax.twinx()
    tw.plot(xs, bu, "k-o", ms=3, lw=1, label="beta_unif (data)")
    tw.axhline(0.0, color="k", lw=0.6)
    tw.set_ylabel("beta_unif")
    cross = _crossing(xs.astype(float), bu)
    if cross is not None:
        ax.axvline(cross, color="k", ls="--", lw=0.8)
        ax.text(cross, ax.get_ylim()[1], " beta_unif = 0", fontsize=7, va="top")


def draw(ctx, runs) -> pd.DataFrame:
    pairs = _pairs(ctx)
    table = phase_table(pairs, [runs[s.key()] for _, s in pairs])
    ctx.meta[NAME] = dict(predicted=predictor_shares(table), predicted_all=predictor_shares(table, clear_only=False),
                          cells=len(table) // max(1, len(ctx.seeds)), seeds=list(ctx.seeds))
    rows = []
    for _, r in table.iterrows():
        common = dict(sweep=r.sweep, offset=r.offset, freq_lo=r.freq_lo, freq_hi=r.freq_hi, seed=r.seed,
                      basin=r.basin)
        for m in ("proximity_index", "beta_unif", "beta_init", "beta_epoch1", "beta_epoch2", "beta_epoch3",
                  "beta_final"):
            rows.append(dict(panel="cell", metric=m, value=r[m], **common))
    for (st, sp), (_, r) in zip(pairs, table.iterrows()):
        f = records_frame(runs[sp.key()].records)
        for _, e in f[f.metric == "beta"].iterrows():
            rows.append(dict(panel="trajectory", sweep=r.sweep, offset=r.offset, freq_lo=r.freq_lo,
                             freq_hi=r.freq_hi, seed=r.seed, epoch=int(e.epoch), metric="beta",
                             value=float(e.value), basin=r.basin))
    frame = pd.DataFrame(rows, columns=COLUMNS)

    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    off = table[table.sweep == "offset"]
    _panel(axes[0, 0], off, "offset", [f"{o:g}" for o in off.offset.unique()], "per-sequence offset std (freq 1–3)")
    fr = table[table.sweep == "freq"].assign(freq=lambda t: t.freq_lo.astype(str) + "–" + t.freq_hi.astype(str))
    _panel(axes[0, 1], fr, "freq", list(fr.freq.unique()), "cycles per sequence (no offset)")
    traj = frame[frame.panel == "trajectory"]
    for ax, sweep in zip(axes[1], ("offset", "freq")):
        for (o, lo, hi, s), g in traj[traj.sweep == sweep].groupby(["offset", "freq_lo", "freq_hi", "seed"]):
            ax.plot(g.epoch, g.value, color=BASIN_COLORS[g.basin.iloc[0]], lw=0.7, alpha=0.6)
        ax.axhline(0.0, color="k", lw=0.6)
        ax.set(xlabel="SPT epoch (0 = init)", ylabel="model's recon gain beta (uniform attention)",
               title=f"beta along SPT, {sweep} sweep (green: proximity basin, red: anti-local)")
    sh = ctx.meta[NAME]["predicted"]
    fig.suptitle(f"{TITLE}\n{len(ctx.seeds)} seeds per cell, SPT only; basin predicted where |beta_unif| > 0.1 by "
                 f"sign(beta_unif) {sh['beta_unif']['hits']}/{sh['beta_unif']['n']}, sign(beta after epoch 1) "
                 f"{sh['beta_epoch1']['hits']}/{sh['beta_epoch1']['n']}, sign(beta at init) "
                 f"{sh['beta_init']['hits']}/{sh['beta_init']['n']}", fontsize=9)
    fig.tight_layout()
    save_figure(fig, ctx.out, NAME, ctx.quick)
    return frame
