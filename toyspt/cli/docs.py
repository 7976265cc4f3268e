"""``toyspt docs``: rewrite the tables the docs quote from the figures' CSVs
(:mod:`toyspt.figs.doc_tables`), or check that they are what the CSVs render.

    toyspt docs                 # every page of README.md, ARCHITECTURE.md and docs/ with a table block
    toyspt docs --check         # exit 1, naming each page, when a block differs from its CSV's rendering
    toyspt docs docs/ucr.md --figures /tmp/figs

A page is written atomically and only when a block changed.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from toyspt.cli.flags import EXIT_FAILED, EXIT_OK


def pages(root: Path = Path(".")) -> list[Path]:
    """The pages a table block may live in: README.md, ARCHITECTURE.md and docs/*.md under ``root``."""
    return [p for p in (root / "README.md", root / "ARCHITECTURE.md", *sorted((root / "docs").glob("*.md")))
            if p.is_file()]


def run(args: argparse.Namespace) -> int:
    from toyspt.figs.doc_tables import BLOCK, refresh
    from toyspt.util.atomic import write_text

    paths = [Path(p) for p in args.pages] or pages()
    if not paths:
        raise ValueError("no page to rewrite here: run it from the repository's root, or name the pages")
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise ValueError(f"no such page: {', '.join(missing)}")
    if not Path(args.figures).is_dir():
        raise ValueError(f"--figures {args.figures}: not a folder (the figures' CSVs are read from it)")
    stale, blocks = [], 0
    for page in paths:
        text = page.read_text(encoding="utf-8")
        blocks += len(BLOCK.findall(text))
        new = refresh(text, Path(args.figures), str(page))
        if new != text:
            stale.append(page)
            if not args.check:
                write_text(page, new)
    verb = "differ from" if args.check else "rewritten from"
    print(f"{blocks} table block(s) in {len(paths)} page(s); {len(stale)} page(s) {verb} {args.figures}"
          + "".join(f"\n  {p}" for p in stale))
    return EXIT_FAILED if args.check and stale else EXIT_OK


def register(sub) -> None:
    p = sub.add_parser("docs", help="rewrite the docs' tables from the figures' CSVs (--check: only compare)",
                       description=__doc__.splitlines()[0])
    p.add_argument("pages", nargs="*", help="pages to rewrite (default: README.md, ARCHITECTURE.md, docs/*.md)")
    p.add_argument("--figures", default="figures", help="the folder of the CSVs (default figures)")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 when a page's table differs")
    p.set_defaults(func=run)


__all__ = ["register", "run", "pages"]
