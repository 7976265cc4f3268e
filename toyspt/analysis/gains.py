"""Gains and shares with intervals, on any data: every arm against a base arm (scratch), paired
seed by seed, and each arm's share of SPT's gain.

Statistics come from :mod:`toyspt.analysis.paired` (one :class:`toyspt.analysis.paired.PairedTest`
per test; :func:`columns` spells its fields as a table's columns), :mod:`toyspt.analysis.multiplicity`,
:mod:`toyspt.analysis.shares` and :mod:`toyspt.analysis.pooling`. A comparison pairs an arm with scratch seed by
seed (the same initialisation, data order and, for transfer arms, the same SPT-only parent).

**One test for direction and significance:** the Wilcoxon signed-rank test (exact, zero rule
"wilcox", :mod:`toyspt.analysis.rank_tests`) with the Hodges-Lehmann estimate and the interval
that inverts it (``hl``, ``hl_low``, ``hl_high``); a verdict reads its sign (``direction``) and
its p from that test. The mean with its t interval and t p (``mean_diff``, ``ci_low``,
``ci_high``, ``p_t``) is descriptive.

**Families.** The confirmatory family is the ``primary`` metric (the real-data study's:
:data:`toyspt.ucr.design.PRIMARY`) x the sets of one table for the comparison spt vs scratch
(:data:`CONFIRMATORY_ARM`): ``family`` "confirmatory", ``p_holm`` Holm over those rows. Every
other row is ``descriptive``. On the primary metric the other arms against scratch are one Holm
family, every arm x every set (a weight-group decomposition asks one question of all its arms;
Holm within each arm would let twelve arms each spend alpha); each arm x secondary metric is
Holm over its sets. ``holm_m`` says the family's size. The spt - arm TOSTs are likewise one
family (:func:`equivalences`). The MDE (``mde80``) is that of the signed-rank test at
alpha / holm_m, the level Holm's first step needs.

The frames are per-run rows (:func:`toyspt.analysis.rows.label_row`: dataset, arm, seed and a
column per metric); what metric is primary and which sets are related is the caller's (the
study design, :mod:`toyspt.ucr.design`, :mod:`toyspt.ucr.archive`).
"""
from __future__ import annotations

import math
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from toyspt.analysis import rank_tests
from toyspt.analysis.multiplicity import holm
from toyspt.analysis.paired import PairedTest, paired, rounded, tost
from toyspt.analysis.pooling import random_effects
from toyspt.analysis.shares import share_of_gain

GAIN_COLUMNS = ["dataset", "arm", "metric", "family", "n_seeds", "mean_diff", "sd_diff", "ci_low", "ci_high", "p_t",
                "hl", "hl_low", "hl_high", "direction", "p_wilcoxon", "holm_m", "p_holm", "wilcoxon_method", "mde80",
                "wins", "ties", "losses", "tost_p", "spt_minus_arm", "spt_minus_arm_low", "spt_minus_arm_high",
                "spt_minus_arm_p", "spt_minus_arm_tost_p", "share", "share_low", "share_high", "share_interval"]
ARCHIVE_COLUMNS = ["dataset", "unit", "n_seeds", "gain", "ci_low", "ci_high", "hl", "hl_low", "hl_high", "direction",
                   "p_wilcoxon", "p_holm", "mde80", "qk_share", "qk_share_low", "qk_share_high", "qk_share_interval",
                   "scratch_mean", "spt_mean", "qk_mean", "n_train", "length", "n_classes"]
# where a table's columns take the fields of a PairedTest (:func:`columns`)
T_COLUMNS = dict(estimate="mean_diff", low="ci_low", high="ci_high", p="p_t")  # the paired t test
RANK_COLUMNS = dict(estimate="hl", low="hl_low", high="hl_high", p="p_wilcoxon", method="wilcoxon_method")
ARCHIVE_T = dict(estimate="gain", low="ci_low", high="ci_high")  # archive_table: the mean and its t interval
ARCHIVE_RANK = dict(estimate="hl", low="hl_low", high="hl_high", p="p_wilcoxon")
GAIN_T = dict(estimate="gain", low="gain_low", high="gain_high")  # gain_and_share: the mean and its t interval
ALPHA = 0.05  # family-wise error rate of the Holm-adjusted verdicts
CONFIRMATORY_ARM = "spt"  # the confirmatory comparison: spt vs scratch on the primary metric
# Equivalence margin of the weight-group contrasts (TOST), stated before the study: a gain
# within ±0.01 accuracy (one test series in 100) counts as none. "This group carries none of
# SPT's gain": arm - scratch equivalent to 0; "it carries all of it": spt - arm equivalent to 0.
EQUIVALENCE_MARGIN = 0.01


def diffs(frame: pd.DataFrame, dataset: str, arm: str, metric: str, base: str = "scratch") -> pd.Series:
    """arm - base by seed on one set (the seeds both have)."""
    g = frame[frame.dataset == dataset]
    a, b = (g[g.arm == x].set_index("seed")[metric] for x in (arm, base))
    return (a - b).dropna()


def gain_and_share(per_seed: Mapping[str, Sequence[float]], arm: str, base: str = "scratch",
                   spt: str = "spt") -> dict:
    """SPT's gain over ``base`` and ``arm``'s share of it, from one value per seed and arm
    (``per_seed``: {arm: values in seed order}, paired by position), as :func:`gain_table`
    computes them, flat (``toyspt.theory``'s T5.3 reads these keys): ``gain``, ``gain_low``,
    ``gain_high`` (the :class:`toyspt.analysis.paired.PairedTest` of the paired t test: estimate,
    interval), ``gain_p`` and ``gain_hl`` (the signed-rank test's p and Hodges-Lehmann estimate),
    and ``share``, ``share_low``, ``share_high``, ``share_interval`` (Fieller,
    :func:`toyspt.analysis.shares.share_of_gain`). With fewer than 2 seeds: the means alone."""
    d_spt, d_arm = (np.subtract(per_seed[a], per_seed[base]) for a in (spt, arm))
    if len(d_spt) < 2:
        m_spt, m_arm = float(np.mean(d_spt)), float(np.mean(d_arm))
        return dict(gain=m_spt, share=m_arm / m_spt if m_spt else math.nan)
    p, sh = paired(d_spt), share_of_gain(d_arm, d_spt)
    return dict(columns(p.t, GAIN_T), gain_p=p.rank.p, gain_hl=p.rank.estimate, share=sh["share"],
                share_low=sh["ci_low"], share_high=sh["ci_high"], share_interval=sh["interval"])


def columns(test: PairedTest, names: Mapping[str, str]) -> dict:
    """``test``'s fields under a table's column names (``names``: field -> column, e.g.
    :data:`T_COLUMNS`): the one place a result's fields are spelled otherwise."""
    return {col: getattr(test, field) for field, col in names.items()}


def _family(arm: str, metric: str, primary: str) -> str:
    return "confirmatory" if arm == CONFIRMATORY_ARM and metric == primary else "descriptive"


def _holm_family(arm: str, metric: str, primary: str) -> str:
    """The Holm family of a row: the confirmatory one; every other arm on the primary metric
    together (one family: arms x sets); each arm x secondary metric on its own."""
    if metric == primary:
        return "confirmatory" if arm == CONFIRMATORY_ARM else f"arms on {metric}"
    return f"{arm} on {metric}"


def _contrast(frame: pd.DataFrame, name: str, arm: str, m: str) -> dict:
    """spt - arm by seed: mean, 95% t interval, signed-rank p, TOST p (NaN where < 2 seeds)."""
    d = diffs(frame, name, "spt", m, base=arm)
    if len(d) < 2:
        return {}
    p = paired(d)
    return dict(columns(p.t, dict(estimate="spt_minus_arm", low="spt_minus_arm_low", high="spt_minus_arm_high")),
                spt_minus_arm_p=p.rank.p, spt_minus_arm_tost_p=tost(d, EQUIVALENCE_MARGIN).p)


def _holm_and_mde(out: pd.DataFrame, keys: list[str], alpha: float) -> pd.DataFrame:
    """p_holm within each group of ``keys``; holm_m its size; mde80 at alpha / holm_m."""
    g = out.groupby(keys, sort=False).p_wilcoxon if keys else None
    out["p_holm"] = g.transform(lambda p: holm(p)) if keys else holm(out.p_wilcoxon)
    out["holm_m"] = g.transform("count") if keys else int(out.p_wilcoxon.notna().sum())
    out["mde80"] = [rank_tests.mde_signed_rank(sd, int(n), alpha / max(int(m), 1)) if sd == sd else np.nan
                    for sd, n, m in zip(out.sd_diff, out.n_seeds, out.holm_m)]
    return out


def gain_table(frame: pd.DataFrame, arms: Sequence[str], metrics: Sequence[str], primary: str,
               alpha: float = ALPHA) -> pd.DataFrame:
    """One row per data set x arm x metric (:data:`GAIN_COLUMNS`): the arm against scratch,
    paired by seed: mean and 95% t interval, t p (descriptive); Hodges-Lehmann estimate, its
    interval, direction and the signed-rank p (the verdict's test); ``family`` and ``p_holm``
    within its Holm family (module docstring: spt on the primary metric over the sets; every
    other arm on the primary metric, all arms x sets together; each arm x secondary metric over
    the sets); the MDE of the signed-rank test at alpha / holm_m; and for arms other than spt:
    ``tost_p`` (arm - scratch equivalent to 0 within :data:`EQUIVALENCE_MARGIN`), the contrast
    spt - arm (mean, t interval, signed-rank p, TOST p; for ``scratch_matched`` it is SPT's gain
    over scratch for SPT's whole budget), and the share of SPT's gain (Fieller interval;
    ``share_interval`` says when it is unbounded)."""
    rows = []
    for name in frame.dataset.unique():
        for arm in arms:
            for m in metrics:
                d = diffs(frame, name, arm, m)
                if len(d) < 2:
                    continue
                p = paired(d)
                row = dict(dataset=name, arm=arm, metric=m, family=_family(arm, m, primary),
                           holm_family=_holm_family(arm, m, primary), n_seeds=p.n, sd_diff=p.sd,
                           **columns(p.t, T_COLUMNS), **columns(p.rank, RANK_COLUMNS), direction=p.direction,
                           wins=p.wins, ties=p.ties, losses=p.losses, tost_p=np.nan, share=np.nan, share_low=np.nan,
                           share_high=np.nan, share_interval="")
                if arm != "spt":
                    row.update(tost_p=tost(d, EQUIVALENCE_MARGIN).p, **_contrast(frame, name, arm, m))
                    sp = diffs(frame, name, "spt", m)
                    if len(sp.index.intersection(d.index)) >= 2:
                        sh = share_of_gain(d, sp)
                        row.update(share=sh["share"], share_low=sh["ci_low"], share_high=sh["ci_high"],
                                   share_interval=sh["interval"])
                rows.append(row)
    out = pd.DataFrame(rows, columns=["holm_family"] + [c for c in GAIN_COLUMNS if c not in ("p_holm", "holm_m",
                                                                                              "mde80")])
    return _holm_and_mde(out, ["holm_family"], alpha).reindex(columns=GAIN_COLUMNS)


def verdicts(gain: pd.DataFrame, metric: str, alpha: float = ALPHA) -> pd.DataFrame:
    """Per arm, on ``metric``: sets where it beats scratch after Holm (within its family), where
    it is worse, and where neither can be told. Direction and significance come from one test:
    the sign of the signed-rank statistic (``direction``) and its Holm-adjusted p (<= alpha)."""
    g = gain[gain.metric == metric]
    sig = g.p_holm <= alpha
    return pd.DataFrame(dict(helps=(sig & (g.direction > 0)).groupby(g.arm, sort=False).sum(),
                             hurts=(sig & (g.direction < 0)).groupby(g.arm, sort=False).sum(),
                             sets=g.groupby("arm", sort=False).size())).reset_index()


def equivalences(gain: pd.DataFrame, metric: str, alpha: float = ALPHA) -> dict:
    """The weight-group contrasts' equivalence tests on ``metric``, over every arm but spt: per
    contrast (``arm_minus_scratch``: "the arm carries none of SPT's gain"; ``spt_minus_arm``:
    "it carries all of it"), the rows tested (one Holm family: every arm x set), how many are
    equivalent to 0 within :data:`EQUIVALENCE_MARGIN` after Holm over that family, the smallest
    unadjusted TOST p with its set and arm, and the smallest Holm-adjusted one."""
    g = gain[(gain.metric == metric) & (gain.arm != CONFIRMATORY_ARM)]
    out = {}
    for name, col in (("arm_minus_scratch", "tost_p"), ("spt_minus_arm", "spt_minus_arm_tost_p")):
        t = g[g[col].notna()]
        adjusted = holm(t[col].to_numpy(float))
        low = t.loc[t[col].idxmin()] if len(t) else None
        out[name] = dict(rows=int(len(t)), equivalent=int((adjusted <= alpha).sum()),
                         min_p=float(low[col]) if low is not None else math.nan,
                         min_at=f"{low.dataset} {low.arm}" if low is not None else "",
                         min_p_holm=float(adjusted.min()) if len(t) else math.nan)
    return dict(margin=EQUIVALENCE_MARGIN, alpha=alpha, **out)


def arm_family(gain: pd.DataFrame, metric: str, alpha: float = ALPHA) -> dict:
    """The arms-vs-scratch family on ``metric`` (every arm but spt x every set, one Holm family):
    its size, how many tests reject after Holm, and the smallest Holm p with its set and arm."""
    g = gain[(gain.metric == metric) & (gain.arm != CONFIRMATORY_ARM) & gain.p_holm.notna()]
    low = g.loc[g.p_holm.idxmin()] if len(g) else None
    return dict(tests=int(len(g)), m=int(g.holm_m.max()) if len(g) else 0, alpha=alpha,
                significant=int((g.p_holm <= alpha).sum()),
                min_p_holm=float(low.p_holm) if low is not None else math.nan,
                min_at=f"{low.dataset} {low.arm}" if low is not None else "")


def archive_table(frame: pd.DataFrame, sizes: dict[str, tuple[int, int, int]], metric: str,
                  unit_of: Callable[[str], str] = str, alpha: float = ALPHA) -> pd.DataFrame:
    """One row per set (:data:`ARCHIVE_COLUMNS`): SPT's gain over scratch on ``metric`` (paired
    by seed: mean and t interval; Hodges-Lehmann, its interval, direction and the signed-rank p;
    Holm across the table's sets, its own family; MDE at alpha / m), its related-set ``unit``
    (``unit_of(name)``, e.g. :func:`toyspt.ucr.archive.unit_of`; default: the set itself) and
    Q/K-only transfer's share of the gain (Fieller); ``sizes``: set -> (training series, length,
    classes)."""
    rows = []
    for name in frame.dataset.unique():
        d = diffs(frame, name, "spt", metric)
        if len(d) < 2:
            continue
        p, qk = paired(d), diffs(frame, name, "qk_transfer", metric)
        sh = share_of_gain(qk, d) if len(qk.index.intersection(d.index)) >= 2 else {}
        g = frame[frame.dataset == name]
        means = {a: float(g[g.arm == a][metric].mean()) for a in ("scratch", "spt", "qk_transfer")}
        n_train, length, n_classes = sizes[name]
        rows.append(dict(dataset=name, unit=unit_of(name), n_seeds=p.n, sd_diff=p.sd, **columns(p.t, ARCHIVE_T),
                         **columns(p.rank, ARCHIVE_RANK), direction=p.direction,
                         qk_share=sh.get("share", np.nan), qk_share_low=sh.get("ci_low", np.nan),
                         qk_share_high=sh.get("ci_high", np.nan), qk_share_interval=sh.get("interval", ""),
                         scratch_mean=means["scratch"], spt_mean=means["spt"], qk_mean=means["qk_transfer"],
                         n_train=n_train, length=length, n_classes=n_classes))
    cols = [c for c in ARCHIVE_COLUMNS if c not in ("p_holm", "mde80")] + ["sd_diff"]
    out = _holm_and_mde(pd.DataFrame(rows, columns=cols), [], alpha) if rows else pd.DataFrame(columns=cols)
    return out.reindex(columns=ARCHIVE_COLUMNS)


def archive_counts(table: pd.DataFrame, alpha: float = ALPHA) -> dict:
    """How many sets of an :func:`archive_table` SPT helps or hurts after Holm (direction from
    the signed-rank test), on how many its mean gain is positive, and where Q/K-only transfer
    keeps at least half of SPT's gain: counted only where that gain is positive (a share of a
    negative gain at or above 1/2 means Q/K-only is worse still), by the point estimate and by
    the Fieller interval's lower end."""
    sig = table.p_holm <= alpha
    helps = sig & (table.direction > 0)
    positive = table.gain > 0
    return dict(sets=int(len(table)), helps=int(helps.sum()), hurts=int((sig & (table.direction < 0)).sum()),
                unclear=int((~sig).sum()), gain_positive=int(positive.sum()),
                qk_keeps_half_where_gain_positive=int((positive & (table.qk_share >= 0.5)).sum()),
                qk_keeps_half_where_spt_helps=int((helps & (table.qk_share >= 0.5)).sum()),
                qk_keeps_half_lower_bound_where_gain_positive=int((positive & (table.qk_share_low >= 0.5)).sum()))


def across_sets(table: pd.DataFrame, unit_of: Callable[[str], str] = str, gain: str = "gain") -> dict:
    """One test of SPT's gain across sets: the per-set mean gains (``table``: columns dataset
    and ``gain``, e.g. :func:`archive_table` of the archive and of the paper's sets, concatenated)
    merged into related-set units (``unit_of(name)``, e.g. :func:`toyspt.ucr.archive.unit_of`; a
    unit's gain is the mean of its sets' gains), then the two-sided exact Wilcoxon signed-rank
    test over the units (:func:`toyspt.analysis.rank_tests.signed_rank`): p, direction,
    Hodges-Lehmann estimate and interval, wins / losses, and the units with their sets and gains."""
    t = table[["dataset", gain]].dropna().drop_duplicates("dataset")
    t = t.assign(unit=[unit_of(d) for d in t.dataset])
    units = t.groupby("unit", sort=False).agg(sets=("dataset", list), gain=(gain, "mean")).reset_index()
    if len(units) < 2:
        raise ValueError(f"table: need at least 2 related-set units with a gain, got {len(units)}")
    w = rank_tests.signed_rank(rounded(units.gain.to_numpy(float)))
    return dict(n_sets=int(len(t)), n_units=int(len(units)), p=w["p"], method=w["method"],
                direction=w["direction"], hl=w["hl"], hl_low=w["hl_low"], hl_high=w["hl_high"],
                wins=int((units.gain > 0).sum()), losses=int((units.gain < 0).sum()),
                units=units.to_dict("records"))


def pooled_gain(frame: pd.DataFrame, metric: str, arm: str = "spt", base: str = "scratch") -> dict:
    """SPT's gain pooled over the sets of ``frame`` (label rows) by random effects
    (:func:`toyspt.analysis.pooling.random_effects`: each set's mean paired gain with its variance
    sd^2 / n; DerSimonian-Laird tau^2, Hartung-Knapp interval; Q, I^2), every set one estimate
    (related sets are not merged: this weighs sets by precision, :func:`across_sets` counts units).
    A set whose paired differences do not vary has no sampling variance to weigh it by: it is left
    out and named (``constant_sets``); fewer than 2 sets left is refused (ValueError)."""
    y, v, names, constant = [], [], [], []
    for name in frame.dataset.unique():
        d = diffs(frame, name, arm, metric, base)
        if len(d) >= 2:
            p = paired(d)
            if p.sd == 0:
                constant.append(name)
                continue
            y.append(p.t.estimate)
            v.append(p.sd ** 2 / p.n)
            names.append(name)
    if len(y) < 2:
        raise ValueError(f"pooled gain: need at least 2 sets whose paired differences vary, got {names}"
                         f" (constant: {constant})")
    return dict(random_effects(y, v).as_dict(), sets=names, constant_sets=constant)


def saturation(frame: pd.DataFrame) -> pd.DataFrame:
    """Per set and arm: runs whose validation accuracy reached 1.0, of all runs (where "test
    at peak validation" selects the first of many tied epochs)."""
    g = frame.groupby(["dataset", "arm"], sort=False)
    return pd.DataFrame(dict(runs=g.size(), val_at_1=g.peak_val_acc.apply(lambda v: int((v == 1.0).sum())),
                             median_epochs_at_peak=g.epochs_at_peak_val.median())).reset_index()


__all__ = ["GAIN_COLUMNS", "ARCHIVE_COLUMNS", "T_COLUMNS", "RANK_COLUMNS", "ARCHIVE_T", "ARCHIVE_RANK", "GAIN_T",
           "ALPHA",
           "CONFIRMATORY_ARM", "EQUIVALENCE_MARGIN", "diffs", "gain_and_share", "columns", "gain_table", "verdicts",
           "equivalences", "arm_family", "archive_table", "archive_counts", "across_sets", "pooled_gain",
           "saturation"]
