"""The UCR baselines (toyspt.ucr.baselines): 1-NN DTW and ROCKET from pyts on the Transformers'
splits, their two protocols, the cache entry, and the refusal without the library."""
from __future__ import annotations

import importlib.util
import sys
from importlib import metadata

import numpy as np
import pytest

from toyspt.runs.ledger import data_kind
from toyspt.runs.specs import Table
from toyspt.ucr import baselines as bl
from toyspt.ucr import design
from toyspt.ucr.data import UCRConfig, load_ucr, ucr_source

# Tests that run the library: skipped without it, and slow (run with `pytest -m slow`): importing
# pyts compiles its numba kernels, about a minute of CPU per process before any series is read,
# too much for CI. The tests below them exercise the wrapper without the library.
needs_pyts = pytest.mark.skipif(importlib.util.find_spec("pyts") is None,
                                reason=f"the baselines need pyts: {bl.INSTALL}")


def _write_toy(root, name="Ramps", n_train=10, n_test=6, length=24, seed=0):
    """Two trivially separable classes: rising and falling ramps with small noise."""
    rng = np.random.default_rng(seed)
    t = np.linspace(-1, 1, length)

    def rows(n):
        out = []
        for i in range(n):
            label = i % 2
            x = (t if label == 0 else -t) + 0.05 * rng.standard_normal(length)
            out.append("\t".join([str(label + 1)] + [f"{v:.6f}" for v in x]))
        return "\n".join(out) + "\n"

    d = root / name
    d.mkdir(parents=True)
    (d / f"{name}_TRAIN.tsv").write_text(rows(2 * n_train))
    (d / f"{name}_TEST.tsv").write_text(rows(2 * n_test))
    return UCRConfig(name=name, root=str(root), location="archive")


@pytest.fixture
def toy(tmp_path):
    return load_ucr(_write_toy(tmp_path))


@pytest.mark.slow
@needs_pyts
def test_dtw_separates_a_trivially_separable_set(toy):
    for protocol in bl.PROTOCOLS:
        row = bl.score(toy, "1nn_dtw", protocol)
        assert row["test_acc"] == 1.0 and row["n_correct"] == row["n_test"] == len(toy.test)


@pytest.mark.slow
@needs_pyts
def test_rows_are_deterministic_and_accuracy_is_k_over_n(toy):
    a, b = bl.evaluate(toy, seed=3), bl.evaluate(toy, seed=3)
    strip = [{k: v for k, v in r.items() if k != "seconds"} for r in a]
    assert strip == [{k: v for k, v in r.items() if k != "seconds"} for r in b]
    assert [(r["baseline"], r["protocol"]) for r in a] == [(x, p) for x in bl.BASELINES for p in bl.PROTOCOLS]
    for r in a:
        assert list(r) == bl.COLUMNS
        assert r["n_test"] == len(toy.test) and r["test_acc"] == r["n_correct"] / r["n_test"]
        assert isinstance(r["n_correct"], int) and 0 <= r["n_correct"] <= r["n_test"]


@pytest.mark.slow
@needs_pyts
def test_gunpoint_matches_the_archive_reference():
    """Full-window 1-NN DTW on GunPoint's whole training split: the archive's published error
    0.093 (136 of 150 right); the train split alone uses fewer series."""
    d = load_ucr("GunPoint")
    full, part = bl.score(d, "1nn_dtw", "train+val"), bl.score(d, "1nn_dtw", "train")
    assert (full["n_train"], full["n_correct"], full["n_test"]) == (50, 136, 150)
    assert part["n_train"] == len(d.train) < full["n_train"]


def test_protocol_b_fits_on_more_series(toy):
    xa, ya = bl.training_set(toy, "train")
    xb, yb = bl.training_set(toy, "train+val")
    assert len(ya) == len(toy.train) and len(yb) == len(toy.train) + len(toy.val) > len(ya)
    assert xa.dtype == np.float64 and xa.shape == (len(ya), toy.length)
    np.testing.assert_array_equal(xb[:len(xa)], xa)  # the training split, then the validation split
    with pytest.raises(ValueError, match="protocol"):
        bl.training_set(toy, "test")


class _Fake:
    """Predicts the first training label for every series (no library needed)."""

    def fit(self, x, y):
        self.label = y[0]
        return self

    def predict(self, x):
        return np.full(len(x), self.label)


def test_spec_table_layout_with_a_fake_classifier(tmp_path, monkeypatch):
    src = ucr_source(_write_toy(tmp_path))
    monkeypatch.setattr(bl, "_require", lambda version=None: None)
    monkeypatch.setattr(bl, "make_classifier", lambda baseline, seed=0: _Fake())
    table = bl.BaselineSpec(src).execute()
    assert isinstance(table, Table) and len(table.rows) == len(bl.BASELINES) * len(bl.PROTOCOLS)
    for r in table.rows:
        assert list(r) == bl.COLUMNS and r["dataset"] == "Ramps"
        assert r["test_acc"] == 0.5 and r["n_correct"] == 6 and r["n_test"] == 12
    assert table.details["library"] == bl.LIBRARY and table.details["dtw_window"] == "full"
    # the results ledger records it and gives the same table back, with no library installed
    spec, path = bl.BaselineSpec(src), tmp_path / "ledger.jsonl"
    assert design.LEDGER.open(path, warn=pytest.fail).add(spec, table)  # the UCR study's ledger covers it
    again = design.LEDGER.open(path, warn=pytest.fail).load(spec)
    assert again.rows == table.rows and again.details == table.details


def test_spec_key_names_data_seed_version_and_settings(tmp_path):
    src = ucr_source(_write_toy(tmp_path))
    spec = bl.BaselineSpec(src)
    d = spec.to_dict()
    assert d["kind"] == "ucr_baselines" and d["content"] == src.fingerprint() and d["version"] == bl.PINNED
    assert (d["dtw_window"], d["n_kernels"], d["protocols"]) == ("full", 10_000, ["train", "train+val"])
    assert d["split"] == dict(val_fraction=0.2, split_seed=0, znorm=True)
    assert spec.key() == bl.BaselineSpec(src, 0).key()
    keys = {spec.key(), bl.BaselineSpec(src, seed=1).key(), bl.BaselineSpec(src, version="0.0").key()}
    assert len(keys) == 3
    assert data_kind(spec) == "ucr"  # the results ledger covers it through its data field
    assert 0 < spec.seconds() < 60
    with pytest.raises(ValueError, match="seed"):
        bl.BaselineSpec(src, seed=-1)


def test_refused_in_one_line_without_the_library(toy, monkeypatch):
    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(bl.metadata, "version", missing)
    for call in (lambda: bl.evaluate(toy), lambda: bl.make_classifier("rocket"),
                 lambda: bl.BaselineSpec(bl.UCRSource.of(toy)).execute()):
        with pytest.raises(bl.BaselinesUnavailable) as e:
            call()
        assert "\n" not in str(e.value) and str(e.value).endswith(bl.INSTALL)
    assert bl.BaselineSpec(bl.UCRSource.of(toy)).key()  # the key needs no library: ledger records stay readable


def test_refused_for_another_version(toy, monkeypatch):
    monkeypatch.setattr(bl.metadata, "version", lambda name: "9.9")
    monkeypatch.setitem(sys.modules, "pyts", object())
    with pytest.raises(bl.BaselinesUnavailable, match=r"pyts==0\.14\.1.*9\.9"):
        bl.BaselineSpec(bl.UCRSource.of(toy)).execute()
