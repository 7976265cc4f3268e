"""The compact run-length form keeps int and float apart: a run of 1 then a run of 1.0 (equal
in Python, different in JSON) stay two runs and come back with their types."""
import json

from toyspt.runs.records import decode, encode, exact_encode


def test_run_length_form_keeps_1_and_1_0_apart():
    col = [1] * 8 + [1.0] * 8 + [1] * 8
    enc = encode(col)
    assert enc == {"@rle": [[1, 8], [1.0, 8], [1, 8]]}
    back = decode(json.loads(json.dumps(enc)))
    assert [type(v) for v in back] == [int] * 8 + [float] * 8 + [int] * 8
    assert json.dumps(back) == json.dumps(col) and exact_encode(col) == enc
