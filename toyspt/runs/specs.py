"""Run specs: everything that determines one run, hashed to a stable key.

Every kind of run (toy task, UCR data set, LRA demo, the theory figure's numbers) is a
:class:`Spec`: it says what it is (``to_dict``), what its cache key hashes (``identity``,
by default the whole dict), and how it trains (``execute``). Specs whose ``group()``
agree may train together (``execute_group``; toy runs that differ only by seed train in
lockstep, bitwise equal to one at a time). A spec may name a ``parent()``: the run whose stored end state its own run
continues (:mod:`toyspt.train.recipes`, ``starts_from``), and ``alternatives()``: specs whose
results answer it exactly (the same run evaluated more often). The cache and the sweep see
nothing else of a spec.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, ClassVar, Sequence

import torch

from toyspt.train.compiled import check_numerics
from toyspt.train.evaluation import check_policy
from toyspt.nn.model import ModelConfig
from toyspt.train.recipes import TrainConfig, get_recipe
from toyspt.data.tasks import TaskConfig, make_task
from toyspt.train.loop import RunResult, run_recipe, run_recipe_seeds

FORMAT_VERSION = 3  # bump when the meaning of a cached entry changes (2: resume state, evaluate; 3: val loss)


def jsonable(obj):
    """``obj`` with tuples as lists, keys as strings and NaN as ``"nan"`` (stable JSON)."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, float) and obj != obj:
        return "nan"
    return obj


def digest(d: dict[str, Any]) -> str:
    """24 hex digits of the sha256 of ``d`` as canonical JSON."""
    blob = json.dumps(jsonable(d), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


class Spec:
    """What the cache and the sweep need of a run spec (subclasses are frozen dataclasses)."""

    kind: ClassVar[str] = "spec"  # short name of the spec kind, in messages and spec.json

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    @classmethod
    def identity_of(cls, d: dict[str, Any]) -> dict[str, Any]:
        """The part of a ``to_dict`` result the key hashes (default: all of it)."""
        return d

    def key(self) -> str:
        """Stable content hash of the spec."""
        return digest(self.identity_of(self.to_dict()))

    def execute(self, progress: bool = False, start: RunResult | None = None) -> RunResult:
        """Train the run (no cache); ``start``: the result of ``parent()``, continued."""
        raise NotImplementedError

    def parent(self) -> "Spec | None":
        """The spec whose run this run continues from its stored end state (default: none)."""
        return None

    def alternatives(self) -> list["Spec"]:
        """Specs whose results answer this spec exactly (default: none)."""
        return []

    def group(self) -> str | None:
        """Specs with the same non-None group may train together through ``execute_group``."""
        return None

    @classmethod
    def execute_group(cls, specs: Sequence["Spec"], starts: Sequence[RunResult] | None = None) -> list[RunResult]:
        """Train specs of one group (``starts``: their parents' results); default: one at a time."""
        return [s.execute(start=None if starts is None else st) for s, st in zip(specs, starts or [None] * len(specs))]

    def label(self) -> str:
        """A short description for messages."""
        return f"{self.kind} run {self.key()}"


def single_thread(fn, *args, **kwargs):
    """Run ``fn`` on one torch thread: these models are far too small to gain from more,
    and extra threads thrash when processes share cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return fn(*args, **kwargs)
    finally:
        torch.set_num_threads(threads)


class RecipeSpec(Spec):
    """What toy and UCR run specs share: a recipe of :mod:`toyspt.train.recipes` applied to a seed
    (fields ``recipe``, ``seed``, ``model``, ``train``, ``trackers``, ``evaluate``,
    ``numerics``), data loaded by ``load_data()``. Runs without trackers continue their prefix run
    (``Recipe.starts_from``) and train seeds in lockstep; ``peak`` runs are answered by the
    same run evaluated with ``all``."""

    def load_data(self):
        """(the labelled data, the data SPT pretrains on where the recipe says so, or None)."""
        raise NotImplementedError

    swap_name: ClassVar[str] = "swap data"  # what the swap data is called in messages

    def __post_init__(self):  # the subclasses' dataclass __init__ calls this
        check_policy(self.evaluate)
        check_numerics(self.numerics)
        get_recipe(self.recipe).check_model(self.model)

    @classmethod
    def identity_of(cls, d: dict[str, Any]) -> dict[str, Any]:
        """The key names the numerics path only off the default: eager runs keep the keys
        they had before there was a choice (toyspt.train.compiled)."""
        if d.get("numerics", "eager") == "eager":
            d = {k: v for k, v in d.items() if k != "numerics"}
        return d

    def parent(self):
        rec = get_recipe(self.recipe)
        if rec.starts_from is None or self.trackers:  # trackers must see every phase
            return None
        # an SPT-only run evaluates nothing: one policy for it serves every label policy
        return replace(self, recipe=rec.starts_from, evaluate="all" if rec.pretrains else self.evaluate)

    def alternatives(self):
        return [replace(self, evaluate="all")] if self.evaluate != "all" else []

    def group(self) -> str | None:
        """Specs without trackers that differ only by seed train in lockstep."""
        return None if self.trackers else f"{self.kind}-{replace(self, seed=0).key()}"

    def execute(self, progress: bool = False, start: RunResult | None = None) -> RunResult:
        return single_thread(lambda: train_recipe(self, *self.load_data(), self.swap_name, progress, start))

    @classmethod
    def execute_group(cls, specs, starts=None) -> list[RunResult]:
        """Seeds of one spec together (:func:`toyspt.train.loop.run_recipe_seeds`, bitwise equal
        to ``execute`` one at a time); results in the order of ``specs``."""
        specs = list(specs)
        if not specs:
            return []
        first = replace(specs[0], seed=0)
        if any(s.trackers for s in specs):
            raise ValueError("specs with trackers train alone (execute), not in a lockstep group")
        if any(replace(s, seed=0) != first for s in specs):
            raise ValueError("a lockstep group must hold specs that differ only by seed")

        def run():
            data, swap = first.load_data()
            return run_recipe_seeds(first.recipe, data, first.model, first.train, [s.seed for s in specs],
                                    pretrain_data=swap, evaluate=first.evaluate, starts=starts,
                                    numerics=first.numerics)
        return single_thread(run)


@dataclass(frozen=True)
class RunSpec(RecipeSpec):
    """Everything that determines one toy-task run."""

    kind: ClassVar[str] = "toy"
    swap_name: ClassVar[str] = "swap_task"

    recipe: str  # one of toyspt.train.recipes.RECIPES
    seed: int = 0  # model init and data order
    task: TaskConfig = field(default_factory=TaskConfig)  # the labelled task
    model: ModelConfig = field(default_factory=ModelConfig)  # architecture
    train: TrainConfig = field(default_factory=TrainConfig)  # optimisation and SPT settings
    swap_task: TaskConfig | None = None  # data_swap: the task SPT runs on
    trackers: tuple[str, ...] = ()  # names of tracker callbacks (toyspt.probe.tracking)
    evaluate: str = "all"  # what the label phase measures: all | peak (toyspt.train.evaluation)
    numerics: str = "eager"  # eager (bitwise) | compiled (toyspt.train.compiled); keyed unless eager

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["format"] = FORMAT_VERSION
        return d

    def label(self) -> str:
        return f"run {self.key()} ({self.recipe}, seed {self.seed})"

    def load_data(self):
        return make_task(self.task), make_task(self.swap_task) if self.swap_task is not None else None


def train_recipe(spec, data, swap, swap_name: str, progress: bool = False,
                 start: RunResult | None = None) -> RunResult:
    """Train ``spec``'s recipe (a toy or UCR spec: recipe, seed, model, train, trackers,
    evaluate) on loaded ``data`` (and ``swap``, the data it pretrains on where the recipe
    says so), continuing ``start`` (the result of ``spec.parent()``) if given."""
    if get_recipe(spec.recipe).needs_swap and swap is None:
        raise ValueError(f"a {spec.recipe} run needs {swap_name} (the data SPT pretrains on)")
    callbacks = ()
    if spec.trackers:
        from toyspt.probe.tracking import make_trackers  # measurement modules load only when asked
        callbacks = make_trackers(spec.trackers, data, spec.train)
    return run_recipe(spec.recipe, data, spec.model, spec.train, spec.seed, callbacks=callbacks,
                      pretrain_data=swap, progress=progress, evaluate=spec.evaluate, start=start,
                      numerics=spec.numerics)


def spec_from_dict(d: dict[str, Any]) -> RunSpec:
    """Inverse of ``RunSpec.to_dict`` (lists become tuples again)."""

    def build(cls, sub):
        if sub is None:
            return None
        kw = {}
        for f in fields(cls):
            if f.name in sub:
                v = sub[f.name]
                kw[f.name] = tuple(v) if isinstance(v, list) else v
        return cls(**kw)

    return RunSpec(recipe=d["recipe"], seed=d["seed"], task=build(TaskConfig, d["task"]),
                   model=build(ModelConfig, d["model"]), train=build(TrainConfig, d["train"]),
                   swap_task=build(TaskConfig, d.get("swap_task")),
                   trackers=tuple(d.get("trackers", ())), evaluate=d.get("evaluate", "all"),
                   numerics=d.get("numerics", "eager"))


def with_overrides(spec: RunSpec, **overrides) -> RunSpec:
    """A copy of ``spec`` with sub-config fields replaced; keys are ``part__name`` with part
    in task, model, train (e.g. ``model__pos="alibi"``)."""
    parts = dict(task=spec.task, model=spec.model, train=spec.train)
    for key, value in overrides.items():
        part, _, name = key.partition("__")
        if part not in parts or not any(f.name == name for f in fields(parts[part])):
            raise ValueError(f"unknown config field {part}.{name}")
        parts[part] = replace(parts[part], **{name: value})
    return replace(spec, **parts)


__all__ = ["Spec", "RecipeSpec", "RunSpec", "FORMAT_VERSION", "jsonable", "digest", "single_thread", "train_recipe", "spec_from_dict",
           "with_overrides"]
