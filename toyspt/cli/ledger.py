"""``toyspt ledger``: check a results ledger, or merge the ledgers of two machines.

    toyspt ledger check figures/ledger/ucr.jsonl
    toyspt ledger merge figures/ledger/ucr.jsonl other/ucr.jsonl -o figures/ledger/ucr.jsonl
    toyspt ledger verify [figures/ledger/ucr.jsonl] [--sample N | --key K]

``check`` prints the records, their size and every line that is not used (exit 1 when there is
one). ``merge`` writes one ledger holding every key of its inputs once (atomically: the output
may be one of the inputs); records of one key with different numbers, or unusable lines, are
refused: nothing is written, each conflict is named, exit 2. ``verify`` retrains records under
the kernels they name and compares every number bit for bit (:mod:`toyspt.runs.verify`): one
paragraph per record (reproduced, differs: which numbers, or not verified: why), exit 1 unless
every record was reproduced.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from toyspt.cli.flags import EXIT_FAILED, EXIT_OK, EXIT_USAGE, out_file


def _missing(paths: list[str]) -> bool:
    """Whether some of ``paths`` do not exist, each named (a mistyped ledger is not an empty one)."""
    gone = [p for p in paths if not os.path.exists(p)]
    for p in gone:
        print(f"error: {p}: no such ledger")
    return bool(gone)


def check(args: argparse.Namespace) -> int:
    from toyspt.runs.ledger import Ledger

    if _missing([args.path]):
        return EXIT_USAGE
    led = Ledger(Path(args.path), kinds=(), warn=lambda m: None)
    lines = led.lines()
    size = Path(args.path).stat().st_size
    kinds: dict[str, int] = {}
    for line in lines.values():  # a run's record says run (its data's kind, ucr, before specs named their own)
        kind = "run" if "recipe" in line.record["spec"] else line.record["kind"]
        kinds[kind] = kinds.get(kind, 0) + 1
    cpus = sorted({line.record.get("cpu") or "?" for line in lines.values()})
    seconds = sum(line.record.get("seconds") or 0.0 for line in lines.values())
    counts = f" ({', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))})" if kinds else ""
    print(f"{args.path}: {len(lines)} records{counts}, "
          f"{size / 1e6:.2f} MB, {size / max(1, len(lines)) / 1e3:.1f} KB a record; "
          f"{seconds / 3600:.2f} CPU-hours recorded; hosts: {'; '.join(cpus) or '-'}")
    for p in led.problems:
        print(p)
    return EXIT_FAILED if led.problems else EXIT_OK


def merge(args: argparse.Namespace) -> int:
    from toyspt.runs.ledger import merge as merge_ledgers

    if _missing(args.paths):
        return EXIT_USAGE
    n, problems = merge_ledgers([Path(p) for p in args.paths], Path(args.out))
    if problems:
        for p in problems:
            print(f"error: {p}")
        print(f"error: nothing written to {args.out}: {len(problems)} conflict(s) or unusable line(s)")
        return EXIT_USAGE
    print(f"{args.out}: {n} records from {len(args.paths)} ledgers")
    return EXIT_OK


def verify(args: argparse.Namespace) -> int:
    import time

    from toyspt.runs.ledger import Ledger
    from toyspt.runs.verify import choose
    from toyspt.runs.verify import verify as verify_record

    if _missing([args.path]):
        return EXIT_USAGE
    if args.sample is not None and args.sample < 1:
        print(f"error: --sample: must be at least 1, got {args.sample}")
        return EXIT_USAGE
    led = Ledger(Path(args.path), kinds=(), warn=lambda m: None)
    try:
        records = choose(led, args.sample if args.key is None else None, args.key, args.seed)
    except ValueError as e:
        print(f"error: {e}")
        return EXIT_USAGE
    t0, counts = time.perf_counter(), {}
    for rec in records:
        out = verify_record(led, rec)
        counts[out.status] = counts.get(out.status, 0) + 1
        print("\n".join(out.lines()), flush=True)
    print(f"{args.path}: {len(records)} records, " + ", ".join(f"{n} {s}" for s, n in counts.items())
          + f" ({time.perf_counter() - t0:.0f} s)")
    return EXIT_OK if counts.get("reproduced", 0) == len(records) else EXIT_FAILED


def register(sub) -> None:
    p = sub.add_parser("ledger", help="check a results ledger, or merge the ledgers of two machines",
                       description=__doc__.splitlines()[0])
    s = p.add_subparsers(dest="ledger_cmd", required=True)
    c = s.add_parser("check", help="records, size and every line not used (exit 1 if any)")
    c.add_argument("path")
    c.set_defaults(func=check)
    m = s.add_parser("merge", help="one ledger of several; conflicting records refused")
    m.add_argument("paths", nargs="+")
    m.add_argument("-o", "--out", type=out_file, required=True, help="the merged ledger (may be one of the inputs)")
    m.set_defaults(func=merge)
    v = s.add_parser("verify", help="retrain records under the kernels they name; compare every number bit for bit")
    v.add_argument("path", nargs="?", default="figures/ledger/ucr.jsonl")
    which = v.add_mutually_exclusive_group()
    which.add_argument("--sample", type=int, default=None, help="this many run records, drawn by --seed (default 1)")
    which.add_argument("--key", default=None, help="the record of this key (or a unique prefix of it)")
    v.add_argument("--seed", type=int, default=0, help="seed of the --sample draw (default 0)")
    v.set_defaults(func=verify)


__all__ = ["register", "check", "merge", "verify"]
