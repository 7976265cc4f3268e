"""Regenerate every mechanistic figure of toyspt from real, cached runs
(``python paper_figs.py`` or ``toyspt figs``; the same flags).

    python paper_figs.py                 # full figures into figures/ (5 seeds)
    python paper_figs.py --quick         # small smoke version into figures-quick/ (stamped QUICK)
    python paper_figs.py --only accuracy,ablations --workers 2

Each figure is written as PNG and PDF with a CSV of the plotted numbers beside it;
``metadata.json`` records the git revision, torch version, device, seeds, quick or not and
the time each figure took. Every figure's runs (toy, UCR, LRA demo) go through one sweep
and the run cache (``--cache``, ``--recompute``, ``--workers``, ``--dask``). Figures train
cheapest first and each is written as soon as its runs are stored, while the rest trains
(:mod:`toyspt.figs.schedule`); the progress bar names the figure in training and its ETA.
"""
from __future__ import annotations

import argparse
import json
import platform
import subprocess
import time
from pathlib import Path

import torch
from tqdm.auto import tqdm

from toyspt.cli.flags import (
    add_numerics_flag,
    add_seeds,
    add_sweep_flags,
    default_workers,
    numerics_of,
    out_dir,
    run_main,
)
from toyspt.figs import CONTRAST, FIGURES, TIERS, FigContext, in_tier, load, render
from toyspt.figs.schedule import Drawer, order
from toyspt.runs import RunCache, sweep
from toyspt.util import plots
from toyspt.util.atomic import write_text

ROOT = Path(__file__).resolve().parent.parent  # the checkout (for the git revision)


def git_revision() -> str:
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             cwd=ROOT, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, cwd=ROOT).stdout.strip()
        return rev + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def machine_info() -> dict:
    """What decides bitwise identity of the runs: CPU model and vector flags, the torch build
    (BLAS, oneDNN, compiler flags), thread counts."""
    cpu, flags = platform.processor() or "unknown", []
    try:
        info = Path("/proc/cpuinfo").read_text().splitlines()
        cpu = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), cpu)
        all_flags = next((line.split(":", 1)[1].split() for line in info if line.startswith("flags")), [])
        flags = sorted(f for f in all_flags if f.startswith(("avx", "amx", "fma", "sse4", "f16c")))
    except OSError:
        pass
    return dict(machine=platform.machine(), cpu=cpu, cpu_vector_flags=flags, torch_build=torch.__config__.show(),
                torch_parallel=torch.__config__.parallel_info(), mkldnn=torch.backends.mkldnn.is_available(),
                training_threads=1, numpy=__import__("numpy").__version__)


def peak_memory_mb() -> dict[str, float]:
    """Peak resident memory of this process and of the largest finished worker process."""
    import resource

    kb = 1024.0  # ru_maxrss is in kilobytes on Linux
    return dict(peak_rss_mb_main=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / kb, 1),
                peak_rss_mb_worker=round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / kb, 1))


def compute_by_figure(planned: dict[str, list], trained: dict[str, float]) -> dict[str, dict]:
    """The runs this call trained, and their training seconds, per figure (``planned``: each
    figure's label and specs, in drawing order): each run counts for the first figure that
    needs it, directly, as the run answering one of its specs, or as the run one of its
    runs continues."""
    owner: dict[str, str] = {}
    for label, specs in planned.items():
        for s in specs:
            x = s
            while x is not None:
                for y in (x, *x.alternatives()):
                    owner.setdefault(y.key(), label)
                x = x.parent()
    out: dict[str, dict] = {}
    for key, sec in trained.items():
        d = out.setdefault(owner.get(key, "?"), dict(runs_trained=0, run_seconds=0.0))
        d["runs_trained"] += 1
        d["run_seconds"] += sec or 0.0
    for d in out.values():
        d["run_seconds"] = round(d["run_seconds"], 1)  # rounded once: each figure's sum is within 0.05 s
    return out


def add_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--only", default=None, help=f"comma-separated subset of {','.join(FIGURES)}")
    p.add_argument("--quick", action="store_true", help="few seeds and epochs: a smoke test, stamped QUICK")
    p.add_argument("--tier", choices=TIERS, default="default",
                   help="the real-data study's tier: 'study' trains its powered runs (hours; the cost is printed "
                        "before training starts) and adds the real_gain and archive_scan figures (default: default)")
    add_seeds(p, None, help="seeds, e.g. 0-4 or 0,2 (default 0-4, quick 0-1)")
    p.add_argument("--out", type=out_dir, default=None,
                   help="output directory (default figures/, quick figures-quick/)")
    p.add_argument("--compare-to", default=None, metavar="DIR",
                   help="after drawing, compare every CSV with DIR's at the level of arm means "
                        "(toyspt.figs.check: stated tolerances); exit 1 when one disagrees")
    p.add_argument("--contrast", action=argparse.BooleanOptionalAction, default=None,
                   help=f"draw the zero-mean contrast of {', '.join(CONTRAST)} into OUT/zero_mean/ "
                        "(default: yes, except with --quick)")
    add_sweep_flags(p, workers=default_workers())
    add_numerics_flag(p)


def select(only: str | None, tier: str = "default") -> tuple[str, ...]:
    """The figures ``--only`` names (all of the tier when None); a clear error for unknown or no
    names, and for a figure the tier does not draw."""
    if only is None:
        return tuple(n for n in FIGURES if in_tier(load(n), tier))
    names = tuple(n for n in only.split(",") if n)
    if not names:
        raise ValueError(f"--only: no figure named in {only!r}; figures are {', '.join(FIGURES)}")
    unknown = [n for n in names if n not in FIGURES]
    if unknown:
        raise ValueError(f"--only: unknown figure(s) {unknown}; figures are {', '.join(FIGURES)}")
    other = [n for n in names if not in_tier(load(n), tier)]
    if other:
        raise ValueError(f"--only: {other[0]} is drawn in the {' or '.join(load(other[0]).TIERS)} tier only "
                         f"(--tier {load(other[0]).TIERS[0]})")
    return names


def make(args: argparse.Namespace) -> int:
    names = select(args.only, args.tier)
    out = Path(args.out or ("figures-quick" if args.quick else "figures"))
    seeds = tuple(args.seeds or ((0, 1) if args.quick else (0, 1, 2, 3, 4)))
    cache = RunCache(args.cache)
    numerics = numerics_of(args)
    ctx = FigContext(out=out, seeds=seeds, quick=args.quick, cache=cache, numerics=numerics, tier=args.tier)
    contrast = FigContext(out=out / "zero_mean", seeds=seeds, quick=args.quick, cache=cache, regime="zero_mean",
                          numerics=numerics)
    with_contrast = (not args.quick) if args.contrast is None else args.contrast
    # (label as metadata names it, context, figure), in drawing order
    jobs = [(n, ctx, n) for n in names] + ([(f"{contrast.regime}/{n}", contrast, n) for n in names if n in CONTRAST]
                                           if with_contrast else [])
    plots.style()
    mods = {n: load(n) for n in names}
    t0 = time.time()
    planned = {label: mods[n].specs(c) for label, c, n in jobs}  # each figure's specs, once
    where = {label: (c, mods[n]) for label, c, n in jobs}
    drawing, charges = order(planned, lambda s: not args.recompute and any(
        cache.path(x).exists() for x in (s, *s.alternatives())))  # cheapest first
    timings: dict[str, float] = {}

    def draw(label, c, mod, specs, results):
        t = time.time()
        render(c, mod, specs, results)
        timings[label] = round(time.time() - t, 2)
        tqdm.write(f"{label:22s} {timings[label]:7.1f}s  -> {c.out / mod.NAME}.png/.pdf/.csv "
                   f"({time.time() - t0:.0f}s after start)")

    # each figure is drawn as soon as the sweep hands over its last result, while the rest trains
    drawer = Drawer({label: (*where[label], planned[label]) for label in drawing}, draw, charges, start=t0)
    trained: dict[str, float] = {}
    sweep([s for label in drawing for s in planned[label].values()], cache, workers=args.workers, dask=args.dask,
          recompute=args.recompute, desc=drawer.describe, lockstep=not args.no_lockstep, trained=trained,
          on_result=drawer.add)
    unwritten = [label for label in drawing if label not in drawer.written]
    if unwritten:
        raise RuntimeError(f"figures {unwritten} did not get all their results")
    train_s = time.time() - t0 - sum(timings.values())
    compute = compute_by_figure({k: list(planned[k].values()) for k in drawing}, trained)
    meta_path = out / "metadata.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    if meta.get("quick", args.quick) != args.quick:
        meta = {}  # never mix quick and full metadata
    meta.update(git_revision=git_revision(), torch=torch.__version__, python=platform.python_version(),
                device="cpu", threads=torch.get_num_threads(), seeds=list(seeds), quick=args.quick, tier=args.tier,
                workers=args.workers, dask=args.dask, lockstep=not args.no_lockstep, cache=str(args.cache))
    meta.setdefault("figures", {})
    for name in mods:
        meta["figures"][name] = dict(draw_seconds=timings[name], written_after_seconds=drawer.written[name],
                                     **compute.get(name, {}), **ctx.meta.get(name, {}))
    if with_contrast:
        meta.setdefault("contrast", dict(regime=contrast.regime, out="zero_mean", figures={}))
        for name in mods:
            if name in CONTRAST:
                label = f"{contrast.regime}/{name}"
                meta["contrast"]["figures"][name] = dict(draw_seconds=timings[label],
                                                         written_after_seconds=drawer.written[label],
                                                         **compute.get(label, {}), **contrast.meta.get(name, {}))
    meta["reproducibility"] = machine_info()
    memory = peak_memory_mb()
    first = min((drawer.written[k] for k in drawing if compute.get(k, {}).get("runs_trained")), default=None)
    meta["last_run"] = dict(figures=list(mods), drawing_order=drawing, training_seconds=round(train_s, 1),
                            total_seconds=round(time.time() - t0, 1), first_trained_figure_seconds=first,
                            runs_trained=len(trained),
                            run_seconds=round(sum(v or 0.0 for v in trained.values()), 1), **memory)
    write_text(meta_path, json.dumps(meta, indent=1))
    print(f"done in {time.time() - t0:.1f}s (training {train_s:.1f}s, {len(trained)} runs trained); peak memory "
          f"{memory['peak_rss_mb_main']:.0f} MB (this process), {memory['peak_rss_mb_worker']:.0f} MB (largest "
          f"worker); metadata in {meta_path}")
    if args.compare_to:
        from toyspt.figs.check import ATOL, RTOL, compare_dirs, summary

        report = compare_dirs(out, Path(args.compare_to))
        plots.save_csv(report, out, "compare_to")
        print(f"arm means against {args.compare_to} (agree when |new - ref| <= {ATOL} + {RTOL} |ref|):")
        print(summary(report))
        return 0 if bool(report.ok.all()) else 1
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python paper_figs.py", description=__doc__.splitlines()[0])
    add_flags(p)
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # argparse: usage errors exit 2 (--help exits 0)
        return e.code if isinstance(e.code, int) else 2
    return run_main(lambda: make(args))


def register(sub) -> None:
    """``toyspt figs``: the same as ``python paper_figs.py``."""
    p = sub.add_parser("figs", help="regenerate the paper figures (the same as python paper_figs.py)",
                       description=__doc__.splitlines()[0])
    add_flags(p)
    p.set_defaults(func=make)


__all__ = ["main", "make", "register", "select", "git_revision", "build_parser"]
