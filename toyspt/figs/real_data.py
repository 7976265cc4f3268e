"""Figure: the mechanism on real data (the four UCR sets, z-normalised series).

Top: which basin SPT lands in per run (SPT-only runs, :mod:`toyspt.ucr.study`), against the
training-free basin predictor (:func:`toyspt.probe.basin.basin_predictor`; on these zero-sum
series :func:`~toyspt.probe.basin.init_beta`, the recon gain of the seed's initial model on
the uniform visible mean, computed on the training inputs without training), and how often each predictor names the basin against what it costs (a fraction
of one SPT run: 0 for statistics of the data or the init, k/E_pre for a reading after k SPT
epochs). Middle: does proximity carry SPT's gain? SPT - scratch (paired by seed) against the
proximity index after SPT and after fine-tuning, and the gain of proximity-basin runs
against anti-local ones. Bottom: the paper's baselines with built-in locality against
scratch and SPT, and gradient blindness at init on each set (label vs recon |cos| of the
score gradient with proximity and control directions, per example).

Writes ``real_data.csv`` (tidy: panel, dataset, seed, arm, metric, value, ...) and
``real_basin.csv`` (one row per SPT-only run: dataset, seed, basin_predictor,
proximity_after_spt and the other predictors compared).
"""
from __future__ import annotations

import time

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch

from toyspt.data import directions as dr
from toyspt.figs import ucr as ucr_fig
from toyspt.nn.model import build_model
from toyspt.probe.basin import basin_predictor, beta_unif, uniform_share
from toyspt.probe.engine import blindness
from toyspt.probe.losses import make_batch
from toyspt.util.plots import color
from toyspt.ucr import study

NAME = "real_data"
TITLE = "The mechanism on real data: what decides SPT's basin on z-normalised series, and does proximity carry the gain"
COLUMNS = ["panel", "dataset", "seed", "arm", "metric", "value", "basin", "direction", "loss"]
BASIN_COLUMNS = ["dataset", "seed", "basin_predictor", "proximity_after_spt", "basin", "beta_unif", "uniform_share",
                 "beta_init", "beta_epoch1", "beta_epoch3", "beta_epoch10", "proximity_init", "proximity_epoch1",
                 "proximity_epoch3", "proximity_epoch10", "spt_epochs", "steps_per_epoch"]
# measured wall seconds: they go to metadata.json (predictor_cost_fraction), never into the CSV,
# so that a redraw from the same cache writes the same bytes
TIMING = ("predictor_seconds", "run_seconds")
BASIN_COLORS = {"proximity": "#2ca02c", "anti-local": "#d62728"}
BLIND_DIRECTIONS = dr.COMPACT  # proximity (circ_*, toep_*) and controls (shifts, random)
BLIND_BATCH = 32  # training series per set for the blindness probe (quick: 4)
QUICK_INIT_N = 32  # training series for the init gain in quick mode


def specs(ctx):
    """Basin runs ``("basin", set, seed)`` and the UCR figure's label runs ``("label", set, arm, seed)``."""
    datasets, _ = ucr_fig.available()
    p = study.plan(ctx.quick, ctx.seeds, ctx.numerics)
    out = {("basin", d.config.name, s.seed): s for d, s in study.basin_specs(datasets, p)}
    out.update({("label", *k): s for k, s in ucr_fig.specs(ctx).items()})
    return out


def basin_frame(ctx, runs) -> pd.DataFrame:
    """``real_basin.csv``: one row per SPT-only run, with the training-free predictor."""
    datasets, _ = ucr_fig.available()
    p = study.plan(ctx.quick, ctx.seeds, ctx.numerics)
    rows = []
    for d, spec in study.basin_specs(datasets, p):
        res = runs["basin", d.config.name, spec.seed]
        row = study.basin_row(d, spec, res)
        t = time.perf_counter()
        row["basin_predictor"] = basin_predictor(d.train.x, spec.model, spec.seed, spec.train.mask_rate,
                                                 n=QUICK_INIT_N if ctx.quick else len(d.train))
        row["predictor_seconds"] = time.perf_counter() - t
        row["run_seconds"] = res.seconds if res.seconds is not None else float("nan")
        row["beta_unif"] = beta_unif(d.train.x, spec.train.mask_rate)
        row["uniform_share"] = uniform_share(d.train.x, spec.train.mask_rate)
        rows.append(row)
    return pd.DataFrame(rows)


def predictor_table(basin: pd.DataFrame) -> pd.DataFrame:
    """Share of runs each predictor names, with its cost as a fraction of one SPT run."""
    E = int(basin.spt_epochs.iloc[0])
    cands = [("basin_predictor", "init gain, train inputs (no training)", 0.0),
             ("beta_unif", "beta_unif (data only)", 0.0),
             ("beta_init", "init gain, tracker's val batch", 0.0)]
    cands += [(f"beta_epoch{e}", f"gain after SPT epoch {e}", e / E) for e in study.EARLY_EPOCHS]
    rows = []
    for col, label, cost in cands:
        if col not in basin or basin[col].isna().all():
            continue
        hits, n = study.predictor_share(basin, col)
        rows.append(dict(predictor=col, label=label, cost_fraction=cost, hits=hits, n=n, share=hits / n))
    for e in study.EARLY_EPOCHS:
        col = f"proximity_epoch{e}"
        if col in basin and not basin[col].isna().all():
            hits, n = study.predictor_share(basin.assign(_pi=basin[col] - 1), "_pi")
            rows.append(dict(predictor=col, label=f"proximity index after epoch {e} > 1", cost_fraction=e / E,
                             hits=hits, n=n, share=hits / n))
    return pd.DataFrame(rows)


def blindness_rows(ctx, datasets) -> list[dict]:
    """Per set: label and recon |cos| of each example's score gradient with each direction,
    at the seed-0 init of the UCR model (float64)."""
    rows = []
    n = 4 if ctx.quick else BLIND_BATCH
    for d in datasets:
        spec = study.basin_specs([d], study.plan(ctx.quick, ctx.seeds, ctx.numerics))[0][1]
        batch = make_batch(d.train.x[:n], d.train.y[:n], spec.train.mask_rate, seed=0)
        bl = blindness(build_model(spec.model, 0), batch, list(BLIND_DIRECTIONS), per_example=True, use_jvp=False)
        for loss, pr in (("label", bl.label), ("recon", bl.recon)):
            pe = pr.layers[0].per_example
            cos = (pe.deriv / torch.linalg.matrix_norm(pe.G)[..., None])[:, 0]  # (B, K), head 0
            for b in range(cos.shape[0]):
                for k, name in enumerate(pr.directions):
                    rows.append(dict(panel="blindness", dataset=d.config.name, seed=b, metric="abs_cos",
                                     value=abs(cos[b, k].item()), direction=name, loss=loss))
    return rows


def _kind(direction: str) -> str:
    return "proximity" if direction.startswith(("circ", "toep")) else "control"


def draw(ctx, runs):
    datasets, skipped = ucr_fig.available()
    if not datasets:
        ctx.meta[NAME] = dict(skipped=skipped, runs=0)
        fig, ax = plt.subplots(figsize=(5, 2))
        ax.axis("off")
        ax.text(0.5, 0.5, "no UCR data set available\n(see metadata: skipped)", ha="center", va="center")
        return fig, {NAME: pd.DataFrame(columns=COLUMNS), "real_basin": pd.DataFrame(columns=BASIN_COLUMNS)}
    basin = basin_frame(ctx, runs)
    labels = pd.DataFrame([study.label_row(next(d for d in datasets if d.config.name == k[1]), k[2], s, runs[k])
                           for k, s in specs(ctx).items() if k[0] == "label"])
    preds = predictor_table(basin)
    gains = study.gain_table(labels, basin)
    contrast = {m: study.basin_gain_contrast(gains, m) for m in ("final_test_acc", "peak_held_out", "test_at_peak")
                if gains[f"gain_{m}"].notna().sum() >= 2}
    check = study.predictor_check(basin)
    blind = pd.DataFrame(blindness_rows(ctx, datasets))
    cost = basin.predictor_seconds / basin.run_seconds
    ctx.meta[NAME] = dict(predictors=preds.to_dict("records"), gain_contrast=contrast, check=check.to_dict(),
                          predictor_cost_fraction=dict(median=float(cost.median()), q25=float(cost.quantile(0.25)),
                                                       q75=float(cost.quantile(0.75)), max=float(cost.max())),
                          skipped=skipped, runs=len(basin))

    rows = []
    for r in basin.itertuples():
        for m in ("basin_predictor", "proximity_after_spt", "beta_init", "beta_epoch1"):
            rows.append(dict(panel="basin", dataset=r.dataset, seed=r.seed, arm="spt_only", metric=m,
                             value=getattr(r, m), basin=r.basin))
    for r in gains.itertuples():
        for m in ("gain_final_test_acc", "gain_peak_held_out", "gain_test_at_peak", "proximity_after_spt",
                  "proximity_after_finetune"):
            rows.append(dict(panel="gain", dataset=r.dataset, seed=r.seed, arm="spt - scratch", metric=m,
                             value=getattr(r, m), basin=r.basin))
    for r in labels.itertuples():
        for m in study.METRICS:
            rows.append(dict(panel="arms", dataset=r.dataset, seed=r.seed, arm=r.arm, metric=m, value=getattr(r, m)))
    frame = pd.concat([pd.DataFrame(rows), blind], ignore_index=True).reindex(columns=COLUMNS)

    fig, axes = plt.subplots(3, 3, figsize=(16, 13))
    names = [d.config.name for d in datasets]
    # basin per run, coloured by the predictor's call; x marks a miss
    ax = axes[0, 0]
    for j, name in enumerate(names):
        g = basin[basin.dataset == name].reset_index(drop=True)
        xs = j + np.linspace(-0.3, 0.3, len(g)) if len(g) > 1 else np.full(1, float(j))
        for x, r in zip(xs, g.itertuples()):
            call = "proximity" if r.basin_predictor > 0 else "anti-local"
            ax.scatter([x], [r.proximity_after_spt], color=BASIN_COLORS[call], s=28,
                       marker="o" if call == r.basin else "X", zorder=3)
    ax.axhline(1.0, color="0.5", lw=0.8, ls=":")
    ax.set_yscale("log")
    ax.set_xticks(range(len(names)), names, fontsize=7)
    ax.set(ylabel="proximity index after SPT (log; > 1 proximity)",
           title=f"basin per run, colour = predictor's call (X = miss)\n{check.checked}")
    ax.title.set_fontsize(8)
    ax = axes[0, 1]
    for name in names:
        g = basin[basin.dataset == name]
        ax.scatter(g.basin_predictor, g.proximity_after_spt, s=20, label=name)
    ax.axvline(0, color="k", lw=0.6)
    ax.axhline(1, color="0.5", lw=0.8, ls=":")
    ax.set_yscale("log")
    ax.set(xlabel="basin predictor: init recon gain on the uniform visible mean", ylabel="proximity index after SPT",
           title="the sign of the init gain against the basin")
    ax.legend(fontsize=7)
    ax = axes[0, 2]
    for r in preds.itertuples():
        ax.scatter(max(r.cost_fraction, 1e-4), r.share, color="C0" if r.predictor.startswith("beta") or
                   r.predictor == "basin_predictor" else "C1", s=25)
        ax.annotate(r.label, (max(r.cost_fraction, 1e-4), r.share), fontsize=6, xytext=(3, 2),
                    textcoords="offset points")
    ax.axhline(study.REAL_SHARE, color="k", ls="--", lw=0.8)
    ax.set_xscale("log")
    ax.set(xlabel="cost, fraction of one SPT run (1e-4 = no training)", ylabel="share of runs whose basin it names",
           title=f"predictors on {len(basin)} real SPT runs", ylim=(0, 1.05))
    # gain vs proximity
    for ax, col, lab in ((axes[1, 0], "proximity_after_spt", "after SPT (SPT-only run)"),
                         (axes[1, 1], "proximity_after_finetune", "after fine-tuning (spt run)")):
        for name in names:
            g = gains[gains.dataset == name]
            ax.scatter(g[col], g.gain_final_test_acc, s=22, label=name,
                       edgecolors=[BASIN_COLORS[b] for b in g.basin], linewidths=1.2)
        ax.axhline(0, color="0.5", lw=0.8)
        ax.axvline(1, color="0.5", lw=0.8, ls=":")
        ax.set_xscale("log")
        ax.set(xlabel=f"proximity index {lab}", ylabel="SPT - scratch, final test acc. (paired by seed)",
               title=f"gain vs proximity {lab}")
        ax.legend(fontsize=7)
    ax = axes[1, 2]
    ax.axis("off")
    lines = []
    for m, c in contrast.items():
        lines.append(f"{m}: proximity runs {c['mean_gain_proximity']:+.3f} (n {c['n_proximity']}), anti-local "
                     f"{c['mean_gain_anti_local']:+.3f} (n {c['n_anti_local']});\n  difference within sets "
                     f"{c['diff_centred']:+.3f} [{c['ci_low']:+.3f}, {c['ci_high']:+.3f}] Welch p={c['welch_p']:.2g}; "
                     f"Spearman(gain, log PI after SPT) {c['spearman_proximity_after_spt']:+.2f}, "
                     f"after FT {c['spearman_proximity_after_finetune']:+.2f}")
    ax.text(0, 1, "gain of proximity-basin vs anti-local runs\n(95% CI)\n\n" + "\n\n".join(lines), va="top",
            fontsize=6.5, family="monospace")
    # baselines
    ax = axes[2, 0]
    arms = [a for a in ucr_fig.ARMS if a in set(labels.arm)]
    for k, arm in enumerate(arms):
        m = labels[labels.arm == arm].groupby("dataset", sort=False).final_test_acc.agg(["mean", "sem"])
        m = m.reindex(names)
        ax.errorbar(np.arange(len(names)) + (k - len(arms) / 2) * 0.1, m["mean"], yerr=m["sem"], fmt="o",
                    color=color(arm), label=arm, ms=4, capsize=2)
    ax.set_xticks(range(len(names)), names, fontsize=7)
    ax.set(ylabel="final test accuracy (mean ± s.e. over seeds)", title="built-in locality vs SPT (from scratch)")
    ax.legend(fontsize=7, ncol=2)
    # blindness
    ax = axes[2, 1]
    if len(blind):
        b = blind.assign(kind=blind.direction.map(_kind))
        b["group"] = b.loss + " / " + b.kind
        order = ["label / proximity", "label / control", "recon / proximity", "recon / control"]
        for k, name in enumerate(names):
            for i, gname in enumerate(order):
                v = b[(b.dataset == name) & (b.group == gname)].value
                ax.boxplot([v], positions=[k * 5 + i], widths=0.7, showfliers=False,
                           patch_artist=True, boxprops=dict(facecolor=f"C{i}", alpha=0.5))
        ax.set_xticks([k * 5 + 1.5 for k in range(len(names))], names, fontsize=7)
        ax.set_yscale("log")
        ax.set(ylabel="|cos(dL/dS, direction)| per example, at init",
               title="blindness at init: " + ", ".join(f"C{i} {g}" for i, g in enumerate(order)))
        ax.title.set_fontsize(7)
    # beta trajectories
    ax = axes[2, 2]
    for (name, seed), _ in basin.groupby(["dataset", "seed"]):
        res = runs["basin", name, seed]
        bt = sorted((int(r["epoch"]), float(r["value"])) for r in res.records if r["metric"] == "beta")
        b_ = basin[(basin.dataset == name) & (basin.seed == seed)].basin.iloc[0]
        ax.plot([e for e, _ in bt], [v for _, v in bt], color=BASIN_COLORS[b_], lw=0.6, alpha=0.6)
    ax.axhline(0, color="k", lw=0.6)
    ax.set_xscale("symlog", linthresh=1)
    ax.set_xlim(0, None)
    ax.set(xlabel="SPT epoch (0 = init)", ylabel="model's recon gain beta (uniform visible attention)",
           title="beta along SPT, by basin (green proximity, red anti-local)")
    fig.suptitle(TITLE, fontsize=10)
    fig.tight_layout()
    extra = [c for c in basin.columns if c not in BASIN_COLUMNS and c not in TIMING]
    return fig, {NAME: frame, "real_basin": basin.reindex(columns=BASIN_COLUMNS + extra)}
