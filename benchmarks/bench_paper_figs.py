"""Wall time, training time and peak memory of ``paper_figs.py`` from a cold (empty) run
cache, side by side in one call on the same machine, and whether the figure CSVs agree.

Modes (``--modes``, comma-separated, run in the order given, each in a fresh process):

* ``before``: the revision ``--before REV`` (default :data:`BEFORE`, the last revision that
  trained every phase of every run and evaluated every split every epoch), checked out into
  a temporary git worktree and run from there;
* ``after``: this checkout;
* ``one-at-a-time`` / ``lockstep``: this checkout with ``--no-lockstep`` / without.

    python benchmarks/bench_paper_figs.py --quick                         # before vs after, ~2 min
    python benchmarks/bench_paper_figs.py --workers 2                     # the full default: ~1.5 h here
    python benchmarks/bench_paper_figs.py --modes one-at-a-time,lockstep --quick --only accuracy

Arguments other than the ones below go to paper_figs.py unchanged (--out and --cache are
set here). Everything is written under a temporary directory, removed afterwards, except
the ``after`` run's cache and figures when ``--keep-after DIR`` is given (DIR/cache,
DIR/figures), so the figures of the measured run can be kept and a warm rerun timed.
"""
from __future__ import annotations

import argparse
import filecmp
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEFORE = "c1e5f0e"  # every run trained in full, every split evaluated every epoch
MODES = {"before": [], "after": [], "one-at-a-time": ["--no-lockstep"], "lockstep": []}
# runs a command and prints the peak resident memory of its whole process tree (kB): the
# maximum over the command and every descendant it waited for (getrusage RUSAGE_CHILDREN)
WRAP = ("import resource, subprocess, sys; rc = subprocess.run(sys.argv[1:]).returncode; "
        "print('PEAK_RSS_KB', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
        "sys.exit(rc)")


def checkout(rev: str, where: Path) -> Path:
    subprocess.run(["git", "worktree", "add", "--detach", "-q", str(where), rev], cwd=ROOT, check=True)
    return where


def run(mode: str, argv: list[str], tmp: Path, src: Path, out: Path, cache: Path) -> dict:
    if cache.exists() and any(cache.iterdir()):
        raise SystemExit(f"{mode}: the cache {cache} is not empty; a cold run needs an empty one")
    cmd = [sys.executable, "-c", WRAP, sys.executable, str(src / "paper_figs.py"), *argv, *MODES[mode],
           "--out", str(out), "--cache", str(cache)]
    env = {**__import__("os").environ, "PYTHONPATH": str(src)}
    print(f"[{time.strftime('%H:%M:%S')}] {mode}: {' '.join(cmd[3:])}", flush=True)
    t = time.perf_counter()
    proc = subprocess.run(cmd, cwd=src, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    (tmp / f"{mode}.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise SystemExit(f"paper_figs.py failed ({mode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    peak = next(int(line.split()[1]) for line in proc.stderr.splitlines() if line.startswith("PEAK_RSS_KB"))
    meta = json.loads((out / "metadata.json").read_text())
    return dict(wall=wall, train=meta["last_run"]["training_seconds"], peak_mb=peak / 1024, out=out,
                runs=meta["last_run"].get("runs_trained"), meta=meta)


def compare_csvs(a: Path, b: Path) -> tuple[list[str], list[str], list[str]]:
    """(identical, differing, only in one) CSV paths relative to the output folders."""
    ca = {p.relative_to(a).as_posix() for p in a.rglob("*.csv")}
    cb = {p.relative_to(b).as_posix() for p in b.rglob("*.csv")}
    same = sorted(f for f in ca & cb if filecmp.cmp(a / f, b / f, shallow=False))
    return same, sorted(ca & cb - set(same)), sorted(ca ^ cb)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--modes", default="before,after", help=f"comma-separated, of {','.join(MODES)}")
    p.add_argument("--before", default=BEFORE, help=f"git revision of the 'before' mode (default {BEFORE})")
    p.add_argument("--keep-after", default=None, metavar="DIR",
                   help="keep the 'after' run's cache and figures in DIR/cache and DIR/figures")
    args, rest = p.parse_known_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        raise SystemExit(f"--modes: unknown {unknown} (choose from {', '.join(MODES)})")
    with tempfile.TemporaryDirectory(prefix="toyspt-bench-") as tmp:
        tmp = Path(tmp)
        res = {}
        try:
            for m in modes:
                src = checkout(args.before, tmp / "before-src") if m == "before" else ROOT
                keep = Path(args.keep_after) if m == "after" and args.keep_after else None
                out, cache = (keep / "figures", keep / "cache") if keep else (tmp / m / "figures", tmp / m / "cache")
                res[m] = run(m, rest, tmp, src, out, cache)
        finally:
            if (tmp / "before-src").exists():
                subprocess.run(["git", "worktree", "remove", "--force", str(tmp / "before-src")], cwd=ROOT)
        label = f"before = {args.before}" if "before" in modes else ""
        print(f"\npaper_figs.py {' '.join(rest)}  (cold cache each; {label})")
        print(f"{'mode':14s} {'wall s':>8s} {'training s':>11s} {'runs':>5s} {'peak MB':>8s} {'x wall':>7s} "
              f"{'x train':>8s}")
        base = res[modes[0]]
        for m, r in res.items():
            print(f"{m:14s} {r['wall']:8.1f} {r['train']:11.1f} {str(r['runs'] or '?'):>5s} {r['peak_mb']:8.0f} "
                  f"{base['wall'] / r['wall']:7.2f} {base['train'] / r['train']:8.2f}")
        last = res[modes[-1]]["meta"]
        per_fig = {**{k: v for k, v in last.get("figures", {}).items() if "run_seconds" in v},
                   **{f"zero_mean/{k}": v for k, v in last.get("contrast", {}).get("figures", {}).items()
                      if "run_seconds" in v}}
        if per_fig:
            print(f"\n{modes[-1]}: training per figure (each run counted once, for the first figure that needs it)")
            for k, v in per_fig.items():
                print(f"  {k:22s} {v['runs_trained']:4d} runs {v['run_seconds']:8.1f} s")
        if len(modes) >= 2:
            a, b = res[modes[0]]["out"], res[modes[-1]]["out"]
            same, differ, lone = compare_csvs(a, b)
            print(f"\nfigure CSVs byte-identical ({modes[0]} vs {modes[-1]}): {len(same)}/{len(same) + len(differ)}")
            for f in differ:
                print(f"  differs: {f}")
            for f in lone:
                print(f"  only in one of them: {f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
