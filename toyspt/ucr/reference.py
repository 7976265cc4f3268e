"""Where the Transformers stand: standard non-Transformer reference classifiers on the very
splits they train and are tested on, so a reader sees whether the models compared here are
competitive at all. (Not the positional arms ALiBi, FIRE and RoPE: those are Transformers,
:data:`toyspt.ucr.design.POSITIONAL_ARMS`.)

The classifiers come from pyts (a maintained time-series library, already the source of
GunPoint), installed with the ``baselines`` extra. They are an optional extra, never a
dependency of the default job: without pyts every entry point refuses with one line naming
the extra (:class:`ReferenceUnavailable`).

- ``1nn_dtw``: 1-nearest-neighbour under dynamic time warping with a full warping window
  (pyts ``KNeighborsClassifier(n_neighbors=1, metric="dtw")``, the classic unconstrained DTW):
  the archive's reference column "DTW (full window)". A learned Sakoe-Chiba window would need a
  cross-validation over windows, which is a choice the reference does not make.
- ``rocket``: ROCKET (Dempster et al. 2020; 10,000 random convolution kernels, pyts
  ``ROCKET``) and a ridge classifier with leave-one-out choice of the penalty over
  ``logspace(-3, 3, 10)`` (scikit-learn ``RidgeClassifierCV``), the paper's protocol. Its
  kernels are drawn from ``seed``, so the numbers are deterministic. MiniRocket, its faster
  successor, lives in aeon and sktime, neither of which installs with this repository's pins
  (every aeon release caps numba below 0.64 and pandas below 3.1; sktime caps pandas below 3.1),
  so ROCKET is the convolution-kernel classifier here.

Two protocols, both reported: ``train`` fits on the Transformers' training split (the archive's
training split less the stratified validation hold-out, the data the Transformers learn from),
``train+val`` on the whole archive training split (training then validation series: the
standard UCR protocol). Both score on the whole test split. Inputs are the loaded splits as they
are (z-normalised per series unless the set's config says otherwise), in float64.

A classifier is a name in :data:`REFERENCE_CLASSIFIERS`, its settings in :data:`SETTINGS` and a
case of :func:`make_classifier`. :class:`ReferenceSpec` makes one classifier's scores on one set a
cache entry (a :class:`~toyspt.runs.specs.Table`), keyed by that classifier and its own settings
only, so adding a classifier computes only the new one; its ``data`` field puts it in the results
ledger. The records written while one entry held both classifiers (kind ``ucr_baselines``, keyed by
the pair) still answer: :class:`CombinedRecord` is that old spec, read as one classifier's rows.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, ClassVar

import numpy as np

from toyspt.runs.pricing import data_shape
from toyspt.runs.specs import FORMAT_VERSION, Spec, Table
from toyspt.ucr.data import UCRData, UCRSource

EXTRA = "baselines"  # the pip extra that installs the library (its name is part of the install line)
INSTALL = f'pip install -c constraints.txt -e ".[{EXTRA}]"'
LIBRARY = "pyts"
# the version constraints.txt pins: a spec names the version its numbers come from, so its key
# can be computed (and its ledger record read) on a machine without the library
PINNED = "0.14.1"
PROTOCOLS = ("train", "train+val")
DTW_WINDOW = "full"  # unconstrained warping (pyts method "classic")
N_KERNELS = 10_000  # ROCKET's default number of kernels
RIDGE_ALPHAS = tuple(float(a) for a in np.logspace(-3, 3, 10))  # RidgeClassifierCV's grid (ROCKET paper)
# every reference classifier and the settings its numbers depend on (what its spec's key hashes)
SETTINGS: dict[str, dict[str, Any]] = {
    "1nn_dtw": dict(dtw_window=DTW_WINDOW),
    "rocket": dict(n_kernels=N_KERNELS, ridge_alphas=list(RIDGE_ALPHAS)),
}
REFERENCE_CLASSIFIERS = tuple(SETTINGS)
# the pair one entry held before each classifier had its own (the records of kind "ucr_baselines"): frozen
COMBINED = ("1nn_dtw", "rocket")
# the CSV column naming the classifier of a row (its name kept: the committed CSVs and docs read it)
COLUMNS = ["dataset", "baseline", "protocol", "n_train", "n_test", "n_correct", "test_acc", "seconds"]


class ReferenceUnavailable(ImportError):
    """The reference classifiers' library is missing (or another version than the spec names)."""


def library_version() -> str:
    """The installed pyts version; refused with the install line when pyts is missing."""
    try:
        return metadata.version(LIBRARY)
    except metadata.PackageNotFoundError:
        raise ReferenceUnavailable(f"the UCR reference classifiers need {LIBRARY} (the '{EXTRA}' extra): "
                                   f"{INSTALL}") from None


def _require(version: str | None = None) -> None:
    """Refuse unless pyts is importable and, when ``version`` is given, is that version (another
    version may draw other kernels or break other ties: other numbers under the same key)."""
    have = library_version()
    try:
        import pyts  # noqa: F401
    except ImportError as e:
        raise ReferenceUnavailable(f"the UCR reference classifiers need {LIBRARY} (the '{EXTRA}' extra), which "
                                   f"does not import ({e}): {INSTALL}") from None
    if version is not None and have != version:
        raise ReferenceUnavailable(f"these reference numbers are specified for {LIBRARY}=={version}, "
                                   f"{LIBRARY} {have} is installed: {INSTALL}")


def check_classifier(name: str) -> str:
    """``name``, or refused by name when it is not a reference classifier."""
    if name not in SETTINGS:
        raise ValueError(f"reference classifier: one of {REFERENCE_CLASSIFIERS}, got {name!r}")
    return name


def training_set(data: UCRData, protocol: str) -> tuple[np.ndarray, np.ndarray]:
    """(series (N, T) float64, labels (N,)) a classifier fits on under ``protocol``: the
    Transformers' training split, or it followed by the validation split."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol: one of {PROTOCOLS}, got {protocol!r}")
    splits = [data.train] if protocol == "train" else [data.train, data.val]
    x = np.concatenate([s.x.numpy()[..., 0] for s in splits]).astype(np.float64)
    y = np.concatenate([s.y.numpy() for s in splits])
    return x, y


def test_set(data: UCRData) -> tuple[np.ndarray, np.ndarray]:
    """(series (N, T) float64, labels (N,)) of the test split."""
    return data.test.x.numpy()[..., 0].astype(np.float64), data.test.y.numpy()


def make_classifier(classifier: str, seed: int = 0):
    """An unfitted scikit-learn-style ``classifier`` (fit on (N, T) series)."""
    check_classifier(classifier)
    _require()
    if classifier == "1nn_dtw":
        from pyts.classification import KNeighborsClassifier
        return KNeighborsClassifier(n_neighbors=1, metric="dtw", metric_params=dict(method="classic"))
    from pyts.transformation import ROCKET
    from sklearn.linear_model import RidgeClassifierCV
    from sklearn.pipeline import make_pipeline
    return make_pipeline(ROCKET(n_kernels=N_KERNELS, random_state=seed),
                         RidgeClassifierCV(alphas=np.array(RIDGE_ALPHAS)))


def score(data: UCRData, classifier: str, protocol: str, seed: int = 0) -> dict[str, Any]:
    """Fit ``classifier`` under ``protocol`` and score it on the test split: one row of
    :data:`COLUMNS` (``test_acc`` = ``n_correct / n_test``; ``seconds``: fit and predict)."""
    x, y = training_set(data, protocol)
    x_te, y_te = test_set(data)
    t = time.perf_counter()
    clf = make_classifier(classifier, seed)
    pred = np.asarray(clf.fit(x, y).predict(x_te))
    seconds = time.perf_counter() - t
    correct = int((pred == y_te).sum())
    return dict(dataset=data.config.name, baseline=classifier, protocol=protocol, n_train=len(y), n_test=len(y_te),
                n_correct=correct, test_acc=correct / len(y_te), seconds=seconds)


def evaluate(data: UCRData, seed: int = 0, classifiers=REFERENCE_CLASSIFIERS, protocols=PROTOCOLS
             ) -> list[dict[str, Any]]:
    """Rows of :func:`score` for every (classifier, protocol), classifiers outer."""
    _require()
    return [score(data, c, p, seed) for c in classifiers for p in protocols]


def details(classifier: str, version: str) -> dict[str, Any]:
    """The facts an entry of ``classifier``'s rows carries beside them."""
    return dict(library=LIBRARY, version=version, classifier=classifier, **SETTINGS[classifier])


def _set_fields(data: UCRSource) -> dict[str, Any]:
    """What a key says of the set: its name, its content and the split rule."""
    return dict(dataset=data.name, content=data.fingerprint(),
                split=dict(val_fraction=data.config.val_fraction, split_seed=data.config.split_seed,
                           znorm=data.config.znorm))


def _check(spec) -> None:
    """Refuse a spec of another data kind, a bad seed or an unknown classifier."""
    if not isinstance(spec.data, UCRSource):
        raise ValueError(f"data: a UCRSource, got {type(spec.data).__name__}")
    if isinstance(spec.seed, bool) or not isinstance(spec.seed, int) or spec.seed < 0:
        raise ValueError(f"seed: a non-negative integer, got {spec.seed!r}")
    check_classifier(spec.classifier)


@dataclass(frozen=True)
class ReferenceSpec(Spec):
    """One reference classifier's test accuracies on one UCR set, both protocols: one row per
    protocol with the columns :data:`COLUMNS`. Keyed by the set's content, the classifier, its
    own settings, the seed and the library version, so a changed setting is another entry and
    another classifier is another entry."""

    kind: ClassVar[str] = "ucr_reference"
    result_type: ClassVar[type] = Table

    data: UCRSource  # the set (its content hash names it); the ledger covers the entry through it
    classifier: str  # one of REFERENCE_CLASSIFIERS
    seed: int = 0  # ROCKET's kernels (1-NN DTW draws nothing)
    version: str = PINNED  # the pyts version the numbers are computed with (execute refuses another)

    def __post_init__(self):
        _check(self)

    def to_dict(self) -> dict[str, Any]:
        return dict(kind=self.kind, format=FORMAT_VERSION, **_set_fields(self.data), seed=self.seed,
                    library=LIBRARY, version=self.version, classifier=self.classifier,
                    settings=SETTINGS[self.classifier], protocols=list(PROTOCOLS))

    def alternatives(self) -> list[Spec]:
        """The record of both classifiers written before each had its own entry, read as this
        one's rows (the same fits: same set, seed, version, settings and protocols)."""
        return [CombinedRecord(self.data, self.classifier, self.seed, self.version)] \
            if self.classifier in COMBINED else []

    def seconds(self) -> float:
        """Both protocols, from the set's shape: 1-NN DTW costs per pair of series (pyts calls
        its DTW once per pair from Python) and per squared length, ROCKET per series, position
        and kernel; fitted to benchmarks/bench_baselines.py on the 2-core machine shared with
        training (load about 5). Not counted: importing pyts compiles its numba kernels, about
        a minute of CPU once per process."""
        n_tr, n_va, n_te, length = data_shape(self.data)
        if self.classifier == "1nn_dtw":
            return 1.0 + n_te * (2 * n_tr + n_va) * (8e-4 + 5e-8 * length ** 2)
        return 1.0 + (2 * n_te + 2 * n_tr + n_va) * length * N_KERNELS * 2e-8

    def label(self) -> str:
        return f"UCR reference {self.classifier} {self.key()} ({self.data.name}, seed {self.seed})"

    def execute(self, progress: bool = False, start=None) -> Table:
        if start is not None:
            raise ValueError(f"{self.label()}: has no parent run to continue")
        _require(self.version)
        t = time.perf_counter()
        rows = evaluate(self.data.load(), self.seed, (self.classifier,))
        return Table(rows, details(self.classifier, self.version), seconds=time.perf_counter() - t)


@dataclass
class ClassifierRows(Table):
    """One classifier's rows of a combined record, with the weights object it was read with
    (a ledger's :class:`~toyspt.runs.ledger.WeightsNotKept`: an entry read from a record is not
    recorded again)."""

    kept: dict = field(default_factory=dict, repr=False)  # what tensors() gives: the stored states

    def tensors(self) -> dict:
        return self.kept


@dataclass(frozen=True)
class _RowsOf:
    """The ``result_type`` of a :class:`CombinedRecord`: its stored table, the classifier's rows."""

    classifier: str  # whose rows are kept
    version: str  # the library version of the record (its key names it)

    def from_stored(self, blob: dict[str, Any], tensors: dict) -> ClassifierRows:
        whole = Table.from_stored(blob, tensors)
        rows = [r for r in whole.rows if r["baseline"] == self.classifier]
        if [r["protocol"] for r in rows] != list(PROTOCOLS):
            raise KeyError(f"{self.classifier} rows of every protocol {PROTOCOLS}")
        return ClassifierRows(rows, details(self.classifier, self.version), sum(r["seconds"] for r in rows),
                              kept=tensors)


@dataclass(frozen=True)
class CombinedRecord(Spec):
    """The spec of the entries that held both reference classifiers (kind ``ucr_baselines``, its
    key hashing :data:`COMBINED`), kept so those records and cache entries answer
    :class:`ReferenceSpec`: read through it, a stored entry gives ``classifier``'s rows, its
    details as :class:`ReferenceSpec` writes them and, as seconds, its rows' fit and predict
    seconds. It is never computed again (the per-classifier specs are)."""

    kind: ClassVar[str] = "ucr_baselines"

    data: UCRSource  # the set (its content hash names it)
    classifier: str  # the classifier whose rows it is read for (not in the key: the entry holds both)
    seed: int = 0  # ROCKET's kernels
    version: str = PINNED  # the pyts version the numbers were computed with

    def __post_init__(self):
        _check(self)
        if self.classifier not in COMBINED:
            raise ValueError(f"classifier: one of the combined entries' {COMBINED}, got {self.classifier!r}")

    @property
    def result_type(self) -> _RowsOf:  # type: ignore[override]
        return _RowsOf(self.classifier, self.version)

    def to_dict(self) -> dict[str, Any]:
        return dict(kind=self.kind, format=FORMAT_VERSION, **_set_fields(self.data), seed=self.seed,
                    library=LIBRARY, version=self.version, baselines=list(COMBINED), protocols=list(PROTOCOLS),
                    dtw_window=DTW_WINDOW, n_kernels=N_KERNELS, ridge_alphas=list(RIDGE_ALPHAS))

    def label(self) -> str:
        return f"UCR reference {self.classifier} in the combined record {self.key()} ({self.data.name})"

    def execute(self, progress: bool = False, start=None):
        raise ValueError(f"{self.label()}: a combined record is only read; "
                         f"ReferenceSpec({self.data.name}, {self.classifier!r}) computes the classifier")


__all__ = ["ReferenceSpec", "CombinedRecord", "ClassifierRows", "ReferenceUnavailable", "REFERENCE_CLASSIFIERS",
           "SETTINGS", "COMBINED", "PROTOCOLS", "COLUMNS", "EXTRA", "INSTALL", "LIBRARY", "PINNED", "DTW_WINDOW",
           "N_KERNELS", "RIDGE_ALPHAS", "library_version", "check_classifier", "training_set", "test_set",
           "make_classifier", "score", "evaluate", "details"]
