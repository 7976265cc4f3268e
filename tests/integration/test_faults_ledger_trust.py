"""The results ledger's trust stated exactly (what ``migrate`` seals, what a reader says of records
without a digest), every number of a record bounded before numpy sees it (by value and by shape),
``repair`` never writing what it reads, the messages of ``toyspt ledger``, and the caps and
counts at their edges."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers.ledgers import committed_records, write_ledger

from toyspt.cli.main import main
from toyspt.runs.ledger_file import DIGEST, seal

ROOT = Path(__file__).resolve().parents[2]
LEDGER = ROOT / "figures" / "ledger" / "ucr.jsonl"


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


# ------------------------------------------------------------------ every number bounded, by value and by shape

def _huge_seconds(rec):
    rec["seconds"] = 10 ** 4000  # an 18 KB line: once an OverflowError traceback from check, verify, the job


def _huge_history(rec):
    rows = rec["entry"]["history"]["@rows"]
    rows["cols"]["epoch"] = {"@range": [1, 10 ** 4000, 3]}


def _many_norms(rec):
    rec["norms"]["final"] = {f"t{i}": 1.0 for i in range(5000)}  # once: bounded by type only (2.8 GB at 117 MiB)


def _foreign_kernels(rec):
    rec["kernels"] = {"os.system": "rm -rf"}


def _wide_spec(rec):
    rec["spec"]["model"] = {**rec["spec"].get("model", {}), "pad": [0] * 3000}


@pytest.mark.parametrize("edit, needle", [
    (_huge_seconds, "line 1: its seconds an integer of 4001 digits is out of range"),
    (_huge_history, "line 1: its entry.history.@rows.cols.epoch.@range[1] an integer of 4001 digits is out of range"),
    (_many_norms, "line 1: its norms.'final': 5000 tensors, more than the 512 a state may hold"),
    (_foreign_kernels, "line 1: its kernels.'os.system' 'rm -rf': not a kernel setting"),
    (_wide_spec, "line 1: its spec: more than the 2000 values a spec may hold"),
], ids=["seconds", "history", "norms", "kernels", "spec"])
def test_every_number_is_bounded_before_numpy_sees_it(tmp_path, capsys, edit, needle):
    from toyspt.runs.ledger_file import identity
    from toyspt.util.hashing import digest

    rec = json.loads((ROOT / "figures" / "ledger" / "lra.jsonl").read_text().splitlines()[0])
    edit(rec)
    rec["key"] = digest(identity(rec["kind"], rec["spec"]))  # a careful forger keeps the key and the digest
    path = write_ledger(tmp_path / "l.jsonl", [seal(rec)])
    for argv in (["ledger", "check", str(path)], ["ledger", "verify", str(path)],
                 ["ledger", "merge", str(path), "-o", str(tmp_path / "m.jsonl")]):
        rc, said = run(capsys, argv)
        assert rc in (1, 2) and (needle in said or argv[1] == "verify"), said


def test_seconds_that_are_no_duration_are_not_summed(tmp_path, capsys):
    recs = committed_records(2)
    recs[1]["seconds"] = 1e308  # once: a 300-digit CPU-hours total
    path = write_ledger(tmp_path / "l.jsonl", [recs[0], seal(recs[1])])
    rc, said = run(capsys, ["ledger", "check", str(path)])
    assert rc == 1 and "line 2: seconds 1e+308 is not a duration" in said and "e+30" not in said.split("\n")[0]


def test_a_record_is_held_as_its_line(tmp_path):
    """Every usable record is kept as its line's bytes: held in memory, a ledger costs about its size."""
    from toyspt.runs.ledger import Ledger

    path = write_ledger(tmp_path / "l.jsonl", committed_records(20))
    lines = Ledger(path, kinds=("ucr",), warn=lambda m: None).lines()
    raw = path.read_bytes().splitlines()
    for line in lines.values():
        assert line.raw == raw[line.number - 1] and line.record == json.loads(raw[line.number - 1])


# ------------------------------------------------------------------ repair never writes what it reads

@pytest.mark.parametrize("how", ["aside", "aside-link", "aside-is-out"])
def test_repair_never_writes_the_file_it_reads(tmp_path, capsys, how):
    recs = committed_records(5)
    conflicting = seal({**recs[1], "tier": "elsewhere", "entry": forged(recs[1])["entry"]})
    path = write_ledger(tmp_path / "l.jsonl", [recs[0], recs[1], conflicting, *recs[2:]])
    before = path.read_bytes()
    out = tmp_path / "new.jsonl"
    if how == "aside":
        aside = path  # once: exit 0, the ledger overwritten by its 2 conflicting records
    elif how == "aside-link":
        aside = tmp_path / "hard.jsonl"
        os.link(path, aside)
    else:
        aside = out  # once: "4 records kept", and the file held the 2 conflicting ones
    rc, said = run(capsys, ["ledger", "repair", str(path), "-o", str(out), "--aside", str(aside)])
    assert rc == 2 and path.read_bytes() == before and "name another --aside" in said, said
    assert not out.exists()


# ------------------------------------------------------------------ messages

def test_kinds_come_from_the_registry_and_duplicates_are_counted_apart(tmp_path, capsys):
    recs = committed_records(90)
    probe = next(r for r in recs if r["kind"] == "proximity")
    odd = seal({**probe, "kind": "a os.system"})  # once printed as a kind: "a os.system 1"
    path = write_ledger(tmp_path / "l.jsonl", [bare(recs[0]), bare(recs[0]), odd])
    rc, said = run(capsys, ["ledger", "check", str(path)])
    assert "os.system" not in said and "of no known kind 1" in said, said
    assert "2 records (" in said and "and 1 duplicate line(s)" in said
    assert "1 of 2 records carry no digest (2 line(s), 1 of them a duplicate of a record" in said  # once: 2 of 1


def test_verify_of_nothing_exits_2(tmp_path, capsys):
    path = write_ledger(tmp_path / "l.jsonl", [])
    rc, said = run(capsys, ["ledger", "verify", str(path)])
    assert rc == 2 and "no run record to verify" in said  # once: exit 0, "0 records"


# ------------------------------------------------------------------ gaps pinned

def test_the_caps_hold_at_their_edge(tmp_path):
    from toyspt.runs.ledger_file import MAX_BYTES, read, read_raw

    rec = json.dumps(committed_records(1)[0], separators=(",", ":")).encode()
    assert read(rec + b"\n", "l", max_line=len(rec)).good  # a line of exactly the cap is read
    assert read(rec + b"\n", "l", max_line=len(rec) - 1).problems[0].startswith(f"l line 1: {len(rec)} bytes, over")
    at = tmp_path / "at.jsonl"
    with open(at, "wb") as f:
        f.truncate(MAX_BYTES)  # exactly the cap: read (one line of zeros, cut off)
    raw, _ = read_raw(at)
    assert len(raw) == MAX_BYTES
    assert read(raw, "l").problems == ["l line 1: truncated (no line end: a write cut short); not used"]


def test_repair_writes_a_duplicated_record_once(tmp_path, capsys):
    recs = committed_records(3)
    path = write_ledger(tmp_path / "l.jsonl", [recs[0], recs[1], recs[0], recs[2], recs[1]])
    out = tmp_path / "new.jsonl"
    rc, said = run(capsys, ["ledger", "repair", str(path), "-o", str(out)])
    assert rc == 0 and [json.loads(x)["key"] for x in out.read_text().splitlines()] == [r["key"] for r in recs]


def test_the_line_tally_is_recounted_after_an_in_place_truncation(tmp_path):
    from toyspt.runs.ledger import Ledger
    from toyspt.runs.ledger_append import append_line

    recs = committed_records(4)
    path = write_ledger(tmp_path / "l.jsonl", recs[:3])
    led = Ledger(path, kinds=("ucr",), warn=lambda m: None)
    led.lines()  # the tally: 3 lines
    first = path.read_bytes().splitlines(keepends=True)[0]
    with open(path, "r+b") as f:  # the same file, cut back to its first line
        f.truncate(len(first))
    assert append_line(path, recs[3], led._tally) == 2
    assert path.read_bytes().count(b"\n\n") == 0 and len(path.read_bytes().splitlines()) == 2


def test_a_record_missing_its_pretraining_epochs_is_refused(tmp_path, capsys):
    from toyspt.runs.exact import decode, exact_encode
    from toyspt.runs.ledger import Ledger

    with open(LEDGER, encoding="utf-8") as f:
        rec = next(r for r in map(json.loads, f) if r["spec"].get("recipe") == "spt")
    entry = decode(rec["entry"])
    entry["history"] = [h for h in entry["history"] if h.get("phase") != "pretrain"]
    from toyspt.train.run import summarize

    entry["summary"] = summarize(entry["history"])
    path = write_ledger(tmp_path / "l.jsonl", [seal({**rec, "entry": exact_encode(entry)})])
    assert not Ledger(path, kinds=("ucr",), warn=lambda m: None).lines()
    rc, said = run(capsys, ["ledger", "check", str(path)])
    assert rc == 1 and "line 1: its entry.history: 0 pretrain epochs, but its spec trains" in said, said
