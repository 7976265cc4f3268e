"""The probe report's figure: blindness ratio per layer and head, ratios by direction,
attention by offset, positional score profile, and (with a reference) displacement."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import seaborn as sns  # noqa: E402

from ..plots import save_figure, style  # noqa: E402


def report_figure(report, out: Path, name: str = "report", title: str | None = None) -> Path:
    """Draw ``report`` (an :class:`~toyspt.lra.report.LRAReport`) to ``out/name.png`` (+pdf)."""
    style()
    s, p, d = report.summary_probes, report.profiles, report.displacement
    with_disp = d is not None and not d.empty
    fig, axes = plt.subplots(1, 5 if with_disp else 4, figsize=(19 if with_disp else 15.5, 3.4))
    dirs = report.meta.get("summary_directions") or sorted(s.direction.dropna().unique())
    key = dirs[min(1, len(dirs) - 1)]

    r = s[(s.metric == "ratio") & (s.direction == key)].pivot(index="layer", columns="head", values="value")
    sns.heatmap(r, ax=axes[0], cmap="viridis", vmin=0, vmax=max(1.0, float(np.nanmax(r.values))),
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
        sns.barplot(h, x="layer", y="value", hue="what", ax=axes[4], errorbar=None)
        axes[4].set(title="relative displacement vs reference (mean over heads)", ylabel="||ΔW|| / ||W_ref||")
        axes[4].legend(fontsize=6)
    if title:
        fig.suptitle(title, y=1.03)
    fig.tight_layout()
    return save_figure(fig, Path(out), name)[0]


__all__ = ["report_figure"]
