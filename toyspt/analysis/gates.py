"""Gates: what a set of runs must show before a comparison on them may be given a verdict.

A verdict needs runs that could have given the other answer. A claim about SPT is not tested
where SPT's reconstruction learned nothing; a model at chance says nothing about a task that a
reference model cannot learn either; a claim that needs scratch to learn is not tested while
scratch sits at chance; a run still improving at its last epoch was not trained out; a gain
that more label epochs also give is a budget, not SPT. Each gate is one test with a threshold
it can miss (:class:`Gate`: its name, whether it passed, the numbers that decided it); a failed
gate turns the verdict into ``not tested: <gate>, ...`` (:func:`gated`), never into
"equivalent". Data-agnostic: the studies say which gates a claim needs (:func:`needed`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats

from toyspt.analysis.stats import mcnemar_exact

GATES = ("treatment", "learnable", "off chance", "trained out", "budget", "margin")
NOT_TESTED = "not tested: {}"


@dataclass(frozen=True)
class Gate:
    """One gate's outcome for one comparison."""

    name: str  # one of GATES
    passed: bool  # whether the runs show what the verdict needs
    detail: str  # the numbers that decided it, in words


def treatment(losses: Sequence[float], constant: float, alpha: float = 0.05) -> Gate:
    """SPT happened: its final validation reconstruction losses (one per seed) lie below the best
    context-free prediction's ``constant``, by the exact one-sided signed-rank test at ``alpha``."""
    d = np.asarray(losses, dtype=np.float64) - constant
    if len(d) == 0 or not np.isfinite(d).all():
        return Gate("treatment", False, f"no finite SPT losses to compare with the constant {constant:.4g}")
    p = 1.0 if (d == 0).all() else float(stats.wilcoxon(d, alternative="less", zero_method="wilcox").pvalue)
    return Gate("treatment", p <= alpha, f"SPT loss {np.median(d) + constant:.4g} (median of {len(d)}) against the "
                f"constant {constant:.4g}, {int((d < 0).sum())}/{len(d)} below, one-sided signed-rank p {p:.3g}")


def learnable_mcnemar(only_model: int, only_majority: int, alpha: float = 0.05, who: str = "the reference") -> Gate:
    """The task can be learned: a reference model beats the majority-class answer on the same test
    examples (exact one-sided McNemar on the discordant examples, :func:`mcnemar_exact`)."""
    p = mcnemar_exact(only_model, only_majority)
    return Gate("learnable", p <= alpha, f"{who} right where the majority class is wrong on {only_model} test "
                f"examples, wrong where it is right on {only_majority}: exact McNemar p {p:.3g}")


def above(name: str, accs: Sequence[float], chance: float, who: str) -> Gate:
    """``accs`` (one test accuracy per seed) above ``chance``: their 95% t interval's lower end
    lies above it (one seed, or no spread: every value above it)."""
    a = np.asarray(accs, dtype=np.float64)
    if len(a) == 0 or not np.isfinite(a).all():
        return Gate(name, False, f"{who}: no finite accuracies")
    if len(a) < 2 or np.ptp(a) == 0:
        low = float(a.min())
    else:
        low = float(stats.ttest_1samp(a, 0.0).confidence_interval(0.95).low)
    return Gate(name, low > chance, f"{who} test accuracy {a.mean():.3f} over {len(a)} seeds, 95% lower end "
                f"{low:.3f} against chance {chance:.3f}")


def trained_out(stopped: Sequence[bool], who: str) -> Gate:
    """Every run of the comparison stopped by its own rule (``stopped``: per run), none at its cap."""
    s = [bool(x) for x in stopped]
    at_cap = len(s) - sum(s)
    return Gate("trained out", bool(s) and at_cap == 0, f"{who}: {at_cap} of {len(s)} runs ended at the epoch cap")


def budget(direction: int, p: float, alpha: float = 0.05, who: str = "the arm") -> Gate:
    """A gain over scratch holds against scratch trained as long: the comparison with that budget
    arm (signed-rank direction and Holm p) shows a gain too."""
    ok = direction > 0 and p <= alpha
    return Gate("budget", ok, f"{who} - scratch at SPT's budget: direction {direction:+d}, p {p:.3g}")


def eval_se(n: int, p: float = 0.5) -> float:
    """Standard error of one accuracy measured on ``n`` examples at accuracy ``p`` (at most 0.5/sqrt(n))."""
    return math.sqrt(p * (1 - p) / n)


def margin(m: float, n_val: int) -> Gate:
    """An equivalence margin wide enough to mean something: at least twice one evaluation's
    standard error on ``n_val`` validation examples (at accuracy 0.5, the largest)."""
    need = 2 * eval_se(n_val)
    return Gate("margin", m >= need, f"margin ±{m:g} against twice one evaluation's standard error on {n_val} "
                f"validation examples, {need:.3f}")


def gated(verdict: str, gates: Sequence[Gate]) -> str:
    """``verdict`` if every gate passed, else ``not tested: <failed gates, in GATES order>``."""
    failed = [g.name for g in gates if not g.passed]
    return NOT_TESTED.format(", ".join(sorted(failed, key=GATES.index))) if failed else verdict


def below_fraction_p(d: Sequence[float], paper_gain: float, fraction: float = 0.5) -> float:
    """One-sided t test that the mean difference is smaller than ``fraction`` of ``paper_gain``
    (H0: mean >= fraction * gain); NaN where undefined (fewer than 2 values, no spread, no gain)."""
    a = np.asarray(d, dtype=np.float64)
    a = a[np.isfinite(a)]
    if not (math.isfinite(paper_gain) and paper_gain > 0) or len(a) < 2 or np.ptp(a) == 0:
        return math.nan
    return float(stats.ttest_1samp(a, fraction * paper_gain, alternative="less").pvalue)


def needed(arm: str, verdict: str, claim: int | None) -> tuple[str, ...]:
    """The gates a confirmatory row of ``arm`` needs for ``verdict`` (its ungated verdict) of a claim
    of sign ``claim``: an SPT arm needs its treatment; every arm a learnable task and trained-out
    runs; an arm whose claim needs scratch to learn (frozen attention, W_Q/W_K transfer) scratch
    off chance; a confirmed gain the budget; an equivalence a margin that can mean it."""
    out = []
    if arm in ("spt", "qk_transfer"):
        out.append("treatment")
    out.append("learnable")
    if arm in ("frozen_attention", "qk_transfer"):
        out.append("off chance")
    out.append("trained out")
    if verdict == "confirmed" and claim == 1:
        out.append("budget")
    if verdict.startswith("equivalent"):
        out.append("margin")
    return tuple(out)


__all__ = ["GATES", "NOT_TESTED", "Gate", "treatment", "learnable_mcnemar", "above", "trained_out", "budget",
           "eval_se", "margin", "gated", "below_fraction_p", "needed"]
