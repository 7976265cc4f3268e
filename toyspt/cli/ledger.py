"""``toyspt ledger``: check, merge, repair, seal or verify a results ledger.

    toyspt ledger check figures/ledger/ucr.jsonl
    toyspt ledger merge figures/ledger/ucr.jsonl other/ucr.jsonl -o figures/ledger/ucr.jsonl
    toyspt ledger verify [figures/ledger/ucr.jsonl] [--sample N | --key K]
    toyspt ledger repair figures/ledger/ucr.jsonl -o /tmp/ucr.jsonl    # then review, and move it over
    toyspt ledger migrate figures/ledger/ucr.jsonl                     # seal the records written before digests

``check`` prints the records, their size, how many carry no digest, and every line that is not
used (exit 1 when there is one, or when records without a digest sit beside sealed ones).
``merge`` writes one ledger holding every key of its inputs once (atomically, under the output's
lock: the output may be one of the inputs, appended to meanwhile); records of one key with
different numbers, or unusable lines, are refused: nothing is written, each is named, exit 2.
``repair`` writes a new file without the lines not used, the records of a key that conflict set
aside in a second file (``--aside``, default OUT.aside), each named. ``migrate`` gives every
record written before digests its digest, in place (atomically, under the lock), each line
sealed listed; a record without a digest that may have lost it (of the layout written since
digests, or beside sealed records) is sealed only when named (``--line N``, one by one);
refused, nothing written, while a line is not used. ``verify`` retrains records under the kernels they name and
compares every number bit for bit (:mod:`toyspt.runs.verify`): one paragraph per record
(reproduced, differs: which numbers, or not verified: why), exit 1 unless every record was
reproduced. ``verify --anyway`` retrains where this host lacks the recorded kernels too (under the
nearest it has) and names each differing number's largest difference and its epoch: exit 0 when
every record is reproduced bit for bit, 3 (:data:`EXIT_WITHIN_TOLERANCE`) when each is reproduced
or within float32 tolerance (:mod:`toyspt.runs.closeness`), 1 when one differs or is not verified.
"""
from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

from toyspt.cli.flags import EXIT_FAILED, EXIT_OK, EXIT_USAGE, out_file


def _missing(paths: list[str]) -> bool:
    """Whether some of ``paths`` do not exist, each named (a mistyped ledger is not an empty one)."""
    gone = [p for p in paths if not os.path.exists(p)]
    for p in gone:
        print(f"error: {p}: no such ledger")
    return bool(gone)


# the modules defining the spec kinds a ledger records (toyspt.runs.specs.spec_kinds)
SPEC_MODULES = ("toyspt.runs.state_probes", "toyspt.ucr.reference", "toyspt.ucr.init_probes", "toyspt.lra.demo",
                "toyspt.studies.lra_cnn")
EXIT_WITHIN_TOLERANCE = 3  # verify --anyway: no record differs beyond float32 tolerance, some not bit for bit
MAX_SHOWN = 200  # characters of a recorded text field printed (a host's CPU model is under 100)


def inert(value: object, most: int = MAX_SHOWN) -> str:
    """A recorded field as printable text: a control character, line or paragraph separator,
    or bidirectional override written as its escape (a terminal never runs it, a fake line
    never starts), at most MAX_SHOWN characters."""
    text = str(value)
    shown = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text[:most])
    return shown + (f"... ({len(text)} characters)" if len(text) > most else "")


def _seconds(number: int, s, wrong: list[str]) -> float:
    """A record's seconds as counted in the total: 0, with a sentence in ``wrong``, where no
    computation can have taken them (infinite, NaN, negative, over 30 days): never printed as a total."""
    from toyspt.runs.record_checks import MAX_SECONDS

    if s is None:
        return 0.0
    if math.isfinite(s) and 0 <= s <= MAX_SECONDS:
        return s
    wrong.append(f"line {number}: seconds {s!r} is not a duration (finite, >= 0, at most {MAX_SECONDS:.0f}: "
                 "30 days); not counted")
    return 0.0


def _survey(lines: dict) -> tuple[dict[str, int], list[str], float, list[str]]:
    """(records by kind, hosts, seconds summed, a sentence per seconds not counted), each record
    parsed once in turn (a ledger's records are never all parsed at once)."""
    import importlib

    from toyspt.cli.compare import kinds as data_kinds
    from toyspt.runs.specs import spec_kinds

    for module in SPEC_MODULES:
        importlib.import_module(module)
    known = {*spec_kinds(), *data_kinds()} - {"spec"}  # data kinds: runs recorded before specs named their own
    kinds: dict[str, int] = {}
    cpus: set[str] = set()
    total, wrong = 0.0, []
    for line in lines.values():
        rec = line.record  # a run's record says run (its data's kind, ucr, before specs named their own)
        kind = "run" if "recipe" in rec["spec"] else rec["kind"] if rec["kind"] in known else "of no known kind"
        kinds[kind] = kinds.get(kind, 0) + 1
        cpus.add(inert(rec.get("cpu") or "?"))
        total += _seconds(line.number, rec.get("seconds"), wrong)
    return kinds, sorted(cpus), total, wrong


def check(args: argparse.Namespace) -> int:
    from toyspt.runs.ledger import Ledger

    if _missing([args.path]):
        return EXIT_USAGE
    led = Ledger(Path(args.path), kinds=(), warn=lambda m: None)
    lines = led.lines()
    size = Path(args.path).stat().st_size
    kinds, cpus, seconds, wrong = _survey(lines)
    counts = f" ({', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))})" if kinds else ""
    dup = len(led.duplicates)
    print(f"{inert(args.path)}: {len(lines)} records{counts}"
          f"{f' and {dup} duplicate line(s) (a record again, same numbers)' if dup else ''}, "
          f"{size / 1e6:.2f} MB, {size / max(1, len(lines) + dup) / 1e3:.1f} KB a record; "
          f"{seconds / 3600:.2f} CPU-hours recorded{' (without the records below)' if wrong else ''}; "
          f"hosts: {'; '.join(cpus) or '-'}")
    mixed = bool(led.unsealed) and len(led.unsealed) < len(lines) + dup
    if led.unsealed:
        bare = [x for x in [*lines.values(), *led.duplicates] if not x.sealed]
        dups = sum(x.number not in {y.number for y in lines.values()} for x in bare)
        print(f"{len({x.record['key'] for x in bare})} of {len(lines)} records carry no digest ({len(bare)} line(s)"
              f"{f', {dups} of them a duplicate of a record' if dups else ''}: their numbers are not bound to them); "
              "`toyspt ledger migrate` seals those written before digests"
              + (f"; beside sealed ones, lines {_some(led.unsealed)} (migrate seals them only named one by one, "
                 "--line N: review them first)" if mixed else ""))
    for p in [*led.problems, *(f"{args.path} {w}" for w in wrong)]:
        print(inert(p, 100 * MAX_SHOWN))
    return EXIT_FAILED if led.problems or wrong or mixed else EXIT_OK


def _some(numbers: list[int], most: int = 20) -> str:
    return ", ".join(map(str, numbers[:most])) + (f" and {len(numbers) - most} more" if len(numbers) > most else "")


def repair(args: argparse.Namespace) -> int:
    from toyspt.runs.ledger_append import repair as repair_ledger

    if _missing([args.path]):
        return EXIT_USAGE
    aside = Path(args.aside or f"{args.out}.aside")
    got, kept, set_aside = repair_ledger(Path(args.path), Path(args.out), aside)
    for p in got.problems:
        print(inert(p, 100 * MAX_SHOWN))
    print(f"{args.out}: {kept} records kept; {len(got.dropped)} line(s) dropped ({_some(got.dropped) or '-'})"
          + (f"; {set_aside} conflicting record(s) of {len(got.conflicts)} key(s) set aside in {aside}, none kept"
             if set_aside else ""))
    return EXIT_OK


def migrate(args: argparse.Namespace) -> int:
    from toyspt.runs.ledger_append import migrate as migrate_ledger
    from toyspt.runs.ledger_append import spans

    if _missing([args.path]):
        return EXIT_USAGE
    sealed, before = migrate_ledger(Path(args.path), frozenset(args.line or ()))
    print(f"{inert(args.path)}: {len(sealed)} records sealed, {before} sealed before"
          + (f"; the lines sealed: {spans(sealed)}" if sealed else "; nothing written"))
    return EXIT_OK


def merge(args: argparse.Namespace) -> int:
    from toyspt.runs.ledger import merge as merge_ledgers

    if _missing(args.paths):
        return EXIT_USAGE
    n, problems = merge_ledgers([Path(p) for p in args.paths], Path(args.out))
    if problems:
        for p in problems:
            print(f"error: {p}")
        print(f"error: nothing written to {args.out}: {len(problems)} conflict(s) or unusable line(s) "
              "(toyspt ledger repair drops them or sets them aside)")
        return EXIT_USAGE
    print(f"{args.out}: {n} records from {len(args.paths)} ledgers")
    return EXIT_OK


def verify(args: argparse.Namespace) -> int:
    import time

    from toyspt.cli.compare import kinds
    from toyspt.runs.ledger import Ledger
    from toyspt.runs.verify import choose
    from toyspt.runs.verify import verify as verify_record

    if _missing([args.path]):
        return EXIT_USAGE
    if args.sample is not None and args.sample < 1:
        print(f"error: --sample: must be at least 1, got {args.sample}")
        return EXIT_USAGE
    led = Ledger(Path(args.path), kinds=(), warn=lambda m: None)
    kinds()  # every kind of data a record may name (the ucr and LRA kinds register on import)
    try:
        records = choose(led, args.sample if args.key is None else None, args.key, args.seed)
    except ValueError as e:
        print(f"error: {e}")
        return EXIT_USAGE
    if not records:  # nothing retrained is nothing reproduced
        print(f"error: {inert(args.path)}: no run record to verify ({len(led.problems)} line(s) not used; "
              "`toyspt ledger check` names them)")
        return EXIT_USAGE
    t0, counts = time.perf_counter(), {}
    for rec in records:
        out = verify_record(led, rec, anyway=args.anyway)
        counts[out.status] = counts.get(out.status, 0) + 1
        print("\n".join(out.lines()), flush=True)
    print(f"{args.path}: {len(records)} records, " + ", ".join(f"{n} {s}" for s, n in counts.items())
          + f" ({time.perf_counter() - t0:.0f} s)")
    if counts.get("reproduced", 0) == len(records):
        return EXIT_OK
    close = counts.get("reproduced", 0) + counts.get("within tolerance", 0) == len(records)
    return EXIT_WITHIN_TOLERANCE if args.anyway and close else EXIT_FAILED


def register(sub) -> None:
    p = sub.add_parser("ledger", help="check, merge, repair or seal a results ledger",
                       description=__doc__.splitlines()[0])
    s = p.add_subparsers(dest="ledger_cmd", required=True)
    c = s.add_parser("check", help="records, size and every line not used (exit 1 if any)")
    c.add_argument("path")
    c.set_defaults(func=check)
    m = s.add_parser("merge", help="one ledger of several; conflicting records refused")
    m.add_argument("paths", nargs="+")
    m.add_argument("-o", "--out", type=out_file, required=True, help="the merged ledger (may be one of the inputs)")
    m.set_defaults(func=merge)
    r = s.add_parser("repair", help="a new ledger without the lines not used, conflicting records set aside")
    r.add_argument("path")
    r.add_argument("-o", "--out", type=out_file, required=True, help="the repaired ledger (a new file)")
    r.add_argument("--aside", type=out_file, default=None, help="where conflicting records go (default OUT.aside)")
    r.set_defaults(func=repair)
    g = s.add_parser("migrate", help="seal every record written before digests (in place, once)")
    g.add_argument("path")
    g.add_argument("--line", type=int, action="append", metavar="N",
                   help="also seal the record of line N, one that may have lost its digest (review it first)")
    g.set_defaults(func=migrate)
    v = s.add_parser("verify", help="retrain records under the kernels they name; compare every number bit for bit")
    v.add_argument("path", nargs="?", default="figures/ledger/ucr.jsonl")
    which = v.add_mutually_exclusive_group()
    which.add_argument("--sample", type=int, default=None, help="this many run records, drawn by --seed (default 1)")
    which.add_argument("--key", default=None, help="the record of this key (or a unique prefix of it)")
    v.add_argument("--seed", type=int, default=0, help="seed of the --sample draw (default 0)")
    v.add_argument("--anyway", action="store_true",
                   help="retrain where this host lacks the recorded kernels too (the nearest it has); name each "
                        "number's largest difference; exit 0 bit for bit, 3 within float32 tolerance, 1 differs")
    v.set_defaults(func=verify)


__all__ = ["EXIT_WITHIN_TOLERANCE", "register", "check", "merge", "repair", "migrate", "verify", "inert"]
