"""The UCR reference classifiers (toyspt.ucr.reference): 1-NN DTW and ROCKET from pyts on the
Transformers' splits, their two protocols, one cache entry per classifier, the records written when
one entry held both, and the refusal without the library."""
from __future__ import annotations

import importlib.util
import json
import sys
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

from toyspt.runs import RunCache, sweep
from toyspt.runs.ledger import data_kind
from toyspt.runs.specs import Table
from toyspt.runs.store import LayeredStore
from toyspt.ucr import design
from toyspt.ucr import reference as bl
from toyspt.ucr.data import UCRConfig, UCRSource, available, load_ucr, ucr_source

COMMITTED = Path(__file__).resolve().parents[3] / "figures/ledger/ucr.jsonl"

# Tests that run the library: skipped without it, and slow (run with `pytest -m slow`): importing
# pyts compiles its numba kernels, about a minute of CPU per process before any series is read,
# too much for CI. The tests below them exercise the wrapper without the library.
needs_pyts = pytest.mark.skipif(importlib.util.find_spec("pyts") is None,
                                reason=f"the reference classifiers need pyts: {bl.INSTALL}")


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
    assert [(r["baseline"], r["protocol"]) for r in a] == [(x, p) for x in bl.REFERENCE_CLASSIFIERS
                                                           for p in bl.PROTOCOLS]
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
    monkeypatch.setattr(bl, "make_classifier", lambda classifier, seed=0: _Fake())
    for c in bl.REFERENCE_CLASSIFIERS:
        table = bl.ReferenceSpec(src, c).execute()
        assert isinstance(table, Table) and len(table.rows) == len(bl.PROTOCOLS)
        assert [r["protocol"] for r in table.rows] == list(bl.PROTOCOLS)
        for r in table.rows:
            assert list(r) == bl.COLUMNS and (r["dataset"], r["baseline"]) == ("Ramps", c)
            assert r["test_acc"] == 0.5 and r["n_correct"] == 6 and r["n_test"] == 12
        assert table.details == dict(library=bl.LIBRARY, version=bl.PINNED, classifier=c, **bl.SETTINGS[c])
    # the results ledger records it and gives the same table back, with no library installed
    spec, path = bl.ReferenceSpec(src, "1nn_dtw"), tmp_path / "ledger.jsonl"
    table = spec.execute()
    assert design.LEDGER.open(path, warn=pytest.fail).store(spec, table)
    again = design.LEDGER.open(path, warn=pytest.fail).load(spec)
    assert again.rows == table.rows and again.details == table.details


def test_each_classifier_is_keyed_by_its_own_settings_only(tmp_path, monkeypatch):
    src = ucr_source(_write_toy(tmp_path))
    spec = bl.ReferenceSpec(src, "rocket")
    d = spec.to_dict()
    assert d["kind"] == "ucr_reference" and d["content"] == src.fingerprint() and d["version"] == bl.PINNED
    assert (d["classifier"], d["settings"], d["protocols"]) == ("rocket", bl.SETTINGS["rocket"], ["train", "train+val"])
    assert d["split"] == dict(val_fraction=0.2, split_seed=0, znorm=True)
    keys = {bl.ReferenceSpec(src, c).key() for c in bl.REFERENCE_CLASSIFIERS}
    assert len(keys) == len(bl.REFERENCE_CLASSIFIERS)
    keys |= {bl.ReferenceSpec(src, "rocket", seed=1).key(), bl.ReferenceSpec(src, "rocket", version="0.0").key()}
    assert len(keys) == len(bl.REFERENCE_CLASSIFIERS) + 2
    # adding a classifier (its name and settings) changes no existing classifier's key
    monkeypatch.setitem(bl.SETTINGS, "weasel", dict(window_sizes=[0.1, 0.3]))
    assert {bl.ReferenceSpec(src, c).key() for c in ("1nn_dtw", "rocket")} <= keys
    assert bl.ReferenceSpec(src, "weasel").key() not in keys
    assert data_kind(spec) == "ucr"  # the results ledger covers it through its data field
    assert 0 < spec.seconds() < 60 and 0 < bl.ReferenceSpec(src, "1nn_dtw").seconds() < 60
    with pytest.raises(ValueError, match="seed"):
        bl.ReferenceSpec(src, "rocket", seed=-1)
    with pytest.raises(ValueError, match="reference classifier: one of"):
        bl.ReferenceSpec(src, "nearest_centroid")


def _combined_record(tmp_path, src, spec):
    """A record of both classifiers as the combined entry stored it (rows classifiers outer)."""
    rows = [dict(dataset=src.name, baseline=c, protocol=p, n_train=20, n_test=12, n_correct=k + 5,
                 test_acc=(k + 5) / 12, seconds=0.5 + k) for k, (c, p) in
            enumerate((c, p) for c in bl.COMBINED for p in bl.PROTOCOLS)]
    whole = Table(rows, dict(library=bl.LIBRARY, version=bl.PINNED, dtw_window=bl.DTW_WINDOW,
                             n_kernels=bl.N_KERNELS), seconds=9.0)
    path = tmp_path / "ledger.jsonl"
    design.LEDGER.open(path, warn=pytest.fail).store(spec, whole)
    return path, rows


def test_a_combined_record_answers_each_classifier_with_its_rows(tmp_path):
    src = ucr_source(_write_toy(tmp_path))
    combined = bl.CombinedRecord(src, "rocket")
    path, rows = _combined_record(tmp_path, src, combined)
    led = design.LEDGER.open(path, warn=pytest.fail)
    for c in bl.COMBINED:
        spec = bl.ReferenceSpec(src, c)
        got = led.load(spec)
        assert got.rows == [r for r in rows if r["baseline"] == c]  # the record's own numbers, this classifier's
        assert got.details == bl.details(c, bl.PINNED)  # as a fresh entry of the classifier gives them
        assert got.seconds == sum(r["seconds"] for r in got.rows)
        assert not led.store(spec, got)  # read from a record: not recorded again under the new key
    assert len(design.LEDGER.open(path).lines()) == 1
    with pytest.raises(ValueError, match="only read"):
        combined.execute()


def test_a_sweep_through_cache_and_ledger_reads_the_combined_record(tmp_path, monkeypatch):
    """Planning and the sweep find the combined record through the per-classifier specs'
    alternatives: nothing is computed, and the ledger gains no line (the rows read from a record
    are not recorded again under the new keys)."""
    src = ucr_source(_write_toy(tmp_path))
    path, rows = _combined_record(tmp_path, src, bl.CombinedRecord(src, "1nn_dtw"))
    before = path.read_bytes()
    monkeypatch.setattr(bl, "make_classifier", lambda *a, **k: pytest.fail("computed instead of read"))
    store = LayeredStore([RunCache(tmp_path / "cache"), design.LEDGER.open(path, warn=pytest.fail)])
    got = sweep([bl.ReferenceSpec(src, c) for c in bl.COMBINED], store)
    assert [r for t in got for r in t.rows] == rows and path.read_bytes() == before


def test_the_committed_combined_records_answer_the_per_classifier_specs():
    """Each of the committed ledger's records of both classifiers (kind ``ucr_baselines``) answers
    the per-classifier specs of its set with its own numbers, row for row."""
    records = [r for r in map(json.loads, COMMITTED.read_text().splitlines()) if r["kind"] == "ucr_baselines"]
    assert len(records) == 16
    found, skipped = available([r["spec"]["dataset"] for r in records])
    if skipped:
        pytest.skip(f"needs the ucr-all extra: {sorted(skipped)}")
    led, by_set = design.LEDGER.open(COMMITTED, warn=pytest.fail), {d.config.name: UCRSource.of(d) for d in found}
    for rec in records:
        src = by_set[rec["spec"]["dataset"]]
        whole = led.load(_Whole(src, "rocket", seed=rec["spec"]["seed"]))  # the record as one table
        assert _Whole(src, "rocket").key() == rec["key"]  # the old key, computed as it always was
        assert [(r["baseline"], r["protocol"]) for r in whole.rows] == [(c, p) for c in bl.COMBINED
                                                                        for p in bl.PROTOCOLS]
        for c in bl.COMBINED:
            got = led.load(bl.ReferenceSpec(src, c, seed=rec["spec"]["seed"]))
            assert got is not None and len(got.rows) == len(bl.PROTOCOLS), (src.name, c)
            assert json.dumps(got.rows) == json.dumps([r for r in whole.rows if r["baseline"] == c])


class _Whole(bl.CombinedRecord):
    """The combined record's spec read as the one table it stored (both classifiers)."""

    result_type = Table


@pytest.mark.slow
@needs_pyts
def test_a_classifier_computed_alone_gives_the_combined_records_numbers():
    """Coffee, the cheapest recorded set: each classifier computed on its own gives the numbers the
    combined record holds (every column but the seconds)."""
    found, skipped = available(["Coffee"])
    if skipped:
        pytest.skip(f"needs the ucr-all extra: {skipped}")
    src = UCRSource.of(found[0])
    led = design.LEDGER.open(COMMITTED, warn=pytest.fail)
    for c in bl.COMBINED:
        spec = bl.ReferenceSpec(src, c)
        fresh, recorded = spec.execute(), led.load(spec)
        strip = lambda rows: [{k: v for k, v in r.items() if k != "seconds"} for r in rows]  # noqa: E731
        assert strip(fresh.rows) == strip(recorded.rows) and fresh.details == recorded.details


def test_refused_in_one_line_without_the_library(toy, monkeypatch):
    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(bl.metadata, "version", missing)
    for call in (lambda: bl.evaluate(toy), lambda: bl.make_classifier("rocket"),
                 lambda: bl.ReferenceSpec(bl.UCRSource.of(toy), "rocket").execute()):
        with pytest.raises(bl.ReferenceUnavailable) as e:
            call()
        assert "\n" not in str(e.value) and str(e.value).endswith(bl.INSTALL)
    assert bl.ReferenceSpec(bl.UCRSource.of(toy), "rocket").key()  # the key needs no library: records stay readable


def test_refused_for_another_version(toy, monkeypatch):
    monkeypatch.setattr(bl.metadata, "version", lambda name: "9.9")
    monkeypatch.setitem(sys.modules, "pyts", object())
    with pytest.raises(bl.ReferenceUnavailable, match=r"pyts==0\.14\.1.*9\.9"):
        bl.ReferenceSpec(bl.UCRSource.of(toy), "1nn_dtw").execute()
