"""What training did to W_Q, W_K and the attention, read from cached runs (trains nothing
unless ``--train``).

    python benchmarks/displacement_proximity.py --recipes scratch,spt,qk_transfer --seeds 0-4
    python benchmarks/displacement_proximity.py --train.optimizer sgd --train.lr 0.05 --seeds 0

Per run (arm, seed): relative Frobenius displacement of W_Q and W_K from the global init
(final weights; for SPT recipes also the pretrained weights), and the proximity index
(toyspt.probe.tracking) of the final and pretrained models on the task's validation inputs.
SPT runs are split into basins by the pretrained model's proximity index (> 1 proximity,
< 1 anti-local). Prints per-seed rows and median [min, max] per arm (and basin).
"""
from __future__ import annotations

import argparse

import pandas as pd
import torch

from toyspt.cli.flags import add_config_flags, base_spec, parse_seeds
from toyspt.data.tasks import make_task
from toyspt.probe import tracking
from toyspt.runs import DEFAULT_CACHE, RunCache, get_run
from toyspt.runs.arms import arm_spec
from toyspt.train.run import load_model


def _pi(result, which, x) -> float:
    A = tracking.attention_maps(load_model(result, which), x)
    return tracking.proximity_index(next(iter(A.values()))).mean().item()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recipes", default="scratch,spt,qk_transfer")
    ap.add_argument("--seeds", type=parse_seeds, default=parse_seeds("0-4"))
    ap.add_argument("--cache", default=str(DEFAULT_CACHE))
    ap.add_argument("--train", action="store_true", help="train runs missing from the cache")
    add_config_flags(ap)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    cache = RunCache(args.cache)
    base = base_spec(args)
    x = make_task(base.task).val.x[:tracking.PROFILE_BATCH]
    rows, missing = [], []
    for arm in filter(None, args.recipes.split(",")):
        for seed in args.seeds:
            spec = arm_spec(arm, base_spec(args, seed=seed))
            res = get_run(spec, cache) if args.train else cache.load(spec)
            if res is None:
                missing.append(f"{arm}/s{seed}")
                continue
            st = res.states
            row = dict(arm=arm, seed=seed, test_at_peak=res.summary["test_at_peak"],
                       rel_WQ=tracking.relative_displacement(st["final"], st["init"], "W_Q"),
                       rel_WK=tracking.relative_displacement(st["final"], st["init"], "W_K"),
                       PI_final=_pi(res, "final", x))
            if "pretrained" in st:
                row.update(rel_WQ_pre=tracking.relative_displacement(st["pretrained"], st["init"], "W_Q"),
                           rel_WK_pre=tracking.relative_displacement(st["pretrained"], st["init"], "W_K"),
                           PI_pre=_pi(res, "pretrained", x))
                row["basin"] = "proximity" if row["PI_pre"] > 1 else "anti-local"
            rows.append(row)
    print(f"optimizer={base.train.optimizer} lr={base.train.lr} task={base.task.family} T={base.task.T}")
    if missing:
        print(f"not in the cache (use --train): {', '.join(missing)}")
    if not rows:
        return 1
    f = pd.DataFrame(rows)
    with pd.option_context("display.float_format", "{:.3f}".format, "display.width", 200):
        print(f.to_string(index=False))
        keys = ["arm", "basin"] if "basin" in f else ["arm"]
        g = f.assign(basin=f.get("basin", pd.Series(index=f.index, dtype=object)).fillna("-"))
        summ = g.groupby(keys if "basin" in f else ["arm"], sort=False).agg(
            lambda s: f"{s.median():.3g} [{s.min():.3g}, {s.max():.3g}]" if s.dtype.kind == "f" else len(s))
        print()
        print(summ.drop(columns=[c for c in ("seed",) if c in summ]).to_string())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
