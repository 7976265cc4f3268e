"""The gates of the LRA claims (:mod:`toyspt.analysis.gates`) read off a study's runs.

Per task, the facts every gate needs come from the task's data (:func:`task_facts`: the
majority-class share of the test set, the validation size, and per SPT loss the best
context-free prediction's loss, :func:`toyspt.studies.lra_mechanism.constant_recon_loss`) and, for
image tasks, the CNN reference trained on the same images (:mod:`toyspt.studies.lra_cnn`). Per
confirmatory row (task x arm against scratch) :func:`row_gates` gives the gates its verdict
needs (:func:`toyspt.analysis.gates.needed`):

* treatment: the arm's SPT validation loss at the end of pretraining, per seed, below the constant;
* learnable: the CNN reference against the majority class (exact McNemar on the test examples);
  without one (ListOps), the best arm's test accuracy at peak validation, its seed interval above chance;
* off chance: scratch's test accuracy at peak validation, its seed interval above chance;
* trained out: every run of the arm and of scratch ended by the label rule, not at its cap. A run
  of a study without a stopping rule counts as trained out where the rule (:data:`PATIENCE`) would
  have stopped it before its last epoch (its history says so);
* budget: scratch trained out (by the same reading), or the arm's gain also against scratch at
  SPT's budget (``scratch_matched``, exact signed-rank);
* margin: the equivalence margin at least twice one evaluation's standard error.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from toyspt.analysis import gates as g
from toyspt.analysis.paired import paired
from toyspt.train.run import stalled

PATIENCE = 10  # the label rule every arm of the second study stops by (read into the first study's runs)
AT_PEAK = "test_at_peak"  # the test accuracy the chance gates read: at the (first) epoch of peak validation


@dataclass(frozen=True)
class TaskFacts:
    """What the gates of one task read off its data and its reference."""

    chance: float  # the majority class's share of the test set
    n_val: int  # validation examples (one evaluation's noise)
    constants: dict = field(default_factory=dict)  # SPT loss name -> the best context-free prediction's loss
    reference: dict | None = None  # the CNN reference's summary (only_model, only_majority, ...), None: none
    n_test: int = 0  # test examples (0: not known)
    classes: int = 2  # the task's classes

    def above_majority(self, accuracy: float, alpha: float) -> bool:
        """Whether one run's test ``accuracy`` beats always answering the majority class by the
        largest exact McNemar p that accuracy allows (:func:`toyspt.analysis.stats.accuracy_bound`)."""
        from toyspt.analysis.stats import accuracy_bound

        if self.n_test < 1:
            raise ValueError("above_majority: the task's test size is not known (n_test 0)")
        return accuracy_bound(accuracy, self.n_test, round(self.chance * self.n_test), self.classes) <= alpha


def task_facts(data, recons, reference: dict | None = None) -> TaskFacts:
    """The facts of a task whose data source is ``data`` and whose SPT arms use the losses ``recons``."""
    from toyspt.studies.lra_mechanism import constant_recon_loss

    d = data.load()
    return TaskFacts(float(d.test.y.bincount().max()) / len(d.test.y), len(d.val.y),
                     {r: constant_recon_loss(d.train.x, d.val.x, r) for r in dict.fromkeys(recons)}, reference,
                     len(d.test.y), int(max(d.train.y.max(), d.val.y.max(), d.test.y.max())) + 1)


def pretrain_end(result) -> float:
    """The SPT validation loss at the last pretraining epoch of a run's history."""
    pre = [h["val_loss"] for h in result.history if h["phase"] == "pretrain"]
    if not pre:
        raise ValueError(f"a {result.recipe} run (seed {result.seed}) has no SPT phase")
    return pre[-1]


def stopped_by_rule(result, patience: int = PATIENCE) -> bool:
    """Whether the run's label phase ended by its rule (a run trained with one), or would have by
    :data:`PATIENCE` before its last epoch (a run trained a fixed number of epochs)."""
    if "stopped_early" in result.summary:
        return result.summary["stopped_early"] == 1.0
    ft = [h for h in result.history if h["phase"] == "finetune"]
    return any(stalled(ft[:n], patience) for n in range(1, len(ft)))


def _seeds(runs: dict, task: str, arm: str) -> dict:
    return {s: r for (t, a, s), r in runs.items() if t == task and a == arm}


def _accs(runs: dict, task: str, arm: str) -> list[float]:
    return [r.summary[AT_PEAK] for r in _seeds(runs, task, arm).values()]


def learnable(runs: dict, task: str, facts: TaskFacts, alpha: float) -> g.Gate:
    """The CNN reference against the majority class, or the best arm's test interval above chance."""
    if facts.reference is not None:
        return g.learnable_mcnemar(facts.reference["only_model"], facts.reference["only_majority"], alpha,
                                   "the CNN reference")
    arms = dict.fromkeys(a for t, a, _ in runs if t == task)
    best = max(arms, key=lambda a: np.mean(_accs(runs, task, a)))
    return g.above("learnable", _accs(runs, task, best), facts.chance, f"the best arm ({best})")


def budget(runs: dict, task: str, arm: str, alpha: float) -> g.Gate:
    """Scratch trained out, or the arm's gain against ``scratch_matched`` too."""
    scratch = list(_seeds(runs, task, "scratch").values())
    if scratch and all(stopped_by_rule(r) for r in scratch):
        return g.Gate("budget", True, f"every scratch run ({len(scratch)}) stopped by the rule: it trained as long "
                      "as it gained")
    mine, matched = _seeds(runs, task, arm), _seeds(runs, task, "scratch_matched")
    common = sorted(set(mine) & set(matched))
    if len(common) < 2:
        return g.Gate("budget", False, "scratch was not trained out and no scratch at SPT's budget to compare with")
    p = paired([mine[s].summary["peak_val_acc"] - matched[s].summary["peak_val_acc"] for s in common])
    return g.budget(p.direction, p.rank.p, alpha, f"{arm} (n {len(common)})")


def row_gates(runs: dict, task: str, arm: str, verdict: str, claim: int | None, facts: TaskFacts,
              margin: float, alpha: float = 0.05) -> list[g.Gate]:
    """The gates the confirmatory row ``task`` x ``arm`` needs for its ungated ``verdict``."""
    out = []
    for name in g.needed(arm, verdict, claim):
        if name == "treatment":
            mine = _seeds(runs, task, arm)
            recon = next(iter(mine.values())).config["train"]["recon"] if mine else ""
            out.append(g.treatment([pretrain_end(r) for r in mine.values()], facts.constants.get(recon, np.nan),
                                   alpha))
        elif name == "learnable":
            out.append(learnable(runs, task, facts, alpha))
        elif name == "off chance":
            out.append(g.above("off chance", _accs(runs, task, "scratch"), facts.chance, "scratch"))
        elif name == "trained out":
            both = [*_seeds(runs, task, arm).values(), *_seeds(runs, task, "scratch").values()]
            out.append(g.trained_out([stopped_by_rule(r) for r in both], f"{arm} and scratch"))
        elif name == "budget":
            out.append(budget(runs, task, arm, alpha))
        else:
            out.append(g.margin(margin, facts.n_val))
    return out


def describe(gates: list[g.Gate]) -> str:
    """The gates of a row as one CSV cell: ``name: pass|fail`` joined by ``; ``."""
    return "; ".join(f"{x.name}: {'pass' if x.passed else 'fail'}" for x in gates)


__all__ = ["PATIENCE", "AT_PEAK", "TaskFacts", "task_facts", "pretrain_end", "stopped_by_rule", "learnable", "budget",
           "row_gates", "describe"]
