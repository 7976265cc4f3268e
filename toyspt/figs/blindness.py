"""Figure 5: gradient blindness. How strongly the label loss and the reconstruction loss
see each score direction (|cos| of dL/dS with the direction), at W_Q = W_K = 0 in theory's
affine setting (exactly blind along circulant directions), at the default init, and along
training; plus the label gradient's row heterogeneity and column-only share."""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from toyspt.data import directions as dr
from toyspt.nn.model import ModelConfig, build_model
from toyspt.probe.engine import blindness
from toyspt.probe.losses import make_batch
from toyspt.probe.tracking import records_frame
from toyspt.util.plots import color

NAME = "blindness"
TITLE = "Label supervision is (nearly) blind to proximity directions that reconstruction sees"
COLUMNS = ["panel", "setting", "arm", "seed", "direction", "metric", "step", "value"]
SETTINGS = {  # model variants probed without training
    "qk=0, affine after attention (T1)": dict(qk_init_scale=0.0, d_mlp=0, final_norm=False),
    "qk=0, default model": dict(qk_init_scale=0.0),
    "default init": {},
}
TRACK_DIRECTIONS = dr.PROXIMITY_W1 + ("prev", "random_s0")


def specs(ctx):
    return {(a, s): ctx.tracked_spec(a, s) for a in ("scratch", "spt") for s in ctx.seeds}


def _init_rows(ctx) -> list[dict]:
    """Blindness at init, per setting and seed (a float64 probe of a fresh model)."""
    data = ctx.base.data.load()
    batch = make_batch(data.train.x[:128], data.train.y[:128], 0.5, seed=0)
    rows = []
    for setting, kw in SETTINGS.items():
        for s in ctx.seeds:
            bl = blindness(build_model(ModelConfig(**kw), s), batch, list(dr.COMPACT),
                           per_example=False, use_jvp=False)
            lab, rec = bl.label.layers[0], bl.recon.layers[0]
            for k, d in enumerate(bl.label.directions):
                rows.append(dict(panel="init", setting=setting, seed=s, direction=d, metric="abs_cos_label",
                                 value=abs(lab.cos[0, k].item())))
                rows.append(dict(panel="init", setting=setting, seed=s, direction=d, metric="abs_cos_recon",
                                 value=abs(rec.cos[0, k].item())))
            rows.append(dict(panel="init", setting=setting, seed=s, metric="row_heterogeneity_label",
                             value=lab.row_heterogeneity[0].item()))
            rows.append(dict(panel="init", setting=setting, seed=s, metric="column_share_label",
                             value=lab.column_share[0].item()))
    return rows


def _training_rows(ctx, runs) -> list[dict]:
    """What the tracked runs recorded along training, in the tracked directions."""
    rows = []
    for a in ("scratch", "spt"):
        for s in ctx.seeds:
            f = records_frame(runs[a, s].records)
            f = f[f.metric.isin(["cos_label", "cos_recon", "row_heterogeneity_label", "column_share_label"])]
            for r in f.itertuples():
                d = getattr(r, "direction", None)
                if isinstance(d, str) and d not in TRACK_DIRECTIONS:
                    continue
                v = abs(r.value) if r.metric.startswith("cos") else r.value
                rows.append(dict(panel="training", arm=a, seed=s, direction=d if isinstance(d, str) else None,
                                 metric=("abs_" + r.metric) if r.metric.startswith("cos") else r.metric,
                                 step=r.step, value=v))
    return rows


def _init_panels(axes, init: pd.DataFrame) -> None:
    """Top row: |cos| per direction per setting, and label against recon per seed and direction."""
    for k, setting in enumerate(SETTINGS):
        ax = axes[k]
        g = init[(init.setting == setting) & init.metric.str.startswith("abs_cos")]
        m = g.groupby(["direction", "metric"], sort=False).value.mean().unstack()
        m = m.reindex(list(dr.COMPACT))
        m.plot.bar(ax=ax, color=[color("scratch"), color("spt")], logy=True, legend=k == 0)
        het = init[(init.setting == setting) & (init.metric == "row_heterogeneity_label")].value.mean()
        col = init[(init.setting == setting) & (init.metric == "column_share_label")].value.mean()
        ax.set_title(f"{setting}\nlabel row het. {het:.1e}, column-only share {col:.2f}")
        if k == 0:
            ax.set_ylim(1e-18, 2)  # exact zeros (circulant) sit at float64 rounding, ~1e-17
        ax.set_xlabel("")
    axes[0].set_ylabel("|cos(dL/dS, direction)| (mean over seeds)")
    ax = axes[3]
    g = init[init.metric.str.startswith("abs_cos")].pivot_table(
        index=["setting", "seed", "direction"], columns="metric", values="value").reset_index()
    for setting, gg in g.groupby("setting", sort=False):
        ax.scatter(gg.abs_cos_recon, gg.abs_cos_label.clip(lower=1e-18), s=10, label=setting)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("|cos| recon")
    ax.set_ylabel("|cos| label")
    ax.set_title("per seed and direction")
    ax.legend(fontsize=6)


def _training_panels(axes, tr: pd.DataFrame) -> None:
    """Bottom row: |cos| along training per proximity direction, row heterogeneity and column share."""
    for k, d in enumerate(dr.PROXIMITY_W1):
        ax = axes[k]
        for a in ("scratch", "spt"):
            for metric, ls in (("abs_cos_label", "-"), ("abs_cos_recon", "--")):
                g = tr[(tr.arm == a) & (tr.direction == d) & (tr.metric == metric)].groupby("step").value.mean()
                ax.plot(g.index, g.values, ls, marker="o", ms=2, color=color(a), label=f"{a} {metric[8:]}")
        ax.set_yscale("log")
        ax.set_title(f"along training: direction {d}")
        ax.set_xlabel("optimizer step")
        ax.legend(fontsize=7)
    for k, metric in enumerate(("row_heterogeneity_label", "column_share_label")):
        ax = axes[2 + k]
        for a in ("scratch", "spt"):
            g = tr[(tr.arm == a) & (tr.metric == metric)].groupby("step").value.agg(["mean", "std"])
            ax.plot(g.index, g["mean"], marker="o", ms=2, color=color(a), label=a)
            ax.fill_between(g.index, g["mean"] - g["std"].fillna(0), g["mean"] + g["std"].fillna(0),
                            color=color(a), alpha=0.2)
        ax.set_title(f"{metric.replace('_', ' ')} along training")
        ax.set_xlabel("optimizer step")
        ax.legend(fontsize=7)


def draw(ctx, runs):
    rows = _init_rows(ctx) + _training_rows(ctx, runs)
    frame = pd.DataFrame(rows, columns=COLUMNS).drop_duplicates(
        ["panel", "setting", "arm", "seed", "direction", "metric", "step"], keep="last")
    fig, axes = plt.subplots(2, 4, figsize=(17, 7.5), layout="constrained")
    init = frame[frame.panel == "init"]
    _init_panels(axes[0], init)
    _training_panels(axes[1], frame[frame.panel == "training"])
    fig.suptitle(f"{TITLE} ({len(ctx.seeds)} seeds; recon probe uses L1, 50% mask)")
    summ = init[init.metric.str.startswith("abs_cos")].groupby(["setting", "direction", "metric"]).value.median()
    ctx.meta[NAME] = {f"{a}|{b}|{c}": float(v) for (a, b, c), v in summ.items()}
    return ctx.stamp_regime(fig), frame
