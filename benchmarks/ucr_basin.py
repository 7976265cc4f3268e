"""Which basin SPT lands in on the paper's UCR sets, and which predictor names it: SPT-only
runs with the ``beta`` tracker (:class:`toyspt.probe.basin.BetaTracker`), through the run cache.

    python benchmarks/ucr_basin.py                          # the four paper sets, seeds 0-4
    python benchmarks/ucr_basin.py --dataset GunPoint --seeds 0-9 --workers 2

Per (set, seed): the data's ``beta_unif`` (the gain of a masked value on the uniform visible
mean, exact over the mask law), the same statistic on the series with a per-series random
offset added (std ``--offset``; what z-normalisation removes), the model's beta at init and
after SPT epochs 1 and 3 and at the end, and the proximity index after SPT (> 1 proximity,
< 1 anti-local). Then, per predictor, in how many runs its sign names the basin.

Why the offset column: every UCR series is z-normalised, so it sums to 0, and then
beta_unif is ``-E[n] / E[n^2 / (T - n)]`` over the mask law (n masked positions), a constant
of the length and mask rate whatever the data (tests/test_basin.py).
"""
from __future__ import annotations

import argparse

import pandas as pd
import torch

from toyspt.probe.basin import beta_unif
from toyspt.cli.flags import parse_seeds
from toyspt.figs.ucr import proximity_after_spt
from toyspt.runs import DEFAULT_CACHE, RunCache, sweep
from toyspt.ucr.data import PAPER_DATASETS, load_ucr
from toyspt.ucr.runs import ucr_spec

EPOCHS = (1, 3)  # SPT epochs after which the model's beta is read


def offset_beta(x: torch.Tensor, mask_rate: float, std: float, seed: int = 0) -> float:
    """beta_unif of ``x`` with one N(0, std^2) offset added to each whole series."""
    g = torch.Generator().manual_seed(seed)
    return beta_unif(x + std * torch.randn(len(x), 1, 1, generator=g, dtype=x.dtype), mask_rate)


def rows(datasets, seeds, cache, workers, offset) -> pd.DataFrame:
    loaded = [load_ucr(name) for name in datasets]
    specs = [(d, ucr_spec("spt_only", d, seed, trackers=("beta",))) for d in loaded for seed in seeds]
    results = sweep([s for _, s in specs], cache, workers=workers, desc="SPT-only runs (beta tracker)")
    shifted = {d.config.name: offset_beta(d.train.x, specs[0][1].train.mask_rate, offset) for d in loaded}
    out = []
    for (d, spec), res in zip(specs, results):
        beta = {r["epoch"]: float(r["value"]) for r in res.records if r["metric"] == "beta"}
        pi = proximity_after_spt(d, res)
        out.append(dict(dataset=d.config.name, seed=spec.seed,
                        beta_unif=next(float(r["value"]) for r in res.records if r["metric"] == "beta_unif"),
                        beta_unif_offset=shifted[d.config.name],
                        beta_init=beta[0], **{f"beta_epoch{e}": beta.get(e, float("nan")) for e in EPOCHS},
                        beta_final=beta[max(beta)], proximity_index=pi,
                        basin="proximity" if pi > 1 else "anti-local"))
    return pd.DataFrame(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default=",".join(PAPER_DATASETS), help="comma-separated UCR names")
    p.add_argument("--seeds", default="0-4")
    p.add_argument("--offset", type=float, default=1.0, help="std of the per-series offset (z-units)")
    p.add_argument("--cache", default=DEFAULT_CACHE)
    p.add_argument("--workers", type=int, default=1)
    args = p.parse_args(argv)
    df = rows([n for n in args.dataset.split(",") if n], parse_seeds(args.seeds), RunCache(args.cache),
              args.workers, args.offset)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(df.to_string(index=False, float_format=lambda v: f"{v:+.3f}"))
    prox = df.proximity_index > 1
    print(f"\nbasin: proximity in {int(prox.sum())}/{len(df)} runs")
    for col in ("beta_unif", "beta_unif_offset", "beta_init", *(f"beta_epoch{e}" for e in EPOCHS), "beta_final"):
        ok = ((df[col] > 0) == prox).sum()
        print(f"  sign({col}) names the basin in {ok}/{len(df)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
