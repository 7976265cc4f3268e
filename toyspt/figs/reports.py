"""Each study's report page, generated and never edited by hand: ``docs/reports/NAME.md`` is
written from what the study committed beside its ledger (``figures/studies/NAME/``: the page's
written text ``report.md``, the pre-registration it includes, the pilot's CSV, the progress its
ledger gives) and from the figures drawn from that ledger (their CSVs and ``metadata.json``), as
docs/theory-report.md is written by ``python -m theory --markdown``.

A report's source is a Markdown page whose directives are lines of their own:

    <!-- include FILE -->                          FILE (beside the source) inserted unchanged
    <!-- progress -->                              the study's progress in one sentence
                                                   (``Study.describe`` of its progress JSON)
    <!-- pilot-table --> ... <!-- /pilot-table -->  the pilot's CSV, rendered by the study's renderer
    <!-- table NAME --> ... <!-- /table -->        a table of :mod:`toyspt.figs.doc_tables`

and every number it quotes carries a marker of :mod:`toyspt.figs.doc_numbers`, rewritten from its
source. ``toyspt study report NAME`` writes one page, ``toyspt docs`` every page (``--check``:
compare only); tests/integration/test_docs.py holds each committed page to :func:`generate`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd

from toyspt.figs import doc_numbers, doc_tables
from toyspt.util.files import UnsafeFile, read_bounded, read_json_object

INCLUDE = re.compile(r"<!-- include (\S+) -->")
PROGRESS = "<!-- progress -->"
PILOT = re.compile(r"<!-- pilot-table -->\n.*?<!-- /pilot-table -->\n?", re.S)
DIRECTIVE = re.compile(r"^<!-- (include|progress|pilot-table)\b.*$", re.M)


class ReportError(ValueError):
    """A report source that names no study, includes a file outside its folder or one it lacks, or
    holds a directive that is not one of the forms above."""


def _lra_pilot_table(frame: pd.DataFrame) -> str:
    from toyspt.studies.lra_pilot import markdown_table

    return markdown_table(frame)


@dataclass(frozen=True)
class Report:
    """Where one study's report comes from and where it goes (paths relative to the repository's root)."""

    study: str  # the study's name in toyspt.studies.registry.STUDIES
    source: Path  # the page's written text, with the directives above
    page: Path  # the page written
    progress: Path | None = None  # the progress JSON (``toyspt study progress NAME --json``)
    pilot: Path | None = None  # the pilot's CSV (``toyspt study pilot NAME --out``)
    pilot_table: Callable[[pd.DataFrame], str] | None = None  # the pilot's CSV as a Markdown table

    @property
    def folder(self) -> Path:
        return self.source.parent


LRA, UCR = Path("figures/studies/lra"), Path("figures/studies/ucr")
REPORTS: dict[str, Report] = {
    "lra": Report("lra", LRA / "report.md", Path("docs/reports/lra.md"), LRA / "progress.json", LRA / "pilot.csv",
                  _lra_pilot_table),
    "ucr": Report("ucr", UCR / "report.md", Path("docs/reports/ucr.md")),  # no pilot; its ledger is 37 MB
}


def report(name: str) -> Report:
    """The report of study ``name``; a :class:`ReportError` naming the choices otherwise."""
    if name not in REPORTS:
        raise ReportError(f"report: choose one of {', '.join(REPORTS)}, got {name!r}")
    return REPORTS[name]


def _text(path: Path, what: str) -> str:
    try:
        return read_bounded(path, what, doc_tables.MAX_PAGE_BYTES).decode("utf-8")
    except (UnsafeFile, UnicodeDecodeError) as e:
        raise ReportError(f"{path}: {e}") from None


def _include(m: re.Match, rep: Report, root: Path) -> str:
    name = m.group(1)
    path = root / rep.folder / name
    if Path(name).is_absolute() or not path.resolve().is_relative_to((root / rep.folder).resolve()):
        raise ReportError(f"{rep.source}: includes {name}, which is not in {rep.folder}")
    return _text(path, "included text").rstrip("\n")


def _progress(rep: Report, root: Path) -> str:
    from toyspt.studies.registry import study

    if rep.progress is None:
        raise ReportError(f"{rep.source}: {PROGRESS}, but the {rep.study} report names no progress file")
    try:
        data = read_json_object(root / rep.progress, "progress file", doc_numbers.MAX_SOURCE_BYTES)
    except UnsafeFile as e:
        raise ReportError(str(e)) from None
    return study(rep.study).describe(data) + "."


def _pilot(rep: Report, root: Path) -> str:
    if rep.pilot is None or rep.pilot_table is None:
        raise ReportError(f"{rep.source}: a pilot table, but the {rep.study} report names no pilot")
    table = rep.pilot_table(pd.read_csv(root / rep.pilot)).rstrip("\n")
    return f"<!-- pilot-table -->\n{table}\n<!-- /pilot-table -->\n"


def header(rep: Report) -> str:
    """The line under the page's title: the command that writes it and what it reads."""
    from toyspt.studies.registry import study

    ledger = study(rep.study).ledger.path
    return (f"*Generated by `toyspt study report {rep.study}` from `{rep.folder}/` (this page's text, "
            f"`{rep.source.name}`, and what it includes) and from the figures drawn from the ledger "
            f"`{ledger}` (their CSVs and `figures/metadata.json`); edit those, not this page.*\n")


def generate(name: str, root: Path = Path("."), figures: Path | None = None) -> str:
    """The page of report ``name``: its source with every directive expanded, every table rendered
    from ``figures`` (default ``root``/figures) and every quoted number rewritten from its source."""
    rep = report(name)
    figures = root / "figures" if figures is None else figures
    text = _text(root / rep.source, "report source")
    text = INCLUDE.sub(lambda m: _include(m, rep, root), text)
    left = [m.group(0) for m in DIRECTIVE.finditer(PILOT.sub("", text).replace(PROGRESS, ""))]
    if left:  # a directive misspelt, or a pilot table not closed
        raise ReportError(f"{rep.source}: directive(s) not of the forms of toyspt.figs.reports: {left[:3]}")
    if PROGRESS in text:
        text = text.replace(PROGRESS, _progress(rep, root))
    text = PILOT.sub(lambda m: _pilot(rep, root), text)
    title, _, body = text.partition("\n")
    text = f"{title}\n\n{header(rep)}{body}"
    text = doc_tables.refresh(text, figures, str(rep.page))
    return doc_numbers.refresh(text, root, figures, str(rep.page))


def pages(root: Path = Path(".")) -> dict[Path, str]:
    """The page of every report under ``root`` -> its report's name."""
    return {root / r.page: n for n, r in REPORTS.items()}


__all__ = ["Report", "REPORTS", "ReportError", "report", "generate", "header", "pages"]
