"""Evaluation policies: what a label phase measures, at which epochs.

Evaluating never changes training (no gradients, no generator draws), so the weights of a
run do not depend on its policy; only which entries its history holds does. Validation
accuracy and validation cross-entropy (``val_loss``, from the same logits) are measured
after every label epoch under every policy.

* ``all``: train, validation and test accuracy after every label epoch (the curves of the
  accuracy figure read every one of them, and the paper's *peak held-out accuracy*, the max
  of test accuracy over epochs, needs them).
* ``peak``: test accuracy at every epoch where the validation accuracy beats every earlier
  epoch of the label phase (so "test at peak validation", which takes the first epoch of the
  maximum, is always measured), where the validation loss falls below every earlier one
  ("test at the lowest validation loss"), and at every epoch of the last fifth of the label
  phase (:func:`tail`, "mean test accuracy over the last 20% of label epochs"); train,
  validation and test accuracy at the last epoch and at epoch ``TrainConfig.epochs`` (where
  a matched-budget run passes the plain run's length, so a ``scratch_matched`` run continued
  from ``scratch`` holds the same entries as one trained afresh; the last fifth of the plain
  length is measured for the same reason). Every summary (:func:`toyspt.train.run.summarize`)
  is exactly that of ``all``; a history entry lacks ``train_acc``/``test_acc`` where they were
  not measured.

Evaluation forwards take :data:`EVAL_TOKENS` tokens at a time (rows x positions), so long
series are evaluated in fewer rows per forward than short ones: a (512, 32, 128) MLP
activation is about the largest that stays fast here, whatever the length.
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F

POLICIES = ("all", "peak")
# tokens per evaluation forward: 512 toy sequences of 32 positions. Rows of a matrix product
# do not depend on how many rows are in the call (tests/unit/train/test_evaluation.py), so the
# chunk never changes a logit; a larger chunk only runs slower (measured in benchmarks/bench_eval.py)
EVAL_TOKENS = 512 * 32


def eval_rows(length: int, tokens: int = EVAL_TOKENS) -> int:
    """Rows per evaluation forward for sequences of ``length`` positions (at least 1)."""
    if tokens <= 0:
        raise ValueError(f"eval_tokens: must be positive, got {tokens}")
    return max(1, tokens // max(1, int(length)))


@torch.no_grad()
def scores(logits: Callable[[slice], torch.Tensor], y: torch.Tensor, chunk: int) -> tuple[float, float]:
    """(accuracy, mean cross-entropy) over the rows of ``y``: ``logits(rows)`` gives the logits of
    the examples ``rows`` (a slice of at most ``chunk``), so any model and input layout fits
    (the toy's ``lambda s: model.classify(x[s])``, the LRA demo's padded token batches). The
    per-row losses are summed once, in float64, so the loss does not depend on ``chunk``."""
    if chunk <= 0:
        raise ValueError(f"eval chunk: must be positive, got {chunk}")
    correct, losses = 0, []
    for i in range(0, len(y), chunk):
        rows = slice(i, i + chunk)
        z = logits(rows)
        correct += int((z.argmax(-1) == y[rows]).sum())
        losses.append(F.cross_entropy(z, y[rows], reduction="none"))
    return correct / len(y), float(torch.cat(losses).double().mean())


def accuracy(logits: Callable[[slice], torch.Tensor], y: torch.Tensor, chunk: int) -> float:
    """Fraction of rows whose arg-max logit is the label (see :func:`scores`)."""
    return scores(logits, y, chunk)[0]


def check_policy(policy: str) -> str:
    if policy not in POLICIES:
        raise ValueError(f"evaluate: choose one of {POLICIES}, got {policy!r}")
    return policy


def tail(epochs: int) -> int:
    """Epochs in the last fifth of a label phase of ``epochs`` epochs (ceil(epochs / 5), >= 1)."""
    return max(1, (int(epochs) + 4) // 5)


def in_tail(epoch: int, epochs: int) -> bool:
    """Whether label epoch ``epoch`` (1-based) lies in the last fifth of ``epochs`` epochs."""
    return epochs - tail(epochs) < epoch <= epochs


def extra_splits(policy: str, epoch: int, last_epoch: int, plain_epochs: int, val_acc: float,
                 best_val: float, val_loss: float = float("inf"), best_loss: float = float("inf")
                 ) -> tuple[str, ...]:
    """Splits measured after label epoch ``epoch`` besides validation: a subset of
    ("train", "test"). ``best_val`` / ``best_loss``: the best validation accuracy / lowest
    validation loss of the earlier epochs of the label phase (-inf / inf before the first)."""
    if policy == "all" or epoch in (last_epoch, plain_epochs):
        return ("train", "test")
    check_policy(policy)
    new_best = val_acc > best_val or val_loss < best_loss
    return ("test",) if new_best or in_tail(epoch, last_epoch) or in_tail(epoch, plain_epochs) else ()


def record(epoch: int, step: int, train_loss: float, acc: dict[str, float], val_loss: float) -> dict:
    """One label-epoch history entry; accuracies in the order train, val, test, those
    measured only, then the validation loss."""
    rec = dict(phase="finetune", epoch=epoch, step=step, train_loss=train_loss)
    rec.update({f"{s}_acc": acc[s] for s in ("train", "val", "test") if s in acc})
    rec["val_loss"] = val_loss
    return rec


def best_val(history: list[dict]) -> float:
    """The best validation accuracy of a history's label epochs (-inf if none)."""
    return max((h["val_acc"] for h in history if h["phase"] == "finetune"), default=float("-inf"))


def best_loss(history: list[dict]) -> float:
    """The lowest validation loss of a history's label epochs (inf if none)."""
    return min((h["val_loss"] for h in history if h["phase"] == "finetune"), default=float("inf"))


def label_summary(history: list[dict]) -> dict[str, float]:
    """What every policy measures of a label phase: peak validation accuracy and test accuracy
    at that (first) epoch; the lowest validation loss, its (first) epoch and test accuracy
    there; mean test accuracy over the last fifth of the label epochs (no selection at all);
    final accuracies."""
    ft = [h for h in history if h["phase"] == "finetune"]
    best = max(ft, key=lambda h: h["val_acc"])  # max keeps the first epoch among ties
    low = min(ft, key=lambda h: h["val_loss"])  # min likewise
    last = ft[-tail(len(ft)):]
    return dict(peak_val_acc=best["val_acc"], test_at_peak=best["test_acc"], peak_epoch=best["epoch"],
                final_train_acc=ft[-1]["train_acc"], final_val_acc=ft[-1]["val_acc"],
                final_test_acc=ft[-1]["test_acc"], min_val_loss=low["val_loss"],
                min_val_loss_epoch=low["epoch"], test_at_min_val_loss=low["test_acc"],
                mean_test_last20=sum(h["test_acc"] for h in last) / len(last))


__all__ = ["POLICIES", "EVAL_TOKENS", "eval_rows", "scores", "accuracy", "check_policy", "tail", "in_tail",
           "extra_splits", "record", "best_val", "best_loss", "label_summary"]
