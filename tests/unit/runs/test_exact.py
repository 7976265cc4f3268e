"""The ledger's compact form gives back an entry's JSON exactly, and is compact."""
import json
import math

import numpy as np
import pytest

from toyspt.runs.exact import InexactEncoding, decode, encode, exact_encode


def roundtrip(v):
    return decode(json.loads(json.dumps(encode(v))))


def history(n_val=27, n_test=316, epochs=200):
    rng = np.random.default_rng(0)
    rows = [dict(phase="pretrain", epoch=e, step=14 * e, train_loss=float(rng.random()),
                 val_loss=float(np.float32(rng.random()))) for e in range(1, 301)]
    rows += [dict(phase="finetune", epoch=e, step=14 * e, train_loss=float(rng.random()),
                  train_acc=int(rng.integers(0, 109)) / 108, val_acc=int(rng.integers(0, n_val + 1)) / n_val,
                  val_loss=float(np.float32(rng.random())),
                  test_acc=int(rng.integers(0, n_test + 1)) / n_test if e % 7 else "nan")
             for e in range(1, epochs + 1)]
    return rows


def test_a_history_comes_back_exactly_with_key_order_and_types():
    h = history()
    back = roundtrip(h)
    assert json.dumps(back) == json.dumps(h)
    assert [list(r) for r in back] == [list(r) for r in h]


def test_each_column_takes_its_compact_form():
    c = encode(history())["@rows"]["cols"]
    assert "@rle" in c["phase"]
    assert c["val_acc"]["@frac"] == 27 and c["test_acc"]["@frac"] == 316
    assert "nan" in c["test_acc"]["v"]  # non-numbers pass through
    assert "@f32" in c["val_loss"]
    assert isinstance(c["train_loss"], list)  # float64 values stay as they are


def test_ranges_restart_per_phase():
    c = encode(history())["@rows"]["cols"]
    # epochs 1..300 then 1..200: not one progression, so stored as a plain list of ints
    assert isinstance(c["epoch"], list) and c["epoch"][:3] == [1, 2, 3]
    assert encode(list(range(5, 105, 5))) == {"@range": [5, 5, 20]}


def test_the_compact_form_is_at_most_a_third_of_plain_json():
    h = history()
    assert len(json.dumps(exact_encode(h))) < len(json.dumps(h)) / 3


@pytest.mark.parametrize("value", [
    [0.1] * 3, [1, 2.0, 3] * 4, [True, False] * 6, [1e308, -1e308, 5e-324] * 4, [0.1 + 0.2] * 9,
    {"a": [{"x": 1}, {"y": 2.5}] * 5}, [[1, 2]] * 9, list(range(9)) + [9.0], ["a"] * 3 + ["b"] * 9,
    [float(np.float32(0.3))] * 8 + [0.3],
])
def test_awkward_values_come_back_exactly(value):
    assert json.dumps(roundtrip(value)) == json.dumps(value)
    exact_encode(value)


def test_a_fraction_that_is_not_the_correctly_rounded_quotient_is_not_taken_for_one():
    v = [math.nextafter(1 / 3, 1.0)] + [k / 3 for k in range(3)] * 3
    assert json.dumps(roundtrip(v)) == json.dumps(v)


def test_reserved_keys_are_refused():
    with pytest.raises(InexactEncoding, match="reserved"):
        encode({"@rows": 1})
