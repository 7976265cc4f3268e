"""The real-data study: does the paper's mechanism explain SPT on the four UCR sets?

Which runs it needs (all through the run cache and one sweep, like every figure's) and the
per-run tables made from them; the figures :mod:`toyspt.figs.ucr` and
:mod:`toyspt.figs.real_data` and ``benchmarks/ucr_study.py`` all build their specs here, so
they share runs.

* **Basin runs**: SPT only (recipe ``spt_only``), every seed, with the ``beta`` tracker (the
  model's recon gain on the uniform visible mean after every SPT epoch) and the ``profile``
  tracker (proximity index after every SPT epoch; full profiles only at the start). One
  row per run of ``figures/real_basin.csv`` (:func:`basin_table`).
* **Label runs**: scratch and spt at :data:`PAIR_SEEDS` (paired with the basin runs), qk_transfer at
  :data:`QK_SEEDS`, and the paper's baselines with built-in locality (ALiBi, FIRE, RoPE;
  scratch with another positional scheme) at :data:`BASELINE_SEEDS` (fewer seeds: compute). Scratch and spt at :data:`ALL_EVAL_SEEDS` are evaluated on every
  split after every label epoch (``evaluate="all"``), which gives the paper's metric, the
  *peak held-out accuracy* (max over epochs of test accuracy: selection on the held-out
  set, optimistic by construction); every other run measures test only where validation
  peaks and at the end (``evaluate="peak"``; an ``all`` run answers a ``peak`` spec).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np
import pandas as pd
import torch
from scipy import stats

from toyspt.runs.stats import hits_vs_base_rate
from toyspt.train.run import RunResult, TrainConfig, load_model
from toyspt.ucr.data import UCRData
from toyspt.runs.arms import arm_spec
from toyspt.runs.specs import RunSpec
from toyspt.ucr.runs import ucr_spec, ucr_train_config

ARMS = ("scratch", "spt", "qk_transfer")
BASELINES = ("alibi", "fire", "rope")  # built-in locality, from scratch (toyspt.runs.arms aliases)
# seeds: what one shared 2-core machine allowed in one session (label runs take ~1 min each there)
SEEDS = tuple(range(10))  # basin runs
PAIR_SEEDS = tuple(range(5))  # scratch and spt (paired with the basin runs of the same seed)
QK_SEEDS = (0, 1)
BASELINE_SEEDS = (0,)
ALL_EVAL_SEEDS = PAIR_SEEDS  # scratch and spt evaluated every epoch: peak held-out accuracy
ALL_EVAL_ARMS = ("scratch", "spt")
BASIN_TRACKERS = ("beta", "profile:every=1000")
EARLY_EPOCHS = (1, 2, 3, 5, 10, 20, 50, 100, 200)  # SPT epochs after which early signals are read
QUICK_TRAIN = TrainConfig(epochs=4, pre_epochs=3, batch_size=8)  # smoke test only


@dataclass(frozen=True)
class Plan:
    """Seeds and training of one study (full or quick)."""

    seeds: tuple[int, ...]  # basin runs
    pair_seeds: tuple[int, ...]  # scratch and spt
    qk_seeds: tuple[int, ...]  # qk_transfer
    baseline_seeds: tuple[int, ...]  # alibi, fire, rope
    all_eval_seeds: tuple[int, ...]  # scratch and spt evaluated every epoch
    train: TrainConfig  # epochs, SPT epochs, batch size
    quick: bool = False
    numerics: str = "eager"  # the runs' numerics path: eager | compiled (toyspt.train.compiled)


FULL = Plan(SEEDS, PAIR_SEEDS, QK_SEEDS, BASELINE_SEEDS, ALL_EVAL_SEEDS, ucr_train_config())


def plan(quick: bool, seeds: Sequence[int] = (0, 1), numerics: str = "eager") -> Plan:
    """The full study, or a smoke version on ``seeds`` with a few epochs."""
    if not quick:
        return replace(FULL, numerics=numerics)
    s = tuple(seeds)
    return Plan(s, s, s, s[:1], s[:1], QUICK_TRAIN, quick=True, numerics=numerics)


def basin_specs(datasets: Sequence[UCRData], p: Plan) -> list[tuple[UCRData, RunSpec]]:
    """(data set, SPT-only tracked spec) per data set and seed."""
    return [(d, ucr_spec("spt_only", d, seed=s, train=p.train, trackers=BASIN_TRACKERS, evaluate="peak",
                          numerics=p.numerics))
            for d in datasets for s in p.seeds]


def label_specs(datasets: Sequence[UCRData], p: Plan) -> list[tuple[UCRData, str, RunSpec]]:
    """(data set, arm, spec): scratch and spt at every seed, qk_transfer and the baselines at
    theirs; scratch and spt at the all-eval seeds evaluated every epoch."""
    out = []
    for d in datasets:
        base = ucr_spec("scratch", d, train=p.train, evaluate="peak", numerics=p.numerics)
        for arm in ARMS + BASELINES:
            for s in {"qk_transfer": p.qk_seeds}.get(arm, p.baseline_seeds if arm in BASELINES else p.pair_seeds):
                ev = "all" if arm in ALL_EVAL_ARMS and s in p.all_eval_seeds else "peak"
                out.append((d, arm, arm_spec(arm, replace(base, seed=s, evaluate=ev))))
    return out


# --------------------------------------------------------------------------------------
# per-run tables

def proximity_of(data: UCRData, result: RunResult, which: str) -> float:
    """Proximity index of stored weights on the set's probe inputs (train + validation)."""
    from toyspt.probe.tracking import proximity_of as proximity

    return proximity(result, which, torch.cat([data.train.x, data.val.x]))


def _series(result: RunResult, metric: str) -> dict[int, float]:
    return {int(r["epoch"]): float(r["value"]) for r in result.records
            if r["metric"] == metric and r["phase"] == "pretrain" and r.get("head", 0) == 0}


def basin_row(data: UCRData, spec: RunSpec, result: RunResult) -> dict:
    """One basin run: the model's beta and proximity index at init and after the early SPT
    epochs (NaN past the run's epochs), the proximity index after SPT and the basin."""
    beta, pi = _series(result, "beta"), _series(result, "proximity_index")
    pi_after = proximity_of(data, result, "final")
    row = dict(dataset=data.config.name, seed=spec.seed, T=data.length, n_train=len(data.train),
               proximity_after_spt=pi_after, basin="proximity" if pi_after > 1 else "anti-local",
               beta_init=beta[0], proximity_init=pi.get(0, float("nan")))
    for e in EARLY_EPOCHS:
        row[f"beta_epoch{e}"] = beta.get(e, float("nan"))
        row[f"proximity_epoch{e}"] = pi.get(e, float("nan"))
    row["steps_per_epoch"] = -(-len(data.train) // spec.train.batch_size)
    row["spt_epochs"] = spec.train.pre_epochs
    return row


def label_row(data: UCRData, arm: str, spec: RunSpec, result: RunResult) -> dict:
    """One label run: the summary metrics, the peak held-out accuracy (NaN unless test was
    measured every epoch), how often validation sat at its peak, and proximity indices
    (final weights: scratch, spt, qk_transfer; after SPT: spt, qk_transfer)."""
    ft = [h for h in result.history if h["phase"] == "finetune"]
    every = spec.evaluate == "all"  # test measured every epoch (a peak run may, by chance, too)
    s = result.summary
    row = dict(dataset=data.config.name, arm=arm, seed=spec.seed, evaluate=spec.evaluate,
               peak_held_out=max(h["test_acc"] for h in ft) if every else float("nan"),
               test_at_peak=s["test_at_peak"], final_test_acc=s["final_test_acc"],
               peak_val_acc=s["peak_val_acc"], peak_epoch=s["peak_epoch"], final_train_acc=s["final_train_acc"],
               epochs_at_peak_val=sum(h["val_acc"] == s["peak_val_acc"] for h in ft), n_val=len(data.val),
               proximity_final=proximity_of(data, result, "final") if arm in ARMS else float("nan"),
               proximity_after_spt=proximity_of(data, result, "pretrained") if "pretrained" in result.states
               else float("nan"))
    return row


METRICS = ("peak_held_out", "test_at_peak", "final_test_acc")
PAIRED_COLUMNS = ["dataset", "comparison", "metric", "n", "mean_diff", "ci_low", "ci_high", "t_pvalue",
                  "wins", "ties", "losses"]


def paired_ci(d: pd.Series) -> tuple[float, float, float]:
    """95% t interval of the mean of paired differences and the paired t-test p (NaN when
    there is no spread)."""
    d = d.dropna()
    if len(d) < 2 or d.std(ddof=1) == 0:
        return float("nan"), float("nan"), float("nan")
    lo, hi = stats.t.interval(0.95, len(d) - 1, loc=d.mean(), scale=stats.sem(d))
    return float(lo), float(hi), float(stats.ttest_1samp(d, 0.0).pvalue)


def paired(labels: pd.DataFrame, arms: Sequence[str]) -> pd.DataFrame:
    """Per data set, ``arm - scratch`` paired by seed, for every metric of :data:`METRICS`."""
    out = []
    for name, g in labels.groupby("dataset", sort=False):
        sc = g[g.arm == "scratch"].set_index("seed")
        for arm in arms:
            if arm == "scratch":
                continue
            a = g[g.arm == arm].set_index("seed")
            for metric in METRICS:
                d = (a[metric] - sc[metric]).dropna()
                lo, hi, p = paired_ci(d)
                out.append(dict(dataset=name, comparison=f"{arm} - scratch", metric=metric, n=len(d),
                                mean_diff=float(d.mean()) if len(d) else float("nan"), ci_low=lo, ci_high=hi,
                                t_pvalue=p, wins=int((d > 0).sum()), ties=int((d == 0).sum()),
                                losses=int((d < 0).sum())))
    return pd.DataFrame(out, columns=PAIRED_COLUMNS)


def gain_table(labels: pd.DataFrame, basin: pd.DataFrame) -> pd.DataFrame:
    """Per data set and seed: SPT - scratch (paired by seed) for each metric, the proximity
    index after SPT (basin run) and after fine-tuning (spt run), and the basin."""
    sc = labels[labels.arm == "scratch"].set_index(["dataset", "seed"])
    sp = labels[labels.arm == "spt"].set_index(["dataset", "seed"])
    b = basin.set_index(["dataset", "seed"])
    idx = sp.index.intersection(sc.index).intersection(b.index)
    out = pd.DataFrame(index=idx)
    for m in METRICS:
        out[f"gain_{m}"] = sp.loc[idx, m] - sc.loc[idx, m]
    out["proximity_after_spt"] = b.loc[idx, "proximity_after_spt"]
    out["proximity_after_finetune"] = sp.loc[idx, "proximity_final"]
    out["basin"] = b.loc[idx, "basin"]
    return out.reset_index()


def basin_gain_contrast(gains: pd.DataFrame, metric: str = "final_test_acc") -> dict:
    """Gain of proximity-basin runs minus that of anti-local runs, pooled over sets after
    removing each set's mean gain (so a set with more proximity runs does not pass its own
    level off as a basin effect): difference, Welch 95% interval, p; plus Spearman's rho
    of the gain with log proximity index after SPT and after fine-tuning."""
    g = gains.dropna(subset=[f"gain_{metric}"]).copy()
    g["centred"] = g[f"gain_{metric}"] - g.groupby("dataset")[f"gain_{metric}"].transform("mean")
    a, b = g[g.basin == "proximity"].centred, g[g.basin == "anti-local"].centred
    out = dict(metric=metric, n_proximity=int(len(a)), n_anti_local=int(len(b)),
               mean_gain_proximity=float(g[g.basin == "proximity"][f"gain_{metric}"].mean()),
               mean_gain_anti_local=float(g[g.basin == "anti-local"][f"gain_{metric}"].mean()))
    if len(a) >= 2 and len(b) >= 2:
        t = stats.ttest_ind(a, b, equal_var=False)
        ci = t.confidence_interval(0.95)
        out.update(diff_centred=float(a.mean() - b.mean()), ci_low=float(ci.low), ci_high=float(ci.high),
                   welch_p=float(t.pvalue))
    else:
        out.update(diff_centred=float("nan"), ci_low=float("nan"), ci_high=float("nan"), welch_p=float("nan"))
    for col in ("proximity_after_spt", "proximity_after_finetune"):
        r = stats.spearmanr(np.log(g[col]), g[f"gain_{metric}"])
        out[f"spearman_{col}"], out[f"spearman_p_{col}"] = float(r.statistic), float(r.pvalue)
    return out


__all__ = ["ARMS", "BASELINES", "SEEDS", "PAIR_SEEDS", "QK_SEEDS", "BASELINE_SEEDS", "ALL_EVAL_SEEDS", "BASIN_TRACKERS", "EARLY_EPOCHS",
           "Plan", "FULL", "plan", "basin_specs", "label_specs", "proximity_of", "basin_row", "label_row",
           "METRICS", "paired_ci", "paired", "gain_table", "basin_gain_contrast"]


# --------------------------------------------------------------------------------------
# basin predictors on real runs

REAL_SHARE = 0.90  # the share of real runs a basin predictor must name (docs/basin.md)


def predictor_share(basin: pd.DataFrame, column: str) -> tuple[int, int]:
    """(hits, n): runs where ``column > 0`` agrees with the basin (proximity index after SPT
    > 1); runs where the column is NaN do not count. :func:`predictor_test` tests it."""
    t = basin.dropna(subset=[column])
    return int(((t[column] > 0) == (t.basin == "proximity")).sum()), len(t)


def predictor_test(basin: pd.DataFrame, column: str) -> dict:
    """The share of :func:`predictor_share` against always answering the majority basin of the
    same runs (:func:`toyspt.runs.stats.hits_vs_base_rate`, exact one-sided binomial): hits, n,
    share, majority ("proximity" or "anti-local"), majority_hits, base_rate, p (NaN figures
    and majority "none" when fewer than 2 runs count)."""
    t = basin.dropna(subset=[column])
    if len(t) < 2:
        hits, n = predictor_share(t, column)
        nan = float("nan")
        return dict(hits=hits, n=n, share=hits / n if n else nan, majority="none", majority_hits=n, base_rate=nan, p=nan)
    out = hits_vs_base_rate((t[column] > 0).to_numpy(bool), (t.basin == "proximity").to_numpy(bool))
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
                          f"names {r['majority_hits']}/{n}, one-sided binomial p = {r['p']:.2g} against that base rate",
                          "n.a.", hits / n if n else float("nan"), "share of runs", threshold, "ge", "the goal stated for real data",
                          hits=hits, n=n, base_rate=r["base_rate"], majority=r["majority"], p_base_rate=r["p"])


__all__ += ["REAL_SHARE", "predictor_share", "predictor_test", "predictor_check"]
