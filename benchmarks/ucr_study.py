"""Train (or find in the cache) every run of the real-data study (toyspt.ucr.study): SPT-only
basin runs with the beta and profile trackers, and scratch / spt / qk_transfer / ALiBi /
FIRE / RoPE label runs on the paper's four UCR sets; the same specs the ``ucr`` and
``real_data`` figures ask for, so ``python paper_figs.py --only real_data,ucr`` then draws
from the cache.

    python benchmarks/ucr_study.py [--part basin|label|all] [--quick] [--workers 1] [--cache DIR]
"""
from __future__ import annotations

import argparse
import time

import torch

from toyspt.runs import RunCache, sweep
from toyspt.runs.cache import DEFAULT_CACHE
from toyspt.ucr.data import PAPER_DATASETS, load_ucr
from toyspt.ucr.study import basin_specs, label_specs, plan


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--part", choices=("basin", "label", "all"), default="all")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--cache", default=str(DEFAULT_CACHE))
    a = p.parse_args()
    torch.set_num_threads(1)
    datasets = [load_ucr(n) for n in PAPER_DATASETS]
    pl = plan(a.quick)
    specs = []
    if a.part in ("basin", "all"):
        specs += [s for _, s in basin_specs(datasets, pl)]
    if a.part in ("label", "all"):
        specs += [s for *_, s in label_specs(datasets, pl)]
    t0, trained = time.time(), {}
    sweep(specs, RunCache(a.cache), workers=a.workers, desc="ucr study", trained=trained)
    print(f"{len(specs)} specs, {len(trained)} runs trained, {sum(v or 0 for v in trained.values()):.1f} "
          f"run-seconds, {time.time() - t0:.1f} s wall", flush=True)


if __name__ == "__main__":
    main()
