"""Named experiment arms: a recipe plus config overrides, written as short strings.

Grammar: ``recipe[:key=value[,key=value...]]``, e.g. ``spt``, ``scratch:pos=alibi``,
``spt:spt_attention=no_self``, ``data_swap:swap.family=freq_band``. Keys are config field
names (``task.X``, ``model.X``, ``train.X`` or ``swap.X`` when a name is ambiguous); tuple
values are written with ``/`` inside an arm (``band0=1/2/3``).
Aliases name the common ablations (see :data:`ALIASES`).
"""
from __future__ import annotations

import argparse
import re
from dataclasses import fields, replace
from typing import Any, Sequence

from toyspt.data.source import DataSource
from toyspt.data.tasks import TaskConfig, other_family
from toyspt.runs.specs import RunSpec, with_overrides
from toyspt.train.recipes import RECIPES, get_recipe

ALIASES = {
    "alibi": "scratch:pos=alibi",
    "alibi_steep": "scratch:pos=alibi,alibi_base=1",
    "rope": "scratch:pos=rope",
    "fire": "scratch:pos=fire",
    "learned_pe": "scratch:pos=learned",
    "no_pe": "scratch:pos=none",
    "depth2": "scratch:n_layers=2",
    "spt_depth2": "spt:n_layers=2",
    "spt_no_self": "spt:spt_attention=no_self",
    "spt_no_masked_keys": "spt:spt_attention=no_masked_keys",
}


# numbers as written in ASCII: int() and float() also take "3_2", full-width and Arabic-Indic digits
ASCII_NUMBER = {int: re.compile(r"[+-]?[0-9]+"),
                float: re.compile(r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)",
                                  re.IGNORECASE)}


def ascii_number(text: str, kind: type, expected: str | None = None) -> int | float:
    """``kind(text)`` (int or float) for a number written in ASCII digits; else ValueError
    "expected an int, got 'x'" (with "in ASCII digits" where ``kind`` alone would take it)."""
    if ASCII_NUMBER[kind].fullmatch(text.strip()):
        return kind(text.strip())
    words = expected or ("an int" if kind is int else "a number")
    try:
        kind(text)
    except ValueError:
        raise ValueError(f"expected {words}, got {text!r}") from None
    raise ValueError(f"expected {words} in ASCII digits (0-9, no '_'), got {text!r}")


def parse_value(text: str, like: Any) -> Any:
    """Convert ``text`` to the type of the field default ``like``.

    Raises ValueError with a one-line message ("expected an int, got 'abc'"); the caller
    prefixes the flag or key it came from. Ranges are left to the config's own rules.
    Numbers are ASCII digits only (``3_2``, full-width and Arabic-Indic digits are refused).
    """
    what = {int: ("an int", "ints"), float: ("a number", "numbers")}

    def scalar(item: str, kind: type, expected: str | None = None) -> Any:
        if kind not in what:  # strings (choices are checked by the config)
            return kind(item)
        return ascii_number(item, kind, expected)

    if isinstance(like, bool):
        if text.lower() in ("1", "true", "yes", "on"):
            return True
        if text.lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"expected a boolean (true/false), got {text!r}")
    if isinstance(like, tuple):
        kind = type(like[0]) if like else float
        items = text.replace("/", ",").split(",") if text.strip() else []
        try:
            return tuple(scalar(v, kind) for v in items)
        except ValueError:
            raise ValueError(f"expected comma-separated {what[kind][1]}, got {text!r}") from None
    if like is None:  # optional numeric fields
        return None if text.lower() == "none" else scalar(text, float, "a number or none")
    return scalar(text, type(like))


PROXIMITY_OFFSET = TaskConfig().offset  # spt_swap_start's default: start SPT on the task with this offset


def default_swap(task: TaskConfig, recipe: str = "data_swap") -> TaskConfig:
    """The data SPT (first) runs on when an arm does not say: for data_swap the other
    family, drawn with another seed; for spt_swap_start the same task with the default
    per-sequence offset (the proximity regime)."""
    if recipe == "spt_swap_start":
        return replace(task, offset=PROXIMITY_OFFSET)
    return replace(task, family=other_family(task.family), seed=task.seed + 1)


def _field_default(cfg, name: str):
    for f in fields(cfg):
        if f.name == name:
            return getattr(cfg, name)
    raise ValueError(f"unknown config field {name!r} of {type(cfg).__name__}")


def arm_spec(arm: str, base: RunSpec) -> RunSpec:
    """The spec of one arm on top of ``base`` (whose recipe is replaced). ``task.*`` and
    ``swap.*`` keys describe the toy task and are refused on other data; a recipe that
    pretrains on other data takes the base's ``swap`` (on the toy task, by default another
    family or offset: :func:`default_swap`), and every other arm drops it, so swap data never
    changes the key of an arm that does not use it."""
    text = ALIASES.get(arm, arm)
    recipe, _, rest = text.partition(":")
    if recipe not in RECIPES:
        raise ValueError(f"arm {arm!r}: unknown recipe {recipe!r}; recipes are {RECIPES}, "
                         f"aliases {sorted(ALIASES)}")
    toy = isinstance(base.data, TaskConfig)
    swap, overrides = {}, {}
    cfgs = dict(model=base.model, train=base.train, **({"task": base.data} if toy else {}))
    for item in filter(None, rest.split(",")):
        key, eq, value = item.partition("=")
        if not eq:
            raise ValueError(f"arm {arm!r}: expected key=value, got {item!r}")
        if key.startswith(("swap.", "task.")) and not toy:
            raise ValueError(f"arm {arm!r}: {key.split('.')[0]}.* keys describe the toy task, not "
                             f"{base.data.name} (data_swap on other data takes their swap data)")
        if key.startswith("swap."):
            name = key[5:]
            swap[name] = parse_value(value, _field_default(base.data, name))
            continue
        part, dot, name = key.rpartition(".")
        owners = [part] if dot else [p for p, c in cfgs.items() if any(f.name == name for f in fields(c))]
        if not toy and not owners and any(f.name == name for f in fields(TaskConfig)):
            raise ValueError(f"arm {arm!r}: {name} is a field of the toy task; task.* keys do not apply "
                             f"to {base.data.name}")
        if len(owners) != 1 or owners[0] not in cfgs:
            raise ValueError(f"arm {arm!r}: cannot place key {key!r}; use "
                             f"{'task.X, ' if toy else ''}model.X or train.X")
        overrides[f"{owners[0]}__{name}"] = parse_value(value, _field_default(cfgs[owners[0]], name))
    spec = with_overrides(replace(base, recipe="scratch"), **overrides)  # the recipe's checks come last
    if not get_recipe(recipe).needs_swap:
        if swap:
            raise ValueError(f"arm {arm!r}: swap.* keys only apply to recipes that pretrain on other data "
                             "(data_swap, spt_swap_start)")
        return replace(spec, recipe=recipe, swap=None)
    if toy:
        return replace(spec, recipe=recipe, swap=replace(spec.swap or default_swap(spec.data, recipe), **swap))
    if spec.swap is None:
        raise ValueError(f"arm {arm!r}: {recipe} on {base.data.name} needs swap data (--swap-dataset NAME)")
    return replace(spec, recipe=recipe)


def ascii_int(text: str) -> int:
    """An argparse type: an int in ASCII digits (``type=int`` takes ``3_2`` and other scripts' digits)."""
    try:
        return ascii_number(text, int)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def ascii_float(text: str) -> float:
    """An argparse type: a number in ASCII digits."""
    try:
        return ascii_number(text, float)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def arm_specs(arms: Sequence[str], seeds: Sequence[int], base: RunSpec,
              data: Sequence[DataSource] | None = None) -> list[tuple[dict, RunSpec]]:
    """(labels, spec) for every data source (default: the base's), arm and seed on top of
    ``base``; the model is fitted to each data source (e.g. its class count). The labels (dataset,
    arm, seed) are a table row's; its seed is read off the spec, which holds it."""
    specs = [(d.name, arm, arm_spec(arm, replace(base, data=d, model=d.fit(base.model), seed=s)))
             for d in (data if data is not None else [base.data]) for arm in arms for s in seeds]
    return [(dict(dataset=name, arm=arm, seed=spec.seed), spec) for name, arm, spec in specs]
