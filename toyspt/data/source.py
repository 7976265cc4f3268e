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

:data:`SOURCES` maps each kind to the function that rebuilds a source from its key fields
(``from_fields(d) -> (data, swap)``); a kind registers itself where it is defined.
"""
from __future__ import annotations

from typing import Any, Callable, Protocol, runtime_checkable


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


# kind -> rebuild (data, swap) from a run's key fields
SOURCES: dict[str, Callable[[dict[str, Any]], tuple[DataSource, DataSource | None]]] = {}


def register(kind: str, from_fields: Callable[[dict[str, Any]], tuple[DataSource, DataSource | None]]) -> None:
    """Make ``kind`` known to :func:`from_fields` (called once where the source is defined)."""
    SOURCES[kind] = from_fields


def from_fields(kind: str, d: dict[str, Any]) -> tuple[DataSource, DataSource | None]:
    """(data, swap) of a run from its key fields (the inverse of ``key_fields``)."""
    if kind not in SOURCES:
        raise ValueError(f"data source: unknown kind {kind!r}; known: {sorted(SOURCES)} "
                         "(import the module that defines it)")
    return SOURCES[kind](d)


__all__ = ["DataSource", "SOURCES", "register", "from_fields"]
