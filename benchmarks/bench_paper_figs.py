"""The main job's times, measured: ``python paper_figs.py`` from a cold (empty) run cache --
the time to the headline figure (``accuracy``), to every figure, to the end -- with the
machine it ran on and its load average, the estimate the job printed before training against
what it took, and, with two modes, whether the figure CSVs agree byte for byte.

Modes (``--modes``, comma-separated, run in the order given, each in a fresh process from an
empty cache):

* ``after``: this checkout (the default);
* ``before``: the revision ``--before REV``, checked out into a temporary git worktree;
* ``one-at-a-time`` / ``lockstep``: this checkout with ``--no-lockstep`` / without.

    python benchmarks/bench_paper_figs.py --quick                      # the quick time (goal: 60 s)
    python benchmarks/bench_paper_figs.py --workers 2                  # the cold default (an hour or so)
    python benchmarks/bench_paper_figs.py --quick --modes before,after --before 086a162

Arguments other than the ones below go to paper_figs.py unchanged (--out and --cache are set
here). Everything is written under a temporary directory, removed afterwards, except the
``after`` run's cache and figures when ``--keep-after DIR`` is given (DIR/cache, DIR/figures).
"""
from __future__ import annotations

import argparse
import filecmp
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODES = {"before": [], "after": [], "one-at-a-time": ["--no-lockstep"], "lockstep": []}
HEADLINE = "accuracy"
# runs a command; prints the peak resident memory of its whole process tree (kB) and the CPU
# seconds (user + sys) of every process it waited for
WRAP = ("import resource, subprocess, sys; rc = subprocess.run(sys.argv[1:]).returncode; "
        "u = resource.getrusage(resource.RUSAGE_CHILDREN); "
        "print('PEAK_RSS_KB', u.ru_maxrss, 'CPU_S', u.ru_utime + u.ru_stime, file=sys.stderr); sys.exit(rc)")


def machine() -> str:
    """The machine in one line: CPU model, cores, memory, Python and torch."""
    cpu = platform.processor() or platform.machine()
    try:
        info = Path("/proc/cpuinfo").read_text().splitlines()
        cpu = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), cpu)
    except OSError:
        pass
    try:
        mem = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                   if line.startswith("MemTotal")) / 2 ** 20
        mem_s = f", {mem:.0f} GiB"
    except (OSError, StopIteration):
        mem_s = ""
    import torch

    return (f"{cpu}, {os.cpu_count()} cores{mem_s}; Python {platform.python_version()}, torch {torch.__version__} "
            f"({platform.system()} {platform.release()})")


def load() -> str:
    return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def checkout(rev: str, where: Path) -> Path:
    """``rev`` in a temporary worktree. The project is installed as toyspt.theory from the
    top-level theory/ folder (pyproject's package-dir); the editable install maps that name to
    *this* checkout's theory/, so the worktree gets its own toyspt/theory link, found first."""
    subprocess.run(["git", "worktree", "add", "--detach", "-q", str(where), rev], cwd=ROOT, check=True)
    link = where / "toyspt" / "theory"
    if (where / "theory").is_dir() and not link.exists():
        link.symlink_to(where / "theory", target_is_directory=True)
    return where


def run(mode: str, argv: list[str], tmp: Path, src: Path, out: Path, cache: Path) -> dict:
    if cache.exists() and any(cache.iterdir()):
        raise SystemExit(f"{mode}: the cache {cache} is not empty; a cold run needs an empty one")
    cmd = [sys.executable, "-c", WRAP, sys.executable, str(src / "paper_figs.py"), *argv, *MODES[mode],
           "--out", str(out), "--cache", str(cache)]
    env = {**os.environ, "PYTHONPATH": str(src)}
    print(f"[{time.strftime('%H:%M:%S')}] {mode}: {' '.join(cmd[3:])} ({load()})", flush=True)
    t = time.perf_counter()
    proc = subprocess.run(cmd, cwd=src, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    (tmp / f"{mode}.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise SystemExit(f"paper_figs.py failed ({mode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    line = next(line.split() for line in proc.stderr.splitlines() if line.startswith("PEAK_RSS_KB"))
    meta = json.loads((out / "metadata.json").read_text())
    written = {k: v.get("written_after_seconds") for k, v in meta.get("figures", {}).items()}
    written |= {f"{meta['contrast']['regime']}/{k}": v.get("written_after_seconds")
                for k, v in meta.get("contrast", {}).get("figures", {}).items()}
    last = meta["last_run"]
    return dict(wall=wall, cpu=float(line[3]), peak_mb=int(line[1]) / 1024, out=out, meta=meta, written=written,
                train=last["training_seconds"], runs=last.get("runs_trained"), run_seconds=last.get("run_seconds"),
                headline=written.get(HEADLINE), estimate=last.get("estimate") or {}, load_after=load())


def compare_csvs(a: Path, b: Path) -> tuple[list[str], list[str], list[str]]:
    """(identical, differing, only in one) CSV paths relative to the output folders."""
    ca = {p.relative_to(a).as_posix() for p in a.rglob("*.csv")}
    cb = {p.relative_to(b).as_posix() for p in b.rglob("*.csv")}
    same = sorted(f for f in ca & cb if filecmp.cmp(a / f, b / f, shallow=False))
    return same, sorted(ca & cb - set(same)), sorted(ca ^ cb)


def report(res: dict, modes: list[str], rest: list[str]) -> None:
    print(f"\npaper_figs.py {' '.join(rest)}  (cold cache each)\nmachine: {machine()}")
    print(f"{'mode':14s} {'wall s':>8s} {'CPU s':>8s} {'headline s':>10s} {'runs':>5s} {'run-s':>8s} "
          f"{'estimate h':>10s} {'peak MB':>8s}  load average after")
    for m, r in res.items():
        est = r["estimate"].get("wall_hours")
        print(f"{m:14s} {r['wall']:8.1f} {r['cpu']:8.1f} {r['headline'] or float('nan'):10.1f} "
              f"{str(r['runs'] or '?'):>5s} {r['run_seconds'] or float('nan'):8.1f} "
              f"{est if est is not None else float('nan'):10.3f} {r['peak_mb']:8.0f}  {r['load_after']}")
    last = res[modes[-1]]
    print(f"\n{modes[-1]}: each figure written after (s), in drawing order; the job's own clock starts after imports")
    for k, v in last["written"].items():
        print(f"  {k:24s} {v:8.1f}")
    if last["estimate"]:
        e = last["estimate"]
        print(f"  estimate before training: {e.get('runs')} runs, {e.get('cpu_hours', 0) * 60:.1f} CPU-minutes, "
              f"{e.get('wall_hours', 0) * 60:.1f} min wall (calibrated on {e.get('calibrated_on')} cached entries); "
              f"actual {last['meta']['last_run']['total_seconds'] / 60:.1f} min")
    if len(modes) >= 2:
        a, b = res[modes[0]]["out"], res[modes[-1]]["out"]
        same, differ, lone = compare_csvs(a, b)
        print(f"\nfigure CSVs byte-identical ({modes[0]} vs {modes[-1]}): {len(same)}/{len(same) + len(differ)}")
        for f in differ:
            print(f"  differs: {f}")
        for f in lone:
            print(f"  only in one of them: {f}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--modes", default="after", help=f"comma-separated, of {','.join(MODES)} (default after)")
    p.add_argument("--before", default=None, help="git revision of the 'before' mode")
    p.add_argument("--keep-after", default=None, metavar="DIR",
                   help="keep the 'after' run's cache and figures in DIR/cache and DIR/figures")
    args, rest = p.parse_known_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        raise SystemExit(f"--modes: unknown {unknown} (choose from {', '.join(MODES)})")
    if "before" in modes and not args.before:
        raise SystemExit("--modes before needs --before REV")
    print(f"machine: {machine()}; {load()}", flush=True)
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
        report(res, modes, rest)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
