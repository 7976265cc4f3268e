"""Figure 8: the LRA bridge on small LRA-architecture Transformers trained on generated
ListOps (scratch vs SPT), saved as Lightning checkpoints of the LRA SPT code and probed
back through the bridge: label/recon blindness ratio and proximity index per layer,
attention by offset, displacement from init per head. See :mod:`toyspt.lra.demo`."""
from __future__ import annotations

import math

from toyspt.lra.demo import DemoConfig, DemoSpec, demo_frames
from toyspt.lra.figure import demo_figure

NAME = "lra"
TITLE = "LRA bridge: small ListOps Transformers, scratch vs SPT"
COLUMNS = ["panel", "model", "layer", "direction", "offset", "metric", "mean", "std", "n"]


def _config(ctx) -> DemoConfig:
    return DemoConfig.quick() if ctx.quick else DemoConfig()


def specs(ctx):
    """One demo run (LRA-architecture models trained, saved, loaded back, probed) per seed."""
    return {s: DemoSpec(s, _config(ctx)) for s in ctx.seeds}


def draw(ctx, runs):
    cfg = _config(ctx)
    records, summary = demo_frames([runs[s] for s in ctx.seeds])
    fig, frame = demo_figure(records)
    summ = summary.groupby("model").mean(numeric_only=True)
    ctx.meta[NAME] = dict(config_key=cfg.key(), seeds=list(ctx.seeds),
                          summary={m: {k: float(v) for k, v in row.items() if k != "seed" and math.isfinite(v)}
                                   for m, row in summ.iterrows()})
    return fig, frame
