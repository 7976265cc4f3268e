"""The results ledger against hostile files and failures, through ``toyspt ledger``: what
``ledger check`` prints (recorded text inert, impossible totals refused), reading bounded and
records tamper-evident, one lock for appending and merging, a failed write that leaves no half
record, no append through a link, repair of cut and conflicting lines, and the digest migration."""
from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import pytest
from helpers.ledgers import committed_records, write_ledger

from toyspt.cli.main import main
from toyspt.runs.ledger_file import seal

ROOT = Path(__file__).resolve().parents[2]
LEDGER = ROOT / "figures" / "ledger" / "ucr.jsonl"


def one_error(capsys, needle: str) -> str:
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if "error" in ln]  # argparse: usage, then
    assert len(err) == 1 and needle in err[0], err  # one error line
    return err[0]


# ------------------------------------------------------------------ what `ledger check` prints (F10)

def test_recorded_text_is_printed_inert_and_impossible_totals_are_refused(tmp_path, capsys):
    recs = committed_records(3)
    recs[0]["cpu"] = "Evil\x1b[2J\nline 99: all good\u202e"  # once: the escape ran, a fake line printed
    recs[1]["seconds"] = math.inf  # once: "inf CPU-hours recorded", exit 0
    recs[2]["seconds"] = -5.0
    path = write_ledger(tmp_path / "l.jsonl", [seal(r) for r in recs])  # sealed as a writer would: read, not refused
    assert main(["ledger", "check", str(path)]) == 1
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\u202e" not in out and r"Evil\x1b[2J\nline 99: all good\u202e" in out
    assert not any(ln.startswith("line 99") for ln in out.splitlines())
    assert "inf CPU-hours" not in out and "(without the records below)" in out
    assert "line 2: seconds inf is not a duration" in out and "line 3: seconds -5.0 is not a duration" in out


# ------------------------------------------------------------------ ledger: bounded (F1, F6), tamper-evident (F2, F7)

def edited(rec: dict, edit) -> dict:
    """``rec`` with ``edit(entry)`` applied to its decoded entry, encoded again (still exact)."""
    from toyspt.runs.exact import decode, exact_encode

    entry = decode(rec["entry"])
    edit(entry)
    return {**rec, "entry": exact_encode(entry)}


def check_says(capsys, path: Path, *needles: str) -> str:
    t = time.perf_counter()
    assert main(["ledger", "check", str(path)]) == 1
    assert time.perf_counter() - t < 10
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    for needle in needles:
        assert needle in out.out, out.out[-2000:]
    return out.out


@pytest.mark.parametrize("where, form", [
    ("epoch", {"@range": [1, 1, 10 ** 12]}),  # once: 5.3 GB and 27-46 s, then a failure under a 6 GB limit
    ("phase", {"@rle": [["finetune", 10 ** 12]]}),
    ("which", {"@range": [0, 0, 10 ** 9]}),
])
def test_a_compact_form_claiming_more_than_its_line_allows_is_never_expanded(tmp_path, capsys, where, form):
    rec = committed_records(1)[0]
    rows = rec["entry"]["history"]["@rows"]
    (rows if where == "which" else rows["cols"])[where] = form
    path = write_ledger(tmp_path / "l.jsonl", [rec, *committed_records(2)[1:]])
    assert len(path.read_bytes().splitlines()[0]) < 16_000
    check_says(capsys, path, "line 1: its entry cannot be decoded (Oversized: a ", "more than the",
               "its line's size allows")


def test_the_bomb_costs_no_memory_under_a_limit(tmp_path):
    """``ledger check`` of a line claiming 10^12 values, in a process limited to 1.5 GB."""
    import resource
    import subprocess
    import sys

    rec = committed_records(1)[0]
    rec["entry"]["history"]["@rows"]["cols"]["epoch"] = {"@range": [1, 1, 10 ** 12]}
    path = write_ledger(tmp_path / "l.jsonl", [rec])

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (1536 << 20, 1536 << 20))

    p = subprocess.run([sys.executable, "-m", "toyspt.cli.main", "ledger", "check", str(path)], cwd=ROOT,
                       capture_output=True, text=True, timeout=120, preexec_fn=limit)
    assert p.returncode == 1 and "line 1: its entry cannot be decoded (Oversized" in p.stdout, p.stderr[-2000:]


def test_a_line_and_a_ledger_over_their_caps_are_refused_unread(tmp_path, capsys):
    from toyspt.runs.ledger_file import MAX_BYTES, MAX_LINE_BYTES, LedgerError, read

    big = b"[" + b"0," * (MAX_LINE_BYTES // 2) + b"0]\n"  # once: a 1 GB array line took 7.4 GB, then MemoryError
    got = read(big + b"{}\n", "l")
    assert got.problems[0].startswith(f"l line 1: {len(big) - 1} bytes, over the limit of {MAX_LINE_BYTES}")
    sparse = tmp_path / "sparse.jsonl"
    with open(sparse, "wb") as f:
        f.truncate(MAX_BYTES + 1)  # sized to the study (31 MB): 128 MiB, not the 1 GiB it was
    t = time.perf_counter()
    assert main(["ledger", "check", str(sparse)]) == 2
    assert time.perf_counter() - t < 10  # refused by stat, unread
    assert f"more than the {MAX_BYTES} a ledger may hold" in capsys.readouterr().err
    with pytest.raises(LedgerError):
        from toyspt.runs.ledger_file import read_raw

        read_raw(sparse)


def _impossible():
    def acc(e):
        e["history"][3]["test_acc"] = 1.5

    def loss(e):
        e["history"][7]["train_loss"] = -0.25

    def short(e):
        del e["history"][-1]

    def summary(e):
        e["summary"]["mean_test_last20"] += 0.05  # the edit that turned +0.011 into +0.057 (p 0.0009)

    def swapped(e):
        e["history"][4], e["history"][5] = e["history"][5], e["history"][4]

    def empty(e):
        e.clear()

    return [(acc, "entry.history[3].test_acc 1.5 is not an accuracy"),
            (loss, "entry.history[7].train_loss -0.25 is not a loss"),
            (short, "entry.history: 199 finetune epochs, but its spec trains 200"),
            (summary, "entry.summary.mean_test_last20 0.8118333333333337, but its history gives 0.7618333333333337"),
            (swapped, "entry.history[4].epoch 6: epoch 5 of its 'finetune' phase comes there"),
            (empty, "entry.history: a run's entry holds one")]


@pytest.mark.parametrize("edit, needle", _impossible(), ids=["acc", "loss", "short", "summary", "swapped", "empty"])
def test_numbers_no_run_can_have_are_named_by_line_and_field(tmp_path, capsys, edit, needle):
    from toyspt.runs.ledger import Ledger

    recs = committed_records(2)
    recs[1] = edited(recs[0], edit)
    recs[0] = committed_records(3)[2]
    path = write_ledger(tmp_path / "l.jsonl", recs)
    check_says(capsys, path, f"line 2: its {needle}")  # once: exit 0, silently
    led = Ledger(path, kinds=("ucr",), warn=lambda m: None)
    assert list(led.lines()) == [recs[0]["key"]]  # the job never uses it


def test_an_edited_number_of_a_sealed_record_is_named(tmp_path, capsys):
    from toyspt.runs.ledger_file import record_digest, seal

    rec = seal(committed_records(1)[0])
    assert rec["digest"] == record_digest(rec)

    def train_loss(e):  # a number no rule binds: only the digest can tell
        e["history"][10]["train_loss"] = 0.5

    path = write_ledger(tmp_path / "l.jsonl", [edited(rec, train_loss), {**rec, "cpu": "elsewhere"}])
    check_says(capsys, path, "line 1: its digest does not match its fields", "line 2: its digest does not match")


@pytest.mark.parametrize("field, value, needle", [
    ("ledger", True, "ledger format True, not 1"),  # once: true read as format 1
    ("ledger", 1.0, "ledger format 1.0, not 1"),
    ("kind", ["run"], "its kind is not a text"),  # once: a traceback from check, merge copied it
    ("digest", 7, "its digest of the wrong type"),
])
def test_the_fields_that_make_a_line_a_record_are_typed(tmp_path, capsys, field, value, needle):
    recs = committed_records(2)
    recs[0][field] = value
    path = write_ledger(tmp_path / "l.jsonl", recs)
    check_says(capsys, path, f"line 1: {needle}" if "format" not in needle else f"line 1: a record of {needle}")
    assert main(["ledger", "merge", str(path), "-o", str(tmp_path / "m.jsonl")]) == 2
    assert not (tmp_path / "m.jsonl").exists()


# ------------------------------------------------------------------ one lock (F3), a failed write (F4), links (F9)

def test_a_merge_onto_a_ledger_being_appended_to_loses_nothing(tmp_path):
    """The docs' two-checkout recipe: one process appends while another merges into the same file."""
    import subprocess
    import sys
    import textwrap

    recs = committed_records(41)
    path = write_ledger(tmp_path / "l.jsonl", recs[:1])
    source = write_ledger(tmp_path / "src.jsonl", recs[1:])
    code = textwrap.dedent(f"""
        import json, time
        from pathlib import Path
        from toyspt.runs.ledger_append import append_line
        print("ready", flush=True)
        for line in Path({str(source)!r}).read_text().splitlines():
            append_line(Path({str(path)!r}), json.loads(line))
            time.sleep(0.01)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    from toyspt.runs.ledger_append import merge

    assert proc.stdout.readline().strip() == "ready"
    merges = 0
    while proc.poll() is None:
        n, problems = merge([path], path)  # once: 12 of 40 records lost, silently
        assert not problems
        merges += 1
    assert proc.returncode == 0 and merges > 1
    got = [json.loads(x)["key"] for x in path.read_text().splitlines()]
    assert sorted(got) == sorted(r["key"] for r in recs)


def test_a_full_disk_leaves_no_half_record(tmp_path):
    """An append that the file size limit cuts short (as a full disk does) is cut back whole."""
    import subprocess
    import sys
    import textwrap

    rec = committed_records(1)[0]
    path = write_ledger(tmp_path / "l.jsonl", [rec])
    before = path.read_bytes()
    code = textwrap.dedent(f"""
        import json, resource, signal, sys
        from pathlib import Path
        from toyspt.runs.ledger_append import append_line
        from toyspt.util.atomic import WriteError
        rec = json.loads(Path({str(path)!r}).read_text())
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        limit = {len(before)} + 1000  # room for 1000 bytes of a 14 KB record
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        try:
            append_line(Path({str(path)!r}), rec)
        except WriteError as e:
            print("error:", e)
            sys.exit(2)
    """)
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "cannot append a record" in p.stdout, p.stderr[-2000:]
    assert "nothing half-written was left" in p.stdout and path.read_bytes() == before  # once: half a record


def test_a_read_only_ledger_is_one_line(tmp_path, monkeypatch, capsys):
    import errno

    import toyspt.runs.ledger_append as append
    from toyspt.cli.flags import run_main

    rec = committed_records(1)[0]
    real_open = os.open

    def read_only(p, flags, *a):
        if str(p).endswith("l.jsonl") and flags & (os.O_WRONLY | os.O_RDWR):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(p))
        return real_open(p, flags, *a)

    monkeypatch.setattr(append.os, "open", read_only)
    assert run_main(lambda: append.append_line(tmp_path / "l.jsonl", rec)) == 2  # once: a traceback
    assert "cannot open it to write: Read-only file system" in capsys.readouterr().err


def test_an_append_does_not_follow_a_link_out_of_the_tree(tmp_path, monkeypatch):
    from toyspt.runs.ledger_append import append_line
    from toyspt.runs.ledger_file import LedgerError

    tree, outside = tmp_path / "tree", tmp_path / "outside"
    (tree / "figures").mkdir(parents=True)
    outside.mkdir()
    (outside / "ucr.jsonl").write_text("")
    (tree / "figures" / "ledger").symlink_to(outside)  # once: 28 lines written outside the tree
    monkeypatch.chdir(tree)
    with pytest.raises(LedgerError, match="a link to .*outside the working folder"):
        append_line(Path("figures/ledger/ucr.jsonl"), committed_records(1)[0])
    assert (outside / "ucr.jsonl").read_text() == ""
    (tree / "l.jsonl").symlink_to(tree / "real.jsonl")  # a link inside the tree is followed
    append_line(Path("l.jsonl"), committed_records(1)[0])
    assert len((tree / "real.jsonl").read_text().splitlines()) == 1


# ------------------------------------------------------------------ repair (F5), the digest migration

def conflicting(rec: dict) -> dict:
    """``rec`` as another host computed it: a number no summary reads differs, sealed."""
    from toyspt.runs.ledger_file import seal

    def loss(e):
        e["history"][-1]["train_loss"] += 0.001

    return seal(edited(rec, loss))


def test_repair_drops_cut_lines_and_sets_conflicts_aside(tmp_path, capsys):
    recs = committed_records(4)
    path = write_ledger(tmp_path / "l.jsonl", [recs[0], recs[1], conflicting(recs[1]), recs[2]])
    with open(path, "a") as f:
        f.write(json.dumps(recs[3])[:500])  # a line cut by kill -9
    assert main(["ledger", "check", str(path)]) == 1
    assert main(["ledger", "merge", str(path), "-o", str(tmp_path / "m.jsonl")]) == 2  # once: refused forever
    capsys.readouterr()
    out = tmp_path / "fixed.jsonl"
    assert main(["ledger", "repair", str(path), "-o", str(out)]) == 0
    said = capsys.readouterr().out
    assert "line 5: truncated" in said and "lines 2, 3: records of" in said
    assert f"2 records kept; 1 line(s) dropped (5); 2 conflicting record(s) of 1 key(s) set aside in {out}.aside" \
        in said
    assert [json.loads(x)["key"] for x in out.read_text().splitlines()] == [recs[0]["key"], recs[2]["key"]]
    assert len(Path(f"{out}.aside").read_text().splitlines()) == 2
    assert main(["ledger", "check", str(out)]) == 0
    assert main(["ledger", "repair", str(path), "-o", str(path)]) == 2  # a new file, never the ledger itself


def test_a_conflicting_record_is_not_appended_again(tmp_path):
    from toyspt.runs.ledger import Ledger
    from toyspt.runs.specs import RunSpec
    from toyspt.ucr.data import UCRSource

    recs = committed_records(1)
    path = write_ledger(tmp_path / "l.jsonl", [recs[0], conflicting(recs[0])])
    said = []
    led = Ledger(path, kinds=("ucr",), warn=said.append)
    assert recs[0]["key"] not in led.lines() and recs[0]["key"] in led.conflicted

    class Spec:  # the run whose records conflict: its key, covered, with weights (just trained)
        kind, parent = "run", lambda self: None

        def key(self):
            return recs[0]["key"]

        def label(self):
            return "scratch seed 0"

    class Entry:
        def tensors(self):
            return {"final": {}}

    led.covers = lambda spec: True
    before = path.read_bytes()
    assert not led.store(Spec(), Entry()) and not led.store(Spec(), Entry())  # once: a new copy every fresh run
    assert path.read_bytes() == before
    assert sum("not appended, its records" in m for m in said) == 1 and RunSpec and UCRSource


def test_the_migration_seals_every_record_and_each_answers_as_before(tmp_path, capsys):
    from toyspt.runs.ledger import Ledger
    from toyspt.runs.ledger_file import record_digest

    with open(LEDGER, "rb") as f:  # runs, their SPT-only parents, proximity probes, as written before digests
        head = b"".join(json.dumps({k: v for k, v in json.loads(next(f)).items() if k != "digest"},
                                   separators=(",", ":")).encode() + b"\n" for _ in range(120))
    path = tmp_path / "l.jsonl"
    path.write_bytes(head)
    before = Ledger(path, kinds=(), warn=lambda m: None).lines()
    assert main(["ledger", "check", str(path)]) == 0
    assert "120 of 120 records carry no digest" in capsys.readouterr().out
    assert main(["ledger", "migrate", str(path)]) == 0
    assert "120 records sealed, 0 sealed before" in capsys.readouterr().out
    after = Ledger(path, kinds=(), warn=lambda m: None).lines()
    assert list(after) == list(before)
    for k, line in after.items():
        rec = line.record
        assert rec["digest"] == record_digest(rec) and line.number == before[k].number
        assert {f: v for f, v in rec.items() if f != "digest"} == before[k].record
    sealed = path.read_bytes()
    assert main(["ledger", "migrate", str(path)]) == 0 and path.read_bytes() == sealed  # once is enough
    assert main(["ledger", "check", str(path)]) == 0 and "carry no digest" not in capsys.readouterr().out
    with open(path, "ab") as f:
        f.write(head.splitlines(keepends=True)[0])  # an unsealed record beside sealed ones: named
    assert main(["ledger", "check", str(path)]) == 1
    assert "1 of 120 records carry no digest" in capsys.readouterr().out.replace("121", "")


def test_a_full_disk_under_a_sweep_keeps_the_trained_run_in_the_cache(tmp_path, monkeypatch):
    import errno

    from conftest import SMALL_TASK

    from toyspt.runs import RunCache, RunSpec, sweep
    from toyspt.runs.ledger import Ledger
    from toyspt.runs.store import LayeredStore
    from toyspt.runs.sweeps import SweepOptions
    from toyspt.train.recipes import TrainConfig
    from toyspt.util.atomic import WriteError

    spec = RunSpec("scratch", 0, SMALL_TASK, train=TrainConfig(epochs=1, pre_epochs=1, batch_size=64))
    cache, path = RunCache(tmp_path / "c"), tmp_path / "l.jsonl"
    real_write = os.write

    def full(fd, data):
        if bytes(data[:12]) == b'{"ledger":1,':  # a record's line: the disk is full from here on
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(WriteError, match="cannot append a record: No space left on device"):
        sweep([spec], LayeredStore((cache, Ledger(path, kinds=("toy",)))), options=SweepOptions(progress=False))
    monkeypatch.undo()
    assert cache.load(spec) is not None and path.read_bytes() == b""  # trained, kept; no half record
    assert Ledger(path, kinds=("toy",)).store(spec, cache.load(spec, weights=True))  # the next job records it
