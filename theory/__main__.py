"""``python -m theory [--quick] [--json PATH] [--markdown PATH] [--only T2] ...`` (the same
as ``toyspt theory ...``): check the claims, print the report, exit 1 when a checked claim
fails (2 on bad arguments). docs/theory-report.md is written by ``--markdown``."""
from __future__ import annotations

import argparse
import sys

from toyspt.util.atomic import WriteError, out_file
from toyspt.util.exits import interruptible


def build_parser(prog: str = "python -m theory") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="Check toyspt's theory (T1-T5): symbolic (sympy) and float64 numeric checks, "
                    "plus measured toy-training figures. Exit code 1 when a checked claim fails.")
    p.add_argument("--quick", action="store_true",
                   help="small sizes and short training runs (well under a minute)")
    p.add_argument("--only", metavar="LIST",
                   help="comma-separated claim families or check ids, e.g. T2 or T2.4,T3")
    p.add_argument("--json", metavar="PATH", type=out_file, help="also write the results as JSON (atomically)")
    p.add_argument("--markdown", metavar="PATH", type=out_file,
                   help="also write the report as a Markdown page headed by this command (atomically), "
                        "e.g. docs/theory-report.md")
    p.add_argument("--cache", metavar="DIR", default=None,
                   help="run cache for T5 (default: toyspt's run cache, $TOYSPT_CACHE or .cache/toyspt)")
    p.add_argument("--no-cache", action="store_true", help="T5 trains without reading or writing a cache")
    p.add_argument("--why", action="store_true", help="print why each tolerance is what it is")
    p.add_argument("--list", action="store_true", help="list the check ids and exit")
    p.add_argument("-q", "--quiet", action="store_true", help="no per-check progress on stderr")
    return p


def main(argv: list[str] | None = None, prog: str = "python -m theory") -> int:
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    argv = sys.argv[1:] if argv is None else list(argv)
    import torch

    from . import report  # here, not at the top: Ctrl-C while sympy and torch load is one line

    torch.set_num_threads(1)  # small float64 problems: one thread is fastest on a shared machine
    if args.list:
        for cid, fn in report.REGISTRY.items():
            doc = (fn.__doc__ or "").strip().splitlines()[0]
            print(f"{cid:6s} {doc}")
        return 0
    try:
        report.select(args.only)
    except ValueError as e:
        parser.error(str(e))
    if args.no_cache:
        cache = None
    else:
        from toyspt.runs import DEFAULT_CACHE

        cache = str(args.cache or DEFAULT_CACHE)

    def progress(cid, res, sec):
        if not args.quiet:
            print(f"  {cid:6s} {res.verdict:8s} {sec:5.1f}s", file=sys.stderr, flush=True)

    results = report.run_checks(args.only, quick=args.quick, cache=cache, progress=progress)
    print(report.format_table(results, why=args.why))
    try:
        if args.json:
            path = report.write_json(results, args.json, quick=args.quick, only=args.only,
                                     cache=cache, argv=argv)
            print(f"wrote {path}")
        if args.markdown:
            print(f"wrote {report.write_markdown(results, args.markdown, ' '.join([prog, *argv]))}")
    except WriteError as e:  # the disk filled or the folder went read-only while the checks ran
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    return report.exit_code(results)


if __name__ == "__main__":
    sys.exit(interruptible(main))
