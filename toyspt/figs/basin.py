"""Figure: what decides the SPT basin. SPT-only runs over a grid of task settings (a
per-sequence offset; the number of cycles per sequence), five or more seeds per cell.
Top: the proximity index after SPT per seed (> 1 proximity, < 1 anti-local) against the
setting, with the data statistic beta_unif (the least-squares gain of a masked value on
the uniform mean of the visible tokens) on the same axis and the predicted boundary
beta_unif = 0. Middle: the model's recon gain beta along the SPT epochs, by basin. Bottom:
the trap, on the zero-mean task: plain SPT against SPT whose first ``swap_epochs`` epochs
run on the same task with the default offset (recipe ``spt_swap_start``), per seed: the
reconstruction loss at the end of SPT on the task's own validation data, and test accuracy.
See :mod:`toyspt.probe.basin`, :mod:`toyspt.analysis.basin` and :mod:`toyspt.analysis.basin_grid`."""
from __future__ import annotations

from dataclasses import replace

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from toyspt.analysis.basin import PROXIMITY, basin_of
from toyspt.analysis.basin_grid import phase_specs, predictor_shares, run_row
from toyspt.probe.tracking import records_frame
from toyspt.runs.state_probes import ProximitySpec, proximities
from toyspt.util.plots import color

NAME = "basin"
TITLE = "The SPT basin follows the sign of the reconstruction gain on the uniform mean"
COLUMNS = ["panel", "sweep", "offset", "freq_lo", "freq_hi", "seed", "epoch", "metric", "value", "basin"]
BASIN_COLORS = {"proximity": "#2ca02c", "anti-local": "#d62728"}
TRAP_ARMS = ("spt", "spt_swap_start")  # on the zero-mean task


def _zero_mean(ctx):
    """The trap's task: the figure's task without the per-sequence offset."""
    return replace(ctx.base.data, offset=0.0)


def specs(ctx):
    """``("cell", setting items, seed, task)``: the SPT-only run of one grid setting and seed
    (:func:`toyspt.analysis.basin_grid.phase_specs`); ``("trap", arm, seed)``: the trap runs."""
    cells = {("cell", tuple(st.items()), s.seed, s.data): s for st, s in phase_specs(ctx.base, ctx.seeds)}
    runs = cells | {("trap", a, s): ctx.spec(a, s, data=_zero_mean(ctx)) for a in TRAP_ARMS for s in ctx.seeds}
    return runs | {("proximity", *label): ProximitySpec.of(s) for label, s in runs.items()}  # cached probes


def trap_rows(ctx, runs) -> list[dict]:
    """Per trap arm and seed: recon loss at the end of SPT (the task's validation data),
    proximity index after SPT, test accuracy at peak validation, final train accuracy."""
    rows = []
    for label, res in runs.items():
        if label[0] != "trap":
            continue
        _, arm, seed = label
        pre = [h for h in res.history if h["phase"] == "pretrain"]
        pi = proximities(runs[("proximity", *label)])["pretrained"]
        for m, v in (("recon_val_loss_after_spt", pre[-1]["val_loss"]), ("proximity_index", pi),
                     ("test_at_peak", res.summary["test_at_peak"]),
                     ("final_train_acc", res.summary["final_train_acc"])):
            rows.append(dict(panel="trap", sweep=arm, offset=0.0, seed=seed, metric=m, value=float(v),
                             basin=basin_of(pi)))
    return rows


def trap_epochs(runs) -> int:
    """The epochs the trap's ``spt_swap_start`` runs pretrain with the offset (their stored config)."""
    return next(r.config["train"]["swap_epochs"] for (kind, arm, *_), r in runs.items()
                if kind == "trap" and arm == "spt_swap_start")


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


def draw(ctx, runs):
    cells = [(label, res) for label, res in runs.items() if label[0] == "cell"]
    table = pd.DataFrame([run_row(dict(items), task, seed, res, proximities(runs[("proximity", *label)])["pretrained"])
                          for label, res in cells for _, items, seed, task in [label]])
    ctx.meta[NAME] = dict(predicted=predictor_shares(table), predicted_all=predictor_shares(table, clear_only=False),
                          cells=len(table) // max(1, len(ctx.seeds)), seeds=list(ctx.seeds))
    rows = []
    for _, r in table.iterrows():
        common = dict(sweep=r.sweep, offset=r.offset, freq_lo=r.freq_lo, freq_hi=r.freq_hi, seed=r.seed,
                      basin=r.basin)
        for m in ("proximity_index", "beta_unif", "beta_init", "beta_epoch1", "beta_epoch2", "beta_epoch3",
                  "beta_final"):
            rows.append(dict(panel="cell", metric=m, value=r[m], **common))
    for (_, r), (_, res) in zip(table.iterrows(), cells):
        f = records_frame(res.records)
        for _, e in f[f.metric == "beta"].iterrows():
            rows.append(dict(panel="trajectory", sweep=r.sweep, offset=r.offset, freq_lo=r.freq_lo,
                             freq_hi=r.freq_hi, seed=r.seed, epoch=int(e.epoch), metric="beta",
                             value=float(e.value), basin=r.basin))
    trap = trap_rows(ctx, runs)
    rows += trap
    frame = pd.DataFrame(rows, columns=COLUMNS)
    tf = pd.DataFrame(trap)
    ctx.meta[NAME]["trap"] = {a: {m: float(g.value.mean()) for m, g in tf[tf.sweep == a].groupby("metric")}
                              | {"proximity_seeds": int((tf[(tf.sweep == a) & (tf.metric == "proximity_index")]
                                                          .basin == PROXIMITY).sum())}
                              for a in TRAP_ARMS}

    fig, axes = plt.subplots(3, 2, figsize=(11, 11))
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
    for ax, m, label in ((axes[2, 0], "recon_val_loss_after_spt", "recon loss after SPT (task's own val)"),
                         (axes[2, 1], "test_at_peak", "test accuracy at peak validation")):
        g = tf[tf.metric == m].pivot(index="seed", columns="sweep", values="value")[list(TRAP_ARMS)]
        for s_, r in g.iterrows():
            ax.plot(range(len(TRAP_ARMS)), r.values, color="0.6", lw=0.8, marker="o", ms=3)
        for k, a in enumerate(TRAP_ARMS):
            ax.scatter([k], [g[a].mean()], color=color(a), marker="D", s=40, zorder=3)
        ax.set_xticks(range(len(TRAP_ARMS)), ["SPT", f"SPT, first {trap_epochs(runs)} epochs with offset"])
        ax.set(ylabel=label, title=f"the trap, zero-mean task: {label}")
    sh = ctx.meta[NAME]["predicted"]
    fig.suptitle(f"{TITLE}\n{len(ctx.seeds)} seeds per cell, SPT only; basin predicted where |beta_unif| > 0.1 by "
                 f"sign(beta_unif) {sh['beta_unif']['hits']}/{sh['beta_unif']['n']}, sign(beta after epoch 1) "
                 f"{sh['beta_epoch1']['hits']}/{sh['beta_epoch1']['n']}, sign(beta at init) "
                 f"{sh['beta_init']['hits']}/{sh['beta_init']['n']}", fontsize=9)
    fig.tight_layout()
    return fig, frame
