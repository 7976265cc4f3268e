"""Blindness of the label loss at and near uniform attention, on the default task.

    python benchmarks/blindness_at_init.py [--seeds 0 1 2 3 4] [--n 256]

For each model seed (and the mask seed equal to it), in float64 on the first ``n``
training sequences:

1. W_Q = W_K = 0 (uniform attention), two architectures: the T1 setting
   (``d_mlp=0, final_norm=False``: affine per token, then mean pooling) and the default
   model (MLP + final LayerNorm). Row heterogeneity of the label and recon score
   gradients; |cos| of each gradient with the circulant (blind) and Toeplitz (boundary)
   proximity directions; the per-example rank of dL/dM (sv2/sv1, theory.md T4).
   Also the signed recon cosine: negative = more proximity lowers the recon loss.
2. The default init (``qk_init_scale=1``): the label/recon blindness ratio along the
   proximity directions, for both architectures.

Prints median [min, max] over seeds.
"""
from __future__ import annotations

import argparse

import pandas as pd
import torch

from toyspt.data.tasks import TaskConfig, make_task
from toyspt.nn.model import ModelConfig, build_model
from toyspt.probe import engine as probes
from toyspt.probe import losses

SITE = "blocks.0.attn.hook_attn_scores"
PROX = ("circ_w1", "circ_w2", "circ_w4", "toep_w1", "toep_w2", "toep_w4")
ARCHS = {"T1 (d_mlp=0, no final LN)": dict(d_mlp=0, final_norm=False), "default (MLP + final LN)": {}}


def _fmt(s: pd.Series) -> str:
    return f"{s.median():.3g} [{s.min():.2g}, {s.max():.2g}]"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--offset", type=float, default=None,
                    help="TaskConfig.offset (default: the task's default; 0 = the zero-mean regime)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    data = make_task(TaskConfig() if args.offset is None else TaskConfig(offset=args.offset))
    x, y = data.train.x[:args.n], data.train.y[:args.n]
    rows = []
    for arch, kw in ARCHS.items():
        for scale in (0.0, 1.0):
            for seed in args.seeds:
                model = build_model(ModelConfig(**kw, qk_init_scale=scale), seed)
                bl = probes.blindness(model, losses.make_batch(x, y, seed=seed), list(PROX), use_jvp=False)
                t = bl.table()
                for loss, res in (("label", bl.label), ("recon", bl.recon)):
                    lp = res[SITE]
                    sv = lp.per_example.dLdM_sv[:, 0]
                    row = dict(arch=arch, scale=scale, seed=seed, loss=loss,
                               row_het=lp.row_heterogeneity[0].item(),
                               row_het_pe_max=lp.per_example.row_heterogeneity[:, 0].max().item(),
                               column_share=lp.column_share[0].item(),
                               sv2_sv1_pe_max=(sv[:, 1] / sv[:, 0]).max().item())
                    for k, d in enumerate(res.directions):
                        row[f"|cos| {d}"] = lp.cos[0, k].abs().item()
                        row[f"cos {d}"] = lp.cos[0, k].item()
                    rows.append(row)
                for _, r in t.iterrows():
                    rows.append(dict(arch=arch, scale=scale, seed=seed, loss="ratio",
                                     **{f"|cos| {r.direction}": r.ratio}))
                    rows.append(dict(arch=arch, scale=scale, seed=seed, loss="ratio_per_example",
                                     **{f"|cos| {r.direction}": r.ratio_per_example}))
    f = pd.DataFrame(rows)
    print(f"default task T={data.config.T}, n={args.n}, seeds {args.seeds}; float64; median [min, max] over seeds")
    for scale, title in ((0.0, "W_Q = W_K = 0 (uniform attention)"), (1.0, "default init (qk_init_scale=1)")):
        print(f"\n== {title}")
        for arch in ARCHS:
            print(f"-- {arch}")
            g = f[(f.arch == arch) & (f.scale == scale)]
            out = {}
            for loss in ("label", "recon"):
                gl = g[g.loss == loss]
                out[loss] = {c: _fmt(gl[c]) for c in ("row_het", "row_het_pe_max", "column_share", "sv2_sv1_pe_max")}
                out[loss].update({c: _fmt(gl[c]) for c in gl.columns if c.startswith("|cos|")})
            gr = g[g.loss == "recon"]
            out["recon signed"] = {c.replace("cos", "|cos|"): _fmt(gr[c]) for c in gr.columns
                                   if c.startswith("cos ")}
            for loss in ("ratio", "ratio_per_example"):
                gl = g[g.loss == loss].groupby("seed").first()
                out[loss] = {c: _fmt(gl[c]) for c in gl.columns if c.startswith("|cos|")}
            print(pd.DataFrame(out).fillna("").to_string())
    # the per-seed numbers, for anyone who wants them
    return f


if __name__ == "__main__":
    main()
