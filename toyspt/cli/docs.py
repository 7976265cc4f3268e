"""``toyspt docs``: rewrite the tables the docs quote from the figures' CSVs
(:mod:`toyspt.figs.doc_tables`) and the numbers their prose quotes from metadata.json and the
JSON files their markers name (:mod:`toyspt.figs.doc_numbers`), or check that they match. The
studies' report pages (docs/reports/) are written whole from their sources (:mod:`toyspt.figs.reports`).

    toyspt docs                 # every page of README.md, ARCHITECTURE.md, docs/ and docs/reports/
    toyspt docs --check         # exit 1, naming each page, when a block or quoted number differs
    toyspt docs docs/ucr.md --figures /tmp/figs

A page is read bounded (:data:`toyspt.figs.doc_tables.MAX_PAGE_BYTES`, a regular file), parsed
in one pass, and written atomically and only when a block changed; a page whose folder a
symbolic link takes out of the working folder is refused (a link to the page itself is
replaced by the page, what it pointed to left as it was).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from toyspt.cli.flags import EXIT_FAILED, EXIT_OK


def pages(root: Path = Path(".")) -> list[Path]:
    """The pages a table block may live in: README.md, ARCHITECTURE.md, docs/*.md and the reports
    (docs/reports/*.md) under ``root``."""
    return [p for p in (root / "README.md", root / "ARCHITECTURE.md", *sorted((root / "docs").glob("*.md")),
                        *sorted((root / "docs" / "reports").glob("*.md"))) if p.is_file()]


def read_page(page: Path) -> str:
    """The text of ``page``: a regular file of at most MAX_PAGE_BYTES of UTF-8 (ValueError naming it)."""
    from toyspt.figs.doc_tables import MAX_PAGE_BYTES
    from toyspt.util.files import read_bounded

    data = read_bounded(page, "page", MAX_PAGE_BYTES)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{page}: byte {e.start} is not UTF-8; not a page") from None


def run(args: argparse.Namespace) -> int:
    from toyspt.figs import doc_numbers, reports
    from toyspt.figs.doc_tables import blocks, refresh
    from toyspt.util.atomic import outside_through_link, write_text

    paths = [Path(p) for p in args.pages] or pages()
    if not paths:
        raise ValueError("no page to rewrite here: run it from the repository's root, or name the pages")
    missing = [str(p) for p in paths if not p.exists()]  # a FIFO or folder: read_page names it
    if missing:
        raise ValueError(f"no such page: {', '.join(missing)}")
    if not Path(args.figures).is_dir():
        raise ValueError(f"--figures {args.figures}: not a folder (the figures' CSVs are read from it)")
    if not args.check:
        for page in paths:
            real = outside_through_link(page.parent)
            if real is not None:
                raise ValueError(f"{page}: its folder is a link to {real}, outside the working folder; "
                                 "a page is not written through a link (nothing written)")
    stale, count, numbers, new = [], 0, 0, {}
    generated = {p.resolve(): name for p, name in reports.pages().items()}
    for page in paths:
        text = read_page(page)
        count += len(blocks(text.removeprefix("\ufeff"), str(page)))
        if page.resolve() in generated:  # a study's report: written whole from its source
            tables = new[page] = reports.generate(generated[page.resolve()], Path("."), Path(args.figures))
        else:
            tables = refresh(text, Path(args.figures), str(page))
            new[page] = doc_numbers.refresh(tables, Path("."), Path(args.figures), str(page))
        numbers += doc_numbers.count(tables)
        if new[page] != text:
            stale.append(page)
    if not args.check:  # every page checked before the first is written
        for page in stale:
            write_text(page, new[page])
    verb = "differ from" if args.check else "rewritten from"
    print(f"{count} table block(s) and {numbers} quoted number(s) in {len(paths)} page(s); "
          f"{len(stale)} page(s) {verb} {args.figures}"
          + "".join(f"\n  {p}" for p in stale))
    return EXIT_FAILED if args.check and stale else EXIT_OK


def register(sub) -> None:
    p = sub.add_parser("docs", help="rewrite the docs' tables and quoted numbers (--check: only compare)",
                       description=__doc__.splitlines()[0])
    p.add_argument("pages", nargs="*",
                   help="pages to rewrite (default: README.md, ARCHITECTURE.md, docs/*.md, docs/reports/*.md)")
    p.add_argument("--figures", default="figures", help="the folder of the CSVs and metadata.json (default figures)")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 when a table or quoted number differs")
    p.set_defaults(func=run)


__all__ = ["register", "run", "pages", "read_page"]
