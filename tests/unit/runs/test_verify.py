"""toyspt ledger verify (toyspt.runs.verify): records retrained in a fresh process under the
kernels they name, every number compared; what cannot be reproduced is named with the reason."""
import json
from dataclasses import replace

import pytest

from tests.conftest import SMALL_TASK
from toyspt.runs import RunCache, RunSpec, sweep
from toyspt.runs.ledger import Ledger
from toyspt.runs.ledger_file import seal
from toyspt.runs.store import LayeredStore
from toyspt.runs.sweeps import SweepOptions
from toyspt.runs.verify import choose, lockstep_group, verify
from toyspt.train.recipes import TrainConfig

TRAIN = TrainConfig(epochs=3, pre_epochs=2, batch_size=64)
SPT = RunSpec("spt", 0, SMALL_TASK, train=TRAIN)


def toy_ledger(path):
    return Ledger(path, kinds=("toy",), warn=lambda m: None)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A ledger of spt at two seeds trained in one lockstep job (their SPT-only parents too)."""
    root = tmp_path_factory.mktemp("verify")
    cache, led = RunCache(root / "cache"), toy_ledger(root / "ledger.jsonl")
    specs = [SPT, replace(SPT, seed=1)]
    sweep(specs, LayeredStore((cache, led)), options=SweepOptions(progress=False, lockstep=True))
    return root / "ledger.jsonl", specs


def _rewrite(path, out, change):
    """A copy of the ledger with ``change`` applied to each record, sealed again (a consistent
    record with other numbers, as another machine would write it; not a damaged line)."""
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    out.write_text("".join(json.dumps(seal(change(r))) + "\n" for r in lines))
    return toy_ledger(out)


def test_a_record_is_reproduced_bit_for_bit_with_its_parent(recorded):
    path, specs = recorded
    led = toy_ledger(path)
    rec = led.lines()[specs[1].key()].record
    assert rec["kernels"]["aten_cpu_capability"] == rec["cpu_capability"]  # new records name their kernels
    out = verify(led, rec)
    assert out.status == "reproduced" and out.assumed == [], out.lines()
    assert f"retrained on the way, {specs[1].parent().key()}: reproduced" in out.also
    assert all(a.endswith(": reproduced") for a in out.also) and out.group == 1
    assert lockstep_group(led, rec) == [led.lines()[s.key()].record for s in specs]  # one job, one seconds


def test_a_changed_number_is_named(recorded, tmp_path):
    path, specs = recorded
    key = specs[0].key()

    def change(r):
        if r["key"] == key:
            r["entry"]["history"][0]["train_loss"] = 0.123456  # a number the summaries do not restate
        return r
    led = _rewrite(path, tmp_path / "l.jsonl", change)
    out = verify(led, led.lines()[key].record)
    assert out.status == "differs" and "/history[0]/train_loss: 0.123456 -> " in out.detail, out.lines()
    assert out.group == 2  # retried in its original lockstep group, where it differs still


def test_what_cannot_be_dispatched_or_retrained_is_said_with_the_reason(recorded, tmp_path):
    path, specs = recorded
    key = specs[0].key()

    def change(r):
        r.pop("kernels", None)
        r["cpu_capability"] = "ZVECTOR" if r["key"] == key else r["cpu_capability"]
        return r
    led = _rewrite(path, tmp_path / "l.jsonl", change)
    out = verify(led, led.lines()[key].record)
    assert out.status == "not verified" and "ZVECTOR" in out.detail and out.assumed
    table = dict(led.lines()[key].record, kind="table", spec={"rows": 1})
    out = verify(led, table)
    assert out.status == "not verified" and "only training runs are retrained" in out.detail


def test_records_are_chosen_by_key_or_drawn_by_seed(recorded):
    path, specs = recorded
    led = toy_ledger(path)
    assert [r["key"] for r in choose(led, key=specs[0].key()[:10])] == [specs[0].key()]
    assert choose(led, sample=2, seed=3) == choose(led, sample=2, seed=3) and len(choose(led, sample=9)) == 4
    with pytest.raises(ValueError, match="no record"):
        choose(led, key="zz")


def test_a_record_of_a_kind_registered_above_the_data_layer_is_retrained(tmp_path):
    """The retraining process is a fresh interpreter: it imports the modules that registered
    the parent's data kinds (here the digits kind of toyspt.kinds.tasks), so such a record is
    retrained and compared, not refused with 'unknown kind'."""
    from toyspt.kinds.tasks import DigitsSource
    from toyspt.nn.model import ModelConfig

    data = DigitsSource(side=8)
    spec = RunSpec("scratch", 0, data, model=data.fit(ModelConfig(d_model=8, n_heads=1, d_mlp=8, max_len=65)),
                   train=TrainConfig(epochs=1, batch_size=256))
    led = Ledger(tmp_path / "l.jsonl", kinds=("digits",), warn=lambda m: None)
    sweep([spec], LayeredStore((RunCache(tmp_path / "cache"), led)), options=SweepOptions(progress=False))
    out = verify(led, led.lines()[spec.key()].record)
    assert out.status == "reproduced", out.lines()


def test_records_of_other_seconds_are_no_lockstep_mates(recorded, tmp_path):
    path, specs = recorded
    key = specs[1].key()
    led = _rewrite(path, tmp_path / "l.jsonl", lambda r: {**r, "seconds": r["seconds"] + 1.0} if r["key"] == key else r)
    rec = led.lines()[specs[0].key()].record
    assert lockstep_group(led, rec) == [rec]  # another job's seconds: trained apart
