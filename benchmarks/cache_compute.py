"""Where a run cache's training seconds went: runs and summed training seconds per
(kind, recipe, trackers, evaluation policy), from each entry's spec.json and result.json
(plain JSON; no weights are read), and beside them what the cost model's prior
(``RunSpec.seconds``: one idle core of the reference machine) says the same runs cost, and
the ratio of the two over the timed entries: where the prior's prices are off on this host ("-"
where no entry was timed, and for entries other than training runs, whose spec.json alone does
not rebuild their spec).

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

import toyspt.ucr.kind  # noqa: F401  (registers the "ucr" kind of data: its stored specs are rebuilt)
from toyspt.runs import DEFAULT_CACHE, spec_from_dict
from toyspt.runs.costs import prior


def _prior(spec: dict) -> float | None:
    """The prior seconds of a training run's stored spec; None for other entries."""
    if "recipe" not in spec or "seed" not in spec:
        return None
    try:
        return prior(spec_from_dict(spec))
    except (KeyError, TypeError, ValueError, OSError):  # a spec of an older format, data not at hand
        return None


def tally(root: Path) -> dict[tuple, list]:
    out: dict[tuple, list] = defaultdict(lambda: [0, 0.0, 0.0])
    for entry in sorted(root.glob("*/*/")):
        spec_file, result_file = entry / "spec.json", entry / "result.json"
        if not (spec_file.is_file() and result_file.is_file()):
            continue  # a partial entry: the cache drops it on load
        spec = json.loads(spec_file.read_text())
        seconds = json.loads(result_file.read_text()).get("seconds")  # None: stored untimed (a twin's copy)
        key = (spec.get("kind", "toy"), spec.get("recipe", "-"), ",".join(spec.get("trackers", ())) or "-",
               spec.get("evaluate", "-"))
        row = out[key]
        row[0] += 1
        if seconds:  # the ratio compares timed entries with their prior
            row[1] += seconds
            if row[2] is not None:  # every timed entry so far a training run
                p = _prior(spec)
                row[2] = None if p is None else row[2] + p
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cache", default=DEFAULT_CACHE)
    args = p.parse_args(argv)
    rows = sorted(tally(Path(args.cache)).items(), key=lambda kv: -kv[1][1])
    print(f"{'kind':10s} {'recipe':22s} {'trackers':36s} {'evaluate':8s} {'runs':>5s} {'seconds':>9s} "
          f"{'prior':>9s} {'ratio':>6s}")
    for (kind, recipe, trackers, evaluate), (n, sec, pri) in rows:
        shown = f"{pri:9.1f} {sec / pri:6.2f}" if pri else f"{'-':>9s} {'-':>6s}"
        print(f"{kind:10s} {recipe:22s} {trackers:36s} {evaluate:8s} {n:5d} {sec:9.1f} {shown}")
    sums = [row for _, row in rows]
    print(f"{'total':79s} {sum(n for n, _, _ in sums):5d} {sum(sec for _, sec, _ in sums):9.1f}")
    runs = [(sec, pri) for _, sec, pri in sums if pri]
    if runs:
        sec, pri = map(sum, zip(*runs))
        print(f"{'training runs':79s} {'':5s} {sec:9.1f} {pri:9.1f} {sec / pri:6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
