"""One row per label run, on any data, and the frame the figures build from them.

:func:`label_row` is :func:`toyspt.analysis.tables.run_row` (the one per-run row: labels, summary
metrics, per-run columns) with the columns of a label phase: the paper's peak held-out accuracy
(only where the run's policy measured test every epoch), how often validation sat at its peak,
the validation split's size and, for :data:`PROXIMITY_ARMS`, the proximity index of the final
weights and, where the run continues SPT, of the SPT weights (on the data source's probe
inputs). :func:`label_frame` builds the frame of every label run of a figure's ``{label:
result}`` (labels ending in (data source, arm, seed)), reading proximity indices from the
cached probes that :func:`probe_specs` adds to its specs.
"""
from __future__ import annotations

import math
from typing import Mapping

import pandas as pd

from toyspt.analysis.tables import SUMMARY_METRICS, run_row

PROXIMITY_ARMS = ("scratch", "spt", "qk_transfer")  # runs whose proximity indices the rows carry
# what a label row reports of the run's summary: a table's metrics and the lowest validation loss
LABEL_METRICS = (*SUMMARY_METRICS, "min_val_loss")
ROW_COLUMNS = ["dataset", "arm", "seed", "evaluate", "mean_test_last20", "test_at_min_val_loss", "final_test_acc",
               "peak_held_out", "test_at_peak", "peak_val_acc", "min_val_loss", "final_train_acc",
               "epochs_at_peak_val", "n_val", "proximity_final", "proximity_after_spt"]


def _label_phase(source, arm: str, pi: Mapping[str, float] | None):
    """The label phase's per-run columns of :func:`label_row` (``fn(spec, result) -> dict``)."""
    def columns(_, result) -> dict:
        ft = [h for h in result.history if h["phase"] == "finetune"]
        peak = result.summary["peak_val_acc"]

        def prox(which: str) -> float:
            if pi is not None:
                return pi[which]
            from toyspt.probe.tracking import proximity_of

            return proximity_of(result, which, source.probe_inputs())

        every = result.config["evaluate"] == "all"
        return dict(peak_held_out=max(h["test_acc"] for h in ft) if every else math.nan,
                    epochs_at_peak_val=sum(h["val_acc"] == peak for h in ft), n_val=len(source.load().val),
                    proximity_final=prox("final") if arm in PROXIMITY_ARMS else math.nan,
                    proximity_after_spt=prox("pretrained") if arm in PROXIMITY_ARMS and
                    "pretrained" in result.states else math.nan)
    return columns


def label_row(source, arm: str, seed: int, result, pi: Mapping[str, float] | None = None) -> dict:
    """One label run on the data source ``source`` (``name``, ``load()``, ``probe_inputs()``):
    the columns of :data:`ROW_COLUMNS` (module docstring); ``pi``: the proximity indices by
    state, computed already, e.g. by a cached :class:`toyspt.runs.state_probes.ProximitySpec`."""
    labels = dict(dataset=source.name, arm=arm, seed=seed, evaluate=result.config["evaluate"])
    return run_row(labels, result, LABEL_METRICS, {"label_phase": _label_phase(source, arm, pi)})


def probe_specs(runs: dict) -> dict:
    """``("proximity", *label)`` -> the cached proximity probe of each run of ``runs`` ({label:
    spec}, labels ending in (arm, seed)) whose rows carry proximity indices (:data:`PROXIMITY_ARMS`)."""
    from toyspt.runs.state_probes import ProximitySpec

    return {("proximity", *label): ProximitySpec.of(s) for label, s in runs.items() if label[-2] in PROXIMITY_ARMS}


def label_runs(runs: dict) -> list:
    """The (label, result) pairs of ``runs`` that are runs, not their probes."""
    return [(label, r) for label, r in runs.items() if label[0] != "proximity"]


def probed(runs: dict, label) -> dict[str, float] | None:
    """{state: proximity index} of the run ``label`` from its cached probe in ``runs`` (None: not probed)."""
    from toyspt.runs.state_probes import proximities

    hit = runs.get(("proximity", *label))
    return proximities(hit) if hit is not None else None


def label_frame(runs: dict, group=None) -> pd.DataFrame:
    """One :func:`label_row` per label run of a figure's ``{label: result}`` (labels ending in
    (data source, arm, seed); ``group``: only labels that start with it, e.g. "archive"), with the
    proximity indices of its cached probes, in :data:`ROW_COLUMNS`."""
    rows = [label_row(src, arm, seed, res, probed(runs, label)) for label, res in label_runs(runs)
            if group is None or label[0] == group for *_, src, arm, seed in [label]]
    return pd.DataFrame(rows, columns=ROW_COLUMNS)


__all__ = ["PROXIMITY_ARMS", "LABEL_METRICS", "ROW_COLUMNS", "label_row", "probe_specs", "label_runs", "probed",
           "label_frame"]
