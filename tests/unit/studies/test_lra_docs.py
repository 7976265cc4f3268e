"""The LRA study's report (docs/reports/lra.md, written by toyspt.figs.reports) quotes its numbers
from the files the code wrote (``<!-- from FILE PATH FORMAT -->`` markers, held to their files for
every page by tests/integration/test_docs.py), and its pilot table is the pilot's CSV rendered
(toyspt.studies.lra_pilot.markdown_table)."""
import re
from pathlib import Path

import pandas as pd

from toyspt.figs.doc_numbers import quotes
from toyspt.studies.lra_pilot import markdown_table

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "reports" / "lra.md"
FOLDER = "figures/studies/lra"


def test_the_study_numbers_are_quoted_from_its_files():
    sources = {q.source for q in quotes(PAGE.read_text(), ROOT, page="reports/lra.md")}
    assert {f"{FOLDER}/progress.json", f"{FOLDER}/pilot.json"} <= sources, sources


def test_pilot_table_is_the_pilot_csv_rendered():
    text = PAGE.read_text()
    block = re.search(r"<!-- pilot-table -->\n(.*?)\n<!-- /pilot-table -->", text, re.S)
    assert block, "docs/reports/lra.md lacks the pilot table"
    assert block.group(1).strip() == markdown_table(pd.read_csv(ROOT / FOLDER / "pilot.csv")).strip()


def test_the_preregistration_is_included_unchanged():
    """The pre-registration, committed before any study seed trained, is in the page word for word."""
    text = (ROOT / FOLDER / "preregistration.md").read_text()
    assert "Confirmatory family (9 tests)" in text and text.strip() in PAGE.read_text()
