"""Figure: the mechanism on real data (the four UCR sets, z-normalised series).

Top: which basin SPT lands in per run (tracked SPT-only runs, :func:`toyspt.ucr.design.basin_specs`),
against the training-free basin predictor (:func:`toyspt.probe.basin.basin_predictor`; on these
zero-sum series the recon gain of the seed's initial model on the uniform visible mean), and
how often each predictor names the basin against what it costs, with the base rate of always
answering the majority basin (the null a predictor must beat). Middle: does the basin go with
SPT's *own* accuracy (the spt runs' primary metric, centred within each set; their basin is the
proximity index of their SPT weights), and with the proximity index itself, tested within sets
(:func:`toyspt.analysis.basin.basin_accuracy`). Bottom: the model's gain beta along SPT by basin,
and gradient blindness at init on each set (label vs recon |cos| of the score gradient with
proximity and control directions, per example; a cached probe, :mod:`toyspt.ucr.init_probes`).

Writes ``real_data.csv`` (tidy: panel, dataset, seed, arm, metric, value, ...) and
``real_basin.csv`` (one row per SPT-only run, :func:`toyspt.analysis.basin.basin_row`: the
predictors compared and the basin). :func:`predictor_check` is the theory report's row R1.
"""
from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from toyspt.analysis.basin import (
    EARLY_EPOCHS,
    basin_accuracy,
    basin_row,
    basins,
    predictor_kind,
    predictor_share,
    predictor_test,
)
from toyspt.analysis.rows import label_frame, probe_specs
from toyspt.figs.ucr import no_data
from toyspt.nn.model import ModelConfig
from toyspt.runs.state_probes import ProximitySpec, proximities
from toyspt.ucr import design
from toyspt.ucr.data import UCRSource
from toyspt.ucr.init_probes import InitProbeSpec
from toyspt.ucr.runs import UCR_MODEL_DEFAULTS

NAME = "real_data"
TITLE = ("The mechanism on real data: what decides SPT's basin on z-normalised series, and does it go with SPT's "
         "accuracy")
COLUMNS = ["panel", "dataset", "seed", "arm", "metric", "value", "basin", "direction", "loss"]
BASIN_COLUMNS = ["dataset", "seed", "basin_predictor", "proximity_after_spt", "basin", "beta_unif", "uniform_share",
                 "beta_init", "beta_epoch1", "beta_epoch3", "beta_epoch10", "proximity_init", "proximity_epoch1",
                 "proximity_epoch3", "proximity_epoch10", "spt_epochs", "steps_per_epoch"]
BASIN_COLORS = {"proximity": "#2ca02c", "anti-local": "#d62728"}
REAL_SHARE = 0.90  # the share of real runs a basin predictor must name (docs/basin.md)


def specs(ctx):
    """``("basin", source, seed)``: tracked SPT-only runs; ``("label", source, arm, seed)``:
    scratch and spt; ``("proximity", *label)``: the proximity indices of their stored weights
    (cached probes); ``("probes", source)``: the init probes of the set."""
    datasets, t = ctx.study.datasets, ctx.study.tier
    out = {("basin", UCRSource.of(d), s.seed): s for d, s in design.basin_specs(datasets, t)}
    out.update({("label", UCRSource.of(d), a, s.seed): s
                for d, a, s in design.paper_specs(datasets, t, design.POWER_ARMS)})
    out |= probe_specs({k: s for k, s in out.items() if k[0] == "label"})
    out |= {("proximity", *k): ProximitySpec.of(s) for k, s in out.items() if k[0] == "basin"}
    for d in datasets:
        src = UCRSource.of(d)
        out["probes", src] = InitProbeSpec(src, src.fit(ModelConfig(**UCR_MODEL_DEFAULTS)), t.basin_seeds,
                                           t.train.mask_rate, n_blind=4 if ctx.quick else 32,
                                           n_init=32 if ctx.quick else None)
    return out


def basin_frame(runs) -> pd.DataFrame:
    """``real_basin.csv``: one row per SPT-only run, with the training-free predictor."""
    rows = []
    for label, res in runs.items():
        if label[0] != "basin":
            continue
        _, src, seed = label
        probes = runs["probes", src]
        pred = next(r for r in probes.rows if r["probe"] == "basin_predictor" and r["seed"] == seed)
        after = proximities(runs["proximity", "basin", src, seed])["final"]
        d = src.load()
        rows.append(dict(dataset=src.name, seed=seed, T=d.length, n_train=len(d.train), **basin_row(res, after),
                         steps_per_epoch=-(-len(d.train) // res.config["train"]["batch_size"]),
                         spt_epochs=res.config["train"]["pre_epochs"], basin_predictor=pred["value"],
                         predictor_seconds=pred["seconds"], run_seconds=res.seconds if res.seconds else np.nan,
                         beta_unif=probes.details["beta_unif"], uniform_share=probes.details["uniform_share"]))
    return pd.DataFrame(rows)


def predictor_table(basin: pd.DataFrame) -> pd.DataFrame:
    """Each predictor's share of runs whose basin it names, against always answering the
    majority basin (exact McNemar p, one-sided), with its cost as a fraction of one SPT run and
    its ``kind``: "persistence" for the proximity index read before the end of SPT (the
    quantity that defines the basin), "prediction" otherwise (:func:`toyspt.analysis.basin.predictor_kind`)."""
    E = int(basin.spt_epochs.iloc[0])
    cands = [("basin_predictor", "init gain, train inputs (no training)", 0.0),
             ("beta_unif", "beta_unif (data only)", 0.0), ("beta_init", "init gain, tracker's val batch", 0.0)]
    cands += [(f"beta_epoch{e}", f"gain after SPT epoch {e}", e / E) for e in EARLY_EPOCHS]
    cands += [(f"proximity_epoch{e}", f"persistence: proximity index after epoch {e} > 1", e / E)
              for e in EARLY_EPOCHS]
    rows = []
    for col, label, cost in cands:
        if col not in basin or basin[col].isna().all():
            continue
        t = basin.assign(_x=basin[col] - 1) if col.startswith("proximity") else basin.assign(_x=basin[col])
        r = predictor_test(t, "_x")
        rows.append(dict(predictor=col, kind=predictor_kind(col), label=label, cost_fraction=cost, **r))
    return pd.DataFrame(rows)


def predictor_check(basin: pd.DataFrame, column: str = "basin_predictor", threshold: float = REAL_SHARE):
    """A theory-report row (:class:`toyspt.theory.result.Result`) that fails when the
    predictor names the basin in fewer than ``threshold`` of the real runs; it also reports
    the share against the majority basin's base rate (a predictor must beat always answering
    the majority basin, not one half; :func:`toyspt.analysis.basin.predictor_test`)."""
    from toyspt.theory.result import checked_result

    r = predictor_test(basin, column)
    hits, n = r["hits"], r["n"]
    sets = ", ".join(f"{k} {predictor_share(g, column)[0]}/{len(g)}" for k, g in basin.groupby("dataset", sort=False))
    return checked_result("R1", f"sign({column}) names the SPT basin on real (UCR) data in >= {threshold:.0%} of runs",
                          f"{hits}/{n} SPT-only runs ({sets}); always answering the majority basin ({r['majority']}) "
                          f"names {r['majority_hits']}/{n}, exact McNemar p = {r['p']:.2g} (one-sided; runs only the "
                          f"predictor names {r['only_predictor']}, only the majority {r['only_majority']})",
                          "n.a.", hits / n if n else float("nan"), "share of runs", threshold, "ge",
                          "the goal stated for real data",
                          hits=hits, n=n, base_rate=r["base_rate"], majority=r["majority"], p_base_rate=r["p"])


def _frame(basin: pd.DataFrame, spt: pd.DataFrame, blind: pd.DataFrame) -> pd.DataFrame:
    """``real_data.csv``: the basin panel's runs, SPT's own accuracy, blindness at init."""
    rows = [dict(panel="basin", dataset=r.dataset, seed=r.seed, arm="spt_only", metric=m, value=getattr(r, m),
                 basin=r.basin) for r in basin.itertuples()
            for m in ("basin_predictor", "proximity_after_spt", "beta_init", "beta_epoch1")]
    rows += [dict(panel="own_accuracy", dataset=r.dataset, seed=r.seed, arm="spt", metric=m, value=getattr(r, m),
                  basin=r.basin) for r in spt.itertuples() for m in (design.PRIMARY, "centred", "proximity_after_spt")]
    return pd.concat([pd.DataFrame(rows), blind], ignore_index=True).reindex(columns=COLUMNS)


def _basin_panel(ax, basin: pd.DataFrame, names: list[str], check) -> None:
    """Basin per run, coloured by the predictor's call; x marks a miss."""
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
           title=f"basin per run, colour = predictor's call (X = miss)\n{textwrap.fill(check.checked, 90)}")
    ax.title.set_fontsize(6.5)


def _predictor_panel(ax, preds: pd.DataFrame, n_runs: int) -> None:
    """One row per predictor, cheapest first: no label can fall on another."""
    rows = preds.sort_values("cost_fraction", kind="stable").reset_index(drop=True)
    ys = np.arange(len(rows))[::-1]
    for y, r in zip(ys, rows.itertuples()):
        ax.scatter(r.share, y, color="C0" if r.predictor.startswith(("beta", "basin")) else "C1", s=22, zorder=3)
        ax.scatter(r.base_rate, y, color="0.5", marker="|", s=60, zorder=2)
    ax.axvline(REAL_SHARE, color="k", ls="--", lw=0.8)
    ax.set_yticks(ys, [f"{r.label} (cost {r.cost_fraction:.2g}, p {r.p:.2g})" for r in rows.itertuples()],
                  fontsize=5.5)
    ax.set(xlim=(0, 1.05), xlabel="share of runs whose basin it names (grey bar: always the majority basin)",
           title=f"predictors on {n_runs} SPT-only runs\n(cost: fraction of one SPT run; p: exact McNemar "
                 "vs the majority basin)")
    ax.title.set_fontsize(7)


def _beta_panel(ax, runs, basin: pd.DataFrame) -> None:
    """Beta trajectories along SPT, by basin."""
    for (kind, src, seed), res in ((k, r) for k, r in runs.items() if k[0] == "basin"):
        bt = sorted((int(r["epoch"]), float(r["value"])) for r in res.records if r["metric"] == "beta")
        b_ = basin[(basin.dataset == src.name) & (basin.seed == seed)].basin.iloc[0]
        ax.plot([e for e, _ in bt], [v for _, v in bt], color=BASIN_COLORS[b_], lw=0.6, alpha=0.6)
    ax.axhline(0, color="k", lw=0.6)
    ax.set_xscale("symlog", linthresh=1)
    ax.set_xlim(0, None)
    ax.set(xlabel="SPT epoch (0 = init)", ylabel="model's recon gain beta (uniform visible attention)",
           title="beta along SPT, by basin (green proximity, red anti-local)")


def _own_accuracy_panels(axes, spt: pd.DataFrame, names: list[str], assoc: dict) -> None:
    """SPT's own accuracy by basin within sets, and against the proximity index."""
    ax = axes[0]
    for j, name in enumerate(names):
        for k, b in enumerate(("proximity", "anti-local")):
            v = spt[(spt.dataset == name) & (spt.basin == b)].centred
            ax.scatter(np.full(len(v), j + (k - 0.5) * 0.3), v, color=BASIN_COLORS[b], s=14, alpha=0.7)
    ax.axhline(0, color="0.5", lw=0.8)
    ax.set_xticks(range(len(names)), names, fontsize=7)
    ba = assoc["basin"]
    what = (f"proximity - anti-local {ba['diff']:+.3f} [{ba['ci_low']:+.3f}, {ba['ci_high']:+.3f}], "
            f"within-set permutation p {ba['perm_p']:.2g}" if "diff" in ba else ba.get("error", ""))
    ax.set(ylabel=f"spt {design.PRIMARY}, centred within set", title=f"SPT's own accuracy by basin\n{what}")
    ax.title.set_fontsize(7)
    ax = axes[1]
    for name in names:
        g = spt[spt.dataset == name]
        ax.scatter(g.proximity_after_spt, g.centred, s=16, label=name)
    ax.set_xscale("log")
    ax.axvline(1, color="0.5", lw=0.8, ls=":")
    lp = assoc["log_proximity"]
    what = (f"within-set rho {lp['rho']:+.2f} [{lp['ci_low']:+.2f}, {lp['ci_high']:+.2f}], permutation p "
            f"{lp['perm_p']:.2g}" if "rho" in lp else lp["error"])
    ax.set(xlabel="proximity index of the SPT weights", ylabel=f"spt {design.PRIMARY}, centred within set",
           title=f"own accuracy vs proximity: {what}")
    ax.title.set_fontsize(7)
    ax.legend(fontsize=7)


def _blindness_panel(ax, blind: pd.DataFrame, names: list[str]) -> None:
    """Blindness at init: label and recon |cos| with proximity and control directions."""
    b = blind.assign(kind=np.where(blind.direction.str.startswith(("circ", "toep")), "proximity", "control"))
    b["group"] = b.loss + " / " + b.kind
    order = ["label / proximity", "label / control", "recon / proximity", "recon / control"]
    for k, name in enumerate(names):
        for i, gname in enumerate(order):
            v = b[(b.dataset == name) & (b.group == gname)].value
            ax.boxplot([v], positions=[k * 5 + i], widths=0.7, showfliers=False, patch_artist=True,
                       boxprops=dict(facecolor=f"C{i}", alpha=0.5))
    ax.set_xticks([k * 5 + 1.5 for k in range(len(names))], names, fontsize=7)
    ax.set_yscale("log")
    ax.set(ylabel="|cos(dL/dS, direction)| per example, at init",
           title="blindness at init: " + ", ".join(f"C{i} {g}" for i, g in enumerate(order)))
    ax.title.set_fontsize(7)


def draw(ctx, runs):
    datasets, skipped, t = ctx.study.datasets, ctx.study.skipped, ctx.study.tier
    if not datasets:
        ctx.meta[NAME] = dict(tier=t.name, skipped=skipped, runs=0)
        return no_data({NAME: COLUMNS, "real_basin": BASIN_COLUMNS})
    basin = basin_frame(runs)
    labels = label_frame(runs, group="label")
    preds = predictor_table(basin)
    check = predictor_check(basin)
    assoc = basin_accuracy(labels, design.PRIMARY)
    cost = basin.predictor_seconds / basin.run_seconds
    ctx.meta[NAME] = dict(tier=t.name, basin_seeds=len(t.basin_seeds), label_seeds=len(t.power_seeds),
                          predictors=preds.to_dict("records"), basin_vs_own_accuracy=assoc, check=check.to_dict(),
                          predictor_cost_fraction=dict(median=float(cost.median()), q25=float(cost.quantile(0.25)),
                                                       q75=float(cost.quantile(0.75)), max=float(cost.max())),
                          skipped=skipped, runs=len(basin))
    spt = labels[labels.arm == "spt"].copy()
    spt["basin"] = basins(spt.proximity_after_spt)
    spt["centred"] = spt[design.PRIMARY] - spt.groupby("dataset")[design.PRIMARY].transform("mean")
    blind = pd.DataFrame([dict(panel="blindness", dataset=r["dataset"], seed=r["seed"], metric="abs_cos",
                               value=r["value"], direction=r["direction"], loss=r["loss"])
                          for k, res in runs.items() if k[0] == "probes"
                          for r in res.rows if r["probe"] == "blindness"])
    frame = _frame(basin, spt, blind)

    fig, axes = plt.subplots(2, 3, figsize=(16, 9.5))
    names = [d.config.name for d in datasets]
    _basin_panel(axes[0, 0], basin, names, check)
    _predictor_panel(axes[0, 1], preds, len(basin))
    _beta_panel(axes[0, 2], runs, basin)
    _own_accuracy_panels(axes[1, :2], spt, names, assoc)
    _blindness_panel(axes[1, 2], blind, names)
    fig.suptitle(f"{TITLE}\ntier {t.name}: {len(t.basin_seeds)} SPT-only runs and {len(t.power_seeds)} spt runs "
                 "per set", fontsize=10)
    fig.tight_layout()
    extra = [c for c in basin.columns if c not in BASIN_COLUMNS and c not in ("predictor_seconds", "run_seconds")]
    return fig, {NAME: frame, "real_basin": basin.reindex(columns=BASIN_COLUMNS + extra)}
