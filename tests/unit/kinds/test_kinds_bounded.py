"""Data kinds bounded by memory, not only by field: ListOps caps its depth, arguments and length
in its config (one line, never a RecursionError); Fashion-MNIST checks an IDX header against the
file's size before allocating, and refuses links and special files."""
import gzip
import os
import tracemalloc

import pytest

from toyspt.kinds import listops as lo
from toyspt.kinds.fashion import find_root, read_split


@pytest.mark.parametrize("field, value", [("max_depth", 100_000), ("max_args", 10**9), ("max_len", 10**7)])
def test_listops_refuses_a_config_past_its_caps_in_one_line(field, value):
    with pytest.raises(ValueError, match=f"^{field}: expected an int >= [12] and <= [0-9]+, got {value}$"):
        lo.ListOpsConfig(**{field: value, "min_len": 1})


def test_listops_at_its_caps_draws_without_recursion_errors():
    cfg = lo.ListOpsConfig(max_depth=lo.MAX_DEPTH, max_args=lo.MAX_ARGS, min_len=1, max_len=lo.MAX_TOKENS)
    trees = lo.generate(cfg, 20, 0)
    assert all(len(lo.tokens(t)) <= lo.MAX_TOKENS and lo.evaluate(t) == lo.evaluate_tokens(lo.tokens(t))
               for t in trees)


def _idx(path, shape, magic, data: bytes, compress=False):
    head = magic.to_bytes(4, "big") + b"".join(int(s).to_bytes(4, "big") for s in shape)
    (gzip.open if compress else open)(path, "wb").write(head + data)


def _good(root, compress=False):
    sfx = ".gz" if compress else ""
    for split, n in (("train", 4), ("t10k", 2)):
        _idx(root / f"{split}-images-idx3-ubyte{sfx}", (n, 28, 28), 0x803, bytes(n * 784), compress)
        _idx(root / f"{split}-labels-idx1-ubyte{sfx}", (n,), 0x801, bytes(n), compress)


@pytest.mark.parametrize("compress", [False, True])
def test_an_idx_header_is_checked_against_the_file_before_allocating(tmp_path, compress):
    _good(tmp_path, compress)
    name = "train-images-idx3-ubyte" + (".gz" if compress else "")
    _idx(tmp_path / name, (100_000, 28, 28), 0x803, bytes(784), compress)  # claims 78 MB, holds 784 bytes
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="its header declares 78400000 data bytes .* but the file holds 784$"):
            read_split(tmp_path, "train")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * 2**20, peak  # never the 78 MB the header claims


@pytest.mark.parametrize("make, needle", [
    (lambda p, t: os.symlink(t, p), "is a symbolic link"),
    (lambda p, t: os.mkfifo(p), "not a regular file"),
    (lambda p, t: os.mkdir(p), "not a regular file"),
])
def test_links_and_special_files_are_refused_in_one_line(tmp_path, make, needle):
    _good(tmp_path)
    target = tmp_path / "elsewhere"
    (tmp_path / "train-labels-idx1-ubyte").rename(target)
    make(tmp_path / "train-labels-idx1-ubyte", target)
    with pytest.raises(ValueError, match=needle):
        find_root(str(tmp_path))
