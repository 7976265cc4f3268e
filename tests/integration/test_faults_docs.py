"""``toyspt docs`` against hostile pages: markers named in one pass, a page read bounded, an
indented marker refused and a BOM kept, CSV cells inert in markdown, no page written through a
link out of the tree, doc markers of a small format grammar."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pandas as pd
import pytest

from toyspt.cli.main import main

ROOT = Path(__file__).resolve().parents[2]


def one_error(capsys, needle: str) -> str:
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if "error" in ln]  # argparse: usage, then
    assert len(err) == 1 and needle in err[0], err  # one error line
    return err[0]


@pytest.fixture
def figures(tmp_path):
    """A figures folder holding the committed ucr_paired.csv."""
    out = tmp_path / "figs"
    out.mkdir()
    (out / "ucr_paired.csv").write_bytes((ROOT / "figures" / "ucr_paired.csv").read_bytes())
    return out


STALE = "<!-- table ucr_paired -->\n| stale |\n<!-- /table -->\n"


# ------------------------------------------------------------------ toyspt docs (F8), links (F9)

def test_unclosed_markers_are_named_in_one_pass(tmp_path, figures, capsys):
    from toyspt.figs.doc_tables import TableError, refresh

    text = "<!-- table ucr_paired -->\n" * 30_000  # 0.8 MB: once killed at 120 s (a lazy regex per marker)
    t = time.perf_counter()
    with pytest.raises(TableError, match="p.md line 1: table block ucr_paired without its .* next opens .line 2"):
        refresh(text, figures, "p.md")
    with pytest.raises(TableError, match="p.md line 30000: table block ucr_paired without its"):
        refresh("x\n" * 29_999 + "<!-- table ucr_paired -->\n", figures, "p.md")
    assert time.perf_counter() - t < 10  # once over 60 s: a lazy regex per opening marker
    with pytest.raises(TableError, match="p.md line 2: '<!-- /table -->' closes no table block"):
        refresh("x\n<!-- /table -->\n", figures, "p.md")


def test_a_page_is_read_bounded(tmp_path, figures, capsys):
    page = tmp_path / "big.md"
    with open(page, "wb") as f:
        f.truncate(2 << 30)  # sparse 2 GiB: once 55-77 s and 4.4 GB, then "0 table block(s)"
    t = time.perf_counter()
    assert main(["docs", str(page), "--figures", str(figures), "--check"]) == 2
    assert time.perf_counter() - t < 10  # once 55-77 s
    one_error(capsys, "over the limit of 1048576 for a page")
    os.mkfifo(tmp_path / "fifo.md")
    assert main(["docs", str(tmp_path / "fifo.md"), "--figures", str(figures), "--check"]) == 2
    one_error(capsys, "is a FIFO")


def test_an_indented_marker_is_refused_and_a_bom_is_kept(tmp_path, figures, capsys):
    page = tmp_path / "p.md"
    page.write_text(STALE.replace("<!--", "  <!--"))  # markdown reads it as a marker: once skipped, --check 0
    assert main(["docs", str(page), "--figures", str(figures), "--check"]) == 2
    one_error(capsys, "p.md line 1: a table marker indented by 2 space(s)")
    page.write_text("    " + STALE.replace("\n", "\n    "))  # indented by 4: a code block quoting a marker
    assert main(["docs", str(page), "--figures", str(figures), "--check"]) == 0
    page.write_text("\ufeff" + STALE)  # once skipped: --check passed a stale table
    assert main(["docs", str(page), "--figures", str(figures), "--check"]) == 1
    assert main(["docs", str(page), "--figures", str(figures)]) == 0
    text = page.read_text(encoding="utf-8")
    assert text.startswith("\ufeff<!-- table ucr_paired -->\n| set | arm |") and "| stale |" not in text
    assert main(["docs", str(page), "--figures", str(figures), "--check"]) == 0


def test_csv_cells_are_inert_in_markdown(tmp_path, figures):
    from toyspt.figs.doc_tables import blocks, refresh

    frame = pd.read_csv(figures / "ucr_paired.csv")
    frame.loc[0, "dataset"] = "Gun|Point\n<!-- /table -->\n<script>&"
    frame.to_csv(figures / "ucr_paired.csv", index=False)
    once = refresh(STALE, figures, "p.md")
    assert len(blocks(once, "p.md")) == 1 and refresh(once, figures, "p.md") == once  # once: a 2nd closing marker
    row = next(ln for ln in once.splitlines() if ln.startswith("| Gun\\|"))
    assert row.startswith(r"| Gun\|Point\x0a&lt;!-- /table --&gt;\x0a&lt;script&gt;&amp; | spt |")
    assert row.count(" | ") == 5  # six cells: the | in the name broke none


def test_no_page_is_written_through_a_link_out_of_the_tree(tmp_path, figures, capsys, monkeypatch):
    tree, outside = tmp_path / "tree", tmp_path / "outside"
    tree.mkdir()
    outside.mkdir()
    (outside / "x.md").write_text(STALE)
    (tree / "docs").symlink_to(outside)  # once: outside/x.md rewritten
    monkeypatch.chdir(tree)
    assert main(["docs", "docs/x.md", "--figures", str(figures)]) == 2
    one_error(capsys, f"docs/x.md: its folder is a link to {outside}")
    assert (outside / "x.md").read_text() == STALE
    assert main(["docs", "docs/x.md", "--figures", str(figures), "--check"]) == 1  # reading is fine
    (tree / "README.md").symlink_to(outside / "x.md")  # a link to the page itself: the link is replaced
    assert main(["docs", "README.md", "--figures", str(figures)]) == 0
    assert not (tree / "README.md").is_symlink() and (outside / "x.md").read_text() == STALE


# ------------------------------------------------------------------ doc markers: a small format grammar

@pytest.fixture
def root(tmp_path):
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "metadata.json").write_text(json.dumps({"figures": {"a": 0.5}}))
    (tmp_path / "n.json").write_text(json.dumps({"a": 7654321.5}))
    return tmp_path


@pytest.mark.parametrize("marker, needle", [
    ("<!-- from n.json a 999999999 -->", "format '999999999' is not of the grammar"),  # once 27-33 s, 3.2 GB
    ("<!-- from n.json a .999999999f -->", "format '.999999999f' is not of the grammar"),
    ("<!-- meta figures.a >999999999 -->", "format '>999999999' is not of the grammar"),
    ("<!-- meta figures.a .1f 1e308 -->", "scale '1e308' is not a number of at most 1e+06"),
])
def test_a_marker_format_outside_the_grammar_is_refused_before_formatting(root, capsys, monkeypatch, marker, needle):
    monkeypatch.chdir(root)
    (root / "p.md").write_text("x\n1" + marker + "\n")
    t = time.perf_counter()
    assert main(["docs", "p.md", "--check"]) == 2
    assert time.perf_counter() - t < 10
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and "p.md line 2: a marker's " + needle in err[0], err


def test_a_long_stale_number_is_rewritten_whole(root):
    from toyspt.figs.doc_numbers import refresh

    page = "moved 1,234,567.89<!-- from n.json a ,.2f --> rows"  # 12 characters: a short lookback rewrites its tail
    assert refresh(page, root) == "moved 7,654,321.50<!-- from n.json a ,.2f --> rows"
