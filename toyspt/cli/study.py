"""``toyspt study``: what a study's ledger holds, and its pilot (the studies of
:mod:`toyspt.studies.registry`).

    toyspt study progress lra [--ledger PATH] [--json OUT]   # recorded runs, hours, what the rest costs
    toyspt study pilot lra --out DIR [--quick] [--stages 1,2|a,b,c,d] # the runs that fixed a design
    toyspt study report lra [--check]                        # write docs/reports/lra.md from its sources

``progress`` reads the study's ledger (default: the one it declares) and prints one sentence
(``--json``: every number, as figures/studies/lra/progress.json holds them); a missing ledger is one error line,
exit 2. ``pilot`` trains (or reads from the run cache, ``--cache``) the pilot's runs and prints their
table; ``--out`` gets ``pilot.csv`` and ``pilot.json`` (the second LRA pilot, stages a-d: ``pilot2.*``,
through its ledger, ``--ledger``, ``--workers``; ``--recorded`` trains nothing and tabulates what the
ledger holds). A study without a pilot says so, exit 2. ``report``
writes the study's report page from its folder under figures/studies/ and the figures drawn from its
ledger (:mod:`toyspt.figs.reports`); ``--check`` writes nothing and exits 1 when the page differs.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from toyspt.cli.flags import EXIT_FAILED, EXIT_OK, EXIT_USAGE, cache_dir, out_dir, out_file, workers_count

NAMES = "ucr, lra"  # the registry's names, for --help (the registry itself imports torch)


def _study(name: str):
    from toyspt.studies.registry import study

    return study(name)


def progress(args) -> int:
    study = _study(args.name)
    path = args.ledger if args.ledger is not None else study.ledger.path
    if not Path(path).is_file():
        print(f"error: {path}: no such ledger file", file=sys.stderr)
        return EXIT_USAGE
    ledger = study.ledger.open(path, warn=lambda m: print(f"ledger: {m}", file=sys.stderr))
    out = study.for_tier(study.tiers[0]).progress(ledger)
    if args.json is not None:
        from toyspt.util.atomic import write_text

        write_text(args.json, json.dumps(out, indent=1) + "\n")
    print(study.describe(out))
    return EXIT_OK


def pilot(args) -> int:
    import pandas as pd
    import torch

    study = _study(args.name)
    torch.set_num_threads(1)
    stages = {} if args.stages is None else dict(stages=tuple(int(x) if x.isdigit() else x
                                                              for x in args.stages.split(",")))
    given = dict(cache=args.cache is not None, ledger=args.ledger is not None, workers=args.workers != 1,
                 recorded=args.recorded)
    options = {k: getattr(args, k) for k, on in given.items() if on}  # given only when set: a study refuses the rest
    frame = study.pilot(None if args.out is None else Path(args.out), args.quick, progress=not args.quick, **stages,
                        **options)
    if frame is None:
        print(f"error: the {args.name} study has no pilot ({study.preregistration} fixed its design)",
              file=sys.stderr)
        return EXIT_USAGE
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(frame.to_string(index=False))
    return EXIT_OK


def report(args) -> int:
    from toyspt.figs.reports import generate
    from toyspt.figs.reports import report as find
    from toyspt.util.atomic import write_text

    page = find(args.name).page
    text = generate(args.name, Path("."), Path(args.figures))
    old = page.read_text() if page.is_file() else None
    if args.check:
        print(f"{page}: {'up to date' if old == text else 'differs from what its sources give'}")
        return EXIT_OK if old == text else EXIT_FAILED
    if old != text:
        write_text(page, text)
    print(f"{page}: {'unchanged' if old == text else 'written'} ({len(text.splitlines())} lines)")
    return EXIT_OK


def register(sub) -> None:
    p = sub.add_parser("study", help="a study's progress in its ledger, and its pilot",
                       description=__doc__.splitlines()[0])
    s = p.add_subparsers(dest="study_cmd", required=True)
    g = s.add_parser("progress", help="what the study's ledger records and what the rest costs")
    g.add_argument("name", metavar="NAME", help=f"the study ({NAMES})")
    g.add_argument("--ledger", type=Path, default=None, help="the study's ledger (default: the one it declares)")
    g.add_argument("--json", type=out_file, default=None, help="write the progress there as JSON")
    g.set_defaults(func=progress)
    q = s.add_parser("pilot", help="train (or read from the cache) the runs that fixed the study's design")
    q.add_argument("name", metavar="NAME", help=f"the study ({NAMES})")
    q.add_argument("--out", type=out_dir, default=None,
                   help="folder for pilot.csv and pilot.json (the second LRA pilot: pilot2.*)")
    q.add_argument("--quick", action="store_true", help="tiny sizes (seconds)")
    q.add_argument("--stages", default=None,
                   help="which pilot stages (lra: 1: every task; 2: PathFinder's learnability; default both; "
                        "a, b, c, d: the second study's pilot: digits and ListOps, PathFinder at 20,000 and "
                        "50,000 images, SPT and fine-tuning at 20,000 under the loss stage b chose)")
    q.add_argument("--cache", type=cache_dir, default=None, help="the run cache's folder (default: TOYSPT_CACHE)")
    q.add_argument("--ledger", type=Path, default=None,
                   help="the second LRA pilot's ledger (default: figures/ledger/lra_pilot2.jsonl)")
    q.add_argument("--workers", type=workers_count, default=1, help="training processes (the second LRA pilot)")
    q.add_argument("--recorded", action="store_true",
                   help="train nothing: the table of the runs the ledger records (the second LRA pilot)")
    q.set_defaults(func=pilot)
    r = s.add_parser("report", help="write the study's report page (docs/reports/NAME.md) from its sources")
    r.add_argument("name", metavar="NAME", help="the study (lra)")
    r.add_argument("--figures", default="figures", help="the folder of the CSVs and metadata.json (default figures)")
    r.add_argument("--check", action="store_true", help="write nothing; exit 1 when the page differs")
    r.set_defaults(func=report)


__all__ = ["register", "progress", "pilot", "report", "NAMES"]
