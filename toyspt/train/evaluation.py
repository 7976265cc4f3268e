"""Evaluation policies: which accuracies a label phase measures, at which epochs.

Evaluating never changes training (no gradients, no generator draws), so the weights of a
run do not depend on its policy; only which entries its history holds does.

* ``all``: train, validation and test accuracy after every label epoch (the curves of the
  accuracy figure read every one of them).
* ``peak``: validation accuracy after every epoch; test accuracy at every epoch where the
  validation accuracy beats every earlier epoch of the label phase (so "test at peak
  validation", which takes the first epoch of the maximum, is always measured); train,
  validation and test accuracy at the last epoch and at epoch ``TrainConfig.epochs``
  (where a matched-budget run passes the plain run's length, so a ``scratch_matched`` run
  continued from ``scratch`` holds the same entries as one trained afresh). Every summary
  (:func:`toyspt.train.loop.summarize`) is exactly that of ``all``; a history entry lacks
  ``train_acc``/``test_acc`` where they were not measured.

On the default toy task ``peak`` skips about two thirds of the evaluation forward passes
of a label phase; on UCR sets, whose test splits are 3-40x the training split, far more.
"""
from __future__ import annotations

from typing import Callable

import torch

POLICIES = ("all", "peak")
# rows per evaluation forward: a (512, 32, 128) MLP activation (8 MB) is about the largest
# that stays fast here (2048 runs ~2x slower per sequence, measured). Rows of a matrix
# product do not depend on how many rows are in the call, so the chunk never changes a logit.
EVAL_CHUNK = 512


@torch.no_grad()
def accuracy(logits: Callable[[slice], torch.Tensor], y: torch.Tensor, chunk: int = EVAL_CHUNK) -> float:
    """Fraction of rows whose arg-max logit is the label: ``logits(rows)`` gives the logits of
    the examples ``rows`` (a slice of at most ``chunk``), so any model and input layout fits
    (the toy's ``lambda s: model.classify(x[s])``, the LRA demo's padded token batches)."""
    if chunk <= 0:
        raise ValueError(f"eval_chunk: must be positive, got {chunk}")
    correct = 0
    for i in range(0, len(y), chunk):
        rows = slice(i, i + chunk)
        correct += int((logits(rows).argmax(-1) == y[rows]).sum())
    return correct / len(y)


def check_policy(policy: str) -> str:
    if policy not in POLICIES:
        raise ValueError(f"evaluate: choose one of {POLICIES}, got {policy!r}")
    return policy


def extra_splits(policy: str, epoch: int, last_epoch: int, plain_epochs: int, val_acc: float,
                 best_val: float) -> tuple[str, ...]:
    """Splits measured after label epoch ``epoch`` besides validation: a subset of
    ("train", "test"). ``best_val``: the best validation accuracy of the earlier epochs of
    the label phase (-inf before the first)."""
    if policy == "all" or epoch in (last_epoch, plain_epochs):
        return ("train", "test")
    check_policy(policy)
    return ("test",) if val_acc > best_val else ()


def record(epoch: int, step: int, train_loss: float, acc: dict[str, float]) -> dict:
    """One label-epoch history entry; accuracies in the order train, val, test, those
    measured only."""
    rec = dict(phase="finetune", epoch=epoch, step=step, train_loss=train_loss)
    rec.update({f"{s}_acc": acc[s] for s in ("train", "val", "test") if s in acc})
    return rec


def best_val(history: list[dict]) -> float:
    """The best validation accuracy of a history's label epochs (-inf if none)."""
    return max((h["val_acc"] for h in history if h["phase"] == "finetune"), default=float("-inf"))


__all__ = ["POLICIES", "EVAL_CHUNK", "accuracy", "check_policy", "extra_splits", "record", "best_val"]
