"""Hostile UCR files (issue 34): one ASCII number grammar for values and labels, distinct labels
never merged, classes in a total order, z-normalisation that cannot silently zero a set, and a
reader bounded in time and memory whatever the file's size or shape."""
from __future__ import annotations

import os
import time
import tracemalloc

import numpy as np
import pytest

from toyspt.ucr.data import UCRConfig, UCRError, _label_order, check_znormalized, load_ucr, read_ucr_file
from toyspt.ucr.read import MAX_FILE_BYTES


def rows(labels, T=6, seed=0):
    rng = np.random.default_rng(seed)
    return "".join("\t".join([str(lab)] + [f"{v:.6f}" for v in rng.standard_normal(T)]) + "\n" for lab in labels)


def write_set(root, name, train, test):
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    for split, text in (("TRAIN", train), ("TEST", test)):
        (d / f"{name}_{split}.tsv").write_bytes(text.encode() if isinstance(text, str) else text)
    return d


# ----------------------------------------------------------------------- labels (F3, F7, F12)

@pytest.mark.parametrize("bad, needle", [
    ("-nan", "is NaN: a missing class label"),
    ("+nan", "is NaN: a missing class label"),
    ("inf", "infinite"),
    ("-Infinity", "infinite"),
    ("1e309", "beyond the range of float64"),
    ("1_0", "not written in ASCII digits"),
    ("\uff11", "not written in ASCII digits"),  # full-width 1
    ("\u0661", "not written in ASCII digits"),  # Arabic-Indic 1
])
def test_labels_outside_the_ascii_grammar_are_refused(tmp_path, bad, needle):
    write_set(tmp_path, "Lab", rows([1, 2, 1, 2]) + rows([bad], seed=1), rows([1, 2]))
    with pytest.raises(UCRError, match=rf"Lab_TRAIN.tsv:5: class label .*{needle}"):
        load_ucr("Lab", root=str(tmp_path))


@pytest.mark.parametrize("a, b", [
    ("123456789012345678901234567", "123456789012345678901234568"),  # two huge integers, one float
    ("0.1", "0.10000000000000001"),
    ("10", "1_0"),
])
def test_distinct_label_texts_are_never_merged(tmp_path, a, b):
    write_set(tmp_path, "Two", rows([a, 2, a, 2, b, 2, b]), rows([a, 2]))
    with pytest.raises(UCRError, match=r"Two_TRAIN.tsv:5: class label"):
        load_ucr("Two", root=str(tmp_path))
    write_set(tmp_path, "Cross", rows([a, 2, a, 2]), rows([b, 2]))  # across the two files too
    if b != "1_0":
        with pytest.raises(UCRError, match=r"Cross: class label .*distinct numbers"):
            load_ucr("Cross", root=str(tmp_path))


def test_one_value_written_two_ways_is_one_class_and_order_is_total(tmp_path):
    write_set(tmp_path, "Same", rows(["1", "1.0", "1.0000000e+00", "-1", "-1.", "10", "10", "2", "2"]),
              rows(["1", "10"]))
    d = load_ucr("Same", root=str(tmp_path))
    assert d.label_map == ("-1", "1", "2", "10")  # by value, not as text
    # the order is a function of the labels alone (no NaN: sorted() is a total order)
    labels = ["3", "-0.5", "10", "2.25", "1e3"]
    assert {tuple(_label_order(set(p))) for p in (labels, labels[::-1], sorted(labels))} == {
        ("-0.5", "2.25", "3", "10", "1e3")}


def test_a_nul_or_control_character_in_a_label_or_value_is_refused(tmp_path):
    for text, where in (("1\x00\t0.5\t0.2\n", "column 1: a NUL byte"), ("1\t0.5\x00\t0.2\n", "column 2: a NUL"),
                        ("1\x1b\t0.5\t0.2\n", "column 1: the control character U\\+001B")):
        p = tmp_path / "nul.tsv"
        p.write_bytes(("2\t0.1\t0.3\n" + text).encode())
        with pytest.raises(UCRError, match=rf"nul.tsv:2: {where}"):
            read_ucr_file(p)


@pytest.mark.parametrize("tok", ["0.\u0665", "\uff10.5", "1_000", "0x10", "1e400", "-inf", "+nan"])
def test_values_outside_the_ascii_grammar_are_refused(tmp_path, tok):
    p = tmp_path / "v.tsv"
    p.write_text(f"1\t0.5\t0.25\n2\t0.5\t{tok}\n")
    with pytest.raises(UCRError, match=r"v.tsv:2: column 3: "):
        read_ucr_file(p)


def test_cr_only_line_ends_are_named(tmp_path):
    p = tmp_path / "mac.tsv"
    p.write_bytes(b"1\t0.5\t0.25\r2\t0.1\t0.3\r")
    with pytest.raises(UCRError, match=r"mac.tsv:1: a carriage return .*bare CR"):
        read_ucr_file(p, max_length=512)


# ----------------------------------------------------------------------- z-normalisation (F8)

def test_values_whose_moments_overflow_are_normalised_or_refused_never_zeroed(tmp_path):
    rng = np.random.default_rng(0)

    def text(scale, rel, labels):
        return "".join("\t".join([str(lab)] + [repr(float(scale * (1 + rel * v))) for v in rng.standard_normal(8)])
                       + "\n" for lab in labels)

    write_set(tmp_path, "Huge", text(1.7e308, 0.0, [1]) + text(1e300, 1e-3, [2, 1, 2]), text(1e300, 1e-3, [1, 2]))
    # a series of +-1.7e308: alternate signs
    train = (tmp_path / "Huge" / "Huge_TRAIN.tsv").read_text().splitlines()
    train[0] = "1\t" + "\t".join(repr(1.7e308 * (-1) ** i) for i in range(8))
    (tmp_path / "Huge" / "Huge_TRAIN.tsv").write_text("\n".join(train) + "\n")
    d = load_ucr("Huge", root=str(tmp_path))
    x = np.concatenate([d.train.x[..., 0].numpy(), d.val.x[..., 0].numpy(), d.test.x[..., 0].numpy()])
    assert np.isfinite(x).all() and np.allclose((x.astype(np.float64) ** 2).mean(axis=1), 1, atol=1e-5)
    write_set(tmp_path, "Flat", text(1e300, 1e-9, [1, 2, 1, 2]), text(1e300, 1e-3, [1, 2]))
    with pytest.raises(UCRError, match=r"Flat: series 1 of .*Flat_TRAIN.tsv is constant"):
        load_ucr("Flat", root=str(tmp_path))  # flat to 8 digits: once every input was 0
    with pytest.raises(UCRError, match=r"S: series 2 of f.tsv does not z-normalise"):
        check_znormalized("S", "f.tsv", np.array([[1.0, -1.0], [0.0, 0.0]]))


# ----------------------------------------------------------------------- bounded reads (F4, F5)

def test_a_sparse_4_gib_file_is_refused_from_stat_at_once(tmp_path):
    d = write_set(tmp_path, "Big", rows([1, 2, 1, 2]), rows([1, 2]))
    with open(d / "Big_TRAIN.tsv", "r+b") as f:
        f.truncate(4 << 30)  # sparse: no disk used
    t = time.perf_counter()
    with pytest.raises(UCRError, match=rf"Big_TRAIN.tsv: {4 << 30} bytes, over the limit of {MAX_FILE_BYTES}"):
        load_ucr("Big", root=str(tmp_path))
    assert time.perf_counter() - t < 1.0  # was 40-54 s and 8.6 GB
    from toyspt.ucr.archive import scan

    t = time.perf_counter()
    table = scan(names=["Big"], root=str(tmp_path))
    assert time.perf_counter() - t < 1.0  # was a MemoryError traceback
    assert "over the limit" in table.reason[0]


def test_a_long_row_after_a_short_one_is_ragged_at_once_in_little_memory(tmp_path):
    big = b"2\t" + b"0.5\t" * (6 << 20) + b"0.5\n"  # a 24 MB row (the was 300 MB)
    write_set(tmp_path, "Rag", b"1\t0.5\t0.25\n" + big, rows([1, 2]))
    tracemalloc.start()
    t = time.perf_counter()
    try:
        with pytest.raises(UCRError, match=r"Rag_TRAIN.tsv:2: ragged rows: over \d+ values here .*, 2 on line 1"):
            load_ucr("Rag", root=str(tmp_path))
        seconds, peak = time.perf_counter() - t, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # was 3.7 GB before "ragged rows" for 300 MB; a line is read 1 MiB at a time and counted
    assert seconds < 1.0 and peak < 8 << 20, (seconds, peak)


def test_special_files_are_refused_by_type_not_read(tmp_path):
    os.mkfifo(tmp_path / "f.tsv")
    with pytest.raises(UCRError, match=r"f.tsv: is a FIFO, not a regular UCR data file"):
        read_ucr_file(tmp_path / "f.tsv")  # read_bytes() would wait for a writer


# ----------------------------------------------------------------------- names (F6)

def test_a_300_character_name_is_one_line(tmp_path, capsys):
    from toyspt.cli.main import main

    with pytest.raises(ValueError, match=r"name: not a UCR data set name: .*at most 200"):
        UCRConfig(name="A" * 300)
    assert main(["ucr", "--dataset", "A" * 300, "--ucr-root", str(tmp_path), "--seeds", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a UCR data set name" in err[0], err
