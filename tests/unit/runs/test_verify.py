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


def test_a_run_whose_parent_trained_alone_is_retried_in_its_own_lockstep_group(tmp_path):
    """Parents trained one job each (each its own seconds), their children in one lockstep job: a
    child that differs alone is retried in its original group, though its parent's group is itself."""
    cache, led = RunCache(tmp_path / "cache"), toy_ledger(tmp_path / "ledger.jsonl")
    specs = [SPT, replace(SPT, seed=1)]
    store = LayeredStore((cache, led))
    for s in specs:
        sweep([s.parent()], store, options=SweepOptions(progress=False, lockstep=False))
    sweep(specs, store, options=SweepOptions(progress=False, lockstep=True))
    key = specs[0].key()

    def change(r):
        if r["key"] == key:
            r["entry"]["history"][-1]["train_loss"] = 0.123456
        return r
    led = _rewrite(tmp_path / "ledger.jsonl", tmp_path / "l.jsonl", change)
    rec = led.lines()[key].record
    assert len(lockstep_group(led, rec)) == 2 and lockstep_group(led, led.lines()[specs[0].parent().key()].record) \
        == [led.lines()[specs[0].parent().key()].record]
    out = verify(led, rec)
    assert out.status == "differs" and out.group == 2, out.lines()


# ------------------------------------------------------------------ verify --anyway

def _lacking(monkeypatch, isa="AVX512_CORE_AMX"):
    """This host's CPU as one without ``isa`` (and what needs it), so a record naming it is foreign."""
    from toyspt.runs import kernels

    real = kernels.cpu_flags()
    monkeypatch.setattr(kernels, "cpu_flags", lambda: real - set(kernels.ONEDNN_LEVELS[isa]))
    return isa


def test_a_record_of_kernels_this_host_lacks_is_verified_only_when_asked(recorded, tmp_path, monkeypatch):
    path, specs = recorded
    key, isa = specs[1].key(), _lacking(monkeypatch)
    led = _rewrite(path, tmp_path / "l.jsonl",
                   lambda r: {**r, "kernels": {**r["kernels"], "onednn_max_cpu_isa": isa}} if r["key"] == key else r)
    rec = led.lines()[key].record
    out = verify(led, rec)
    assert out.status == "not verified" and f"does not offer oneDNN's {isa}" in out.detail
    out = verify(led, rec, anyway=True)
    assert out.status == "reproduced", out.lines()
    assert any(a.startswith(f"--anyway: oneDNN's ISA '{isa}' not offered here: retrained under") for a in out.assumed)


@pytest.mark.parametrize("scale, rc, status", [(1 + 1e-7, 3, "within tolerance"), (1.5, 1, "differs")])
def test_verify_anyway_names_each_numbers_largest_difference_and_exits_by_closeness(recorded, tmp_path, capsys,
                                                                                   scale, rc, status):
    """A number altered a little (relative 1e-7, below 2·(n - 1)·u32) is within tolerance (exit
    3), altered a lot differs (exit 1); each names the number, its largest difference and epoch."""
    from toyspt.cli.main import main
    from toyspt.runs.closeness import tolerance
    from toyspt.runs.exact import decode, exact_encode

    path, specs = recorded
    key = specs[0].key()

    def change(r):
        if r["key"] == key:
            entry = decode(r["entry"])
            entry["history"][-1]["train_loss"] *= scale  # the summaries do not restate it
            r["entry"] = exact_encode(entry)
        return r
    led = _rewrite(path, tmp_path / "l.jsonl", change)
    rec = led.lines()[key].record
    assert 1e-7 < tolerance(rec["spec"]) < 1e-3
    last = decode(rec["entry"])["history"][-1]
    phase, epoch = last["phase"], last["epoch"]
    assert main(["ledger", "verify", str(tmp_path / "l.jsonl"), "--key", key, "--anyway"]) == rc
    said = capsys.readouterr().out
    assert said.startswith(f"{status}: ") and f"history.{phase}.train_loss: largest |difference| " in said, said
    assert f"at epoch {epoch} " in said and ("beyond tolerance" in said) == (rc == 1), said
    assert main(["ledger", "verify", str(path), "--key", key, "--anyway"]) == 0  # the record itself: bit for bit
