"""Specs: everything that determines one cache entry, hashed to a stable key.

Every kind of entry is a :class:`Spec`: it says what it is (``to_dict``), what its cache key
hashes (``identity``, by default the whole dict), what it produces (``result_type``, an
:class:`Entry`), how it computes it (``execute``) and roughly how many seconds that takes (``seconds``). A
training run is a :class:`RunSpec`, whatever its data (a data source of
:mod:`toyspt.data.source`: the toy task, a UCR set, ...); the theory figure's numbers and the
LRA demo are specs of their own kinds beside their code. Specs whose ``group()`` agree may
train together (``execute_group``; runs that differ only by seed train in lockstep, bitwise
equal to one at a time). A spec may name a ``parent()``: the run whose stored end state its
own run continues (:mod:`toyspt.train.recipes`, ``starts_from``), and ``alternatives()``:
specs whose results answer it exactly (the same run evaluated more often). The cache and
the sweep see nothing else of a spec.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, ClassVar, Protocol, Sequence

import torch

from toyspt.data import source
from toyspt.data.source import DataSource
from toyspt.data.tasks import TaskConfig
from toyspt.nn.model import ModelConfig
from toyspt.runs.pricing import run_seconds
from toyspt.train.config import RunConfig
from toyspt.train.recipes import Recipe, TrainConfig, get_recipe
from toyspt.train.run import RunResult, run_recipe, run_recipe_seeds
from toyspt.util.hashing import digest, jsonable
from toyspt.util.validation import config_dict

FORMAT_VERSION = 3  # bump when the meaning of a cached run changes (2: resume state, evaluate; 3: val loss)
UNKNOWN_SECONDS = 2.0  # what an entry that says nothing of its cost is taken to take


class Entry(Protocol):
    """What a spec produces and the cache stores: JSON (``result.json``) and tensors (``weights.pt``)."""

    seconds: float | None  # wall seconds its computation took (set by the sweep)

    def to_json(self) -> dict[str, Any]: ...

    def tensors(self) -> dict[str, Any]: ...

    @classmethod
    def from_stored(cls, blob: dict[str, Any], tensors: dict[str, Any]) -> "Entry": ...


@dataclass
class Table:
    """An entry that is a table of numbers: rows (JSON values; NaN read back as NaN) and the
    few facts (``details``) that titles and metadata need. Weights-free."""

    rows: list[dict]
    details: dict = field(default_factory=dict)
    seconds: float | None = None  # wall seconds the computation took

    def to_json(self) -> dict[str, Any]:
        return dict(rows=self.rows, details=self.details, seconds=self.seconds)

    def tensors(self) -> dict:
        return {}

    @classmethod
    def from_stored(cls, blob: dict[str, Any], tensors: dict) -> "Table":
        rows = [{k: (float("nan") if v == "nan" else v) for k, v in r.items()} for r in blob["rows"]]
        return cls(rows, blob["details"], blob.get("seconds"))


class Spec:
    """What the cache and the sweep need of a spec (subclasses are frozen dataclasses)."""

    kind: ClassVar[str] = "spec"  # short name of the spec kind, in messages and spec.json
    result_type: ClassVar[type] = RunResult  # the Entry class it produces

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    @classmethod
    def identity_of(cls, d: dict[str, Any]) -> dict[str, Any]:
        """The part of a ``to_dict`` result the key hashes (default: all of it)."""
        return d

    def key(self) -> str:
        """Stable content hash of the spec (computed once per spec object: specs are frozen)."""
        k = self.__dict__.get("_key")
        if k is None:
            k = digest(self.identity_of(self.to_dict()))
            object.__setattr__(self, "_key", k)
        return k

    def execute(self, progress: bool = False, start: Entry | None = None) -> Entry:
        """Compute the entry (no cache); ``start``: the result of ``parent()``, continued."""
        raise NotImplementedError

    def seconds(self) -> float:
        """Rough seconds ``execute`` takes on one idle core of the reference machine (the prior
        of :mod:`toyspt.runs.costs`, calibrated there on observed seconds); default: an entry
        that says nothing of its cost."""
        return UNKNOWN_SECONDS

    def parent(self) -> "Spec | None":
        """The spec whose run this run continues from its stored end state (default: none)."""
        return None

    def alternatives(self) -> list["Spec"]:
        """Specs whose results answer this spec exactly (default: none)."""
        return []

    def reads_parent(self) -> bool:
        """True when ``execute`` only reads its parent's stored weights (a probe of a stored
        run), so any entry that answers the parent will do (default: it continues the parent's
        exact end state)."""
        return False

    def twins(self) -> list["Spec"]:
        """Other specs whose entries this spec's computation yields too, exactly: their
        entries are :meth:`twin_result` of this one's (default: none). A tracked run's twin
        is the untracked run (its trackers only read the model)."""
        return []

    def twin_result(self, twin: "Spec", result: Entry) -> Entry:
        """The entry of ``twin`` (one of :meth:`twins`) made from this spec's ``result``."""
        raise NotImplementedError

    def group(self) -> str | None:
        """Specs with the same non-None group may train together through ``execute_group``."""
        return None

    @classmethod
    def execute_group(cls, specs: Sequence["Spec"], starts: Sequence[Entry] | None = None) -> list[Entry]:
        """Train specs of one group (``starts``: their parents' results); default: one at a time."""
        return [s.execute(start=None if starts is None else st) for s, st in zip(specs, starts or [None] * len(specs))]

    def label(self) -> str:
        """A short description for messages."""
        return f"{self.kind} entry {self.key()}"


def single_thread(fn, *args, **kwargs):
    """Run ``fn`` on one torch thread: these models are far too small to gain from more,
    and extra threads thrash when processes share cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return fn(*args, **kwargs)
    finally:
        torch.set_num_threads(threads)


@dataclass(frozen=True)
class RunSpec(Spec):
    """Everything that determines one training run: a recipe of :mod:`toyspt.train.recipes`
    applied to a seed and a data source. Runs without trackers continue their prefix run
    (``Recipe.starts_from``) and train seeds in lockstep; ``peak`` runs are answered by the
    same run evaluated with ``all``."""

    recipe: str  # one of toyspt.train.recipes.RECIPES
    seed: int = 0  # model init and data order
    data: DataSource = field(default_factory=TaskConfig)  # the labelled data (toyspt.data.source)
    model: ModelConfig = field(default_factory=ModelConfig)  # architecture
    train: TrainConfig = field(default_factory=TrainConfig)  # optimisation and SPT settings
    swap: DataSource | None = None  # data_swap, spt_swap_start: the data SPT (first) runs on
    trackers: tuple[str, ...] = ()  # names of tracker callbacks (toyspt.probe.tracking)
    evaluate: str = "all"  # what the label phase measures: all | peak (toyspt.train.evaluation)
    numerics: str = "eager"  # eager (bitwise) | compiled (toyspt.train.compiled); keyed unless eager

    def __post_init__(self):
        if not isinstance(self.data, DataSource):
            raise TypeError(f"data: expected a data source (toyspt.data.source), got {type(self.data).__name__}")
        self.run_config()  # refuses an unknown recipe, policy or numerics, a model the recipe cannot use

    kind: ClassVar[str] = "run"  # the spec kind, as every spec names its own (the data's kind is data.kind)

    def to_dict(self) -> dict[str, Any]:
        """The run as JSON values: the layout toy and UCR keys have always had (the data
        source names its own part), so cached runs keep their keys."""
        d = dict(recipe=self.recipe, seed=self.seed, model=config_dict(self.model), train=config_dict(self.train),
                 trackers=list(self.trackers), evaluate=self.evaluate, numerics=self.numerics, format=FORMAT_VERSION)
        d.update(self.data.key_fields(self.swap))
        return d

    @classmethod
    def identity_of(cls, d: dict[str, Any]) -> dict[str, Any]:
        """The key names the numerics path only off the default (eager runs keep the keys they
        had before there was a choice), and a data set by its content, not where it was read."""
        if d.get("numerics", "eager") == "eager":
            d = {k: v for k, v in d.items() if k != "numerics"}
        # where a UCR set was read from (root, location; 'source' before the rename): its fingerprint names it
        for part in ("data", "swap_data"):
            if isinstance(d.get(part), dict):
                d = {**d, part: {k: v for k, v in d[part].items() if k not in ("root", "location", "source")}}
        return d

    def label(self) -> str:
        return f"{self.data.kind} run {self.key()} ({self.data.name}, {self.recipe}, seed {self.seed})"

    def run_config(self) -> RunConfig:
        """What its run trains, whatever the seed and data (what the train functions take)."""
        return RunConfig(self.recipe, self.model, self.train, self.evaluate, self.numerics)

    @property
    def rec(self) -> Recipe:
        """The recipe's row of the table (as :attr:`RunConfig.rec`, without checking the config again)."""
        return get_recipe(self.recipe)

    def seconds(self) -> float:
        """Seconds of this run's own phases (a continued run: what it adds), its evaluations and
        its trackers' records, by the reference machine's model (:func:`toyspt.runs.pricing.run_seconds`)."""
        return run_seconds(self)

    def parent(self):
        rec = self.rec
        if rec.starts_from is None or self.trackers:  # trackers must see every phase
            return None
        if rec.matched_budget and self.train.patience is not None:  # its prefix may have stopped early
            return None
        # an SPT-only run evaluates nothing: one policy for it serves every label policy
        return replace(self, recipe=rec.starts_from, evaluate="all" if rec.pretrains else self.evaluate)

    def alternatives(self):
        return [replace(self, evaluate="all")] if self.evaluate != "all" else []

    def twins(self) -> list["RunSpec"]:
        """A tracked run answers for its untracked twin and serves as a parent in its place:
        trackers only read the model (tests/unit/probe/test_trackers_read_only.py), so its
        weights, history, summary and resume state are bitwise the untracked run's. A run
        without label phase evaluates nothing, so its twin takes the policy parents use ("all")."""
        if not self.trackers:
            return []
        label = self.rec.label_phase
        return [replace(self, trackers=(), evaluate=self.evaluate if label else "all")]

    def twin_result(self, twin: "RunSpec", result: RunResult) -> RunResult:
        """``result`` as the untracked ``twin`` stores it: no tracker records, the twin's policy
        in its config, no seconds of its own (its computation is this run's)."""
        if twin not in self.twins():
            raise ValueError(f"{twin.label()} is not a twin of {self.label()}")
        return RunResult(result.recipe, result.seed, result.history, result.summary, [], result.states,
                         {**result.config, "evaluate": twin.evaluate}, None)

    def group(self) -> str | None:
        """Specs without trackers or stopping rules that differ only by seed train in lockstep."""
        if self.trackers or self.train.stops:  # a stopping rule ends each seed's phase at its own epoch
            return None
        return f"{self.data.kind}-{replace(self, seed=0).key()}"

    def load_data(self):
        """(the labelled data, the data SPT pretrains on where the recipe says so, or None)."""
        return self.data.load(), self.swap.load() if self.swap is not None else None

    def execute(self, progress: bool = False, start: RunResult | None = None) -> RunResult:
        return single_thread(lambda: train_spec(self, *self.load_data(), progress, start))

    @classmethod
    def execute_group(cls, specs, starts=None) -> list[RunResult]:
        """Seeds of one spec together (:func:`toyspt.train.run.run_recipe_seeds`, bitwise equal
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
            return run_recipe_seeds(first.run_config(), data, [s.seed for s in specs], pretrain_data=swap,
                                    starts=starts)
        return single_thread(run)


def train_spec(spec: RunSpec, data, swap, progress: bool = False, start: RunResult | None = None) -> RunResult:
    """Train ``spec``'s recipe on loaded ``data`` (and ``swap``, the data it pretrains on where
    the recipe says so), continuing ``start`` (the result of ``spec.parent()``) if given."""
    if spec.rec.needs_swap and swap is None:
        raise ValueError(f"a {spec.recipe} run needs swap data (the data SPT pretrains on)")
    callbacks = ()
    if spec.trackers:
        from toyspt.probe.tracking import make_trackers  # measurement modules load only when asked
        callbacks = make_trackers(spec.trackers, data, spec.train)
    return run_recipe(spec.run_config(), data, spec.seed, callbacks=callbacks, pretrain_data=swap,
                      progress=progress, start=start)


def spec_from_dict(d: dict[str, Any]) -> RunSpec:
    """Inverse of ``RunSpec.to_dict`` (lists become tuples again; the data source's kind
    rebuilds its part)."""
    def build(cls, sub):
        names = {f.name for f in fields(cls)}
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in sub.items() if k in names})

    data, swap = source.from_fields(d.get("kind", "toy"), d)
    return RunSpec(recipe=d["recipe"], seed=d["seed"], data=data, model=build(ModelConfig, d["model"]),
                   train=build(TrainConfig, d["train"]), swap=swap, trackers=tuple(d.get("trackers", ())),
                   evaluate=d.get("evaluate", "all"), numerics=d.get("numerics", "eager"))


def with_overrides(spec: RunSpec, **overrides) -> RunSpec:
    """A copy of ``spec`` with sub-config fields replaced; keys are ``part__name`` with part
    in task (the toy task: a TaskConfig data source), model, train (e.g. ``model__pos="alibi"``)."""
    parts = dict(model=spec.model, train=spec.train)
    if isinstance(spec.data, TaskConfig):
        parts["task"] = spec.data
    for key, value in overrides.items():
        part, _, name = key.partition("__")
        if part == "task" and part not in parts:
            raise ValueError(f"task.{name}: task.* keys describe the toy task; this run's data is {spec.data.name}")
        if part not in parts or not any(f.name == name for f in fields(parts[part])):
            raise ValueError(f"unknown config field {part}.{name}")
        parts[part] = replace(parts[part], **{name: value})
    data = parts.pop("task", spec.data)
    return replace(spec, data=data, **parts)


def spec_kinds() -> set[str]:
    """The kinds of every spec class defined so far (the registry of spec kinds: a class is
    registered by being defined; import its module first)."""
    out, todo = set(), [Spec]
    while todo:
        cls = todo.pop()
        out.add(cls.kind)
        todo.extend(cls.__subclasses__())
    return out


__all__ = ["Spec", "Entry", "Table", "RunSpec", "FORMAT_VERSION", "jsonable", "digest", "single_thread", "train_spec",
           "spec_from_dict", "with_overrides", "UNKNOWN_SECONDS", "spec_kinds"]
