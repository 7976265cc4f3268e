"""The LRA study's design (issue 43), fixed by the pilot (:mod:`toyspt.studies.lra_pilot`) and written
in docs/lra.md ("Pre-registration") before any of its seeds trained.

Per task (:data:`TASKS`: PathFinder, the image task, ListOps, each a data kind of
:mod:`toyspt.kinds.tasks`) and seed, arms paired by seed from one initialisation (recipes of
:mod:`toyspt.train.recipes`, strings of :mod:`toyspt.runs.arms`):

* confirmatory, each against ``scratch`` (:data:`CONFIRMATORY_ARMS`): ``spt``, ``qk_transfer``,
  ``frozen_attention``;
* descriptive (:data:`DESCRIPTIVE_ARMS`): ``all_but_qk_transfer``, ``scratch_matched`` (SPT's
  total epochs with labels), ``no_attention`` (W_Q = W_K = 0 and frozen: attention stays
  exactly uniform, so the model is mean-pooled embeddings with a per-token MLP and the
  sequence mean added to every token: what "unchanged when attention is frozen" is measured
  against), and at 2 layers ``scratch`` and ``spt`` (:data:`DEPTH_ARMS`); on ListOps also
  ``spt`` with the demo's 50% masking (:data:`LISTOPS_MASK50`).

Primary metric (:data:`PRIMARY`): the paper's peak held-out validation accuracy
(``peak_val_acc``); secondary (:data:`SECONDARY`): the toolkit's mean test accuracy over the last
fifth of the label epochs. Verdicts: the exact Wilcoxon signed-rank test of the paired
differences arm - scratch (direction and significance from that one test,
:func:`toyspt.analysis.stats.paired`), Holm over the confirmatory family (3 tasks x 3 arms),
alpha :data:`ALPHA`; "unchanged" = TOST equivalence within ±:data:`MARGIN`.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar, Sequence

from toyspt.kinds.tasks import PIXEL_TRAIN, TOKEN_TRAIN, DigitsSource
from toyspt.runs.arms import arm_spec
from toyspt.runs.ledger import StudyLedger, data_kind
from toyspt.runs.specs import RunSpec
from toyspt.studies.lra_mechanism import MECHANISM_SEEDS, MechanismConfig, mechanism_trackers, spec_view, task_view
from toyspt.studies.lra_pilot import LISTOPS_SHORT, MODEL_1L, PF_MORE, PILOT_SEEDS, run_pilot, tiny
from toyspt.train.recipes import TrainConfig

PRIMARY = "peak_val_acc"
SECONDARY = "mean_test_last20"
ALPHA = 0.05
MARGIN = 0.02  # "unchanged": arm - scratch within ±0.02 accuracy (TOST), fixed before the study
CONFIRMATORY_ARMS = ("spt", "qk_transfer", "frozen_attention")
DESCRIPTIVE_ARMS = ("all_but_qk_transfer", "scratch_matched", "no_attention")
DEPTH_ARMS = ("scratch", "spt")  # at 2 layers
ARMS = {"no_attention": "frozen_attention:qk_init_scale=0"}  # arm name -> arm string (others: the recipe)
SEEDS_20, SEEDS_10 = tuple(range(20)), tuple(range(10))  # the study's seeds; the pilot's are 1000+
assert not set(SEEDS_20) & set(PILOT_SEEDS)

# the paper's (scratch, arm) peak validation accuracies (the image task: its CIFAR10 numbers)
PAPER_ACCURACY = {("pathfinder", "spt"): (0.67, 0.85), ("pathfinder", "qk_transfer"): (0.672, 0.704),
                  ("pathfinder", "frozen_attention"): (0.672, 0.50), ("image", "spt"): (0.499, 0.72),
                  ("image", "qk_transfer"): (0.486, 0.607), ("image", "frozen_attention"): (0.503, 0.535)}
# the paper's arm - scratch, None where it states no number; "equal" where it says unchanged
PAPER = {**{k: arm - base for k, (base, arm) in PAPER_ACCURACY.items()}, ("listops", "frozen_attention"): "equal"}
# the paper's scratch beside each number of PAPER (its errors are what an arm's gain is a share of)
PAPER_BASE = {k: base for k, (base, _) in PAPER_ACCURACY.items()}
# confirmatory rows the pre-registration (docs/lra.md, committed before any study seed) reports without
# a verdict: with scratch at chance in the pilot, "frozen attention breaks PathFinder" cannot be tested
UNJUDGED = {("pathfinder", "frozen_attention"): "scratch at chance"}
IMAGE_TASKS = ("pathfinder", "image")  # tasks whose learnability a CNN on the same images answers
CLAIMS = {"spt": "SPT beats scratch", "qk_transfer": "W_Q, W_K from SPT alone beat scratch",
          "frozen_attention": "attention frozen at random init"}  # a confirmatory arm's claim, in words


@dataclass(frozen=True)
class Task:
    """One task of the study: its data, model, training, and seeds per arm."""

    name: str  # pathfinder | image | listops
    data: object  # the data source (toyspt.kinds.tasks)
    train: TrainConfig  # epochs, SPT epochs, masking, batch size, lr
    model: object  # ModelConfig of the 1-layer model (the data's width and classes set)
    main_seeds: tuple[int, ...]  # scratch, spt, qk_transfer
    other_seeds: tuple[int, ...]  # every other arm


EPOCHS = dict(epochs=30, pre_epochs=20, batch_size=64, lr=1e-3)  # the pilot's, kept (docs/lra.md)


def _task(name, data, train, seeds_main, model_changes=None) -> Task:
    return Task(name, data, TrainConfig(**EPOCHS, **train), data.fit(replace(MODEL_1L, **(model_changes or {}))),
                seeds_main, SEEDS_10)


TASKS = {
    "pathfinder": _task("pathfinder", PF_MORE, PIXEL_TRAIN, SEEDS_20),
    "image": _task("image", DigitsSource(side=8), PIXEL_TRAIN, SEEDS_20),
    "listops": _task("listops", LISTOPS_SHORT, TOKEN_TRAIN, SEEDS_10),
}
LISTOPS_MASK50 = "spt:mask_rate=0.5"


def study_specs(tasks: dict[str, Task] | None = None) -> dict[str, RunSpec]:
    """label ``task/arm/seed`` -> spec of every run of the study, in the order pieces train them:
    seed by seed (so any prefix holds whole paired seeds), tasks, then arms (scratch first)."""
    tasks = tasks or TASKS
    out = {}
    seeds = sorted({s for t in tasks.values() for s in t.main_seeds + t.other_seeds})
    for s in seeds:
        for t in tasks.values():
            base = RunSpec("scratch", seed=s, data=t.data, model=t.model, train=t.train, evaluate="peak")
            arms = []
            if s in t.main_seeds:
                arms += ["scratch", "spt", "qk_transfer"]
            if s in t.other_seeds:
                arms += ["frozen_attention", *DESCRIPTIVE_ARMS]
                arms += [f"depth2_{a}" for a in DEPTH_ARMS]
                if t.name == "listops":
                    arms.append("spt_mask50")
            for a in arms:
                out[f"{t.name}/{a}/{s}"] = _arm(a, base)
    return out


def mechanism_specs(tasks=None, seeds=MECHANISM_SEEDS, cfg: MechanismConfig = MechanismConfig()) -> dict:
    """label ``mechanism/<task>/<arm>/<seed>`` -> the study's run (:func:`study_specs`,
    every arm and depth) of ``seeds``, with :func:`mechanism_trackers`: the tracked twins whose
    records the figure draws the mechanism from (a tracked run trains alone, SPT phase included,
    and its trackers never touch the run's generators, so it trains what its untracked twin trains)."""
    tasks = tasks or TASKS
    return {f"mechanism/{label}": _tracked(spec, tasks[label.split("/")[0]], cfg)
            for label, spec in study_specs(tasks).items() if spec.seed in seeds}


def _tracked(spec: RunSpec, task: Task, cfg: MechanismConfig = MechanismConfig()) -> RunSpec:
    """``spec`` with the mechanism's trackers of ``task``: its tracked twin."""
    return replace(spec, trackers=mechanism_trackers(task_view(task), cfg))


def _arm(name: str, base: RunSpec) -> RunSpec:
    if name.startswith("depth2_"):
        return arm_spec(name.removeprefix("depth2_"), replace(base, model=replace(base.model, n_layers=2)))
    if name == "spt_mask50":
        return arm_spec(LISTOPS_MASK50, base)
    return arm_spec(ARMS.get(name, name), base)


def family(task: str, arm: str) -> str:
    """confirmatory | descriptive: the Holm family a row of the study belongs to."""
    return "confirmatory" if arm in CONFIRMATORY_ARMS else "descriptive"


# ------------------------------------------------------------------ the study as a figure job runs it
# (added after the pre-registration above; none of its choices changes)

# the study's results ledger (docs/ledger.md): every run of the study (spt's SPT-only parents included),
# relative to the repository root
KINDS = ("pathfinder", "digits", "listops")  # the data kinds of the study's runs (toyspt.kinds.tasks)
LEDGER = StudyLedger(Path("figures/ledger/lra.jsonl"), kinds=KINDS)
TIER = "lra"  # the figure job's tier that trains and draws the study: python paper_figs.py --tier lra
QUICK_TRAIN = dict(epochs=2, pre_epochs=1, batch_size=16)  # the smoke version's training (seconds per run)
QUICK_MODEL = dict(d_model=8, d_mlp=8)  # and its model
TWINS_AFTER = 1_000_000  # the tracked twins' phases: seed + this, after every study seed
# tracked twins only, of no study run, added after the study to test a cause (docs/lra.md, "The
# mechanism, answered"): PathFinder's SPT under L1 does not beat the best context-free prediction
# (the background: L1's minimiser is a median); under MSE (a mean) does it learn from the
# context, and does its attention then become local? Descriptive.
CAUSE_ARMS = {"pathfinder": {"spt_mse": "spt:recon=mse"}}


def quick_tasks(seeds: Sequence[int]) -> dict[str, Task]:
    """The study's tasks at smoke-test sizes (:func:`toyspt.studies.lra_pilot.tiny`), every arm at ``seeds``:
    the same design, for the tests, never recorded in the study's ledger."""
    out = {}
    for name, t in TASKS.items():
        data = tiny(t.data)
        out[name] = Task(name, data, replace(t.train, **QUICK_TRAIN), data.fit(replace(t.model, **QUICK_MODEL)),
                         tuple(seeds), tuple(seeds))
    return out


@dataclass(frozen=True)
class Study:
    """The LRA study as one figure job sees it (``python paper_figs.py --tier lra``): its tasks
    (quick: the smoke version at the job's seeds), its ledger, and the order its runs train in."""

    tasks: dict  # task name -> Task (:data:`TASKS`, or :func:`quick_tasks`)
    quick: bool = False  # the smoke version

    name: ClassVar[str] = "lra"  # its name in the registry (toyspt.studies.registry)
    ledger: ClassVar[StudyLedger] = LEDGER
    tiers: ClassVar[tuple[str, ...]] = (TIER,)  # the figure job's tiers that run this study
    lockstep: ClassVar[bool] = False  # no lockstep groups (one config over seeds): the order is seed by seed
    figures: ClassVar[tuple[str, ...]] = ("lra_claims", "lra_mechanism", "lra_claims2", "lra_mechanism2")
    preregistration: ClassVar[str] = 'docs/lra.md, "Pre-registration"'

    @classmethod
    def refuse(cls, quick: bool, seeds, numerics: str, contrast: bool | None) -> None:
        """A ValueError naming the first flag of the figure job this study would not honour: its
        seeds and numerics are pre-registered (``--seeds`` only with ``--quick``), and it draws
        no figure of the zero-mean contrast."""
        if seeds is not None and not quick:
            raise ValueError("--seeds: the lra tier trains the pre-registered seeds of toyspt.studies.lra_design "
                             "(0-19 and 0-9); --seeds is honoured with --quick only")
        if numerics != "eager":
            raise ValueError("--compile: the lra tier trains with the eager numerics its pilot used; "
                             "leave --compile out")
        if contrast:
            raise ValueError("--contrast: the lra tier draws no figure of the zero-mean contrast; leave it out")

    @classmethod
    def for_tier(cls, name: str, quick: bool = False, seeds: Sequence[int] = (0, 1),
                 numerics: str = "eager") -> "Study":
        """The study of tier ``name`` (quick: its smoke version at ``seeds``)."""
        if name not in cls.tiers:
            raise ValueError(f"tier: the LRA study runs in tier {TIER!r}, not {name!r}")
        cls.refuse(True, None, numerics, None)
        return cls(quick_tasks(seeds) if quick else TASKS, quick)

    def mechanism(self, study: int = 1) -> dict[tuple[str, str, int], RunSpec]:
        """``(task, arm, seed)`` -> the tracked twin of every run of study 1 or 2 at
        :data:`toyspt.studies.lra_mechanism.MECHANISM_SEEDS` (quick: those of its seeds), with
        :func:`toyspt.studies.lra_mechanism.mechanism_trackers`; for study 1 also of each arm of
        :data:`CAUSE_ARMS` at those seeds (a twin of no study run): descriptive, outside the
        pre-registered families, trained after every seed of the studies."""
        if study == 2:
            return {k: replace(s, trackers=mechanism_trackers(spec_view(k[0], s)))
                    for k, s in self.second().items() if k[2] in MECHANISM_SEEDS}
        if study != 1:
            raise ValueError(f"study: 1 or 2, got {study!r}")
        specs = self.specs()
        out = {k: _tracked(s, self.tasks[k[0]]) for k, s in specs.items() if k[2] in MECHANISM_SEEDS}
        for (task, arm, seed), s in specs.items():  # the cause arms' twins (CAUSE_ARMS), after their task's
            if arm == "scratch" and seed in MECHANISM_SEEDS:
                for name, text in CAUSE_ARMS.get(task, {}).items():
                    out[task, name, seed] = _tracked(arm_spec(text, s), self.tasks[task])
        return out

    def specs(self) -> dict[tuple[str, str, int], RunSpec]:
        """``(task, arm, seed)`` -> spec of every run of the study, in :func:`study_specs`' order."""
        out = {}
        for label, spec in study_specs(self.tasks).items():
            task, arm, seed = label.split("/")
            out[task, arm, int(seed)] = spec
        return out

    def second(self) -> dict[tuple[str, str, int], RunSpec]:
        """``(task, arm, seed)`` -> spec of every run of the second study (:mod:`toyspt.studies.lra2_design`;
        quick: its smoke version at this study's quick seeds), recorded in the same ledger."""
        from toyspt.studies import lra2_design as two

        if not self.quick:
            return two.study_specs()
        seeds = sorted({s for t in self.tasks.values() for s in t.main_seeds})
        return two.study_specs(quick=True, seeds=seeds)

    def data_of(self, study: int) -> dict:
        """Task name -> data source of study 1 or 2."""
        if study == 1:
            return {name: t.data for name, t in self.tasks.items()}
        return {t: s.data for (t, a, _), s in self.second().items() if a == "scratch"}

    def margins(self) -> dict[tuple[int, str], float]:
        """``(study, task)`` -> the equivalence margin its pre-registration fixed."""
        from toyspt.studies import lra2_design as two

        return {**{(1, t): MARGIN for t in self.tasks}, **{(2, t): two.MARGINS[t] for t in self.data_of(2)}}

    def references(self) -> dict[tuple[int, str, str, int], object]:
        """``(study, task, "cnn_reference", 0)`` -> the CNN reference on each image task's data
        (:mod:`toyspt.studies.lra_cnn`): the learnability gate of the claims."""
        from toyspt.studies.lra_cnn import QUICK_REFERENCE, REFERENCE, CNNReferenceSpec

        cnn = QUICK_REFERENCE if self.quick else REFERENCE
        return {(n, t, "cnn_reference", 0): CNNReferenceSpec(d, 0, cnn) for n in (1, 2)
                for t, d in self.data_of(n).items() if t in IMAGE_TASKS}

    def claim_specs(self, study: int) -> dict[tuple, object]:
        """``(study, task, arm, seed)`` -> every run of study 1 or 2, then its CNN references."""
        runs = self.specs() if study == 1 else self.second()
        return {**{(study, *k): v for k, v in runs.items()}, **{k: v for k, v in self.references().items()
                                                                if k[0] == study}}

    def progress(self, ledger) -> dict:
        """What ``ledger`` records of the study and what the rest costs
        (:func:`toyspt.studies.lra_progress.progress`)."""
        from toyspt.studies.lra_progress import progress

        return progress(ledger, self)

    @staticmethod
    def describe(progress: dict) -> str:
        """:meth:`progress` in one sentence (:func:`toyspt.studies.lra_progress.summary`)."""
        from toyspt.studies.lra_progress import summary

        return summary(progress)

    @classmethod
    def pilot(cls, out, quick: bool = False, progress: bool = False, stages: tuple = (1, 2), cache=None,
              ledger=None, workers: int = 1, recorded: bool = False):
        """The pilot's runs, trained or read from the cache (:func:`toyspt.studies.lra_pilot.run_pilot`;
        ``cache``: its folder); stages a-d: the second study's pilot (:func:`toyspt.studies.lra_pilot2.run`,
        through its ``ledger``, with ``workers``; ``recorded``: the table of what the ledger holds)."""
        if all(isinstance(s, str) for s in stages):
            from toyspt.studies import lra_pilot2

            if quick:
                raise ValueError("--quick: the second study's pilot has no smoke version; name stages 1,2 or leave "
                                 "--quick out")
            bad = [s for s in stages if s not in lra_pilot2.STAGES]
            if bad:
                raise ValueError(f"--stages: unknown {bad[0]!r}; the second pilot's are {', '.join(lra_pilot2.STAGES)}")
            return lra_pilot2.run(stages, out, cache, ledger, workers, recorded)
        if any(isinstance(s, str) for s in stages):
            raise ValueError("--stages: the first pilot's (1, 2) or the second's (a, b, c, d), not both")
        unused = [f for f, on in (("--ledger", ledger is not None), ("--workers", workers != 1),
                                  ("--recorded", recorded)) if on]
        if unused:
            raise ValueError(f"{unused[0]}: the first pilot (stages 1, 2) has no ledger and trains in one process; "
                             "the second's (stages a-d) takes it")
        from toyspt.runs.cache import RunCache

        return run_pilot(out, quick, RunCache(cache) if cache else None, progress=progress, stages=stages)

    @staticmethod
    def phase(spec, facts) -> int | None:
        """The phase of an entry of the study: its seed, so the sweep trains seed by seed and a
        budget leaves whole paired seeds; a tracked twin (:meth:`mechanism`) after every seed of
        the study; None for an entry of other data."""
        if data_kind(spec) not in KINDS:
            return None
        return spec.seed + (TWINS_AFTER if getattr(spec, "trackers", ()) else 0)


__all__ = ["PRIMARY", "SECONDARY", "ALPHA", "MARGIN", "CONFIRMATORY_ARMS", "DESCRIPTIVE_ARMS", "DEPTH_ARMS", "ARMS",
           "PAPER_ACCURACY", "PAPER", "PAPER_BASE", "UNJUDGED",
           "IMAGE_TASKS", "CLAIMS", "TASKS", "Task", "EPOCHS", "study_specs", "family", "KINDS", "LEDGER", "TIER",
           "Study", "quick_tasks", "TWINS_AFTER", "CAUSE_ARMS", "mechanism_specs"]
