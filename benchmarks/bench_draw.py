"""Each figure's drawing time from a filled run cache, in two parts: ``draw`` (the figure's own
computing and matplotlib's figure building) and ``write`` (rendering PNG and PDF, the CSVs), CPU
and wall seconds, on ``--threads`` torch threads. Nothing trains: the cache must hold the
figures' runs (run ``python paper_figs.py --quick --cache DIR`` first).

    python benchmarks/bench_draw.py --cache /tmp/qc                      # quick figures, one thread
    python benchmarks/bench_draw.py --cache /tmp/qc --threads 2 --only proximity,ucr
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import torch

from toyspt.figs import FIGURES, FigContext, in_tier, load, write
from toyspt.runs import RunCache, sweep
from toyspt.runs.sweeps import SweepOptions
from toyspt.util import plots


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cache", required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--only", default=None)
    p.add_argument("--full", action="store_true", help="the full figures (default: quick)")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    plots.style()
    names = args.only.split(",") if args.only else [n for n in FIGURES if in_tier(load(n), "default")]
    cache = RunCache(args.cache)
    print(f"{args.threads} thread(s); load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'figure':14s} {'draw CPU s':>10s} {'draw wall s':>11s} {'write CPU s':>11s} {'write wall s':>12s}")
    with tempfile.TemporaryDirectory() as out:
        ctx = FigContext(out=Path(out), seeds=(0, 1, 2, 3, 4) if args.full else (0, 1), quick=not args.full,
                         cache=cache)
        total = [0.0, 0.0]
        for n in names:
            mod = load(n)
            specs = mod.specs(ctx)
            runs = dict(zip(specs, sweep(list(specs.values()), cache, options=SweepOptions(progress=False))))
            c, w = time.process_time(), time.perf_counter()
            drawn = mod.draw(ctx, runs)
            c1, w1 = time.process_time(), time.perf_counter()
            write(ctx, mod, drawn)
            c2, w2 = time.process_time(), time.perf_counter()
            total[0] += c1 - c
            total[1] += c2 - c1
            print(f"{n:14s} {c1 - c:10.2f} {w1 - w:11.2f} {c2 - c1:11.2f} {w2 - w1:12.2f}", flush=True)
        print(f"{'total':14s} {total[0]:10.2f} {'':11s} {total[1]:11.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
