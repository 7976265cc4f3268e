"""How far a retrained run's numbers lie from its record, per number, and whether that is within
what float32 arithmetic in another order can give (``toyspt ledger verify --anyway``).

**The tolerance, from the numerics.** Runs train in float32, whose unit roundoff is
u = 2^-24 (about 6.0e-8). Other kernels (another instruction set, FMA or not, another blocking
of a matrix product) add the same terms in another order. Summing n terms in any order errs by
at most (n - 1)·u·Σ|x_i| (recursive summation; Higham, *Accuracy and Stability of Numerical
Algorithms*, 2nd ed., §4.2), so two orders differ by at most 2·(n - 1)·u·Σ|x_i|. The longest
float32 sum of one forward pass of these models has n = the largest of the model's width and
MLP width (a linear layer's dot products), its positions (attention and pooling sum over at
most ``max_len``, the positional table's length: an upper bound, read off the spec without loading
its data) and the batch (the loss is a batch mean). The recorded numbers are means of
such sums whose terms share a sign (losses, accuracies) or are of the size of the result, so
Σ|x_i| is taken as the number's own magnitude: two numbers agree within tolerance when
|a - b| <= 2·(n - 1)·u·max(|a|, |b|), or |a - b| <= u (below float32's resolution at 1).
For the toy's defaults (``max_len`` 512) that is relative 6.1e-5; for the LRA runs (1025) 1.2e-4.

What it bounds, and what not: the rounding of one pass on the same weights. Training feeds each
step's rounding into the next, so a run retrained on other kernels drifts further epoch by
epoch (across CPU models the study's losses differed by about 1e-8 from the second epoch,
docs/reproducibility.md; well inside the bound). A number beyond it means the two runs' paths
diverged (an accuracy differs by a whole example, a loss by more than a reordering gives): the
report says by how much and at which epoch, and the record is said to differ.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

U32 = 2.0 ** -24  # float32's unit roundoff
MAX_NAMED = 40  # numbers named per record


def terms(spec: dict) -> int:
    """The longest float32 sum of one forward pass of ``spec``'s run (see the module docstring)."""
    model, train = spec.get("model") or {}, spec.get("train") or {}
    sizes = [model.get(k) for k in ("d_model", "d_mlp", "max_len")] + [train.get("batch_size")]
    return max([s for s in sizes if isinstance(s, int) and not isinstance(s, bool)] or [1])


def tolerance(spec: dict) -> float:
    """The relative tolerance of ``spec``'s numbers: 2·(n - 1)·u, n = :func:`terms`."""
    return 2 * (terms(spec) - 1) * U32


@dataclass
class Gap:
    """The largest absolute difference of one number over its epochs (or items)."""

    name: str  # e.g. history.label.val_loss, summary.mean_test_last20
    size: float  # |recorded - new| at its largest
    where: str  # e.g. "epoch 3" ("" for a single value)
    recorded: float
    new: float
    within: bool  # within the tolerance

    def line(self) -> str:
        at = f" at {self.where}" if self.where else ""
        return (f"{self.name}: largest |difference| {self.size:.3g}{at} ({self.recorded!r} -> {self.new!r})"
                + ("" if self.within else ", beyond tolerance"))


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _item(x: dict, i: int) -> tuple[str, str]:
    """(the name part, the place) of item ``i`` of a list of dicts: its phase or metric names it,
    its epoch places it (the history's rows, tracker records), else its index."""
    name = ".".join(str(x[k]) for k in ("phase", "metric") if isinstance(x.get(k), str))
    where = f"epoch {x['epoch']}" if _is_number(x.get("epoch")) else f"item {i}"
    return name, where


def compare(recorded, new, tol: float) -> tuple[dict[str, Gap], list[str]]:
    """({number's name: its largest gap}, every difference that is not one of numbers: a field
    missing, a list's length, a text) between a record's entry and a retrained one."""
    gaps: dict[str, Gap] = {}
    other: list[str] = []

    def walk(a, b, name: str, where: str) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            other.extend(f"{name}.{k}: {'missing from the new entry' if k in a else 'not in the record'}"
                         for k in sorted(set(a) ^ set(b)))
            for k in a:
                if k in b:
                    walk(a[k], b[k], f"{name}.{k}" if name else str(k), where)
        elif isinstance(a, list) and isinstance(b, list):
            if len(a) != len(b):
                other.append(f"{name}: {len(a)} items recorded, {len(b)} new")
                return
            for i, (x, y) in enumerate(zip(a, b)):
                part, at = _item(x, i) if isinstance(x, dict) else ("", f"item {i}")
                walk(x, y, f"{name}.{part}" if part else name, f"{where} {at}".strip())
        elif _is_number(a) and _is_number(b):
            size = abs(float(a) - float(b))
            if size > max(tol * max(abs(float(a)), abs(float(b))), U32):
                beyond.add(name)
            if size > 0 and (name not in gaps or size > gaps[name].size):
                gaps[name] = Gap(name, size, where, a, b, True)
        elif json.dumps(a) != json.dumps(b):
            other.append(f"{name}{f' ({where})' if where else ''}: {json.dumps(a)} -> {json.dumps(b)}")

    beyond: set[str] = set()  # numbers of which some value lies beyond the tolerance
    walk(recorded, new, "", "")
    for name in beyond:
        gaps[name].within = False
    return gaps, other


def judge(recorded: dict, new: dict, tol: float) -> tuple[str, list[str]]:
    """(``reproduced`` | ``within tolerance`` | ``differs``, a line per differing number, largest
    first) of two entries' numbers (:func:`toyspt.runs.ledger.numbers`)."""
    if json.dumps(recorded, sort_keys=True) == json.dumps(new, sort_keys=True):
        return "reproduced", []
    gaps, other = compare(recorded, new, tol)
    within = not other and all(g.within for g in gaps.values())
    ranked = sorted(gaps.values(), key=lambda g: -g.size)
    lines = other + [g.line() for g in ranked]
    if len(lines) > MAX_NAMED:
        lines = lines[:MAX_NAMED] + [f"and {len(lines) - MAX_NAMED} more"]
    return ("within tolerance" if within else "differs"), lines


__all__ = ["U32", "terms", "tolerance", "Gap", "compare", "judge"]
