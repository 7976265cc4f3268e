"""Wall time of ``paper_figs.py`` from a cold (empty, temporary) run cache, with the seeds
of each arm trained one at a time and trained together (``sweep(vectorize=True)``), each in
a fresh process; checks that both give the same figure CSVs byte for byte.

    python benchmarks/bench_paper_figs.py --quick --only accuracy         # ~1 minute here
    python benchmarks/bench_paper_figs.py --only accuracy,ablations,proximity --workers 2
    python benchmarks/bench_paper_figs.py                                  # the full default: hours

Arguments other than --modes go to paper_figs.py unchanged (--out and --cache are set
here). Nothing is written outside a temporary directory, which is removed afterwards.
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
MODES = {"one-at-a-time": ["--no-vectorize"], "vectorized": []}  # extra paper_figs.py flags


def run(mode: str, argv: list[str], tmp: Path) -> dict:
    out, cache = tmp / mode / "figures", tmp / mode / "cache"
    cmd = [sys.executable, str(ROOT / "paper_figs.py"), *argv, *MODES[mode], "--out", str(out), "--cache", str(cache)]
    t = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"paper_figs.py failed ({mode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    meta = json.loads((out / "metadata.json").read_text())
    return dict(wall=wall, train=meta["last_run"]["training_seconds"], out=out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--modes", default=",".join(MODES), help=f"comma-separated subset of {','.join(MODES)}")
    args, rest = p.parse_known_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    with tempfile.TemporaryDirectory(prefix="toyspt-bench-") as tmp:
        res = {m: run(m, rest, Path(tmp)) for m in modes}
        print(f"paper_figs.py {' '.join(rest)}  (cold cache each)")
        print(f"{'mode':14s} {'wall s':>8s} {'training s':>11s} {'x':>6s}")
        base = res[modes[0]]["wall"]
        for m, r in res.items():
            print(f"{m:14s} {r['wall']:8.1f} {r['train']:11.1f} {base / r['wall']:6.2f}")
        if len(modes) == 2:
            a, b = (res[m]["out"] for m in modes)
            csvs = sorted(f.name for f in a.glob("*.csv"))
            same = [f for f in csvs if filecmp.cmp(a / f, b / f, shallow=False)]
            print(f"identical figure CSVs: {len(same)}/{len(csvs)}" +
                  ("" if len(same) == len(csvs) else f" (differ: {sorted(set(csvs) - set(same))})"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
