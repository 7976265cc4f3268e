"""docs/lra.md quotes the LRA numbers from the files the code wrote: every
``<!-- from FILE PATH FORMAT -->`` marker must follow the value at PATH of the JSON FILE so
printed, and the pilot table is docs/lra_pilot.csv rendered (toyspt.lra.pilot.markdown_table)."""
import json
import re
from pathlib import Path

import pandas as pd

from toyspt.lra.pilot import markdown_table

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "lra.md"
MARK = re.compile(r"<!-- from (\S+) (\S+) (\S+) -->")


def _value(d, path):
    for part in path.split("."):
        d = d[int(part)] if isinstance(d, list) else d[part]
    return d


def quoted(text: str) -> list[tuple[str, str, str]]:
    out = []
    for m in MARK.finditer(text):
        f, path, spec = m.groups()
        want = format(_value(json.loads((ROOT / f).read_text()), path), spec)
        out.append((path, want, text[max(0, m.start() - len(want)):m.start()]))
    return out


def test_numbers_quoted_from_the_files_match_them():
    text = DOC.read_text()
    assert len(re.findall(r"<!-- from ", text)) == len(MARK.findall(text))
    wrong = [q for q in quoted(text) if q[1] != q[2]]
    assert not wrong, wrong


def test_a_wrong_number_is_caught():
    text = DOC.read_text()
    m = MARK.search(text)
    assert m, "docs/lra.md quotes no number from the LRA files"
    i = m.start() - 1  # the quoted number's last digit
    bad = text[:i] + ("2" if text[i] == "1" else "1") + text[i + 1:]
    assert quoted(bad)[0][1] != quoted(bad)[0][2]


def test_pilot_table_is_the_pilot_csv_rendered():
    text = DOC.read_text()
    block = re.search(r"<!-- pilot-table -->\n(.*?)\n<!-- /pilot-table -->", text, re.S)
    assert block, "docs/lra.md lacks the pilot table"
    assert block.group(1).strip() == markdown_table(pd.read_csv(ROOT / "docs" / "lra_pilot.csv")).strip()
