"""Hostile inputs, round 6 (issue 44), at the front doors: ``toyspt docs`` linear and bounded
(markers in one pass, a page size cap, BOM and indented markers, CSV cells inert in markdown,
no page written through a link out of the tree), round 5's leftovers (a 300-character set name,
a 250-character folder in the archive, text in a reference CSV's value column, ``--budget -1h``)
and what ``toyspt ledger check`` prints (recorded text inert, impossible totals refused)."""
from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import pandas as pd
import pytest

from toyspt.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
LEDGER = ROOT / "figures" / "ledger" / "ucr.jsonl"


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
    assert time.perf_counter() - t < 2.0
    with pytest.raises(TableError, match="p.md line 2: '<!-- /table -->' closes no table block"):
        refresh("x\n<!-- /table -->\n", figures, "p.md")


def test_a_page_is_read_bounded(tmp_path, figures, capsys):
    page = tmp_path / "big.md"
    with open(page, "wb") as f:
        f.truncate(2 << 30)  # sparse 2 GiB: once 55-77 s and 4.4 GB, then "0 table block(s)"
    t = time.perf_counter()
    assert main(["docs", str(page), "--figures", str(figures), "--check"]) == 2
    assert time.perf_counter() - t < 2.0
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


# ------------------------------------------------------------------ round 5's leftovers (F11, F12)

def test_a_set_name_longer_than_a_file_name_is_one_line(tmp_path, capsys):
    assert main(["ucr", "--list", "--dataset", "A" * 300]) == 2  # once: OSError ENAMETOOLONG, rc 1
    one_error(capsys, "not a UCR data set name: 'AAA")
    assert main(["ucr", "--list", "--dataset", "Gun\x1bPoint"]) == 2
    one_error(capsys, "not a UCR data set name")


def test_the_archive_scan_passes_over_a_folder_no_set_can_be(tmp_path, monkeypatch):
    from toyspt.ucr.archive import archive_names, scan

    (tmp_path / ("B" * 250)).mkdir()  # once: OSError ENAMETOOLONG from the scan
    (tmp_path / "Tiny").mkdir()
    (tmp_path / "Tiny" / "Tiny_TRAIN.tsv").write_text("1\t0.5\t0.25\n")
    assert archive_names(tmp_path) == ["Tiny"]
    monkeypatch.setenv("TOYSPT_UCR_ROOT", str(tmp_path))
    (row,) = scan().to_dict("records")
    assert row["name"] == "Tiny" and not row["admitted"] and "cannot be read" in row["reason"]


def test_text_in_a_reference_value_column_is_refused_before_drawing(tmp_path, capsys):
    from toyspt.cli.figs import main as figs_main
    from toyspt.figs.check import CompareError, check_reference

    ref = tmp_path / "ref"
    ref.mkdir()
    (ref / "a.csv").write_text("arm,value,acc\nspt,1.0,0.9\nscratch,2.0,oops\n")
    with pytest.raises(CompareError, match=r"column 'acc' holds numbers and text \('oops' in data row 2\)"):
        check_reference(ref)
    out = tmp_path / "o"
    argv = ["--quick", "--only", "task", "--out", str(out), "--cache", str(tmp_path / "c")]
    assert figs_main([*argv, "--compare-to", str(ref)]) == 2
    one_error(capsys, "holds numbers and text")
    assert not out.exists()  # once: refused only after every figure was drawn


def test_a_comparison_with_nothing_in_common_is_not_an_agreement(tmp_path):
    from toyspt.figs.check import compare_dirs, summary

    for side in ("ref", "new"):
        (tmp_path / side).mkdir()
    (tmp_path / "ref" / "a.csv").write_text("arm,value\nx,1.0\n")
    (tmp_path / "new" / "b.csv").write_text("arm,value\nx,1.0\n")
    report = compare_dirs(tmp_path / "new", tmp_path / "ref", drawn=["b.csv"])  # once: KeyError 'file'
    assert report.empty and "nothing compared" in summary(report)


@pytest.mark.parametrize("argv, needle", [
    (["--budget", "-1h"], "a budget must be more than 0 seconds, got '-1h'"),  # once: "expected one argument"
    (["--workers", "-2"], "must be >= 1, got -2"),
    (["--seeds", "-3"], "seeds must be >= 0"),
    (["--out"], "expected one argument (none given; a value starting with '-' reads as a flag"),
])
def test_a_value_that_starts_with_a_dash_gets_its_own_message(tmp_path, capsys, argv, needle):
    from toyspt.cli.figs import main as figs_main

    assert figs_main(["--quick", "--only", "task", "--cache", str(tmp_path / "c"), *argv]) == 2
    one_error(capsys, needle)
    assert main(["figs", "--quick", "--only", "task", "--cache", str(tmp_path / "c"), *argv]) == 2
    one_error(capsys, needle)


# ------------------------------------------------------------------ what `ledger check` prints (F10)

def committed_records(n: int) -> list[dict]:
    with open(LEDGER, encoding="utf-8") as f:
        return [json.loads(next(f)) for _ in range(n)]


def write_ledger(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records))
    return path


def test_recorded_text_is_printed_inert_and_impossible_totals_are_refused(tmp_path, capsys):
    recs = committed_records(3)
    recs[0]["cpu"] = "Evil\x1b[2J\nline 99: all good\u202e"  # once: the escape ran, a fake line printed
    recs[1]["seconds"] = math.inf  # once: "inf CPU-hours recorded", exit 0
    recs[2]["seconds"] = -5.0
    path = write_ledger(tmp_path / "l.jsonl", recs)
    assert main(["ledger", "check", str(path)]) == 1
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\u202e" not in out and r"Evil\x1b[2J\nline 99: all good\u202e" in out
    assert not any(ln.startswith("line 99") for ln in out.splitlines())
    assert "inf CPU-hours" not in out and "(without the records below)" in out
    assert "line 2: seconds inf is not a duration" in out and "line 3: seconds -5.0 is not a duration" in out
