"""Figure (lra tier): the paper's LRA claims against both LRA studies' runs.

Per study (1: fixed epochs, :mod:`toyspt.studies.lra_design`; 2: every arm trained out by one
stopping rule, :mod:`toyspt.studies.lra2_design`), task and arm, the arm's difference from its
baseline (scratch; at 2 layers ``depth2_spt`` against ``depth2_scratch``) on each metric, paired by
seed (:func:`toyspt.analysis.paired.paired`): the mean with its 95% paired t interval (``mean_diff``,
``ci_low``, ``ci_high``: descriptive) and the exact Wilcoxon signed-rank test (``direction``, ``p``;
its Hodges-Lehmann estimate and interval ``hl``, ``hl_low``, ``hl_high``); ``tost_p``: the two
one-sided t tests of arm - base within the study's margin for the task (``margin``);
``below_half_p``: beside each claimed gain, the one-sided t test that it is smaller than half the
paper's (:func:`toyspt.analysis.gates.below_fraction_p`). Descriptive, added once both studies were
complete to compare gains across tasks whose scratch leaves different room: ``error_share`` (95% t
interval ``error_share_low``, ``error_share_high``), the mean over seeds of (arm - base) / (1 - base),
the share of the baseline's validation errors the arm removes (NaN where a baseline makes none), and
``paper_error_share``, the paper's gain over its own scratch's errors (:data:`toyspt.studies.lra_design.PAPER_BASE`).

Families, within each study (``family``, ``holm_family``, ``p_holm`` = Holm over the family's
signed-rank p, :func:`toyspt.analysis.multiplicity.holm`): ``confirmatory`` is task x {spt,
qk_transfer, frozen_attention} against scratch on the primary metric (``peak_val_acc``; 9 in the
first study), whose TOST p are Holm-adjusted over the same family (``tost_p_holm``); every other
row is ``descriptive``, Holm within its arm and metric over the tasks, and gets no verdict.

Verdicts (confirmatory rows only), against the claim of the paper (:func:`claim`: the sign of
:data:`toyspt.studies.lra_design.PAPER`'s arm - scratch; "equal" for its "unchanged"; on ListOps,
where it states no number for spt and qk_transfer, its general claim that they beat scratch), at
alpha :data:`toyspt.studies.lra_design.ALPHA`. First the rule alone (``ungated``, :func:`verdict`):

* ``confirmed``: Holm-adjusted signed-rank p <= alpha with the test's direction the claim's sign;
* ``contradicted``: p_holm <= alpha in the other direction, or (claim "unchanged") in either;
* ``equivalent within the margin``: not that, and the Holm-adjusted TOST p <= alpha;
* ``not resolved``: anything else.

Then the gates the claim needs (``gates``; :mod:`toyspt.studies.lra_claim_gates`: treatment,
learnable, off chance, trained out, budget, margin): a failed gate makes the ``verdict``
``not tested: <gates>``, so a claim that could not have failed is never called confirmed or
equivalent. The CNN references of the image tasks (entries keyed ``(study, task,
"cnn_reference", 0)``) answer the learnability gate.

Writes ``lra_claims.csv`` (:data:`COLUMNS`, one row per study x task x arm x metric) and
``lra_claims_runs.csv`` (:data:`RUN_COLUMNS`, one row per run).
"""
from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from toyspt.analysis.gains import RANK_COLUMNS, T_COLUMNS, columns
from toyspt.analysis.gates import below_fraction_p, gated
from toyspt.analysis.multiplicity import holm
from toyspt.analysis.paired import paired, tost
from toyspt.studies import lra_design as design
from toyspt.studies.lra_claim_gates import AT_PEAK, describe, row_gates, stopped_by_rule, task_facts
from toyspt.util.plots import color

NAME = "lra_claims"
TITLE = "The paper's LRA claims: arm - scratch, paired by seed, beside the paper's numbers"
TIERS = (design.TIER,)
COLUMNS = ["study", "task", "arm", "n_seeds", "metric", "mean_diff", "ci_low", "ci_high", "p_holm", "family",
           "paper_value", "verdict", "gates", "ungated", "base", "claim", "test", "direction", "p", "holm_family",
           "holm_m", "hl", "hl_low", "hl_high", "tost_p", "tost_p_holm", "margin", "below_half_p", "wins", "ties",
           "losses", "arm_mean", "base_mean", "error_share", "error_share_low", "error_share_high",
           "paper_error_share"]
# per run, from its summary (test_at_peak: what the chance gates read)
METRICS = ("peak_val_acc", "mean_test_last20", "final_test_acc", "final_train_acc", "test_at_peak")
RUN_COLUMNS = ["study", "task", "arm", "seed", *METRICS, "stopped_by_rule", "seconds", "above_majority"]
BASES = {"depth2_spt": "depth2_scratch"}  # the baseline of an arm (others: scratch)
REFERENCE = "cnn_reference"  # the arm name of the CNN references among the runs (toyspt.studies.lra_cnn)
TEST = "signed-rank"  # the test behind direction, p and p_holm (mean_diff and its interval: the paired t test)
CONFIRMED, CONTRADICTED, EQUIVALENT, UNRESOLVED = ("confirmed", "contradicted", "equivalent within the margin",
                                                   "not resolved")
VERDICTS = (CONFIRMED, CONTRADICTED, EQUIVALENT, UNRESOLVED)  # before the gates (``ungated``)
META_FIELDS = ("n_seeds", "base_mean", "arm_mean", "mean_diff", "ci_low", "ci_high", "hl", "hl_low", "hl_high",
               "p_holm", "tost_p", "tost_p_holm", "below_half_p", "verdict", "gates", "error_share", "error_share_low",
               "error_share_high", "paper_error_share")  # per row, in metadata.json
SHARE_COLUMNS = dict(estimate="error_share", low="error_share_low", high="error_share_high")  # t test of the shares
GENERAL_CLAIM = {"spt": 1, "qk_transfer": 1}  # the paper's claims where it gives no number: SPT and its W_Q, W_K help


STUDY = 1  # the study this figure draws (the second: toyspt.figs.lra_claims2)


def specs(ctx):
    """``(1, task, arm, seed)`` -> every run of the first study and the CNN references of its image
    tasks (:meth:`toyspt.studies.lra_design.Study.claim_specs`)."""
    return ctx.study.claim_specs(STUDY)


def claim(task: str, arm: str) -> int | None:
    """The sign the paper claims for arm - scratch on ``task``: +1, -1, 0 ("unchanged"), None (no claim)."""
    v = design.PAPER.get((task, arm))
    if v == "equal":
        return 0
    if v is None:
        return GENERAL_CLAIM.get(arm)
    return int(np.sign(v))


def verdict(sign: int | None, direction: int, p_holm: float, tost_p: float, alpha: float = design.ALPHA) -> str:
    """The statistical verdict of one confirmatory row before its gates (module docstring): ``sign``
    the claim's, ``direction`` and ``p_holm`` the signed-rank test's, ``tost_p`` the equivalence
    test's, Holm-adjusted over the family (NaN: not reached)."""
    if sign not in (-1, 0, 1):
        raise ValueError(f"verdict: a confirmatory row needs the paper's claim (+1, -1 or 0), got {sign!r}")
    if p_holm <= alpha and direction != 0:  # a claim of 0 ("unchanged") is contradicted either way
        return CONFIRMED if direction == sign else CONTRADICTED
    if tost_p <= alpha:
        return EQUIVALENT
    return UNRESOLVED


def run_frame(runs: dict, facts=None) -> pd.DataFrame:
    """One row per run of ``{(study, task, arm, seed): result}`` (:data:`RUN_COLUMNS`); the label
    rule's stop (:func:`toyspt.studies.lra_claim_gates.stopped_by_rule`) read off its history;
    ``above_majority`` (descriptive, where ``facts(study, task)`` gives the task's
    :class:`toyspt.studies.lra_claim_gates.TaskFacts`): whether the run's test accuracy at its
    validation peak beats the majority class (exact McNemar bound, alpha :data:`ALPHA`, per run) or
    stayed on the majority-class plateau."""
    first: dict = {}  # (study, task, arm) in the studies' order (tasks, then arms, scratch first); then the seeds
    for k in runs:
        first.setdefault(k[:3], len(first))
    keys = sorted(runs, key=lambda k: (first[k[:3]], k[3]))
    rows = [dict(study=n, task=t, arm=a, seed=s, **{m: runs[n, t, a, s].summary.get(m, math.nan) for m in METRICS},
                 stopped_by_rule=stopped_by_rule(runs[n, t, a, s]) if hasattr(runs[n, t, a, s], "history") else None,
                 seconds=runs[n, t, a, s].seconds,
                 above_majority=facts(n, t).above_majority(runs[n, t, a, s].summary[AT_PEAK], design.ALPHA)
                 if facts is not None and AT_PEAK in runs[n, t, a, s].summary else None) for n, t, a, s in keys]
    return pd.DataFrame(rows, columns=RUN_COLUMNS)


def _row(frame: pd.DataFrame, study: int, task: str, arm: str, metric: str, margin: float) -> dict | None:
    base = BASES.get(arm, "scratch")
    g = frame[(frame.study == study) & (frame.task == task)].pivot_table(index="seed", columns="arm", values=metric,
                                                                         aggfunc="first")
    if arm not in g or base not in g:
        return None
    pair = g[[arm, base]].dropna()
    if len(pair) < 2:
        return None
    d = (pair[arm] - pair[base]).to_numpy()
    p = paired(d)
    confirmatory = design.family(task, arm) == "confirmatory" and base == "scratch" and metric == design.PRIMARY
    paper = design.PAPER.get((task, arm)) if base == "scratch" and metric == design.PRIMARY else None
    gain = paper if isinstance(paper, float) and paper > 0 else math.nan
    room = (1 - pair[base]).to_numpy()  # the baseline's validation errors per seed
    share = (columns(paired(d / room).t, SHARE_COLUMNS) if (room > 0).all()
             else dict.fromkeys(SHARE_COLUMNS.values(), math.nan))
    paper_base = design.PAPER_BASE.get((task, arm)) if isinstance(paper, float) else None
    return dict(study=study, task=task, arm=arm, n_seeds=p.n, metric=metric, **columns(p.t, T_COLUMNS),
                family="confirmatory" if confirmatory else "descriptive",
                paper_value=paper if isinstance(paper, float) else (0.0 if paper == "equal" else math.nan),
                base=base, claim=claim(task, arm) if confirmatory else None, test=TEST, direction=p.direction,
                p=p.rank.p, holm_family="confirmatory" if confirmatory else f"{arm} on {metric}",
                **{k: v for k, v in columns(p.rank, RANK_COLUMNS).items() if k in ("hl", "hl_low", "hl_high")},
                tost_p=tost(d, margin).p, margin=margin, below_half_p=below_fraction_p(d, gain), wins=p.wins,
                ties=p.ties, losses=p.losses, arm_mean=float(pair[arm].mean()), base_mean=float(pair[base].mean()),
                **share, paper_error_share=paper / (1 - paper_base) if paper_base is not None else math.nan)


def claims_table(frame: pd.DataFrame, alpha: float = design.ALPHA, margins=None, gates=None) -> pd.DataFrame:
    """One row per study x task x arm x metric of the per-run ``frame`` (:func:`run_frame`), :data:`COLUMNS`:
    the paired comparison, its Holm family's adjusted p (within its study), the TOSTs Holm-adjusted
    over the confirmatory family, the statistical verdict (``ungated``) and, where ``gates(study, task,
    arm, ungated, claim)`` gives the gates the row needs, the verdict after them. ``margins``:
    ``(study, task)`` -> the equivalence margin (default: :data:`toyspt.studies.lra_design.MARGIN`)."""
    margins = margins or {}
    arms = [a for a in dict.fromkeys(frame.arm) if a not in ("scratch",)]
    rows = [r for n in dict.fromkeys(frame.study) for m in (design.PRIMARY, design.SECONDARY)
            for t in dict.fromkeys(frame[frame.study == n].task) for a in arms
            if (r := _row(frame, n, t, a, m, margins.get((n, t), design.MARGIN))) is not None]
    out = pd.DataFrame(rows, columns=[c for c in COLUMNS if c not in ("p_holm", "holm_m", "tost_p_holm", "verdict",
                                                                        "gates", "ungated")])
    fam = out.groupby(["study", "holm_family"], sort=False) if len(out) else None
    out["p_holm"] = fam.p.transform(lambda p: holm(p)) if len(out) else []
    out["holm_m"] = fam.p.transform("count") if len(out) else []
    out["tost_p_holm"] = [math.nan] * len(out)
    conf = out.family == "confirmatory"
    for n in dict.fromkeys(out.study[conf]):
        rows_n = conf & (out.study == n)
        out.loc[rows_n, "tost_p_holm"] = holm(out.tost_p[rows_n].to_numpy())
    out["ungated"] = [verdict(c, d, ph, tp, alpha) if f == "confirmatory" else ""
                      for c, d, ph, tp, f in zip(out.claim, out.direction, out.p_holm, out.tost_p_holm, out.family)]
    decided = [gates(n, t, a, u, c) if f == "confirmatory" and gates is not None else []
               for n, t, a, u, c, f in zip(out.study, out.task, out.arm, out.ungated, out.claim, out.family)]
    out["gates"] = [describe(g) for g in decided]
    out["verdict"] = [gated(u, g) if u else "" for u, g in zip(out.ungated, decided)]
    return out.reindex(columns=COLUMNS)


def _claims_meta(rows: pd.DataFrame) -> dict:
    """task -> arm -> the :data:`META_FIELDS` of its row (one per task and arm), as plain JSON numbers."""
    out: dict = {}
    for r in rows.to_dict("records"):  # Python's own numbers (exact), not numpy's
        out.setdefault(r["task"], {})[r["arm"]] = {k: r[k] for k in META_FIELDS}
    return out


def _run_means(frame: pd.DataFrame) -> dict:
    """task -> arm -> per metric of :data:`METRICS` its mean and (``<metric>_std``) standard deviation over seeds."""
    out: dict = {}
    for (task, arm), g in frame.groupby(["task", "arm"], sort=False):
        out.setdefault(task, {})[arm] = {**{m: float(g[m].mean()) for m in METRICS},
                                         **{f"{m}_std": float(g[m].std()) for m in METRICS}, "runs": len(g),
                                         "above_majority": int(g.above_majority.eq(True).sum())
                                         if g.above_majority.notna().any() else None}
    return out


def _meta(table: pd.DataFrame, frame: pd.DataFrame) -> dict:
    """What the docs quote of one study: its confirmatory rows, the descriptive and secondary ones,
    the runs' means."""
    primary = table[table.metric == design.PRIMARY]
    return dict(claims=_claims_meta(table[table.family == "confirmatory"]),
                descriptive=_claims_meta(primary[primary.family == "descriptive"]),
                secondary=_claims_meta(table[table.metric == design.SECONDARY]), run_means=_run_means(frame))


def _by_study(runs: dict) -> dict:
    """study -> ``{(task, arm, seed): result}`` of its runs, the CNN references left out."""
    return {n: {k[1:]: r for k, r in runs.items() if k[0] == n and k[2] != REFERENCE}
            for n in dict.fromkeys(k[0] for k in runs)}


def facts_function(ctx, runs: dict):
    """``fact(study, task)``: the task's :class:`toyspt.studies.lra_claim_gates.TaskFacts` (its data,
    the recons of its SPT arms among ``runs``, its CNN reference), each built once."""
    facts: dict = {}
    data = {n: ctx.study.data_of(n) for n in dict.fromkeys(k[0] for k in runs)}  # a study's specs are many
    by_study = _by_study(runs)

    def fact(n, t):
        if (n, t) not in facts:
            ref = next((r.details for (nn, tt, a, _), r in runs.items() if (nn, tt, a) == (n, t, REFERENCE)), None)
            recons = [r.config["train"]["recon"] for (tt, a, _), r in by_study[n].items()
                      if tt == t and a in ("spt", "qk_transfer")]
            facts[n, t] = task_facts(data[n][t], recons, ref)
        return facts[n, t]
    return fact


def gate_function(ctx, runs: dict, alpha: float = design.ALPHA, fact=None):
    """``gates(study, task, arm, ungated, claim)`` for :func:`claims_table`: the gates of
    :func:`toyspt.studies.lra_claim_gates.row_gates` read off ``runs`` (the CNN references' entries
    among them, keyed ``(study, task, "cnn_reference", seed)``) and each task's facts (``fact``,
    default :func:`facts_function`)."""
    margins = ctx.study.margins()
    fact = fact or facts_function(ctx, runs)
    by_study = _by_study(runs)

    def gates(n, t, a, ungated, c):
        return row_gates(by_study[n], t, a, ungated, c, fact(n, t), margins.get((n, t), design.MARGIN), alpha)
    return gates


def draw(ctx, runs, name: str = NAME):
    """The claims of the study whose runs (and CNN references) ``runs`` holds: the table, the per-run
    table (``<name>_runs``) and a panel per task; what the docs quote in ``ctx.meta[name]``."""
    fact = facts_function(ctx, runs)
    frame = run_frame({k: r for k, r in runs.items() if k[2] != REFERENCE}, fact)
    table = claims_table(frame, margins=ctx.study.margins(), gates=gate_function(ctx, runs, fact=fact))
    primary = table[table.metric == design.PRIMARY]
    confirm = table[table.family == "confirmatory"]
    ctx.meta[name] = dict(quick=ctx.quick, runs=len(frame), primary=design.PRIMARY, test=TEST, alpha=design.ALPHA,
                          margin=design.MARGIN, holm_m=int(len(confirm)), **_meta(table, frame),
                          references={t: r.details for (_, t, a, _), r in runs.items() if a == REFERENCE},
                          cpu_seconds=float(frame.seconds.fillna(0).sum()))
    panels = list(dict.fromkeys(zip(primary.study, primary.task)))
    fig, axes = plt.subplots(1, max(1, len(panels)), figsize=(4.2 * max(1, len(panels)), 4.2), sharex=True,
                             squeeze=False)
    for ax, (n, task) in zip(axes[0], panels):
        g = primary[(primary.study == n) & (primary.task == task)].reset_index(drop=True)
        y = np.arange(len(g))[::-1]
        for yy, r in zip(y, g.itertuples()):
            c = color("spt") if r.family == "confirmatory" else "0.45"
            ax.errorbar(r.mean_diff, yy, xerr=[[r.mean_diff - r.ci_low], [r.ci_high - r.mean_diff]]
                        if np.isfinite(r.ci_low) else None, fmt="o", ms=4, capsize=2, color=c,
                        mfc="none" if r.verdict.startswith("not tested") else c)
            if np.isfinite(r.paper_value):
                ax.plot(r.paper_value, yy, marker="*", ms=9, color="tab:red", ls="none")
        m = g.margin.iloc[0]
        ax.axvline(0, color="0.5", lw=0.8)
        ax.axvspan(-m, m, color="0.9", zorder=0)
        ax.set_yticks(y, [f"{a} - {b}" for a, b in zip(g.arm, g.base)], fontsize=6)
        lo, hi = int(g.n_seeds.min()), int(g.n_seeds.max())
        ax.set_title(f"study {n}: {task} ({lo if lo == hi else f'{lo}-{hi}'} paired seeds)", fontsize=8)
        ax.set_xlabel(f"{design.PRIMARY} difference (mean, 95% paired t)", fontsize=7)
    fig.suptitle(f"{TITLE}\ncoloured: confirmatory (Holm within each study), open: not tested (a gate failed), "
                 "grey: descriptive; red star: the paper; shaded: the equivalence margin", fontsize=8)
    fig.tight_layout()
    return fig, {name: table, f"{name}_runs": frame}
