"""The basin of SPT on real data: one row per tracked SPT-only run (the model's recon gain
beta and its proximity index along SPT, the basin after SPT) and how well a basin predictor
names the basin, tested against always answering the majority basin (exact McNemar). The runs are
:func:`toyspt.ucr.plan.basin_specs`; ``figures/real_basin.csv`` holds the rows.
"""
from __future__ import annotations

import pandas as pd
import torch

from toyspt.probe.tracking import proximity_of
from toyspt.runs.stats import hits_vs_base_rate
from toyspt.train.run import RunResult
from toyspt.ucr.data import UCRData

EARLY_EPOCHS = (1, 2, 3, 5, 10, 20, 50, 100, 200)  # SPT epochs after which early signals are read


def _series(result: RunResult, metric: str) -> dict[int, float]:
    return {int(r["epoch"]): float(r["value"]) for r in result.records
            if r["metric"] == metric and r["phase"] == "pretrain" and r.get("head", 0) == 0}


def basin_row(data: UCRData, seed: int, result: RunResult, after: float | None = None) -> dict:
    """One basin run: the model's beta and proximity index at init and after the early SPT
    epochs (NaN past the run's epochs), the proximity index after SPT and the basin (``after``:
    that index, computed already, e.g. by a cached :class:`toyspt.runs.state_probes.ProximitySpec`)."""
    beta, pi = _series(result, "beta"), _series(result, "proximity_index")
    pi_after = after if after is not None else proximity_of(result, "final", torch.cat([data.train.x, data.val.x]))
    row = dict(dataset=data.config.name, seed=seed, T=data.length, n_train=len(data.train),
               proximity_after_spt=pi_after, basin="proximity" if pi_after > 1 else "anti-local",
               beta_init=beta[0], proximity_init=pi.get(0, float("nan")))
    for e in EARLY_EPOCHS:
        row[f"beta_epoch{e}"] = beta.get(e, float("nan"))
        row[f"proximity_epoch{e}"] = pi.get(e, float("nan"))
    train = result.config["train"]
    row["steps_per_epoch"] = -(-len(data.train) // train["batch_size"])
    row["spt_epochs"] = train["pre_epochs"]
    return row


# --------------------------------------------------------------------------------------
# basin predictors on real runs

REAL_SHARE = 0.90  # the share of real runs a basin predictor must name (docs/basin.md)


def predictor_share(basin: pd.DataFrame, column: str) -> tuple[int, int]:
    """(hits, n): runs where ``column > 0`` agrees with the basin (proximity index after SPT
    > 1); runs where the column is NaN do not count. :func:`predictor_test` tests it."""
    t = basin.dropna(subset=[column])
    return int(((t[column] > 0) == (t.basin == "proximity")).sum()), len(t)


def predictor_kind(column: str) -> str:
    """"persistence" for a reading of the proximity index itself before the end of SPT (the
    quantity whose value after SPT defines the basin: an early value of the outcome, not a
    prediction of it), "prediction" for every other quantity (the init gain, beta)."""
    return "persistence" if column.startswith("proximity_epoch") else "prediction"


def predictor_test(basin: pd.DataFrame, column: str) -> dict:
    """The share of :func:`predictor_share` against always answering the majority basin of the
    same runs (:func:`toyspt.runs.stats.hits_vs_base_rate`: exact McNemar, one-sided, on the
    runs where the two answers disagree): hits, n, share, majority ("proximity" or
    "anti-local"), majority_hits, base_rate, only_predictor, only_majority, p (NaN figures and
    majority "none" when fewer than 2 runs count)."""
    t = basin.dropna(subset=[column])
    if len(t) < 2:
        hits, n = predictor_share(t, column)
        nan = float("nan")
        return dict(hits=hits, n=n, share=hits / n if n else nan, majority="none", majority_hits=n, base_rate=nan,
                    only_predictor=0, only_majority=0, p=nan)
    out = hits_vs_base_rate((t[column] > 0).to_numpy(bool), (t.basin == "proximity").to_numpy(bool))
    out.pop("test")
    return dict(out, majority="proximity" if out["majority"] else "anti-local")


def predictor_check(basin: pd.DataFrame, column: str = "basin_predictor", threshold: float = REAL_SHARE):
    """A theory-report row (:class:`toyspt.theory.result.Result`) that fails when the
    predictor names the basin in fewer than ``threshold`` of the real runs; it also reports
    the share against the majority basin's base rate (a predictor must beat always answering
    the majority basin, not one half)."""
    from toyspt.theory.result import checked_result

    r = predictor_test(basin, column)
    hits, n = r["hits"], r["n"]
    sets = ", ".join(f"{k} {predictor_share(g, column)[0]}/{len(g)}" for k, g in basin.groupby("dataset", sort=False))
    return checked_result("R1", f"sign({column}) names the SPT basin on real (UCR) data in >= {threshold:.0%} of runs",
                          f"{hits}/{n} SPT-only runs ({sets}); always answering the majority basin ({r['majority']}) "
                          f"names {r['majority_hits']}/{n}, exact McNemar p = {r['p']:.2g} (one-sided; runs only the "
                          f"predictor names {r['only_predictor']}, only the majority {r['only_majority']})",
                          "n.a.", hits / n if n else float("nan"), "share of runs", threshold, "ge",
                          "the goal stated for real data",
                          hits=hits, n=n, base_rate=r["base_rate"], majority=r["majority"], p_base_rate=r["p"])


__all__ = ["EARLY_EPOCHS", "basin_row", "REAL_SHARE", "predictor_share", "predictor_kind", "predictor_test",
           "predictor_check"]
