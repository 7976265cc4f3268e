"""Where a run cache's training seconds went: runs and summed training seconds per
(kind, recipe, trackers, evaluation policy), from each entry's spec.json and result.json
(plain JSON; no weights are read).

    python benchmarks/cache_compute.py                       # the default cache
    python benchmarks/cache_compute.py --cache .cache/after/cache

The cache holds every run any command stored, so after ``python paper_figs.py`` from an
empty cache it is that run's compute; later commands add their own runs.
"""
from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from toyspt.runs import DEFAULT_CACHE


def tally(root: Path) -> dict[tuple, list]:
    out: dict[tuple, list] = defaultdict(lambda: [0, 0.0])
    for entry in sorted(root.glob("*/*/")):
        spec_file, result_file = entry / "spec.json", entry / "result.json"
        if not (spec_file.is_file() and result_file.is_file()):
            continue  # a partial entry: the cache drops it on load
        spec = json.loads(spec_file.read_text())
        seconds = json.loads(result_file.read_text()).get("seconds") or 0.0
        key = (spec.get("kind", "toy"), spec.get("recipe", "-"), ",".join(spec.get("trackers", ())) or "-",
               spec.get("evaluate", "-"))
        out[key][0] += 1
        out[key][1] += seconds
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cache", default=DEFAULT_CACHE)
    args = p.parse_args(argv)
    rows = sorted(tally(Path(args.cache)).items(), key=lambda kv: -kv[1][1])
    print(f"{'kind':10s} {'recipe':22s} {'trackers':36s} {'evaluate':8s} {'runs':>5s} {'seconds':>9s}")
    for (kind, recipe, trackers, evaluate), (n, sec) in rows:
        print(f"{kind:10s} {recipe:22s} {trackers:36s} {evaluate:8s} {n:5d} {sec:9.1f}")
    print(f"{'total':79s} {sum(n for n, _ in dict(rows).values()):5d} {sum(s for _, s in dict(rows).values()):9.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
