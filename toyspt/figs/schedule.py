"""Figures while the job runs: the cheapest figure is trained first and drawn as soon as
its runs are at hand.

``python paper_figs.py`` sends every figure's specs through one sweep. :func:`order` sorts
the figures by their estimated training cost, cheapest first and greedily: a run costs a
figure nothing when it is cached or an earlier figure already trains it (so a warm figure
comes first, and a run shared by two figures is charged once). The specs go to the sweep in
that order, so the sweep starts the first figure's runs first, and :class:`Drawer` (the
sweep's ``on_result``) draws a figure the moment its last result arrives, while the rest
trains; its :meth:`Drawer.describe` names the figure in training and its ETA for the
progress bar.

The cost of a spec (:meth:`toyspt.runs.specs.Spec.cost`) is a rough estimate for ordering
only: for a run, tokens it trains on (examples x positions x its own epochs, a continued run
only its own phases) times layers x width.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from toyspt.runs.specs import Spec


def order(planned: dict[str, dict], is_cached: Callable[[Spec], bool]) -> tuple[list[str], dict[str, dict]]:
    """(the labels of ``planned`` ({label: {spec label: spec}}) cheapest first, {label: {spec
    key: cost charged to it}}): a spec is charged its own run and its parents' when not
    cached and not charged to an earlier figure; ties keep the given order."""
    chains: dict[str, dict[str, list[str]]] = {}  # label -> asked key -> its uncached lineage
    cost: dict[str, float] = {}
    for label, specs in planned.items():
        chains[label] = {}
        for s in specs.values():
            chain, x = [], s
            while x is not None and not is_cached(x):
                cost.setdefault(x.key(), x.cost())
                chain.append(x.key())
                x = x.parent()
            chains[label][s.key()] = chain
    labels, charged, left, charges = [], set(), list(planned), {}

    def fresh(label: str) -> dict[str, float]:
        seen, out = set(charged), {}
        for key, chain in chains[label].items():
            new = [c for c in chain if c not in seen]
            seen.update(new)
            out[key] = sum(cost[c] for c in new)
        return out

    while left:
        best = min(left, key=lambda lb: sum(fresh(lb).values()))
        charges[best] = fresh(best)
        charged.update(c for chain in chains[best].values() for c in chain)
        labels.append(best)
        left.remove(best)
    return labels, charges


@dataclass
class Drawer:
    """Draws each figure of ``figures`` ({label: (context, module, specs)}, in drawing
    order) once every result it needs has arrived through :meth:`add`; ``draw(label, ctx,
    module, specs, results)`` does the drawing. ``costs``: {label: {spec key: estimated
    cost}} for the ETA."""

    figures: dict[str, tuple]
    draw: Callable[..., Any]
    costs: dict[str, dict[str, float]] = field(default_factory=dict)
    results: dict[str, Any] = field(default_factory=dict)  # spec key -> RunResult
    written: dict[str, float] = field(default_factory=dict)  # label -> seconds after start
    start: float = field(default_factory=time.time)

    def __post_init__(self):
        self.need = {label: {s.key() for s in specs.values()} for label, (_, _, specs) in self.figures.items()}
        self.done_cost = 0.0
        self._draw_ready()  # figures with no runs at all

    def add(self, key: str, result) -> None:
        """One spec's result: draw every figure that now has all of its results."""
        self.results[key] = result
        for label, keys in self.need.items():
            if key in keys:
                keys.discard(key)
                self.done_cost += self.costs.get(label, {}).get(key, 0.0)
        self._draw_ready()

    def _draw_ready(self) -> None:
        for label, (ctx, mod, specs) in self.figures.items():
            if label not in self.written and not self.need[label]:
                self.draw(label, ctx, mod, specs, self.results)
                self.written[label] = round(time.time() - self.start, 1)

    def current(self) -> str | None:
        """The first figure, in drawing order, still waiting for runs."""
        return next((label for label in self.figures if label not in self.written), None)

    def describe(self) -> str:
        """``training <figure> (k/n figures, ETA m:ss)`` for the progress bar."""
        label = self.current()
        if label is None:
            return "training"
        k = list(self.figures).index(label) + 1
        left = sum(self.costs.get(label, {}).get(key, 0.0) for key in self.need[label])
        rate = self.done_cost / max(time.time() - self.start, 1e-9)
        eta = f"{int(left / rate) // 60}:{int(left / rate) % 60:02d}" if rate > 0 else "?"
        return f"training {label} ({k}/{len(self.figures)} figures, ETA {eta})"


__all__ = ["order", "Drawer"]
