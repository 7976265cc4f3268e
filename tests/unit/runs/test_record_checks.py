"""What a record's numbers must satisfy: every committed record does, and each rule names the
field that breaks it."""
import json
from pathlib import Path

import pytest

from toyspt.runs.exact import decode
from toyspt.runs.record_checks import Impossible, check_entry

LEDGER = Path(__file__).resolve().parents[3] / "figures" / "ledger" / "ucr.jsonl"


def test_every_committed_record_satisfies_the_rules():
    with open(LEDGER, encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    for rec in records:  # a rule that refused a real record would make the study retrain it
        check_entry(rec["spec"], decode(rec["entry"]))
    assert len(records) >= 2260


def _baseline(**row):
    return dict(rows=[dict(dataset="GunPoint", baseline="rocket", protocol="train", n_train=40, n_test=150,
                           n_correct=120, test_acc=0.8, seconds=1.5, **row)], details={})


@pytest.mark.parametrize("row, needle", [
    (dict(n_correct=121), "entry.rows[0].test_acc 0.8 is not n_correct / n_test (121/150)"),
    (dict(test_acc=float("inf")), "entry.rows[0].test_acc inf is not an accuracy"),
    (dict(seconds=-1.0), "entry.rows[0].seconds -1.0 is not a duration"),
    (dict(seconds="1s"), "entry.rows[0].seconds '1s' is not a duration"),
])
def test_a_table_row_that_cannot_be_is_named(row, needle):
    check_entry({"kind": "ucr_baselines"}, _baseline())
    entry = _baseline()
    entry["rows"][0].update(row)
    with pytest.raises(Impossible, match=needle.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        check_entry({"kind": "ucr_baselines"}, entry)


def test_a_run_entry_must_be_its_specs():
    with open(LEDGER, encoding="utf-8") as f:
        rec = json.loads(next(f))
    entry = decode(rec["entry"])
    for field, value, needle in (("seed", 1, "entry.seed 1 is not its spec's (0)"),
                                 ("recipe", "spt", "entry.recipe 'spt' is not its spec's ('scratch')")):
        with pytest.raises(Impossible, match=needle.replace("(", r"\(").replace(")", r"\)")):
            check_entry(rec["spec"], {**entry, field: value})
    with pytest.raises(Impossible, match=r"entry.history\[0\].epoch 1.0"):
        check_entry(rec["spec"], {**entry, "history": [{**entry["history"][0], "epoch": 1.0}, *entry["history"][1:]]})


def test_every_recipe_writes_entries_that_satisfy_the_rules(tmp_path):
    """Not only the study's recipes: a toy ledger (toyspt compare --ledger) records any of them."""
    from dataclasses import replace

    from tests.conftest import SMALL_TASK
    from toyspt.runs import RunCache, RunSpec, get_run
    from toyspt.runs.arms import arm_spec
    from toyspt.train.recipes import TABLE, TrainConfig
    from toyspt.util.hashing import jsonable

    base = RunSpec("scratch", 0, SMALL_TASK, train=TrainConfig(epochs=3, pre_epochs=2, batch_size=64, swap_epochs=1))
    cache = RunCache(tmp_path / "c")
    for name in TABLE:
        for evaluate in ("all", "peak"):
            swap = ":swap.family=local_shuffle" if "swap" in name else ""
            spec = arm_spec(name + swap, replace(base, evaluate=evaluate))
            entry = json.loads(json.dumps(jsonable(get_run(spec, cache).to_json())))
            check_entry(jsonable(spec.to_dict()), entry)
