"""The SPT basin on any data: the basin rule, one row per tracked SPT-only run, how well a
predictor names the basin, and the basin against SPT's own accuracy.

**The basin rule** (:func:`basin_of`, :func:`basins`): the proximity index of the attention
after SPT (:func:`toyspt.probe.tracking.proximity_index`: mass on near neighbours relative to
uniform attention) above 1 is the "proximity" basin, otherwise "anti-local". It is stated here
once; every table and figure that names a basin calls it.

**A basin row** (:func:`basin_row`) reads a run's tracker records along SPT (the model's recon
gain beta, :class:`toyspt.probe.basin.BetaTracker`; the proximity index, the ``profile``
tracker) at init and after the :data:`EARLY_EPOCHS` the run reached, beside the basin after
SPT. Any grid of SPT-only runs builds its table from these rows: the toy's task settings
(:mod:`toyspt.analysis.basin_grid`), the UCR sets (``toyspt.figs.real_data``).

**A predictor** says "proximity" where its value is > 0; :func:`predictor_test` scores it
against always answering the majority basin of the same runs (exact McNemar,
:func:`toyspt.analysis.stats.hits_vs_base_rate`).
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd

from toyspt.analysis.stats import hits_vs_base_rate, within_set_association

PROXIMITY, ANTI_LOCAL = "proximity", "anti-local"
# SPT epochs after which early signals are read (a run records those it reaches: the UCR basin
# runs' trackers record after exactly these, toyspt.ucr.design.basin_trackers; the toy grid reads
# the first three, toyspt.analysis.basin_grid.GRID_EPOCHS)
EARLY_EPOCHS = (1, 2, 3, 5, 10, 20, 50, 100, 200)
SERIES = {"beta": "beta", "proximity_index": "proximity"}  # tracked metric -> its columns' prefix


def basin_of(pi: float) -> str:
    """The basin of a proximity index: "proximity" above 1, "anti-local" otherwise."""
    return PROXIMITY if pi > 1 else ANTI_LOCAL


def basins(pi) -> np.ndarray:
    """:func:`basin_of` of every proximity index in ``pi`` (array or Series)."""
    return np.where(np.asarray(pi, dtype=float) > 1, PROXIMITY, ANTI_LOCAL)


def spt_series(result, metric: str) -> dict[int, float]:
    """{SPT epoch: value} of a tracked ``metric`` of a run (epoch 0: at init; head 0)."""
    return {int(r["epoch"]): float(r["value"]) for r in result.records
            if r["metric"] == metric and r["phase"] == "pretrain" and r.get("head", 0) == 0}


def basin_row(result, after: float, epochs: Sequence[int] = EARLY_EPOCHS,
              metrics: Sequence[str] = ("beta", "proximity_index")) -> dict:
    """The basin columns of one tracked SPT-only run: ``proximity_after_spt`` (``after``: the
    proximity index of its SPT weights, computed already, e.g. by a cached
    :class:`toyspt.runs.state_probes.ProximitySpec`), ``basin``, and per tracked metric
    (:data:`SERIES`: beta, proximity) its value at init (``beta_init``) and after each of
    ``epochs`` (``beta_epoch3``; NaN past the run's SPT epochs or where it did not record)."""
    s = {m: spt_series(result, m) for m in metrics}
    row = dict(proximity_after_spt=after, basin=basin_of(after))
    row.update({f"{SERIES[m]}_init": s[m].get(0, math.nan) for m in metrics})
    for e in epochs:
        row.update({f"{SERIES[m]}_epoch{e}": s[m].get(e, math.nan) for m in metrics})
    return row


# --------------------------------------------------------------------------------------
# basin predictors

def predictor_share(basin: pd.DataFrame, column: str) -> tuple[int, int]:
    """(hits, n): runs where ``column > 0`` agrees with the basin; runs where the column is NaN
    do not count. :func:`predictor_test` tests it."""
    t = basin.dropna(subset=[column])
    return int(((t[column] > 0) == (t.basin == PROXIMITY)).sum()), len(t)


def predictor_kind(column: str) -> str:
    """"persistence" for a reading of the proximity index itself before the end of SPT (the
    quantity whose value after SPT defines the basin: an early value of the outcome, not a
    prediction of it), "prediction" for every other quantity (the init gain, beta)."""
    return "persistence" if column.startswith("proximity_epoch") else "prediction"


def predictor_test(basin: pd.DataFrame, column: str) -> dict:
    """The share of :func:`predictor_share` against always answering the majority basin of the
    same runs (:func:`toyspt.analysis.stats.hits_vs_base_rate`: exact McNemar, one-sided, on the
    runs where the two answers disagree): hits, n, share, majority ("proximity" or
    "anti-local"), majority_hits, base_rate, only_predictor, only_majority, p (NaN figures and
    majority "none" when fewer than 2 runs count)."""
    t = basin.dropna(subset=[column])
    if len(t) < 2:
        hits, n = predictor_share(t, column)
        nan = math.nan
        return dict(hits=hits, n=n, share=hits / n if n else nan, majority="none", majority_hits=n, base_rate=nan,
                    only_predictor=0, only_majority=0, p=nan)
    out = hits_vs_base_rate((t[column] > 0).to_numpy(bool), (t.basin == PROXIMITY).to_numpy(bool))
    out.pop("test")
    return dict(out, majority=PROXIMITY if out["majority"] else ANTI_LOCAL)


# --------------------------------------------------------------------------------------
# the basin against SPT's own accuracy

def basin_accuracy(frame: pd.DataFrame, metric: str, seed: int = 0) -> dict:
    """The basin SPT lands in (:func:`basins` of the proximity index of the SPT weights,
    ``proximity_after_spt``) and that index against SPT's *own* accuracy on ``metric`` within
    each set (not against the paired gain, which carries scratch's noise): a stratified test of
    the basin, and Spearman's rho with log proximity, both with permutations within sets
    (:func:`toyspt.analysis.stats.within_set_association`). ``frame``: per-run rows
    (:func:`toyspt.analysis.rows.label_row`); the spt runs with a proximity index count."""
    spt = frame[(frame.arm == "spt") & frame.proximity_after_spt.notna()].copy()
    spt["basin"] = basins(spt.proximity_after_spt)
    spt["log_proximity"] = np.log(spt.proximity_after_spt)
    out = dict(n=int(len(spt)), proximity=int((spt.basin == PROXIMITY).sum()))
    for key, kw in (("basin", dict(x="basin", positive=PROXIMITY)), ("log_proximity", dict(x="log_proximity",
                                                                                         kind="continuous"))):
        try:
            out[key] = within_set_association(spt, "dataset", y=metric, seed=seed, **kw)
        except ValueError as e:  # too few runs, or every set in one basin: no within-set contrast
            out[key] = dict(error=str(e))
    return out


__all__ = ["PROXIMITY", "ANTI_LOCAL", "EARLY_EPOCHS", "SERIES", "basin_of", "basins", "spt_series", "basin_row",
           "predictor_share", "predictor_kind", "predictor_test", "basin_accuracy"]
