"""The toy's basin phase diagram as runs: SPT-only runs over a grid of task settings
(per-sequence offset, frequency range), each tracked with the model's recon gain beta per SPT
epoch (:class:`toyspt.probe.basin.BetaTracker`), and the table of what each predictor says.

One row per (setting, seed): the data's ``beta_unif`` (:func:`toyspt.probe.basin.beta_unif`), the
model's beta at init and after SPT epochs 1..3 (:data:`GRID_EPOCHS`) and at the end, the
proximity index of the attention after SPT and the basin (the columns of
:func:`toyspt.analysis.basin.basin_row`, the basin rule of :func:`toyspt.analysis.basin.basin_of`;
the proximity index is named ``proximity_index`` here). A predictor says "proximity" when its
beta is positive (:func:`toyspt.analysis.basin.predictor_test`). Used by the ``basin`` figure
and by ``python -m theory`` (T5.4).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import pandas as pd

from toyspt.analysis.basin import EARLY_EPOCHS, basin_row, predictor_test, spt_series
from toyspt.probe.tracking import proximity_of
from toyspt.runs.specs import RunSpec
from toyspt.train.run import RunResult

OFFSETS = (0.0, 0.05, 0.1, 0.15, 0.25, 0.5)  # per-sequence offset std, at 1-3 cycles per sequence
FREQ_RANGES = ((0.25, 0.75), (0.5, 1.5), (1.0, 2.0), (1.0, 3.0), (2.0, 4.0))  # cycles per sequence, no offset
TRACKERS = ("beta",)
GRID_EPOCHS = EARLY_EPOCHS[:3]  # SPT epochs after which the model's beta is read as a predictor
CLEAR_MARGIN = 0.1  # |beta_unif| above this: a setting where the data statistic should decide


def settings() -> list[dict]:
    """The grid: (sweep, TaskConfig overrides) of the phase diagram."""
    return ([dict(sweep="offset", offset=o, freq_range=(1.0, 3.0)) for o in OFFSETS]
            + [dict(sweep="freq", freq_range=f, offset=0.0) for f in FREQ_RANGES])


def setting_spec(base: RunSpec, setting: dict, seed: int) -> RunSpec:
    """The SPT-only run of one grid cell and seed."""
    task = replace(base.data, **{k: v for k, v in setting.items() if k != "sweep"})
    return replace(base, recipe="spt_only", seed=seed, data=task, trackers=TRACKERS)


def phase_specs(base: RunSpec, seeds: Sequence[int]) -> list[tuple[dict, RunSpec]]:
    return [(st, setting_spec(base, st, s)) for st in settings() for s in seeds]


def run_row(setting: dict, task, seed: int, res: RunResult, pi: float | None = None) -> dict:
    """One (setting, seed) row of the run ``res`` on ``task``: beta_unif, the model's beta by
    epoch (NaN past the run's SPT epochs), the basin after SPT (``pi``: the proximity index after
    SPT, computed already, e.g. by a cached :class:`toyspt.runs.state_probes.ProximitySpec`)."""
    bu = next(float(r["value"]) for r in res.records if r["metric"] == "beta_unif")
    pi = pi if pi is not None else proximity_of(res, "pretrained", task.probe_inputs())
    b = basin_row(res, pi, GRID_EPOCHS, metrics=("beta",))
    beta = spt_series(res, "beta")
    return dict(sweep=setting["sweep"], offset=task.offset, freq_lo=task.freq_range[0], freq_hi=task.freq_range[1],
                seed=seed, beta_unif=bu, beta_init=b["beta_init"], **{f"beta_epoch{e}": b[f"beta_epoch{e}"]
                                                                       for e in GRID_EPOCHS},
                beta_final=beta[max(beta)], proximity_index=b["proximity_after_spt"], basin=b["basin"])


def phase_table(pairs: Sequence[tuple[dict, RunSpec]], results: Sequence[RunResult]) -> pd.DataFrame:
    return pd.DataFrame([run_row(st, sp.data, sp.seed, r) for (st, sp), r in zip(pairs, results)])


def predictor_shares(table: pd.DataFrame, clear_only: bool = True) -> dict[str, dict]:
    """For each predictor (beta_unif, beta at init, after epochs 1..3): the share of runs
    whose basin it predicts (beta > 0 <=> proximity), over the runs with |beta_unif| >
    :data:`CLEAR_MARGIN` when ``clear_only``, and that share against always answering the
    majority basin of those runs (``base_rate``; ``p_base_rate``: exact McNemar, one-sided, on
    the runs where the two answers disagree, :func:`toyspt.analysis.basin.predictor_test`; NaN
    with fewer than 2 runs). Every predictor here is a prediction (beta, not the proximity
    index that defines the basin)."""
    t = table[table.beta_unif.abs() > CLEAR_MARGIN] if clear_only else table
    out = {}
    for col in ("beta_unif", "beta_init", *[f"beta_epoch{e}" for e in GRID_EPOCHS]):
        r = predictor_test(t, col)
        out[col] = dict(share=r["share"], hits=r["hits"], n=r["n"], base_rate=r["base_rate"], p_base_rate=r["p"])
    return out


__all__ = ["OFFSETS", "FREQ_RANGES", "TRACKERS", "GRID_EPOCHS", "CLEAR_MARGIN", "settings", "setting_spec",
           "phase_specs", "run_row", "phase_table", "predictor_shares"]
