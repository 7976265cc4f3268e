"""How long answering a figure's finished runs takes, by where the answers come from, side by
side in one process: planning (:func:`toyspt.runs.planning.make_plan`) with the run cache and
the results ledger (what ``python paper_figs.py`` does on a machine that trained the runs), with
an empty cache and the ledger (a fresh checkout), and the cache's own part alone (verifying and
loading every entry, weights included). Nothing trains: the runs must be in the cache and the
ledger. The ledger is read from a temporary copy, so nothing is appended to it.

    python benchmarks/bench_answer.py --cache /work/cache/toyspt                   # real_gain, study tier
    python benchmarks/bench_answer.py --cache DIR --only archive_scan --repeat 3
"""
from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from toyspt.figs import FigContext, load
from toyspt.runs import RunCache
from toyspt.runs.planning import load_answer, make_plan
from toyspt.runs.store import LayeredStore
from toyspt.ucr.design import LEDGER

ROOT = Path(__file__).resolve().parents[1]


def _timed(fn) -> tuple[float, float, object]:
    c, w = time.process_time(), time.perf_counter()
    out = fn()
    return time.process_time() - c, time.perf_counter() - w, out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cache", required=True, help="a run cache holding the figure's runs")
    p.add_argument("--ledger", default=str(ROOT / "figures/ledger/ucr.jsonl"))
    p.add_argument("--only", default="real_gain", help="one figure (default real_gain)")
    p.add_argument("--tier", default="study")
    p.add_argument("--repeat", type=int, default=1, help="rounds of the three measurements, interleaved")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        ledger_copy = Path(tmp) / "ledger.jsonl"
        shutil.copyfile(args.ledger, ledger_copy)
        cache, empty = RunCache(args.cache), RunCache(Path(tmp) / "empty")
        ctx = FigContext(out=Path(tmp) / "out", cache=cache, tier=args.tier)
        specs = list(load(args.only).specs(ctx).values())
        targets = list({s.key(): s for s in specs}.values())
        print(f"{args.only} ({args.tier} tier): {len(specs)} entries; load average "
              f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(f"{'round':>5s} {'answered by':32s} {'CPU s':>7s} {'wall s':>7s} {'from cache':>10s} "
              f"{'from ledger':>11s}")
        for r in range(args.repeat):
            rows = []
            for name, c in (("cache, checked against the ledger", cache), ("the ledger (empty cache)", empty)):
                store = LayeredStore((c, LEDGER.open(ledger_copy)))
                cpu, wall, plan = _timed(lambda: make_plan(specs, store))
                if plan.todo:
                    print(f"{len(plan.todo)} entries are in neither the cache nor the ledger: nothing to compare")
                    return 1
                n_ledger = sum(store.answered.get(k) == "ledger" for k in plan.done)
                rows.append((name, cpu, wall, len(plan.done) - n_ledger, n_ledger))
            cpu, wall, hits = _timed(lambda: [load_answer(cache, s) for s in targets])
            rows.append(("cache entries alone (no ledger)", cpu, wall, sum(h is not None for h in hits), 0))
            for name, cpu, wall, n_cache, n_ledger in rows:
                print(f"{r:5d} {name:32s} {cpu:7.1f} {wall:7.1f} {n_cache:10d} {n_ledger:11d}")
            print(f"{r:5d} cache+ledger / ledger alone: {rows[0][2] / rows[1][2]:.2f}x wall; the cache's loading is "
                  f"{rows[2][2] / rows[0][2]:.0%} of it")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
