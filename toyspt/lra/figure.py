"""The probe report's figure: blindness ratio per layer and head, ratios by direction,
attention by offset, positional score profile, and (with a reference) displacement."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from toyspt.util.plots import save_figure, style  # noqa: E402


def report_figure(report, out: Path, name: str = "report", title: str | None = None) -> Path:
    """Draw ``report`` (an :class:`~toyspt.lra.report.LRAReport`) to ``out/name.png`` (+pdf)."""
    style()
    s, p, d = report.summary_probes, report.profiles, report.displacement
    with_disp = d is not None and not d.empty
    fig, axes = plt.subplots(1, 5 if with_disp else 4, figsize=(19 if with_disp else 15.5, 3.4))
    dirs = report.meta.get("summary_directions") or sorted(s.direction.dropna().unique())
    key = dirs[min(1, len(dirs) - 1)]

    r = s[(s.metric == "ratio") & (s.direction == key)].pivot(index="layer", columns="head", values="value")
    finite = r.values[np.isfinite(r.values)]  # a label-only report has no ratios at all
    sns.heatmap(r, ax=axes[0], cmap="viridis", vmin=0, vmax=max([1.0, *finite.tolist()]),
                cbar_kws=dict(label="|cos label| / |cos recon|"), annot=r.shape[1] <= 8, fmt=".2f",
                annot_kws=dict(fontsize=6))
    axes[0].set_title(f"blindness ratio along {key}")

    rr = s[s.metric == "ratio"].groupby(["direction", "layer"]).value.median().reset_index()
    sns.lineplot(rr, x="layer", y="value", hue="direction", marker="o", ax=axes[1])
    axes[1].axhline(1.0, color="0.5", lw=0.8, ls="--")
    axes[1].set(title="ratio by direction (median over heads)", ylabel="ratio", yscale="log")
    axes[1].legend(fontsize=6, ncol=2)

    a = p[p.metric == "attn_weight"].groupby(["layer", "offset"]).value.mean().reset_index()
    sns.lineplot(a, x="offset", y="value", hue="layer", palette="crest", ax=axes[2])
    axes[2].set(title="attention by offset (data, mean over heads)", ylabel="mean weight")

    ps = p[p.metric == "pos_score"].groupby(["layer", "offset"]).value.mean().reset_index()
    sns.lineplot(ps, x="offset", y="value", hue="layer", palette="flare", ax=axes[3])
    axes[3].set(title="positional score profile (mean input)", ylabel="row-centred score")

    if with_disp:
        h = d[(d.section == "head") & (d.metric == "rel_disp_ref")].copy()
        h["what"] = h.name.str.rsplit(".", n=1).str[-1]
        h["layer"] = h.layer.astype(int)
        sns.barplot(h, x="layer", y="value", hue="what", ax=axes[4], errorbar=None)
        axes[4].set(title="relative displacement vs reference (mean over heads)", ylabel="||ΔW|| / ||W_ref||")
        axes[4].legend(fontsize=6)
    if title:
        fig.suptitle(title, y=1.03)
    fig.tight_layout()
    return save_figure(fig, Path(out), name)[0]


MODEL_COLORS = {"scratch": "#1f77b4", "spt_pretrained": "#2ca02c", "spt_finetuned": "#d62728"}


def _agg(frame, by):
    g = frame.groupby(by, dropna=False).value.agg(mean="mean", std="std", n="count").reset_index()
    g["std"] = g["std"].fillna(0.0)
    return g


def demo_figure(records, directions: tuple[str, ...] = ("circ_w1", "toep_w1")):
    """The LRA demo figure from :func:`toyspt.lra.demo.demo_records`: blindness ratio and
    proximity index per layer, attention by offset (last layer), displacement from init.
    Returns (the figure, unsaved; the plotted numbers: panel, model, layer, direction, offset,
    metric, mean, std, n), means over heads and seeds per layer, std over the per-(seed, head)
    values."""

    style()
    r = records
    models = [m for m in MODEL_COLORS if m in set(r.model)]
    fig, axes = plt.subplots(1, 4, figsize=(17, 3.5))
    parts = []

    s = r[(r.section == "probe_summary") & (r.metric == "ratio") & r.direction.isin(directions)]
    a = _agg(s, ["model", "direction", "layer"]).assign(panel="ratio", metric="ratio")
    for (m, d), g in a.groupby(["model", "direction"]):
        axes[0].errorbar(g.layer + (0.05 if d == directions[-1] else 0), g["mean"], g["std"],
                         color=MODEL_COLORS.get(m, "0.4"), marker="o" if d == directions[0] else "s",
                         ls="-" if d == directions[0] else "--", label=f"{m} {d}", capsize=2)
    axes[0].axhline(1, color="0.5", lw=0.8, ls=":")
    axes[0].set(title="label/recon cosine ratio", xlabel="layer", ylabel="rms|cos label| / rms|cos recon|")
    axes[0].legend(fontsize=6)
    layers = sorted(int(v) for v in r.layer.dropna().unique())
    for ax in axes[:2]:
        ax.set_xticks(layers)
    parts.append(a)

    p = r[(r.section == "profile") & (r.metric == "proximity_index")]
    a = _agg(p.groupby(["model", "seed", "layer", "head"]).value.mean().reset_index(), ["model", "layer"])
    a = a.assign(panel="proximity", metric="proximity_index")
    for m, g in a.groupby("model"):
        axes[1].errorbar(g.layer, g["mean"], g["std"], color=MODEL_COLORS.get(m, "0.4"), marker="o",
                         label=m, capsize=2)
    axes[1].axhline(1, color="0.5", lw=0.8, ls=":")
    axes[1].set(title="proximity index (data; 1 = uniform)", xlabel="layer", ylabel="index")
    axes[1].legend(fontsize=7)
    parts.append(a)

    last = int(r.layer.dropna().max())
    w = r[(r.section == "profile") & (r.metric == "attn_weight") & (r.layer == last)]
    a = _agg(w.groupby(["model", "seed", "head", "offset"]).value.mean().reset_index(), ["model", "offset"])
    a = a.assign(panel="attention_by_offset", metric="attn_weight", layer=last)
    for m, g in a.groupby("model"):
        axes[2].plot(g.offset, g["mean"], color=MODEL_COLORS.get(m, "0.4"), label=m)
        axes[2].fill_between(g.offset, g["mean"] - g["std"], g["mean"] + g["std"],
                             color=MODEL_COLORS.get(m, "0.4"), alpha=0.15)
    axes[2].set(title=f"attention by offset (layer {last})", xlabel="offset j - i", ylabel="mean weight")
    parts.append(a)

    d = r[(r.section == "displacement") & (r.part == "head") & (r.metric == "rel_disp_ref")].copy()
    d["what"] = d.name.str.rsplit(".", n=1).str[-1]
    d = d[d.what.isin(["W_Q", "W_K", "W_V", "M"])]
    a = _agg(d, ["model", "what"]).assign(panel="displacement", metric="rel_disp_init")
    sns.barplot(d, x="what", y="value", hue="model", palette=MODEL_COLORS, ax=axes[3], errorbar="sd",
                hue_order=models, order=["W_Q", "W_K", "M", "W_V"])
    axes[3].set(title="relative displacement from init (per head)", xlabel="", ylabel="||ΔW|| / ||W_init||")
    axes[3].legend(fontsize=7)
    parts.append(a.rename(columns={"what": "direction"}))
    fig.tight_layout()
    cols = ["panel", "model", "layer", "direction", "offset", "metric", "mean", "std", "n"]
    return fig, pd.concat(parts, ignore_index=True).reindex(columns=cols)


__all__ = ["report_figure", "demo_figure", "MODEL_COLORS"]
