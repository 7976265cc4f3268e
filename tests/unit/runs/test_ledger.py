"""The results ledger: records that answer specs exactly, integrity of every line, atomic
appends, merges that refuse conflicts."""
import json
import math
import os
import signal
import subprocess
import sys
import textwrap
from dataclasses import replace

import pytest
import torch

from tests.conftest import SMALL_TASK
from toyspt.runs import RunCache, RunSpec, sweep
from toyspt.runs.ledger import LEDGER_FORMAT, Ledger, Tally, WeightsNotKept, append_line, differences, merge
from toyspt.runs.planning import make_plan
from toyspt.runs.store import LayeredStore
from toyspt.runs.sweeps import Stopped, SweepOptions, Watch
from toyspt.train.recipes import TrainConfig

TRAIN = TrainConfig(epochs=3, pre_epochs=2, batch_size=64)
SPT = RunSpec("spt", 0, SMALL_TASK, train=TRAIN)


def toy_ledger(path, **kw):
    return Ledger(path, kinds=("toy",), warn=kw.pop("warn", lambda m: None), **kw)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A cache and ledger after one sweep of spt at two seeds (their SPT-only parents recorded too)."""
    root = tmp_path_factory.mktemp("ledger")
    cache, led = RunCache(root / "cache"), toy_ledger(root / "ledger.jsonl")
    specs = [SPT, replace(SPT, seed=1)]
    results = sweep(specs, LayeredStore((cache, led)), options=SweepOptions(progress=False))
    return root, specs, results


def test_every_finished_run_and_parent_is_recorded_once(trained):
    root, specs, _ = trained
    led = toy_ledger(root / "ledger.jsonl")
    keys = {s.key() for s in specs} | {s.parent().key() for s in specs}
    assert set(led.lines()) == keys and not led.problems
    rec = led.lines()[SPT.key()].record
    assert rec["ledger"] == LEDGER_FORMAT and rec["parent"] == SPT.parent().key()
    assert rec["spec"]["recipe"] == "spt" and rec["spec"]["seed"] == 0 and rec["spec"]["evaluate"] == "all"
    assert set(rec["states"]) >= {"init", "final"} and rec["norms"]["final"] and rec["cpu"]


def test_a_record_answers_its_spec_exactly_without_weights(trained):
    root, specs, results = trained
    led = toy_ledger(root / "ledger.jsonl")
    store = LayeredStore((RunCache(root / "empty"), led))
    plan = make_plan(specs, store)
    assert not plan.todo and all(store.answered[s.key()] == "ledger" for s in specs)
    for s, r in zip(specs, results):
        got = plan.done[s.key()]
        assert json.dumps(got.to_json()) == json.dumps(r.to_json())
        assert isinstance(got.states, WeightsNotKept) and "final" in got.states
        with pytest.raises(KeyError, match="not kept in the ledger"):
            got.states["final"]


def test_recompute_does_not_read_the_ledger(trained):
    root, specs, _ = trained
    store = LayeredStore((RunCache(root / "empty2"), toy_ledger(root / "ledger.jsonl")))
    plan = make_plan(specs[:1], store, recompute=True)
    assert [s.key() for s in plan.todo] == [SPT.parent().key(), SPT.key()]


def test_runs_in_the_cache_but_not_the_ledger_are_recorded_while_planning(trained, tmp_path):
    root, specs, _ = trained
    led = toy_ledger(tmp_path / "new.jsonl")
    store = LayeredStore((RunCache(root / "cache"), led))
    make_plan(specs, store)
    assert all(store.answered[s.key()] == "cache" for s in specs)
    assert {s.key() for s in specs} <= set(toy_ledger(tmp_path / "new.jsonl").lines())


def _lines(root):
    return (root / "ledger.jsonl").read_text().splitlines()


@pytest.mark.parametrize("damage,why", [
    (lambda line: line[: len(line) // 2], "not JSON"),
    (lambda line: line.replace('"seed":0', '"seed":7', 1), "does not match its own spec"),
    (lambda line: line.replace(f'"ledger":{LEDGER_FORMAT}', '"ledger":99', 1), "ledger format 99"),
    (lambda line: "[1, 2]", "not a JSON object"),
    (lambda line: "[" * 100_000 + "]" * 100_000, "not JSON (nested too deeply)"),
    (lambda line: '"seconds":NaN,"was":'.join(line.rsplit('"seconds":', 1)), "not JSON (NaN is not a JSON number)"),
    (lambda line: '"seconds":"2h","was":'.join(line.rsplit('"seconds":', 1)), "its seconds of the wrong type"),
    (lambda line: line.replace('"states":[', '"states":[7,', 1), "its states of the wrong type"),
    (lambda line: line.replace('"entry":{', '"entry":{"@rows":1,', 1), "its entry cannot be decoded"),
])
def test_a_bad_line_is_named_and_never_used(trained, tmp_path, damage, why):
    root, _, _ = trained
    lines = _lines(root)
    i = next(j for j, line in enumerate(lines) if f'"key":"{SPT.key()}"' in line)
    lines[i] = damage(lines[i])
    (tmp_path / "l.jsonl").write_text("\n".join(lines) + "\n")
    led = toy_ledger(tmp_path / "l.jsonl")
    assert SPT.key() not in led.lines() and len(led) == len(lines) - 1
    assert len(led.problems) == 1 and f"line {i + 1}" in led.problems[0] and why in led.problems[0]


def test_non_utf8_and_truncated_lines_are_named(trained, tmp_path):
    root, _, _ = trained
    raw = (root / "ledger.jsonl").read_bytes()
    (tmp_path / "l.jsonl").write_bytes(b"\xff\xfe{}\n" + raw + raw.splitlines()[0][:100])
    led = toy_ledger(tmp_path / "l.jsonl")
    assert len(led) == len(raw.splitlines())
    assert any("line 1: not UTF-8" in p for p in led.problems)
    assert any("truncated" in p for p in led.problems)


def other_host(line: str) -> str:
    """The line's record as another host might compute it: one number its summary does not read
    (the last epoch's training loss) differs, the record consistent and sealed."""
    from toyspt.runs.exact import decode, exact_encode
    from toyspt.runs.ledger_file import seal

    rec = json.loads(line)
    entry = decode(rec["entry"])
    entry["history"][-1]["train_loss"] += 0.001
    return json.dumps(seal({**rec, "entry": exact_encode(entry)}))


def test_two_records_of_one_key_with_different_numbers_are_both_refused(trained, tmp_path):
    root, _, _ = trained
    lines = _lines(root)
    i = next(j for j, line in enumerate(lines) if f'"key":"{SPT.key()}"' in line)
    (tmp_path / "l.jsonl").write_text("\n".join(lines + [other_host(lines[i]), lines[i]]) + "\n")
    led = toy_ledger(tmp_path / "l.jsonl")
    assert SPT.key() not in led.lines()
    assert any(f"lines {i + 1}, {len(lines) + 1}, {len(lines) + 2}" in p and "different numbers" in p
               for p in led.problems)


def test_two_records_of_one_run_read_from_different_roots_are_one_record():
    """The key hashes a run's identity, not where its data set was read: a record of the same
    run from another machine's archive root is a duplicate, not a conflict (as merge has it)."""
    from toyspt.runs.ledger_file import identity, parse
    from toyspt.train.run import summarize
    from toyspt.util.hashing import digest

    def line(where, acc=0.75):
        spec = dict(recipe="scratch", seed=0, data=dict(kind="ucr", name="GunPoint", fingerprint="f00d", root=where),
                    train=dict(epochs=1))
        history = [dict(phase="finetune", epoch=1, step=4, train_loss=0.5, train_acc=acc, val_acc=acc, test_acc=acc,
                        val_loss=0.5)]
        entry = dict(recipe="scratch", seed=0, history=history, summary=summarize(history))
        rec = dict(ledger=LEDGER_FORMAT, key=digest(identity("ucr", spec)), kind="ucr", spec=spec, entry=entry,
                   states=["final"])
        return json.dumps(rec).encode() + b"\n"

    good, problems = parse(line("/a/UCRArchive_2018") + line("/b/ucr"), "l.jsonl")
    assert not problems and [x.number for x in good.values()] == [1]
    good, problems = parse(line("/a/UCRArchive_2018") + line("/b/ucr", acc=0.5), "l.jsonl")
    assert not good and "lines 1, 2: records of" in problems[0] and "different numbers" in problems[0]


def test_an_identical_duplicate_is_harmless(trained, tmp_path):
    root, _, _ = trained
    lines = _lines(root)
    (tmp_path / "l.jsonl").write_text("\n".join(lines + lines[:1]) + "\n")
    led = toy_ledger(tmp_path / "l.jsonl")
    assert len(led) == len(lines) and not led.problems


def test_an_append_after_a_truncated_line_starts_a_new_line(trained, tmp_path):
    root, _, _ = trained
    lines = _lines(root)
    p = tmp_path / "l.jsonl"
    p.write_text(lines[0] + "\n" + lines[1][:50])
    append_line(p, json.loads(lines[2]))
    led = toy_ledger(p)
    assert len(led) == 2 and len(led.problems) == 1 and "line 2" in led.problems[0]


def test_a_file_that_is_no_ledger_is_refused_before_anything_trains(trained, tmp_path, monkeypatch):
    """Lines but not one record, and not beginning as a record does (a password file, a CSV): the
    sweep refuses before training and the file keeps its bytes; a ledger with a damaged line, or only
    a killed writer's cut-off last line, is written to."""
    from toyspt.runs.ledger import LedgerError

    root, specs, _ = trained
    foreign = tmp_path / "passwd"
    foreign.write_text("root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1::/usr/sbin:/usr/sbin/nologin\n")
    before = foreign.read_bytes()
    from toyspt.runs import sweeps

    calls = []
    monkeypatch.setattr(sweeps, "train_job", lambda *a, **k: calls.append(a))
    with pytest.raises(LedgerError, match="passwd: not a ledger, no line of it is a record .*line 1: not JSON"):
        sweep(specs[:1], LayeredStore((RunCache(tmp_path / "c"), toy_ledger(foreign))),
              options=SweepOptions(progress=False))
    assert foreign.read_bytes() == before and not calls
    cache = RunCache(root / "cache")
    damaged, cut = tmp_path / "damaged.jsonl", tmp_path / "cut.jsonl"
    damaged.write_text("not a record\n" + _lines(root)[0] + "\n")
    cut.write_text(_lines(root)[0][:40])  # a first writer killed mid-line: no record yet, still a ledger
    for path in (damaged, cut):
        led = toy_ledger(path)
        led.check_writable()
        assert led.store(specs[0], cache.load(specs[0])) and specs[0].key() in toy_ledger(path)


def _entries(root, specs):
    """(spec, cached entry with weights) of the runs and their SPT-only parents."""
    cache = RunCache(root / "cache")
    every = [x for s in specs for x in (s, s.parent())]
    return [(x, cache.load(x)) for x in every]


def test_two_ledgers_appending_to_one_file_alternately_number_every_line_right(trained, tmp_path):
    root, specs, _ = trained
    p = tmp_path / "l.jsonl"
    p.write_text("{oops\n")  # a line before, never used
    a, b = toy_ledger(p), toy_ledger(p)
    assert len(a) == len(b) == 0  # both read the file before either appends
    for i, (spec, entry) in enumerate(_entries(root, specs)):
        assert (a, b)[i % 2].store(spec, entry)
    fresh = toy_ledger(p)
    assert [line.number for line in sorted(fresh.lines().values(), key=lambda x: x.number)] == [2, 3, 4, 5]
    for led in (a, b):
        for k, line in led.lines().items():
            assert line.number == fresh.lines()[k].number, k


def test_an_append_counts_only_the_bytes_past_what_it_knows(trained, tmp_path, monkeypatch):
    root, _, _ = trained
    lines = _lines(root)
    p = tmp_path / "l.jsonl"
    p.write_text("\n".join(lines[:2]) + "\n")
    tally = Tally()
    assert append_line(p, json.loads(lines[2]), tally) == 3  # the first append counts the whole file
    with open(p, "a") as f:
        f.write(lines[3] + "\n")  # another writer appends a line
    read = []
    real = os.pread
    monkeypatch.setattr(os, "pread", lambda fd, n, at: read.append(n) or real(fd, n, at))
    assert append_line(p, json.loads(lines[0]), tally) == 5
    assert sum(read) <= len(lines[3]) + 2  # the other writer's line and the last byte, not the file
    assert (tally.size, tally.lines) == (p.stat().st_size, 5)


def test_a_ledger_replaced_under_a_tally_is_counted_again(trained, tmp_path):
    root, specs, _ = trained
    lines = _lines(root)
    p = tmp_path / "l.jsonl"
    p.write_text(lines[0] + "\n")
    led = toy_ledger(p)
    assert len(led) == 1
    other = tmp_path / "other.jsonl"  # a merge writes a new file and renames it over the ledger
    other.write_text("{}\n" * 30 + lines[0] + "\n")
    os.replace(other, p)
    spec, entry = next((s, e) for s, e in _entries(root, specs) if s.key() != json.loads(lines[0])["key"])
    assert led.store(spec, entry)
    assert led.lines()[spec.key()].number == 32 == toy_ledger(p).lines()[spec.key()].number


def test_a_kill_during_appends_leaves_a_readable_ledger(trained, tmp_path):
    """A writer killed with SIGKILL mid-stream: every complete line is usable, at most the
    line in flight is lost."""
    root, _, _ = trained
    src = root / "ledger.jsonl"
    p = tmp_path / "l.jsonl"
    code = textwrap.dedent(f"""
        import json, sys
        from pathlib import Path
        from toyspt.runs.ledger_append import append_line
        recs = [json.loads(x) for x in Path({str(src)!r}).read_text().splitlines()]
        i = 0
        while True:
            r = dict(recs[i % len(recs)]); append_line(Path({str(p)!r}), r); i += 1
            print(i, flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    for _ in range(20):
        proc.stdout.readline()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    led = toy_ledger(p)
    assert len(led) == len(_lines(root))  # identical duplicates: every key once
    assert all("truncated" in x for x in led.problems) and len(led.problems) <= 1


def test_merge_unions_and_refuses_conflicts(trained, tmp_path):
    root, _, _ = trained
    lines = _lines(root)
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("\n".join(lines[:2]) + "\n")
    b.write_text("\n".join(lines[1:]) + "\n")
    n, problems = merge([a, b], tmp_path / "m.jsonl")
    assert n == len(lines) and not problems and len(toy_ledger(tmp_path / "m.jsonl")) == len(lines)
    b.write_text(other_host(lines[1]) + "\n")
    n, problems = merge([a, b], tmp_path / "m2.jsonl")
    assert n == 0 and len(problems) == 1 and "differ" in problems[0] and not (tmp_path / "m2.jsonl").exists()


def test_a_differing_recomputation_keeps_the_record_and_says_so(trained, tmp_path):
    root, specs, results = trained
    said = []
    p = tmp_path / "l.jsonl"
    p.write_text((root / "ledger.jsonl").read_text())
    led = toy_ledger(p, warn=said.append)
    r = results[0]
    r.summary = {**r.summary, "final_test_acc": -1.0}
    r.states = RunCache(root / "cache").load(specs[0]).states
    assert not led.store(specs[0], r)
    assert len(said) == 1 and "differ from its record" in said[0]
    assert p.read_text() == (root / "ledger.jsonl").read_text()


def test_a_recomputation_that_differs_only_in_its_timing_is_silent(trained, tmp_path):
    """A run computed again takes other seconds: not a difference in its numbers, nothing said."""
    root, specs, _ = trained
    said = []
    p = tmp_path / "l.jsonl"
    p.write_text((root / "ledger.jsonl").read_text())
    r = RunCache(root / "cache").load(specs[0])
    r.seconds = r.seconds + 1.5
    assert not toy_ledger(p, warn=said.append).store(specs[0], r) and said == []
    r.summary = {**r.summary, "final_test_acc": -1.0}
    assert not toy_ledger(p, warn=said.append).store(specs[0], r)
    assert len(said) == 1 and "1 differ, first /summary/final_test_acc: " in said[0] and "-> -1.0" in said[0]
    assert p.read_text() == (root / "ledger.jsonl").read_text()


def test_differences_compare_every_number_by_its_text():
    assert differences({"a": [1, 2.0]}, {"a": [1, 2.0]}) == []
    assert differences({"a": [1, 2.0]}, {"a": [1, 2]}) == ["/a[1]: 2.0 -> 2"]
    assert differences({"a": 1}, {"b": 1}) == ["/a: missing from the new entry", "/b: not in the record"]
    # with a tolerance, floats within it agree (relative, or absolute near zero); nothing else is loosened
    assert differences({"a": [0.1 + 0.2, 1e-18, math.nan]}, {"a": [0.3, -1e-18, math.nan]}, tol=1e-15) == []
    assert differences({"a": 0.3}, {"a": 0.3 + 1e-12}, tol=1e-15) == [f"/a: 0.3 -> {0.3 + 1e-12!r}"]
    assert differences({"a": [1, 2.0]}, {"a": [1, 2]}, tol=1.0) == ["/a[1]: 2.0 -> 2"]


def test_the_ledger_is_a_regular_file_of_bounded_size(tmp_path):
    from toyspt.runs.ledger_file import LedgerError

    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(LedgerError, match="not a regular file"):
        toy_ledger(tmp_path / "fifo").lines()


class StopAfterOne(Watch):
    def __init__(self):
        self.n = 0

    def finished(self, job, results):
        self.n += 1

    def more(self):
        return self.n < 1


def test_a_watch_stops_a_sweep_with_every_finished_run_kept(tmp_path):
    cache, led = RunCache(tmp_path / "c"), toy_ledger(tmp_path / "l.jsonl")
    specs = [replace(SPT, recipe="scratch", seed=s) for s in (5, 6, 7)]
    with pytest.raises(Stopped) as e:
        sweep(specs, LayeredStore((cache, led)), watch=StopAfterOne(),
              options=SweepOptions(progress=False))
    assert len(e.value.left) == 2 and len(toy_ledger(tmp_path / "l.jsonl")) == 1
    assert sum(cache.load(s) is not None for s in specs) == 1


def test_the_ledger_command_checks_and_merges(trained, tmp_path, capsys):
    from toyspt.cli.main import main

    root, _, _ = trained
    src = root / "ledger.jsonl"
    assert main(["ledger", "check", str(src)]) == 0
    assert f"{len(_lines(root))} records (run {len(_lines(root))})" in capsys.readouterr().out
    bad = tmp_path / "bad.jsonl"
    bad.write_text(src.read_text() + "{oops\n")
    assert main(["ledger", "check", str(bad)]) == 1
    assert f"line {len(_lines(root)) + 1}: not JSON" in capsys.readouterr().out
    assert main(["ledger", "merge", str(src), str(bad), "-o", str(tmp_path / "m.jsonl")]) == 2
    assert "nothing written" in capsys.readouterr().out and not (tmp_path / "m.jsonl").exists()
    assert main(["ledger", "merge", str(src), str(src), "-o", str(tmp_path / "m.jsonl")]) == 0
    assert (tmp_path / "m.jsonl").read_text() == src.read_text()


def test_a_missing_ledger_or_a_folder_is_one_line_not_an_empty_ledger(tmp_path, capsys):
    from toyspt.cli.main import main

    assert main(["ledger", "check", str(tmp_path / "typo.jsonl")]) == 2
    assert capsys.readouterr().out == f"error: {tmp_path / 'typo.jsonl'}: no such ledger\n"
    assert main(["ledger", "merge", str(tmp_path / "typo.jsonl"), "-o", str(tmp_path / "m.jsonl")]) == 2
    assert "no such ledger" in capsys.readouterr().out and not (tmp_path / "m.jsonl").exists()
    assert main(["ledger", "check", str(tmp_path)]) == 2
    assert "not a regular file" in capsys.readouterr().err
    (tmp_path / "l.jsonl").write_text("")
    assert main(["ledger", "merge", str(tmp_path / "l.jsonl"), "-o", str(tmp_path)]) == 2
    assert "must be a file to write, but it is a folder" in capsys.readouterr().err


def test_a_diverged_tensor_has_its_norm_as_text_never_a_nan_the_ledger_would_refuse():
    from toyspt.runs.ledger_file import norms

    n = norms({"model": {"w": torch.tensor([float("nan")]), "b": torch.tensor([float("inf")]),
                         "c": torch.tensor([3.0, 4.0]), "i": torch.tensor([1])}})
    assert n == {"model": {"w": "nan", "b": "inf", "c": 5.0}}


def test_infinity_as_pythons_json_writes_it_is_read():
    from toyspt.runs.ledger_file import parse

    assert parse(b'[Infinity]\n', "l")[1] == ["l line 1: not a JSON object; not used"]  # read, then refused as a list
    assert parse(b'[NaN]\n', "l")[1] == ["l line 1: not JSON (NaN is not a JSON number); not used"]


def test_a_recorded_entry_is_compared_decoded_without_encoding_it_again(trained, tmp_path, monkeypatch):
    """A cached run whose record is there: same numbers, nothing said, nothing appended, and the
    costly encoding of a record is not done (compared against the decoded record); a record
    written in plain JSON (no compact columns) holds the same numbers and is no difference."""
    import toyspt.runs.ledger as ledger_mod

    root, specs, results = trained
    said = []
    p = tmp_path / "l.jsonl"
    recs = [json.loads(line) for line in (root / "ledger.jsonl").read_text().splitlines()]
    first = next(r for r in recs if r["key"] == specs[0].key())
    first["entry"] = ledger_mod.decode(first["entry"])  # the same numbers, uncompacted
    p.write_text("".join(json.dumps(r) + "\n" for r in recs))
    led = toy_ledger(p, warn=said.append)
    monkeypatch.setattr(ledger_mod, "exact_encode", lambda v: pytest.fail("a recorded entry was encoded again"))
    entry = RunCache(root / "cache").load(specs[0])
    assert not led.store(specs[0], entry) and not said
    assert p.read_text() == "".join(json.dumps(r) + "\n" for r in recs)
