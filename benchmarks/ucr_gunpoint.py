"""What SPT learns on a real UCR set: per-seed proximity index of the SPT (pretrained) and
final weights next to the accuracies, through the run cache (trains what is missing).

    python benchmarks/ucr_gunpoint.py                       # GunPoint, scratch + spt, seeds 0-4
    python benchmarks/ucr_gunpoint.py --dataset ECG200 --ucr-root ~/UCRArchive_2018
    python benchmarks/ucr_gunpoint.py --recipes scratch,spt,qk_transfer --cache /tmp/fresh

Per (arm, seed): proximity index (toyspt.probe.tracking: attention mass on the two nearest
neighbours each side relative to uniform; 1 = uniform, > 1 proximity, < 1 anti-local) of
the init, pretrained (SPT recipes) and final weights on the train + validation inputs,
the centre of the positional score profile (row-centred scores on the mean input at
offsets -1, 0, +1 minus their mean at |offset| = 50), and test accuracy at peak
validation / final. SPT runs are split into basins by the pretrained proximity index.
Prints the wall and CPU seconds spent training (0 when everything was cached).
"""
from __future__ import annotations

import argparse
import time

import pandas as pd
import torch

from toyspt.cli.flags import parse_seeds
from toyspt.probe import tracking as tr
from toyspt.runs import DEFAULT_CACHE, RunCache, sweep
from toyspt.train.run import load_model
from toyspt.ucr.data import UCRConfig, load_ucr
from toyspt.ucr.runs import arm_spec, ucr_spec

FAR = 50  # offset whose positional score serves as the "far" baseline


def local_contrast(model, T: int) -> float:
    """Mean row-centred positional score at offsets -1..1 minus that at offsets +-FAR."""
    p = next(iter(tr.positional_profile(model, T).values())).mean(0)  # (2T-1,), over heads
    c = T - 1  # index of offset 0
    far = min(FAR, T - 1)
    return (p[c - 1:c + 2].mean() - p[[c - far, c + far]].mean()).item()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="GunPoint")
    ap.add_argument("--ucr-root", default=None)
    ap.add_argument("--recipes", default="scratch,spt")
    ap.add_argument("--seeds", type=parse_seeds, default=parse_seeds("0-4"))
    ap.add_argument("--cache", default=str(DEFAULT_CACHE))
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    data = load_ucr(UCRConfig(name=args.dataset, root=args.ucr_root))
    base = ucr_spec("scratch", data)
    specs = [(arm, arm_spec(arm, ucr_spec("scratch", data, seed=s))) for arm in args.recipes.split(",")
             for s in args.seeds]
    t0, c0 = time.time(), time.process_time()
    results = sweep([s for _, s in specs], RunCache(args.cache), desc="ucr runs")
    wall, cpu = time.time() - t0, time.process_time() - c0
    x = torch.cat([data.train.x, data.val.x])
    rows = []
    for (arm, spec), res in zip(specs, results):
        row = dict(arm=arm, seed=spec.seed, test_at_peak=res.summary["test_at_peak"],
                   final_test=res.summary["final_test_acc"])
        for which in ("init", "pretrained", "final"):
            if which in res.states:
                m = load_model(res, which)
                row[f"PI_{which}"] = tr.proximity_index(next(iter(tr.attention_maps(m, x).values()))).mean().item()
                row[f"local_{which}"] = local_contrast(m, data.length)
        rows.append(row)
    f = pd.DataFrame(rows)
    if "PI_pretrained" in f:
        f["basin"] = f.PI_pretrained.map(lambda v: "" if pd.isna(v) else ("proximity" if v > 1 else "anti-local"))
    print(f"{data.config.name} ({data.source}): train {len(data.train)}, val {len(data.val)}, test "
          f"{len(data.test)}, T={data.length}; train config {base.train}")
    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.precision", 3):
        print(f.to_string(index=False))
        if "basin" in f:
            print(f[f.basin != ""].groupby(["arm", "basin"])[["test_at_peak", "final_test", "PI_pretrained"]]
                  .agg(["median", "min", "max", "count"]))
    print(f"training: {wall:.1f}s wall, {cpu:.1f}s CPU (0 when every run was cached)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
