"""Figure 8: the LRA bridge on small LRA-architecture Transformers trained on generated
ListOps (scratch vs SPT), saved as Lightning checkpoints of the LRA SPT code and probed
back through the bridge: label/recon blindness ratio and proximity index per layer,
attention by offset, displacement from init per head. See :mod:`toyspt.lra.demo`."""
from __future__ import annotations

import math

import pandas as pd

from ..lra.demo import DemoConfig, run_demo
from ..lra.figure import demo_figure

NAME = "lra"
TITLE = "LRA bridge: small ListOps Transformers, scratch vs SPT"
COLUMNS = ["panel", "model", "layer", "direction", "offset", "metric", "mean", "std", "n"]


def specs(ctx):
    return []  # the demo trains its own LRA-architecture models (cached beside the run cache)


def draw(ctx, runs) -> pd.DataFrame:
    from dataclasses import replace

    cfg = replace(DemoConfig.quick() if ctx.quick else DemoConfig(), seeds=tuple(ctx.seeds))
    res = run_demo(cfg, ctx.cache.root / ("lra_demo_quick" if ctx.quick else "lra_demo"))
    frame = demo_figure(res.records, ctx.out, NAME, ctx.quick)
    summ = res.summary.groupby("model").mean(numeric_only=True)
    ctx.meta[NAME] = dict(config_key=cfg.key(), seeds=list(ctx.seeds),
                          summary={m: {k: float(v) for k, v in row.items() if k != "seed" and math.isfinite(v)}
                                   for m, row in summ.iterrows()})
    return frame
