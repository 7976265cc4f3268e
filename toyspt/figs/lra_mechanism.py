"""Figure (lra tier): the mechanism on the first LRA study's tasks, descriptively.

Per task and arm, the tracked twins of the study's runs (:meth:`toyspt.studies.lra_design.Study.mechanism`:
seeds :data:`toyspt.studies.lra_mechanism.MECHANISM_SEEDS`, each training what its untracked twin
trains, with the trackers of :func:`toyspt.studies.lra_mechanism.mechanism_trackers`) give, per layer
and head, at init, after SPT (``pretrained``, the runs that pretrain) and at the end: the
proximity index (attention mass on the neighbours ``|j-i| = 1`` relative to uniform; on images
also the 2-D neighbourhood index), the Frobenius displacement of each weight group from the init
and the label/recon gradient ratio along the proximity directions of the scores. Does SPT learn
proximity attention here as on the toy, is it what Q/K transfer carries, and does frozen random
attention fail where proximity is needed? The answer is read off these rows; no test is run on
them (three seeds, outside the pre-registered family). Beside them, the twins of the cause arms
(:data:`toyspt.studies.lra_design.CAUSE_ARMS`: PathFinder's SPT under MSE), and per task whether SPT's
validation loss got below the best context-free prediction's (:func:`spt_against_constant`).
The metadata keeps the summary nested (``means``: task, arm, state, ``L<layer>``) for the docs.

Writes ``lra_claims_probes.csv``: one row per twin x state x layer x head (``task, arm, state,
seed, layer, head``, then the columns of :func:`toyspt.studies.lra_mechanism.mechanism_table`), and
``lra_mechanism.csv`` (:data:`COLUMNS`): per task, arm, state and layer, means over the twins.
"""
from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from toyspt.studies import lra_design as design
from toyspt.studies.lra_claim_gates import pretrain_end
from toyspt.studies.lra_mechanism import STATES, at_state, constant_recon_loss, mechanism_table
from toyspt.util.plots import color

NAME = "lra_mechanism"
CSV = "lra_claims_probes"  # the per-twin table's name
TITLE = "The mechanism on the LRA tasks: how local attention is, and how blind the label loss is to it (tracked twins)"
TIERS = (design.TIER,)


@dataclass(frozen=True)
class Sheet:
    """What one study's mechanism figure reads and writes (:data:`FIRST`; the second study's in
    :mod:`toyspt.figs.lra_mechanism2`)."""
    name: str  # the figure's name: its summary CSV, PNG and metadata entry
    csv: str  # the per-twin table's CSV name
    title: str  # the figure's title
    study: int  # whose tracked twins (toyspt.studies.lra_design.Study.mechanism): 1 or 2
    states: tuple[str, ...]  # the models each twin is read at (toyspt.studies.lra_mechanism.at_state)
    metrics: tuple[str, ...]  # the run summaries' accuracies the metadata averages over the twins


FIRST = Sheet(NAME, CSV, TITLE, 1, STATES, (design.PRIMARY, design.SECONDARY))
RATIO = "ratio_toep_w1"  # the label/recon gradient ratio along the band |j - i| <= 1 of the scores
GROUPS = ("Q", "K", "V", "O", "mlp")  # the weight groups of a layer whose displacement the summary keeps
COLUMNS = ["task", "arm", "state", "layer", "n_seeds", "proximity_index", "proximity_min", "proximity_max",
           "neighbourhood_index", *(f"rel_disp_{g}" for g in GROUPS), "ratio", "ratio_min", "ratio_max"]
# state -> marker, face, vertical offset in its row
MARKERS = {"init": ("o", "none", -0.2), "pretrained": ("^", None, 0.0), "label_start": ("s", None, 0.1),
           "final": ("o", None, 0.2)}


def specs(ctx, sheet: Sheet = FIRST):
    """``(task, arm, seed)`` -> the tracked twin of the study run
    (:meth:`toyspt.studies.lra_design.Study.mechanism`)."""
    return ctx.study.mechanism(sheet.study)


def probe_table(runs: dict, states: tuple[str, ...] = STATES) -> pd.DataFrame:
    """The rows of every twin of ``{(task, arm, seed): result}`` at each of ``states`` it has,
    in the study's order (tasks, arms), then seed, state; columns in one order (missing: NaN)."""
    parts = []
    for (task, arm, seed), res in runs.items():
        for state in states:
            rows = at_state(res.records, state)
            if rows:
                parts.append(mechanism_table(rows, task=task, arm=arm, state=state, seed=seed))
    out = pd.concat(parts, ignore_index=True)
    lead = ["task", "arm", "state", "seed", "layer", "head"]
    order = {k: i for i, k in enumerate(dict.fromkeys((t, a) for t, a, _ in runs))}
    out["_o"] = [order[t, a] for t, a in zip(out.task, out.arm)]
    out["_s"] = out.state.map(states.index)
    out = out.sort_values(["_o", "seed", "_s", "layer", "head"], kind="stable").drop(columns=["_o", "_s"])
    return out[lead + sorted(c for c in out.columns if c not in lead)].reset_index(drop=True)


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """One row per task x arm x state x layer (:data:`COLUMNS`): the twins' count; the mean over
    seeds and heads of the proximity index, with the lowest and highest seed's (its heads' mean);
    the 2-D neighbourhood index (images) and the relative displacement from the init of each of
    :data:`GROUPS` (means); the median over seeds and heads of the :data:`RATIO`, with the lowest
    and highest seed's (its heads' median)."""
    rows = []
    for (t, a, s, layer), g in table.groupby(["task", "arm", "state", "layer"], sort=False):
        nb = g.neighbourhood_index.mean() if "neighbourhood_index" in g else np.nan
        per_seed, ratios = g.groupby("seed").proximity_index.mean(), g.groupby("seed")[RATIO].median()
        rows.append(dict(task=t, arm=a, state=s, layer=int(layer), n_seeds=int(g.seed.nunique()),
                         proximity_index=g.proximity_index.mean(), proximity_min=per_seed.min(),
                         proximity_max=per_seed.max(), neighbourhood_index=nb, ratio=g[RATIO].median(),
                         ratio_min=ratios.min(), ratio_max=ratios.max(),
                         **{f"rel_disp_{k}": g[f"rel_disp_group_init_{k}"].mean() for k in GROUPS}))
    return pd.DataFrame(rows, columns=COLUMNS)


def _nested(frame: pd.DataFrame) -> dict:
    """``summary`` as {task: {arm: {state: {"L<layer>": {column: value}}}}} (NaN: None), for
    the docs' metadata markers."""
    out: dict = {}
    for r in frame.to_dict("records"):
        leaf = {k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in r.items()
                if k not in ("task", "arm", "state", "layer")}
        out.setdefault(r["task"], {}).setdefault(r["arm"], {}).setdefault(r["state"], {})[f"L{r['layer']}"] = leaf
    return out


def spt_against_constant(data: dict, twins: dict, runs: dict) -> dict:
    """Per task and SPT arm (``twins``: ``(task, arm, seed)`` -> spec, the twins whose recipe is
    ``spt``; ``data``: task name -> its data source): the validation SPT
    loss at the end of pretraining (mean, lowest and highest seed) beside
    :func:`toyspt.studies.lra_mechanism.constant_recon_loss` of the arm's SPT loss, the loss of the best
    context-free prediction: SPT that does not get below it has learned nothing from the
    context, so nothing that attention to the neighbours could have given it."""
    ends: dict = {}
    for key, res in runs.items():
        if twins[key].recipe == "spt":  # an arm's seeds share its SPT loss
            ends.setdefault((*key[:2], twins[key].train.recon), []).append(pretrain_end(res))
    out: dict = {}
    constants: dict = {}  # (task, loss) -> its constant, computed once (spt and depth2_spt share it)
    for (task, arm, recon), losses in ends.items():
        if (task, recon) not in constants:
            d = data[task].load()
            constants[task, recon] = constant_recon_loss(d.train.x, d.val.x, recon)
        row = dict(recon=recon, n_seeds=len(losses), val_loss=float(np.mean(losses)), val_loss_min=min(losses),
                   val_loss_max=max(losses), constant=constants[task, recon])
        out.setdefault(task, {})[arm] = dict(row, below_constant=row["val_loss_max"] < row["constant"])
    return out


def accuracy(runs: dict, metric: str = "peak_val_acc") -> dict:
    """Per task and arm, the twins' ``metric`` (mean, lowest and highest seed) and its paired
    difference from scratch's twin at the same seed (mean, lowest, highest): the tracked twins
    train the study's runs, and the cause arms' only runs (descriptive, three seeds)."""
    out: dict = {}
    for (task, arm, seed), res in runs.items():
        v = float(res.summary[metric])
        base = runs.get((task, "scratch", seed))
        d = out.setdefault(task, {}).setdefault(arm, {"values": [], "minus_scratch": []})
        d["values"].append(v)
        if base is not None:
            d["minus_scratch"].append(v - float(base.summary[metric]))
    for arms in out.values():
        for arm, d in arms.items():
            vals, diffs = d.pop("values"), d.pop("minus_scratch")
            d.update(n_seeds=len(vals), mean=float(np.mean(vals)), min=min(vals), max=max(vals))
            if diffs:
                d.update(minus_scratch=float(np.mean(diffs)), minus_scratch_min=min(diffs),
                         minus_scratch_max=max(diffs))
    return out


def draw(ctx, runs, sheet: Sheet = FIRST):
    table = probe_table(runs, sheet.states)
    means = summary(table)
    ctx.meta[sheet.name] = dict(quick=ctx.quick, twins=len(runs), ratio=RATIO, descriptive=True,
                                means=_nested(means),
                                spt_loss=spt_against_constant(ctx.study.data_of(sheet.study), specs(ctx, sheet), runs),
                                accuracy={m: accuracy(runs, m) for m in sheet.metrics})
    tasks = list(dict.fromkeys(table.task))
    fig, axes = plt.subplots(2, max(1, len(tasks)), figsize=(4.2 * max(1, len(tasks)), 7.0), squeeze=False)
    for j, task in enumerate(tasks):
        g = table[table.task == task]
        rows = list(dict.fromkeys(zip(g.arm, g.layer)))
        y = {r: len(rows) - 1 - i for i, r in enumerate(rows)}
        for (arm, layer, state), h in g.groupby(["arm", "layer", "state"], sort=False):
            marker, face, dy = MARKERS[state]
            c = color("spt") if state != "init" else "0.5"
            for ax, col in ((axes[0, j], "proximity_index"), (axes[1, j], RATIO)):
                v = h[col].to_numpy(float)
                ax.plot(v, np.full(len(v), y[arm, layer]) + dy,
                        marker=marker, ls="none", ms=4, color=c, mfc=face or c, alpha=0.8)
        labels = [f"{a}" + (f" L{layer}" if g[g.arm == a].layer.max() > 0 else "") for a, layer in rows]
        for ax in axes[:, j]:
            ax.set_yticks(list(y.values()), labels, fontsize=6)
        axes[0, j].axvline(1.0, color="0.5", lw=0.8)
        axes[0, j].set_title(f"{task} ({g.seed.nunique()} seeds)", fontsize=8)
        axes[0, j].set_xlabel("proximity index (|j-i| = 1, relative to uniform)", fontsize=7)
        axes[1, j].set_xscale("log")
        axes[1, j].set_xlabel(f"label/recon gradient ratio ({RATIO.removeprefix('ratio_')})", fontsize=7)
    square = "; square: the label phase's start" if "label_start" in sheet.states else ""
    fig.suptitle(f"{sheet.title}\nopen grey: init; triangle: after SPT{square}; filled: end of training "
                 "(per seed; descriptive)", fontsize=8)
    fig.tight_layout()
    return fig, {sheet.name: means, sheet.csv: table}
