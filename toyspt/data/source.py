"""What a run's data is: a *data source*, anything that can load itself and say what it is.

A run spec (:class:`toyspt.runs.specs.RunSpec`) holds a data source, never the data: the
toy task's :class:`toyspt.data.tasks.TaskConfig` (its data are a pure function of the
config), a UCR set's :class:`toyspt.ucr.data.UCRSource` (files on disk, named by a content
hash), or whatever comes next. A source provides

* ``kind``: a short name ("toy", "ucr"), in messages and in the run's key where it is not the toy's;
* ``name``: what a reader calls the data ("local_shuffle T=32", "GunPoint");
* ``load()``: the splits, a :class:`toyspt.data.tasks.TaskData`;
* ``fingerprint()``: a hash of exactly what ``load()`` gives (the same fingerprint, the same data);
* ``key_fields(swap)``: the part of a run's cache key that names this data (and ``swap``,
  the data SPT pretrains on, or None), as a dict of JSON values;
* ``fit(model)``: the model config this data needs (e.g. the class count set), refusing a
  model it cannot feed;
* ``probe_inputs()``: the unlabelled inputs that probes of a run's stored weights read.

:data:`SOURCES` maps each kind to its :class:`DataKind`: how a run's key fields rebuild the
source (``from_fields(d) -> (data, swap)``) and, for the command line, how ``--data kind:NAME``
names it, its flags and its model/training defaults. A kind registers itself (:func:`register`)
in the module that defines it, in the layer that owns it, and is known once that module is
imported: the toy tasks' by this package (``toyspt.data``), the UCR kind (``toyspt.ucr.kind``) by
its package (``toyspt.ucr``: any UCR source or spec registers it), and ``toyspt compare`` loads
those of the layers above that it offers (``toyspt.cli.compare.DATA_KINDS``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, runtime_checkable


@runtime_checkable
class DataSource(Protocol):
    """The protocol above (a frozen dataclass in practice)."""

    kind: str

    @property
    def name(self) -> str: ...

    def load(self): ...

    def fingerprint(self) -> str: ...

    def key_fields(self, swap: "DataSource | None") -> dict[str, Any]: ...

    def fit(self, model): ...

    def probe_inputs(self): ...


Rebuild = Callable[[dict[str, Any]], "tuple[DataSource, DataSource | None]"]


@dataclass(frozen=True)
class DataKind:
    """What one kind of data gives the rest of toyspt (only ``from_fields`` is required)."""

    kind: str
    from_fields: Rebuild  # a run's key fields -> (data, swap)
    # ``--data kind[:NAME,...]``: (parsed flags, the NAMEs, the model's longest sequence or None) -> (sources, swap)
    from_args: Callable[[Any, list[str], "int | None"], "tuple[list[DataSource], DataSource | None]"] | None = None
    add_flags: Callable[[Any], None] | None = None  # its own command-line flags (an argparse parser)
    given: Callable[[Any], list[str]] | None = None  # those of its flags the user set (refused with other data)
    model_defaults: Mapping[str, Any] = field(default_factory=dict)  # ModelConfig fields its runs default to
    train_defaults: Mapping[str, Any] = field(default_factory=dict)  # TrainConfig fields its runs default to
    describe: Callable[[DataSource], str] | None = None  # a line on loaded data, printed before training
    usage: str = ""  # how --data names it, e.g. "ucr:NAME[,ucr:NAME...]"


SOURCES: dict[str, DataKind] = {}  # kind -> what it provides


def register(kind: str, from_fields: Rebuild, **provides: Any) -> DataKind:
    """Make ``kind`` known (called once where the source is defined); ``provides``: the other
    fields of :class:`DataKind`."""
    SOURCES[kind] = DataKind(kind, from_fields, **provides)
    return SOURCES[kind]


def kinds() -> dict[str, DataKind]:
    """Every registered kind (those of the modules imported so far)."""
    return SOURCES


def kind_of(kind: str) -> DataKind:
    """The registered ``kind`` (a clear error naming the known ones)."""
    if kind not in SOURCES and kind not in kinds():
        raise ValueError(f"data source: unknown kind {kind!r}; known: {sorted(SOURCES)} "
                         "(a kind is known once the module that defines it is imported)")
    return SOURCES[kind]


def from_fields(kind: str, d: dict[str, Any]) -> tuple[DataSource, DataSource | None]:
    """(data, swap) of a run from its key fields (the inverse of ``key_fields``)."""
    return kind_of(kind).from_fields(d)


__all__ = ["DataSource", "DataKind", "SOURCES", "register", "kinds", "kind_of", "from_fields"]
