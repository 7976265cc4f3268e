"""Where finished entries are kept: the store protocol and a layered store.

A store answers a spec with its entry, keeps one, drops one and says whether it can be written
before anything trains. Two stores implement it: the run cache (:class:`toyspt.runs.cache.RunCache`:
every entry with its weights, on one machine) and the results ledger
(:class:`toyspt.runs.ledger.Ledger`: a committed file of records, without weights, covering the
data kinds a study names). :class:`LayeredStore` puts them one behind the other: an entry is read
from the first layer that has it (and is then written to every later layer that covers it and
lacks it), an entry computed now is written to every layer that covers it, and it says which layer
answered each key. Planning and the sweep (:mod:`toyspt.runs.planning`, :mod:`toyspt.runs.sweeps`)
take any store and know nothing of what is behind it::

    store = LayeredStore((RunCache(), Ledger("figures/ledger/ucr.jsonl", kinds=("ucr",))))
    sweep(specs, store)

:func:`layered` builds the usual one (a run cache, then a study's ledger where there is one).
"""
from __future__ import annotations

from pathlib import Path
from typing import Protocol, Sequence, runtime_checkable

from toyspt.runs.specs import Entry, Spec


@runtime_checkable
class Store(Protocol):
    """What planning and the sweep need of a place that keeps entries."""

    name: str  # a short name in messages and in ``LayeredStore.answered`` ("cache", "ledger")
    keeps_weights: bool  # whether its entries carry their weights (a run can continue them)
    root: Path | None  # the folder a worker process stores into (a cache's), None: it cannot

    def covers(self, spec: Spec) -> bool:
        """Whether ``spec``'s entry belongs in this store."""

    def load(self, spec: Spec, weights: bool = False) -> Entry | None:
        """``spec``'s entry, or None (with ``weights``: only an entry that has its weights)."""

    def store(self, spec: Spec, entry: Entry) -> None:
        """Keep ``entry`` as ``spec``'s."""

    def remove(self, spec: Spec) -> None:
        """Drop ``spec``'s entry (``--recompute``): it no longer answers here."""

    def check_writable(self) -> None:
        """Raise now (one sentence) if an entry computed later could not be kept."""

    def provenance(self, spec: Spec) -> str | None:
        """What made the entry that answers ``spec`` when that is not this host (a ledger record's
        ``cpu_capability``); None when it does not say."""


class LayeredStore:
    """Stores read in order, the first that has an entry answering (``answered``: key -> the
    name of that layer); every write goes to each layer that covers the entry."""

    name = "layered"

    def __init__(self, layers: Sequence[Store]):
        if not layers:
            raise ValueError("a layered store needs at least one store")
        bad = [type(x).__name__ for x in layers if not isinstance(x, Store)]
        if bad:
            raise TypeError(f"a layered store is made of stores (RunCache, Ledger), got {bad}")
        self.layers = tuple(layers)
        self.answered: dict[str, str] = {}  # key -> the name of the layer whose entry answered it
        self._by: dict[str, Store] = {}

    @property
    def keeps_weights(self) -> bool:
        return any(x.keeps_weights for x in self.layers)

    @property
    def root(self) -> Path | None:
        return next((x.root for x in self.layers if x.root is not None), None)

    def covers(self, spec: Spec) -> bool:
        return any(x.covers(spec) for x in self.layers)

    def load(self, spec: Spec, weights: bool = False) -> Entry | None:
        for i, layer in enumerate(self.layers):
            if (weights and not layer.keeps_weights) or not layer.covers(spec):
                continue
            hit = layer.load(spec, weights)
            if hit is not None:
                self.answered[spec.key()], self._by[spec.key()] = layer.name, layer
                for later in self.layers[i + 1:]:  # e.g. a cached run the ledger has no record of yet
                    if later.covers(spec):
                        later.store(spec, hit)
                return hit
        return None

    def store(self, spec: Spec, entry: Entry) -> None:
        for layer in self.layers:
            if layer.covers(spec):
                layer.store(spec, entry)

    def remove(self, spec: Spec) -> None:
        for layer in self.layers:
            layer.remove(spec)
        self.answered.pop(spec.key(), None)
        self._by.pop(spec.key(), None)

    def check_writable(self) -> None:
        for layer in self.layers:
            layer.check_writable()

    def provenance(self, spec: Spec) -> str | None:
        """The provenance the layer that answered ``spec`` (or an alternative of it) gives."""
        for s in (spec, *spec.alternatives()):
            if (layer := self._by.get(s.key())) is not None:
                return layer.provenance(s)
        return None

    def __repr__(self) -> str:
        return f"LayeredStore({', '.join(x.name for x in self.layers)})"


def layered(cache: Store, ledger: Store | None = None) -> Store:
    """The store a sweep uses: ``cache`` (a run cache), then ``ledger`` where there is one
    (entries recorded where the ledger covers them)."""
    return cache if ledger is None else LayeredStore((cache, ledger))


__all__ = ["Store", "LayeredStore", "layered"]
