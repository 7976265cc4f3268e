"""What a record's numbers must satisfy, whoever wrote its line: the rules a run's history and
summary obey by construction (:mod:`toyspt.train.run`), checked on every record the results
ledger reads (:mod:`toyspt.runs.ledger_file`), so a number that breaks one is named by line and
field and never used.

* accuracies (``*_acc``, ``test_acc``) are numbers in [0, 1]; losses (``*_loss``) and
  ``seconds`` finite and >= 0, in every row of a history or a table;
* a run's history: each phase's epochs are numbered 1, 2, ..., and there are as many as its
  spec trains (:meth:`toyspt.train.recipes.Recipe.label_epochs`; ``pre_epochs`` where the
  recipe pretrains on the task);
* a run's summary is exactly what :func:`toyspt.train.run.summarize` gives of its history,
  and its recipe and seed are its spec's;
* a reference classifier's row: ``test_acc`` is ``n_correct / n_test``.

They bind a record's numbers to each other and to its spec, not to the truth: a consistent
forgery (a history and the summary it gives, made up together) passes them. The record's digest
(:func:`toyspt.runs.ledger_file.record_digest`) names an edit made after the line was written;
retraining the run (``toyspt ledger verify``) settles doubt.
"""
from __future__ import annotations

import json
import math
from typing import Any

import numpy as np


class Impossible(ValueError):
    """A number a record cannot hold; the message is ``field: why``."""


def _kind(key: str) -> str | None:
    """What a column named ``key`` holds: an accuracy, a loss, a duration, or None (unchecked)."""
    if key.endswith("_acc"):
        return "accuracy"
    if key.endswith("_loss"):
        return "loss"
    return "duration" if key == "seconds" else None


def _column(where: str, key: str, rows: list[dict]) -> None:
    """Every ``key`` of ``rows`` a number of its kind; the first that is not, named."""
    kind = _kind(key)
    if kind is None:
        return
    values = [r[key] for r in rows if key in r]
    if not values:
        return
    plain = set(map(type, values)) <= {int, float}
    a = np.asarray(values, dtype=np.float64) if plain else None
    if a is not None and np.isfinite(a).all() and (a >= 0).all() and (kind != "accuracy" or (a <= 1).all()):
        return
    for i, r in enumerate(rows):  # the first offender, for its message
        v = r.get(key, 0.0)
        if type(v) not in (int, float) or not math.isfinite(v) or v < 0 or (kind == "accuracy" and v > 1):
            want = "a number in [0, 1]" if kind == "accuracy" else "finite and >= 0"
            raise Impossible(f"{where}[{i}].{key} {v!r} is not {'an' if kind == 'accuracy' else 'a'} {kind} ({want})")


def _rows(where: str, rows: Any) -> None:
    if not isinstance(rows, list) or not set(map(type, rows)) <= {dict}:
        raise Impossible(f"{where}: not a list of rows")
    keys = {k: None for schema in set(map(tuple, rows)) for k in schema}  # rows share a few key orders
    for key in keys:
        _column(where, key, rows)
    if {"n_correct", "n_test", "test_acc"} <= set(keys):
        for i, r in enumerate(rows):
            n, c = r.get("n_test"), r.get("n_correct")
            if not (type(n) is int and type(c) is int and 0 <= c <= n and n > 0 and c / n == r.get("test_acc")):
                raise Impossible(f"{where}[{i}].test_acc {r.get('test_acc')!r} is not n_correct / n_test "
                                 f"({c!r}/{n!r})")


def _stopped(history: list[dict], phase: str, got: int, cap: int, patience: int) -> None:
    """A phase under a stopping rule: at most ``cap`` epochs, the last saying why it ended, and a
    stop before the cap only where the rule says stop (:func:`toyspt.train.run.stalled`, ``plateaued``)."""
    from toyspt.train.run import plateaued, stalled

    rows = [h for h in history if h.get("phase") == phase]
    why = rows[-1].get("stopped") if rows else None
    rule = "patience" if phase == "finetune" else "plateau"
    ok = 0 < got <= cap and why in (rule, "cap") and (why == rule or got == cap)
    if ok:  # the rule fires exactly at the stop and never before it
        fires = stalled if phase == "finetune" else plateaued
        ok = all(not fires(rows[:n], patience) for n in range(1, got)) and fires(rows, patience) == (why == rule)
    if not ok:
        raise Impossible(f"entry.history: {got} {phase} epochs ending {why!r}, but its spec stops by its rule "
                         f"(patience {patience}) or at {cap}")


def _run(spec: dict, entry: dict) -> None:
    from toyspt.train.recipes import TrainConfig, get_recipe
    from toyspt.train.run import summarize

    for field in ("recipe", "seed"):
        if entry.get(field) != spec.get(field) or type(entry.get(field)) is not type(spec.get(field)):
            raise Impossible(f"entry.{field} {entry.get(field)!r} is not its spec's ({spec.get(field)!r})")
    history = entry.get("history")
    _rows("entry.history", history)
    phases = [h.get("phase") for h in history]
    counts = {phase: phases.count(phase) for phase in dict.fromkeys(phases)}
    for phase in counts:
        epochs = [h.get("epoch") for h in history if h.get("phase") == phase]
        if epochs != list(range(1, len(epochs) + 1)) or not set(map(type, epochs)) <= {int}:
            n = next(n for n, e in enumerate(epochs, 1) if e != n or type(e) is not int)
            i = [k for k, p in enumerate(phases) if p == phase][n - 1]
            raise Impossible(f"entry.history[{i}].epoch {epochs[n - 1]!r}: epoch {n} of its {phase!r} phase "
                             "comes there")
    try:
        recipe, cfg = get_recipe(spec["recipe"]), TrainConfig(**spec["train"])
    except (KeyError, TypeError, ValueError) as e:
        raise Impossible(f"spec: not a run's spec ({' '.join(str(e).split())[:100]})") from None
    want = {"finetune": recipe.label_epochs(cfg)}
    if recipe.pretrain_on == "task":
        want["pretrain"] = cfg.pre_epochs
    rules = {"finetune": cfg.patience, "pretrain": cfg.pre_patience}
    for phase, n in want.items():
        got = counts.get(phase, 0)
        if rules[phase] is None and got != n:
            raise Impossible(f"entry.history: {got} {phase} epochs, but its spec trains {n}")
        if rules[phase] is not None and n:
            _stopped(history, phase, got, n, rules[phase])
    try:
        summary = summarize(history)
    except (KeyError, ValueError, TypeError, ZeroDivisionError) as e:
        raise Impossible(f"entry.history: no summary can be drawn from it ({type(e).__name__} {e})") from None
    got = entry.get("summary")
    if not isinstance(got, dict) or json.dumps(got) != json.dumps(summary):
        if not isinstance(got, dict):
            raise Impossible("entry.summary: not an object")
        k = next((k for k in {**summary, **got} if k not in got or k not in summary or type(got[k]) is not
                  type(summary[k]) or got[k] != summary[k]), None)
        if k is None:
            raise Impossible("entry.summary: its fields are not in the order its history gives")
        raise Impossible(f"entry.summary.{k} {got.get(k, '(missing)')!r}, but its history gives "
                         f"{summary.get(k, '(nothing)')!r}")


def check_entry(spec: dict, entry: dict) -> None:
    """:class:`Impossible` naming the first field of ``entry`` (decoded) that an entry of
    ``spec`` cannot hold (see the module docstring)."""
    if entry.get("seconds") is not None:
        _rows("entry", [{"seconds": entry["seconds"]}])
    if "recipe" in spec:
        for field, t in (("history", list), ("summary", dict)):
            if not isinstance(entry.get(field), t):
                raise Impossible(f"entry.{field}: a run's entry holds one ({t.__name__})")
        _run(spec, entry)
    elif "rows" in entry:
        _rows("entry.rows", entry["rows"])


__all__ = ["Impossible", "check_entry"]
