"""Hostile inputs, round 7: a ledger whose trust is stated exactly (what ``migrate`` seals, what a
reader says of records without a digest), every number of a record bounded before numpy sees it
(by value and by shape), ``repair`` never writing what it reads, doc markers of a small format
grammar, and the messages of ``toyspt ledger``."""
from __future__ import annotations

import json
from pathlib import Path

from toyspt.cli.main import main
from toyspt.runs.ledger_file import DIGEST

ROOT = Path(__file__).resolve().parents[2]
LEDGER = ROOT / "figures" / "ledger" / "ucr.jsonl"


def committed_records(n: int) -> list[dict]:
    with open(LEDGER, encoding="utf-8") as f:
        return [json.loads(next(f)) for _ in range(n)]


def write_ledger(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records))
    return path


def bare(rec: dict) -> dict:
    """``rec`` without its digest."""
    return {k: v for k, v in rec.items() if k != DIGEST}


def forged(rec: dict) -> dict:
    """``rec`` with every test accuracy raised and its summary recomputed: a consistent record."""
    from toyspt.runs.exact import decode, exact_encode
    from toyspt.train.run import summarize

    entry = decode(rec["entry"])
    for h in entry["history"]:
        if isinstance(h.get("test_acc"), float):
            h["test_acc"] = min(1.0, h["test_acc"] + 8 / 150)
    entry["summary"] = summarize(entry["history"])
    return {**rec, "entry": exact_encode(entry)}


def run(capsys, argv: list[str]) -> tuple[int, str]:
    rc = main(argv)
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    return rc, out.out + out.err


# ------------------------------------------------------------------ trust stated exactly

def test_migrate_seals_records_written_before_digests_and_lists_each_line(tmp_path, capsys):
    recs = committed_records(6)
    path = write_ledger(tmp_path / "l.jsonl", [bare(r) for r in recs] + [bare(recs[2])])  # and a duplicate
    rc, said = run(capsys, ["ledger", "migrate", str(path)])
    assert rc == 0 and "7 records sealed, 0 sealed before; the lines sealed: 1-7" in said, said
    assert all(DIGEST in json.loads(x) for x in path.read_text().splitlines())  # the duplicate too


def test_a_digest_removed_beside_sealed_records_is_sealed_only_when_named(tmp_path, capsys):
    recs = committed_records(6)
    lines = [*recs[:3], bare(forged(recs[3])), *recs[4:]]  # a forgery whose digest was deleted
    path = write_ledger(tmp_path / "l.jsonl", lines)
    before = path.read_bytes()
    rc, said = run(capsys, ["ledger", "migrate", str(path)])  # once: sealed, silently, without naming it
    assert rc == 2 and "line 4: a record without a digest beside 5 sealed records" in said, said
    assert "--line 4" in said and path.read_bytes() == before
    rc, said = run(capsys, ["ledger", "migrate", str(path), "--line", "4"])
    assert rc == 0 and "1 records sealed, 5 sealed before; the lines sealed: 4" in said, said
    rc, said = run(capsys, ["ledger", "migrate", str(path), "--line", "2"])
    assert rc == 2 and "line(s) 2 named, but not a usable record without a digest" in said


def test_a_record_of_the_current_layout_without_a_digest_is_not_sealed_unasked(tmp_path, capsys):
    rec = json.loads((ROOT / "figures" / "ledger" / "lra.jsonl").read_text().splitlines()[0])
    assert "kernels" in rec
    path = write_ledger(tmp_path / "l.jsonl", [bare(rec)])
    rc, said = run(capsys, ["ledger", "migrate", str(path)])
    assert rc == 2 and "line 1: a record of the layout written since digests (it has kernels)" in said, said
    rc, said = run(capsys, ["ledger", "migrate", str(path), "--line", "1"])
    assert rc == 0 and "1 records sealed, 0 sealed before; the lines sealed: 1" in said


def test_a_reader_says_once_what_it_used_unsealed_and_a_study_refuses_it(tmp_path):
    from toyspt.runs.ledger import Ledger, StudyLedger

    recs = committed_records(5)
    path = write_ledger(tmp_path / "l.jsonl", [*recs[:4], bare(forged(recs[4]))])
    said: list[str] = []
    led = Ledger(path, kinds=("ucr",), warn=said.append)
    assert recs[4]["key"] in led.lines() and len(led.lines()) == 5  # the API uses it, and says so once
    assert said == [f"{path}: 1 record(s) without a digest used beside 4 sealed (lines 5): their numbers are "
                    "bound to nothing (`toyspt ledger check`)"]
    said.clear()
    study = StudyLedger(path, kinds=("ucr",)).open(warn=said.append)  # as the figure job opens it
    assert recs[4]["key"] not in study.lines() and len(study.lines()) == 4  # once: all 5 used, no word
    assert len(said) == 1 and "1 record(s) without a digest not used (lines 5)" in said[0]


def test_ledger_docs_state_what_a_digest_detects_and_what_not():
    text = " ".join((ROOT / "docs" / "ledger.md").read_text().split())
    assert "a digest deleted or recomputed" in text
    assert "review of the ledger's diff" in text and "toyspt ledger verify" in text
