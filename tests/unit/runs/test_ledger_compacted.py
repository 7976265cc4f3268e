"""The ledger on records long enough to be compacted (8+ epochs: the history in columns, the
accuracies as @frac, the epochs as @range): a cached entry checked against its record, and the
line numbers of what is appended after a line cut off by a killed writer."""
import json

import pytest

from tests.conftest import SMALL_TASK
from toyspt.runs import RunCache, RunSpec, sweep
from toyspt.runs.ledger import Ledger
from toyspt.runs.store import LayeredStore
from toyspt.runs.sweeps import SweepOptions
from toyspt.train.recipes import TrainConfig

SCRATCH = RunSpec("scratch", 0, SMALL_TASK, train=TrainConfig(epochs=8, batch_size=64))  # 8 rows: compacted


def _ledger(path, said=None):
    return Ledger(path, kinds=("toy",), warn=(said.append if said is not None else lambda m: None))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A cache and a ledger holding one 8-epoch scratch run (a couple of seconds)."""
    root = tmp_path_factory.mktemp("compacted")
    cache, led = RunCache(root / "cache"), _ledger(root / "ledger.jsonl")
    sweep([SCRATCH], LayeredStore((cache, led)), options=SweepOptions(progress=False))
    return root, cache


def test_the_record_is_compacted(recorded):
    root, _ = recorded
    (rec,) = [json.loads(x) for x in (root / "ledger.jsonl").read_text().splitlines()]
    text = json.dumps(rec["entry"])
    assert "@rows" in text and "@range" in text and "@frac" in text  # what the checks below compare through


def test_a_cached_entry_is_checked_against_its_compacted_record(recorded, tmp_path):
    """Same numbers: nothing said, nothing appended. One accuracy changed in the last epoch of the
    history (inside a compacted column): said, with the record's line, and the record is kept."""
    root, cache = recorded
    p = tmp_path / "l.jsonl"
    p.write_text((root / "ledger.jsonl").read_text())
    said = []
    entry = cache.load(SCRATCH)
    assert not _ledger(p, said).store(SCRATCH, entry) and said == []
    entry.history[-1] = {**entry.history[-1], "test_acc": entry.history[-1]["test_acc"] + 0.5}
    assert not _ledger(p, said).store(SCRATCH, entry)
    assert len(said) == 1 and "differ from its record" in said[0] and "line 1" in said[0]
    assert p.read_text() == (root / "ledger.jsonl").read_text()


def test_lines_appended_after_a_cut_off_line_are_numbered_as_read_back(recorded, tmp_path):
    """A good line, then a line cut off without its end: the append closes it (line 2, unusable)
    and writes line 3; the ledger that appended says 3, as a fresh read does, and so does the
    warning when that record is contradicted."""
    root, cache = recorded
    good = (root / "ledger.jsonl").read_text()
    other = RunSpec("scratch", 1, SMALL_TASK, train=SCRATCH.train)
    sweep([other], cache, options=SweepOptions(progress=False))
    p = tmp_path / "l.jsonl"
    p.write_text(good + good[:40])  # line 2 cut off
    led = _ledger(p)
    assert led.store(other, cache.load(other))
    assert led.lines()[other.key()].number == 3
    fresh = _ledger(p)
    assert fresh.lines()[other.key()].number == 3 and any("line 2" in x for x in fresh.problems)
    said, entry = [], cache.load(other)
    entry.summary = {**entry.summary, "final_test_acc": -1.0}
    assert not _ledger(p, said).store(other, entry)
    assert "line 2: not JSON" in said[0] and "differ from its record" in said[-1] and " line 3," in said[-1]
