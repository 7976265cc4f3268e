"""Figure (lra tier): the paper's LRA claims against the LRA study's runs (issue 43, item 7).

Per task of :data:`toyspt.studies.lra_design.TASKS` and arm, the arm's difference from its baseline
(scratch; at 2 layers ``depth2_spt`` against ``depth2_scratch``) on each metric, paired by seed
(:func:`toyspt.analysis.paired.paired`): the mean with its 95% paired t interval
(``mean_diff``, ``ci_low``, ``ci_high``: descriptive) and the exact Wilcoxon signed-rank test
(``direction``, ``p``; its Hodges-Lehmann estimate and interval ``hl``, ``hl_low``, ``hl_high``),
the test the pre-registration (docs/lra.md) names; ``tost_p``: the two one-sided t tests of
arm - base within ±:data:`toyspt.studies.lra_design.MARGIN` (:func:`toyspt.analysis.paired.tost`).

Families (``family``, ``holm_family``, ``p_holm`` = Holm over the family's signed-rank p,
:func:`toyspt.analysis.multiplicity.holm`): ``confirmatory`` is the pre-registered 9, task x
{spt, qk_transfer, frozen_attention} against scratch on the primary metric (``peak_val_acc``);
every other row is ``descriptive``, Holm within its arm and metric over the tasks (labelled
by ``holm_family``), and gets no verdict.

Verdicts (confirmatory rows only; :func:`verdict`), against the claim of the paper
(:func:`claim`: the sign of :data:`toyspt.studies.lra_design.PAPER`'s arm - scratch; "equal" for its
"unchanged"; on ListOps, where it states no number for spt and qk_transfer, its general claim
that they beat scratch), at alpha :data:`toyspt.studies.lra_design.ALPHA`:

* ``confirmed``: Holm-adjusted signed-rank p <= alpha with the test's direction the claim's sign;
* ``contradicted``: p_holm <= alpha in the other direction, or (claim "unchanged") in either;
* ``equivalent within the margin``: not that, and the TOST p <= alpha (arm - scratch inside
  ±MARGIN): for an "unchanged" claim this is what confirms it, for a claimed gain it says the
  gain, if any, is smaller than the margin;
* ``not resolved``: anything else (too few seeds, or an effect neither shown nor ruled out);
* ``not judged (scratch at chance)``: a row the pre-registration reports without a verdict
  (:data:`toyspt.studies.lra_design.UNJUDGED`: frozen attention on PathFinder, whose scratch was at chance
  in the pilot); its test stays in the Holm family of 9.

Writes ``lra_claims.csv`` (:data:`COLUMNS`, one row per task x arm x metric) and
``lra_claims_runs.csv`` (:data:`RUN_COLUMNS`, one row per run).
"""
from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from toyspt.analysis.gains import RANK_COLUMNS, T_COLUMNS, columns
from toyspt.analysis.multiplicity import holm
from toyspt.analysis.paired import paired, tost
from toyspt.studies import lra_design as design
from toyspt.util.plots import color

NAME = "lra_claims"
TITLE = "The paper's LRA claims: arm - scratch, paired by seed, beside the paper's numbers"
TIERS = (design.TIER,)
COLUMNS = ["task", "arm", "n_seeds", "metric", "mean_diff", "ci_low", "ci_high", "p_holm", "family", "paper_value",
           "verdict", "base", "claim", "test", "direction", "p", "holm_family", "holm_m", "hl", "hl_low", "hl_high",
           "tost_p", "margin", "wins", "ties", "losses", "arm_mean", "base_mean"]
METRICS = ("peak_val_acc", "mean_test_last20", "final_test_acc", "final_train_acc")  # per run, from its summary
RUN_COLUMNS = ["task", "arm", "seed", *METRICS, "seconds"]
BASES = {"depth2_spt": "depth2_scratch"}  # the baseline of an arm (others: scratch)
TEST = "signed-rank"  # the test behind direction, p and p_holm (mean_diff and its interval: the paired t test)
CONFIRMED, CONTRADICTED, EQUIVALENT, UNRESOLVED = ("confirmed", "contradicted", "equivalent within the margin",
                                                   "not resolved")
NOT_JUDGED = "not judged ({})"  # filled with the reason of design.UNJUDGED
VERDICTS = (CONFIRMED, CONTRADICTED, EQUIVALENT, UNRESOLVED,
            *(NOT_JUDGED.format(why) for why in design.UNJUDGED.values()))
META_FIELDS = ("n_seeds", "base_mean", "arm_mean", "mean_diff", "ci_low", "ci_high", "hl", "hl_low", "hl_high",
               "p_holm", "tost_p", "verdict")  # per row, noted in metadata.json (README and docs quote them)
GENERAL_CLAIM = {"spt": 1, "qk_transfer": 1}  # the paper's claims where it gives no number: SPT and its W_Q, W_K help


def specs(ctx):
    """``(task, arm, seed)`` -> every run of the study (:meth:`toyspt.studies.lra_design.Study.specs`)."""
    return ctx.study.specs()


def claim(task: str, arm: str) -> int | None:
    """The sign the paper claims for arm - scratch on ``task``: +1, -1, 0 ("unchanged"), None (no claim)."""
    v = design.PAPER.get((task, arm))
    if v == "equal":
        return 0
    if v is None:
        return GENERAL_CLAIM.get(arm)
    return int(np.sign(v))


def verdict(sign: int | None, direction: int, p_holm: float, tost_p: float, alpha: float = design.ALPHA) -> str:
    """The verdict of one confirmatory row (module docstring): ``sign`` the claim's, ``direction``
    and ``p_holm`` the signed-rank test's, ``tost_p`` the equivalence test's (NaN: not reached)."""
    if sign not in (-1, 0, 1):
        raise ValueError(f"verdict: a confirmatory row needs the paper's claim (+1, -1 or 0), got {sign!r}")
    if p_holm <= alpha and direction != 0:  # a claim of 0 ("unchanged") is contradicted either way
        return CONFIRMED if direction == sign else CONTRADICTED
    if tost_p <= alpha:
        return EQUIVALENT
    return UNRESOLVED


def run_frame(runs: dict) -> pd.DataFrame:
    """One row per run of ``{(task, arm, seed): result}`` (:data:`RUN_COLUMNS`)."""
    first: dict = {}  # (task, arm) in the study's order (tasks, then arms, scratch first); then the seeds
    for k in runs:
        first.setdefault(k[:2], len(first))
    keys = sorted(runs, key=lambda k: (first[k[:2]], k[2]))
    rows = [dict(task=t, arm=a, seed=s, **{m: runs[t, a, s].summary.get(m, math.nan) for m in METRICS},
                 seconds=runs[t, a, s].seconds) for t, a, s in keys]
    return pd.DataFrame(rows, columns=RUN_COLUMNS)


def _row(frame: pd.DataFrame, task: str, arm: str, metric: str) -> dict | None:
    base = BASES.get(arm, "scratch")
    g = frame[frame.task == task].pivot_table(index="seed", columns="arm", values=metric, aggfunc="first")
    if arm not in g or base not in g:
        return None
    pair = g[[arm, base]].dropna()
    if len(pair) < 2:
        return None
    d = (pair[arm] - pair[base]).to_numpy()
    p = paired(d)
    confirmatory = design.family(task, arm) == "confirmatory" and base == "scratch" and metric == design.PRIMARY
    paper = design.PAPER.get((task, arm)) if base == "scratch" and metric == design.PRIMARY else None
    return dict(task=task, arm=arm, n_seeds=p.n, metric=metric, **columns(p.t, T_COLUMNS),
                family="confirmatory" if confirmatory else "descriptive",
                paper_value=paper if isinstance(paper, float) else (0.0 if paper == "equal" else math.nan),
                base=base, claim=claim(task, arm) if confirmatory else None, test=TEST, direction=p.direction,
                p=p.rank.p, holm_family="confirmatory" if confirmatory else f"{arm} on {metric}",
                **{k: v for k, v in columns(p.rank, RANK_COLUMNS).items() if k in ("hl", "hl_low", "hl_high")},
                tost_p=tost(d, design.MARGIN).p, margin=design.MARGIN, wins=p.wins, ties=p.ties, losses=p.losses,
                arm_mean=float(pair[arm].mean()), base_mean=float(pair[base].mean()))


def claims_table(frame: pd.DataFrame, alpha: float = design.ALPHA) -> pd.DataFrame:
    """One row per task x arm x metric of the per-run ``frame`` (:func:`run_frame`), :data:`COLUMNS`:
    the paired comparison, its Holm family's adjusted p, the verdict of a confirmatory row."""
    arms = [a for a in dict.fromkeys(frame.arm) if a not in ("scratch",)]
    rows = [r for m in (design.PRIMARY, design.SECONDARY) for t in dict.fromkeys(frame.task) for a in arms
            if (r := _row(frame, t, a, m)) is not None]
    out = pd.DataFrame(rows, columns=[c for c in COLUMNS if c not in ("p_holm", "holm_m", "verdict")])
    out["p_holm"] = out.groupby("holm_family", sort=False).p.transform(lambda p: holm(p)) if len(out) else []
    out["holm_m"] = out.groupby("holm_family", sort=False).p.transform("count") if len(out) else []
    out["verdict"] = [NOT_JUDGED.format(design.UNJUDGED[t, a]) if f == "confirmatory" and (t, a) in design.UNJUDGED
                      else verdict(c, d, ph, tp, alpha) if f == "confirmatory" else ""
                      for t, a, c, d, ph, tp, f in zip(out.task, out.arm, out.claim, out.direction, out.p_holm,
                                                       out.tost_p, out.family)]
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
                                         **{f"{m}_std": float(g[m].std()) for m in METRICS}}
    return out


def draw(ctx, runs):
    frame = run_frame(runs)
    table = claims_table(frame)
    primary = table[table.metric == design.PRIMARY]
    confirm = table[table.family == "confirmatory"]
    ctx.meta[NAME] = dict(quick=ctx.quick, runs=len(frame), primary=design.PRIMARY, test=TEST, alpha=design.ALPHA,
                          margin=design.MARGIN, holm_m=int(len(confirm)),
                          claims=_claims_meta(confirm),  # the confirmatory rows; the rest, for the docs to quote:
                          descriptive=_claims_meta(primary[primary.family == "descriptive"]),
                          secondary=_claims_meta(table[table.metric == design.SECONDARY]),
                          run_means=_run_means(frame),
                          cpu_seconds=float(frame.seconds.fillna(0).sum()))
    tasks = list(dict.fromkeys(primary.task))
    fig, axes = plt.subplots(1, max(1, len(tasks)), figsize=(4.2 * max(1, len(tasks)), 4.2), sharex=True,
                             squeeze=False)
    for ax, task in zip(axes[0], tasks):
        g = primary[primary.task == task].reset_index(drop=True)
        y = np.arange(len(g))[::-1]
        for yy, r in zip(y, g.itertuples()):
            c = color("spt") if r.family == "confirmatory" else "0.45"
            ax.errorbar(r.mean_diff, yy, xerr=[[r.mean_diff - r.ci_low], [r.ci_high - r.mean_diff]]
                        if np.isfinite(r.ci_low) else None, fmt="o", ms=4, capsize=2, color=c)
            if np.isfinite(r.paper_value):
                ax.plot(r.paper_value, yy, marker="*", ms=9, color="tab:red", ls="none")
        ax.axvline(0, color="0.5", lw=0.8)
        ax.axvspan(-design.MARGIN, design.MARGIN, color="0.9", zorder=0)
        ax.set_yticks(y, [f"{a} - {b}" for a, b in zip(g.arm, g.base)], fontsize=6)
        lo, hi = int(g.n_seeds.min()), int(g.n_seeds.max())
        ax.set_title(f"{task} ({lo if lo == hi else f'{lo}-{hi}'} paired seeds)", fontsize=8)
        ax.set_xlabel(f"{design.PRIMARY} difference (mean, 95% paired t)", fontsize=7)
    fig.suptitle(f"{TITLE}\ncoloured: confirmatory (Holm over {len(confirm)}), grey: descriptive; red star: the paper; "
                 f"shaded: ±{design.MARGIN}", fontsize=8)
    fig.tight_layout()
    return fig, {NAME: table, f"{NAME}_runs": frame}
