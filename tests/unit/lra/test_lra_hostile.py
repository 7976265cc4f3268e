"""Hostile and broken checkpoint files: each is refused with a CheckpointError whose reason a
person can read, in bounded time and memory (measured in a child process)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import lra_hostile as H

from toyspt.lra.checkpoint import load_lra, lra_state_dict, run_config
from toyspt.lra.lightning import CheckpointError, CheckpointRefused, read_checkpoint, write_checkpoint
from toyspt.lra.model import LRAConfig, build_lra

REASONS = {  # what the message must say, per hostile file
    "shared_tuples_22kb": "nested deeper than",
    "shared_tuples_60": "more than 200000 values",
    "self_list": "contains itself",
    "deep_200k": "nested deeper than",
    "reduce_anynode": "AnyNode called with 1 argument",
    "reduce_typing_any": "not callable",
    "opcode_inst": "opcode INST",
    "opcode_ext1": "opcode EXT1",
    "opcode_persid": "opcode PERSID",
    "many_ops_400k": "more than 300000 opcodes",
    "pickle_9mb": "over the limit",
    "deflate_1gib": "is compressed",
    "oversized_record": "declares 2147483648 bytes",
    "torchscript": "TorchScript archive",
    "broadcast_1e9": "broadcast view",
    "int_keys": "found int key 0",
    "legacy_os_system": "os.system",
    "key_shared_64": "dict key of more than 2^62 values",
    "key_deep_300k": "nested deeper than 1000",
    "aliased_records_256": "aliased zip records",
    "shared_views_20": "would materialise 83886080 bytes",
    "shared_views_100": "would materialise 419430400 bytes",
    "undeclared_records": "declares 9 records but its directory holds 2006",
    "zip64_second_directory": "zip64 and classic directories disagree",
    "case_twin_data_pkl": "differ only in case",
    "build_list_of_pairs": "BUILD state that is a list",
    "codecs_hex_nested_20": "calls _codecs.encode with arguments torch.save never writes",
    "set_of_shared_tuple": "set item of more than 2^62 values",
    "counter_copies_1e8": "hash or copy more than 2000000 values",
    "bytearray_copies_1gib": "in bytes values",
}
CFG = LRAConfig(n_layers=1, d_model=8, n_heads=2, d_ff=16, max_len=32)
# the budget the work item sets for any hostile file
MAX_SECONDS, MAX_EXTRA_MB = 5.0, 200.0


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("hostile")
    out = H.build_all(d)
    sd = lra_state_dict(build_lra(CFG))
    for name, key, value in (("zero_d_weight", "model.layers.0.layer.linears.0.weight", torch.tensor(1.0)),
                             ("nan_weight", "model.layers.1.layer.ff.2.weight", torch.full((8, 16), float("nan")))):
        p = d / f"{name}.ckpt"
        write_checkpoint(p, dict(sd, **{key: value}), run_config(CFG))
        out[name] = p
    return out


def test_every_case_has_a_reason():
    assert set(REASONS) == set(H.HOSTILE)


@pytest.mark.parametrize("name", sorted(REASONS))
def test_hostile_file_is_refused_with_a_readable_reason(files, name):
    with pytest.raises(CheckpointError) as e:
        read_checkpoint(files[name])
    msg = str(e.value)
    assert REASONS[name] in msg
    assert "Check the documentation" not in msg and "Traceback" not in msg and "\n" not in msg
    if name.startswith(("opcode", "legacy")):
        assert isinstance(e.value, CheckpointRefused)


@pytest.mark.parametrize("name,match", [("zero_d_weight", "expected a 2-d tensor"),
                                        ("nan_weight", "128 non-finite values")])
def test_broken_weights_are_named(files, name, match):
    with pytest.raises(CheckpointError, match=match):
        load_lra(files[name])


CHILD = r"""
import gc, json, sys, time
from toyspt.lra.checkpoint import load_lra
from toyspt.lra.lightning import CheckpointError

def kb(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1])

for name, path in json.loads(sys.argv[1]).items():
    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset the peak RSS (VmHWM) to the current RSS
    base = kb("VmRSS:")
    t = time.perf_counter()
    try:
        load_lra(path)
        outcome = "loaded"
    except CheckpointError:
        outcome = "refused"
    except Exception as e:
        outcome = type(e).__name__
    dt = time.perf_counter() - t
    print(json.dumps(dict(name=name, seconds=dt, extra_mb=(kb("VmHWM:") - base) / 1024,
                          outcome=outcome)), flush=True)
"""


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux /proc peak-RSS reset")
def test_hostile_files_refused_in_bounded_time_and_memory(files):
    """Every file through the whole load path (what ``toyspt lra inspect`` does), in a fresh
    process whose peak RSS is reset before each file: seconds and extra MB are printed."""
    arg = json.dumps({k: str(v) for k, v in files.items()})
    out = subprocess.run([sys.executable, "-c", CHILD, arg], capture_output=True, text=True,
                         timeout=300, check=True).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert {r["name"] for r in rows} == set(files)
    print(f"\n{'file':22s} {'seconds':>8s} {'extra MB':>9s}  outcome")
    for r in rows:
        print(f"{r['name']:22s} {r['seconds']:8.3f} {r['extra_mb']:9.1f}  {r['outcome']}")
    for r in rows:
        assert r["outcome"] == "refused", r
        assert r["seconds"] < MAX_SECONDS and r["extra_mb"] < MAX_EXTRA_MB, r
