"""``toyspt probe``: the label/recon blindness table of one run's weights.

    toyspt probe --recipe spt --at final --seed 0 --n 256
    toyspt probe --at init --model.qk_init_scale 0 --model.d_mlp 0 --model.final_norm false

``--at init`` builds the seed's initial model without training (the same weights as the
run's ``init`` state); ``final`` and ``pretrained`` come from the run cache (trained when
missing). The probe batch is the first ``--n`` training sequences with a mask drawn from
``--mask-seed`` at the run's mask rate; the recon loss uses the run's reconstruction loss
and SPT attention option. Everything is computed in float64.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from toyspt.data.directions import DEFAULT
from toyspt.probe import engine as pr
from toyspt.probe import losses as toy_losses
from toyspt.probe.results import Blindness

AT = ("init", "pretrained", "final")


def _model(args, spec):
    from toyspt.nn.model import build_model
    from toyspt.runs import RunCache, get_run
    from toyspt.train.recipes import PRETRAINED
    from toyspt.train.run import load_model

    if args.at == "init":
        return build_model(spec.model, spec.seed)
    if args.at == "pretrained" and spec.recipe not in PRETRAINED:
        raise ValueError(f"recipe {spec.recipe!r} has no pretrained weights; choose one of {PRETRAINED}")
    res = get_run(spec, RunCache(args.cache), recompute=args.recompute, progress=True)
    return load_model(res, args.at, spec.model)


def summary_frame(bl: Blindness) -> pd.DataFrame:
    """Per loss, layer and head: row heterogeneity and column-only / blind energy shares."""
    rows = []
    for res in (bl.label, bl.recon):
        for lp in res.layers:
            for h in range(lp.G.shape[0]):
                rows.append(dict(loss=res.loss, layer=lp.site, head=h,
                                 row_heterogeneity=lp.row_heterogeneity[h].item(),
                                 column_share=lp.column_share[h].item(),
                                 blind_share=lp.blind_share[h].item(),
                                 dLdM_sv2_over_sv1=(lp.qk.dLdM_sv[h, 1] / lp.qk.dLdM_sv[h, 0]).item()
                                 if lp.qk is not None else float("nan")))
    return pd.DataFrame(rows)


def cmd_probe(args) -> int:
    from toyspt.cli.flags import base_spec
    from toyspt.runs.arms import arm_spec

    spec = arm_spec(args.recipe, base_spec(args, seed=args.seed))
    data = spec.data.load()
    if not 0 < args.n <= len(data.train):
        raise ValueError(f"--n must be in 1..{len(data.train)}, got {args.n}")
    batch = toy_losses.make_batch(data.train.x[:args.n], data.train.y[:args.n], spec.train.mask_rate, args.mask_seed)
    losses = {"label": toy_losses.label_loss, "recon": toy_losses.recon(spec.train.recon, spec.train.spt_attention)}
    dirs = [d for d in args.directions.split(",") if d]
    bl = pr.blindness(_model(args, spec), batch, dirs, losses=losses)
    table, summary = bl.table(), summary_frame(bl)
    print(f"probe: recipe={args.recipe} seed={args.seed} at={args.at} n={args.n} "
          f"mask_seed={args.mask_seed} (float64)")
    print("ratio = |cos_label| / |cos_recon|, cos = <dL/dS, D> / (||dL/dS|| ||D||), D row-centred")
    with pd.option_context("display.float_format", "{:.3g}".format, "display.width", 200):
        print(table.to_string(index=False))
        print()
        print(summary.to_string(index=False))
    if args.out:
        from toyspt.util.atomic import write_text

        out = Path(args.out)
        write_text(out / "blindness.csv", table.to_csv(index=False))
        write_text(out / "gradient_summary.csv", summary.to_csv(index=False))
        print(f"wrote {out}/blindness.csv, gradient_summary.csv")
    return 0


def register(sub) -> None:
    """Add the ``probe`` subcommand to the ``toyspt`` parser's subparsers."""
    from toyspt.cli.flags import add_cache_flags, add_config_flags, ascii_int, nonnegative_int, out_dir, positive_int

    p = sub.add_parser("probe", help="label/recon gradient-blindness table of a run's weights",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--recipe", default="spt", help="recipe or arm, e.g. spt, scratch")
    p.add_argument("--at", choices=AT, default="final", help="which weights to probe")
    p.add_argument("--seed", type=nonnegative_int, default=0)
    p.add_argument("--n", type=positive_int, default=256, help="training sequences in the probe batch")
    p.add_argument("--mask-seed", type=ascii_int, default=0, help="seed of the SPT mask of the probe batch")
    p.add_argument("--directions", default=",".join(DEFAULT),
                   help="comma-separated direction names (toyspt.data.directions)")
    p.add_argument("--out", type=out_dir, default=None, help="directory for blindness.csv and gradient_summary.csv")
    add_cache_flags(p)
    add_config_flags(p)
    p.set_defaults(func=cmd_probe)


__all__ = ["register", "cmd_probe", "summary_frame"]
