"""Probes of a stored run's weights as cache entries of their own, so that drawing a figure
computes nothing: the proximity index (:func:`toyspt.probe.tracking.proximity_of`) of the
run's stored states on its data's probe inputs.

A :class:`ProximitySpec` names its run as its parent and only reads it (``reads_parent``): the
sweep computes it in a worker right after the run is stored (or from the run's cached entry, or
from any entry answering it: the run evaluated every epoch, its tracked twin), on one thread,
so any process computes the same bits; probes ready together go to a worker together (their
``group``). Its key names the run's weights, which neither the evaluation policy nor the
trackers change, so one entry serves every form of the run.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

from toyspt.runs.specs import FORMAT_VERSION, RunSpec, Spec, Table, single_thread


@dataclass(frozen=True)
class ProximitySpec(Spec):
    """The proximity index of ``run``'s stored weights ``states`` ("init", "pretrained",
    "final") on ``run.data.probe_inputs()``: a :class:`Table` of rows (state, proximity_index)."""

    kind: ClassVar[str] = "proximity"
    result_type: ClassVar[type] = Table

    run: RunSpec  # the run whose stored weights are probed
    states: tuple[str, ...] = ("final",)  # which of its stored weights

    @classmethod
    def of(cls, run: RunSpec) -> "ProximitySpec":
        """The probe every figure shares for ``run``: its weights after SPT (where it pretrains)
        and its final weights."""
        return cls(run, ("pretrained", "final") if run.rec.pretrains else ("final",))

    def weights(self) -> RunSpec:
        """The run's form that names its weights (no trackers, evaluated every epoch)."""
        return replace(self.run, trackers=(), evaluate="all")

    def to_dict(self) -> dict[str, Any]:
        return dict(kind=self.kind, format=FORMAT_VERSION, run=self.weights().key(), states=list(self.states))

    def label(self) -> str:
        return f"proximity {self.key()} of {self.run.label()} ({', '.join(self.states)})"

    def parent(self) -> RunSpec:
        return self.run

    def reads_parent(self) -> bool:
        return True

    def seconds(self) -> float:
        return 0.1

    def group(self) -> str:
        """Probes are jobs of several (fewer round trips to the workers; see :meth:`execute_group`)."""
        return self.kind

    @classmethod
    def execute_group(cls, specs, starts=None) -> list[Table]:
        """Each probe of ``specs`` from its run's entry in ``starts``, one after the other."""
        if starts is None or len(starts) != len(specs):
            raise ValueError("proximity probes need their runs' stored entries")
        return [s.execute(start=st) for s, st in zip(specs, starts)]

    def execute(self, progress: bool = False, start=None) -> Table:
        if start is None:
            raise ValueError(f"{self.label()}: needs its run's stored entry")
        return single_thread(self._compute, start)

    def _compute(self, start) -> Table:
        from toyspt.probe.tracking import proximity_of  # measurement modules load only when asked

        x = self.run.data.probe_inputs()
        return Table([dict(state=w, proximity_index=proximity_of(start, w, x)) for w in self.states])


def proximities(table: Table) -> dict[str, float]:
    """{state: proximity index} of a :class:`ProximitySpec`'s entry."""
    return {r["state"]: r["proximity_index"] for r in table.rows}


__all__ = ["ProximitySpec", "proximities"]
