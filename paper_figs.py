"""Regenerate every mechanistic figure of toyspt from real, cached runs.

    python paper_figs.py                 # full figures into figures/ (5 seeds)
    python paper_figs.py --quick         # small smoke version into figures-quick/ (stamped QUICK)
    python paper_figs.py --only accuracy,ablations --workers 2

Each figure is written as PNG and PDF with a CSV of the plotted numbers beside it;
``metadata.json`` records the git revision, torch version, device, seeds, quick or not and
the time each figure took. Finished runs are reused from the cache (``--cache``).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import torch

from toyspt import plots
from toyspt.cli import parse_seeds
from toyspt.figs import FIGURES, FigContext, load
from toyspt.engines import executor_scope
from toyspt.runs import DEFAULT_CACHE, RunCache, sweep


def git_revision() -> str:
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             cwd=Path(__file__).parent, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, cwd=Path(__file__).parent).stdout.strip()
        return rev + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default=None, help=f"comma-separated subset of {','.join(FIGURES)}")
    p.add_argument("--quick", action="store_true", help="few seeds and epochs: a smoke test, stamped QUICK")
    p.add_argument("--seeds", type=parse_seeds, default=None, help="seeds (default 0-4, quick 0-1)")
    p.add_argument("--out", default=None, help="output directory (default figures/, quick figures-quick/)")
    p.add_argument("--cache", default=str(DEFAULT_CACHE), help="run cache directory")
    p.add_argument("--recompute", action="store_true", help="retrain runs even when cached")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                   help="parallel training processes (default: one per CPU core)")
    p.add_argument("--dask", default=None, metavar="ADDRESS",
                   help="train on a dask.distributed scheduler (tcp://host:8786) or 'local' (dask extra)")
    p.add_argument("--no-vectorize", action="store_true",
                   help="train seeds one at a time (results are bitwise identical, only slower)")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    names = FIGURES if args.only is None else tuple(n for n in args.only.split(",") if n)
    unknown = [n for n in names if n not in FIGURES]
    if unknown:
        print(f"error: unknown figure(s) {unknown}; figures are {', '.join(FIGURES)}", file=sys.stderr)
        return 2
    out = Path(args.out or ("figures-quick" if args.quick else "figures"))
    seeds = tuple(args.seeds or ((0, 1) if args.quick else (0, 1, 2, 3, 4)))
    ctx = FigContext(out=out, seeds=seeds, quick=args.quick, cache=RunCache(args.cache),
                     workers=args.workers)
    plots.style()
    mods = {n: load(n) for n in names}
    t0 = time.time()
    specs = [s for m in mods.values() for s in m.specs(ctx)]
    with executor_scope(args.workers, args.dask) as ex:
        results = sweep(specs, ctx.cache, workers=args.workers, executor=ex, recompute=args.recompute,
                        desc="training runs", vectorize=not args.no_vectorize)
    by_key = {s.key(): r for s, r in zip(specs, results)}
    train_s = time.time() - t0
    timings = {}
    for name, mod in mods.items():
        t = time.time()
        runs = {s.key(): by_key[s.key()] for s in mod.specs(ctx)}
        frame = mod.draw(ctx, runs)
        missing = [c for c in mod.COLUMNS if c not in frame.columns]
        if missing:
            raise RuntimeError(f"figure {name}: CSV lacks documented columns {missing}")
        plots.save_csv(frame, out, name)
        timings[name] = round(time.time() - t, 2)
        print(f"{name:13s} {timings[name]:7.1f}s  -> {out / name}.png/.pdf/.csv", flush=True)
    meta_path = out / "metadata.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    if meta.get("quick", args.quick) != args.quick:
        meta = {}  # never mix quick and full metadata
    meta.update(git_revision=git_revision(), torch=torch.__version__, python=platform.python_version(),
                device="cpu", threads=torch.get_num_threads(), seeds=list(seeds), quick=args.quick,
                workers=args.workers, dask=args.dask, vectorize=not args.no_vectorize, cache=str(args.cache))
    meta.setdefault("figures", {})
    for name in mods:
        meta["figures"][name] = dict(draw_seconds=timings[name], **ctx.meta.get(name, {}))
    meta["last_run"] = dict(figures=list(mods), training_seconds=round(train_s, 1),
                            total_seconds=round(time.time() - t0, 1))
    plots.write_text(meta_path, json.dumps(meta, indent=1))
    print(f"done in {time.time() - t0:.1f}s (training {train_s:.1f}s); metadata in {meta_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
