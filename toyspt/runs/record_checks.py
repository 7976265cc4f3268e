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
* a reference classifier's row: ``test_acc`` is ``n_correct / n_test``;
* every integer of a record within 64 bits, so no number reaches numpy or ``float`` that they
  cannot hold (:func:`check_bounds`, before anything else reads the record); an entry's
  ``seconds`` a plausible duration (at most :data:`MAX_SECONDS`);
* the fields beside the entry bounded by shape (:func:`check_shapes`): ``states`` a few names,
  ``norms`` a norm per state it names and tensor (at most :data:`MAX_TENSORS` a state),
  ``kernels`` the settings of :mod:`toyspt.runs.kernels` only, ``spec`` at most
  :data:`MAX_SPEC_VALUES` values.

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

MAX_SECONDS = 30 * 86400.0  # a plausible duration of one computation (the studies' longest record: 794 s)
MAX_INT = 1 << 63  # integers of a record lie in [-MAX_INT, MAX_INT) (a seed, a count: 64 bits)
MAX_TENSORS = 512  # norms a state may hold (the studies' models: at most 41 tensors)
MAX_SPEC_VALUES = 2000  # JSON values a spec may hold (the studies': at most 58)
MAX_STATES = 8  # state names a record may hold (init, pretrained, final, resume)
MAX_NAME = 200  # characters of a state's, a tensor's or a kernel setting's name or text
KERNEL_FIELDS = {"aten_cpu_capability": str, "onednn_max_cpu_isa": str, "mkldnn": bool, "torch_threads": int}


class Impossible(ValueError):
    """A number a record cannot hold; the message is ``field: why``."""


def _shown(v: Any) -> str:
    """A value for a message: an integer too long to print as its digit count."""
    if type(v) is int and abs(v) >= MAX_INT:
        return f"an integer of {len(str(abs(v)))} digits"
    return repr(v)[:60]


def _too_big(v: Any) -> bool:
    """Whether ``v`` holds an integer outside 64 bits (iterative: a deep value costs no recursion)."""
    todo = [v]
    while todo:
        x = todo.pop()
        t = type(x)
        if t is dict:
            todo.extend(x.values())
        elif t is list:
            todo.extend(x)
        elif t is int and not -MAX_INT <= x < MAX_INT:
            return True
    return False


def check_bounds(rec: Any, where: str = "") -> None:
    """:class:`Impossible` naming the first integer of ``rec`` (a parsed line) outside 64 bits by its
    field's path, before numpy or ``float`` sees it. (A record's own ``seconds`` is read, and
    refused from totals where it is no plausible duration: ``toyspt ledger check``.)"""
    if not _too_big(rec):
        return
    path, v = where, rec
    while type(v) in (dict, list):  # down the first branch that holds one, naming it
        items = v.items() if type(v) is dict else enumerate(v)
        k, v = next((k, x) for k, x in items if _too_big(x))
        path = f"{path}.{k}" if type(k) is str and path else f"{path}[{k}]" if type(k) is int else str(k)
    raise Impossible(f"{path} {_shown(v)} is out of range (an integer of at most 64 bits)")


def _count(v: Any, most: int) -> int:
    """JSON values in ``v``, counting stopped past ``most``."""
    n, todo = 0, [v]
    while todo and n <= most:
        x = todo.pop()
        n += 1
        if isinstance(x, dict):
            todo.extend(x.values())
        elif isinstance(x, list):
            todo.extend(x)
    return n


def check_shapes(rec: dict) -> None:
    """:class:`Impossible` naming the first field beside the entry whose shape no record has
    (see the module docstring): the bounds that keep a record's size its entry's."""
    states = rec.get("states", [])
    if len(states) > MAX_STATES or any(len(s) > MAX_NAME for s in states):
        raise Impossible(f"states: {len(states)} names, at most {MAX_STATES} of at most {MAX_NAME} characters")
    for state, t in rec.get("norms", {}).items():
        if state not in states or not isinstance(t, dict):
            raise Impossible(f"norms.{_shown(state)}: not a table of a state the record has")
        if len(t) > MAX_TENSORS:
            raise Impossible(f"norms.{_shown(state)}: {len(t)} tensors, more than the {MAX_TENSORS} a state may hold")
        for name, v in t.items():
            if len(name) > MAX_NAME or not (type(v) in (int, float) and v >= 0 or v in ("nan", "inf")):
                raise Impossible(f"norms.{_shown(state)}.{_shown(name)} {_shown(v)}: not a norm (a number >= 0, "
                                 "'nan' or 'inf') of a tensor name of at most "
                                 f"{MAX_NAME} characters")
    for k, v in rec.get("kernels", {}).items():
        want = KERNEL_FIELDS.get(k)
        if want is None or type(v) is not want or (want is str and len(v) > MAX_NAME):
            raise Impossible(f"kernels.{_shown(k)} {_shown(v)}: not a kernel setting "
                             f"({', '.join(f'{f} ({t.__name__})' for f, t in KERNEL_FIELDS.items())})")
    n = _count(rec.get("spec"), MAX_SPEC_VALUES)
    if n > MAX_SPEC_VALUES:
        raise Impossible(f"spec: more than the {MAX_SPEC_VALUES} values a spec may hold")


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
    top = 1 if kind == "accuracy" else MAX_SECONDS if kind == "duration" else math.inf
    if a is not None and np.isfinite(a).all() and (a >= 0).all() and (a <= top).all():
        return
    for i, r in enumerate(rows):  # the first offender, for its message
        v = r.get(key, 0.0)
        if type(v) not in (int, float) or not math.isfinite(v) or v < 0 or v > top:
            want = ("a number in [0, 1]" if kind == "accuracy" else f"finite, in [0, {top:.0f}]" if kind == "duration"
                    else "finite and >= 0")
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


__all__ = ["Impossible", "check_entry", "check_bounds", "check_shapes", "MAX_SECONDS", "MAX_INT"]
