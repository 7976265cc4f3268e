"""docs/lra.md quotes the LRA numbers from the files the code wrote (``<!-- from FILE PATH
FORMAT -->`` markers, held to their files for every page by tests/integration/test_docs.py),
and its pilot table is docs/lra_pilot.csv rendered (toyspt.studies.lra_pilot.markdown_table)."""
import re
from pathlib import Path

import pandas as pd

from toyspt.figs.doc_numbers import quotes
from toyspt.studies.lra_pilot import markdown_table

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "lra.md"


def test_the_study_numbers_are_quoted_from_its_files():
    sources = {q.source for q in quotes(DOC.read_text(), ROOT, page="lra.md")}
    assert {"docs/lra_study.json", "docs/lra_pilot.json"} <= sources, sources


def test_pilot_table_is_the_pilot_csv_rendered():
    text = DOC.read_text()
    block = re.search(r"<!-- pilot-table -->\n(.*?)\n<!-- /pilot-table -->", text, re.S)
    assert block, "docs/lra.md lacks the pilot table"
    assert block.group(1).strip() == markdown_table(pd.read_csv(ROOT / "docs" / "lra_pilot.csv")).strip()
