"""The real-data study's design, by tier: which arms, seeds and sets each tier trains (what a
sweep then does with those runs is its plan, :mod:`toyspt.runs.planning`).

Arms (recipes of :mod:`toyspt.train.recipes`, aliases of :mod:`toyspt.runs.arms`):

* ``scratch`` and ``spt`` at :attr:`Tier.power_seeds` on the paper's four sets, evaluated every
  epoch (``evaluate="all"``), so the paper's peak held-out accuracy exists for them;
* the decomposition at :attr:`Tier.arm_seeds`, each continuing the same SPT-only parents as
  ``spt``: one weight group from SPT (``qk_transfer``, ``vo_transfer``, ``embed_transfer``,
  ``mlp_transfer``, ``norm_transfer``), everything but W_Q, W_K (``all_but_qk_transfer``), and
  the controls that separate content from scale (``spt_norms``: random directions at SPT's
  per-tensor norms; ``spt_permuted``: SPT's values, permuted within each tensor) and budget
  (``scratch_matched``: labels for SPT's epochs plus the label epochs; it continues the
  ``scratch`` run of its seed, so it is evaluated like it);
* the positional arms, the paper's baselines with built-in locality, from scratch (``alibi``,
  ``fire``, ``rope``), at :attr:`Tier.positional_seeds` (not the reference classifiers of
  :mod:`toyspt.ucr.reference`);
* beyond the paper's sets: ``scratch``, ``spt``, ``qk_transfer`` at :attr:`Tier.archive_seeds` on
  the first :attr:`Tier.archive_sets` sets the archive rule admits, in its stated order
  (:mod:`toyspt.ucr.archive`);
* the archive's excluded small sets (:func:`toyspt.ucr.archive.small_sets`: refused only for a
  class with fewer than 5 training series): ``scratch`` and ``spt`` at :attr:`Tier.archive_seeds`
  where :attr:`Tier.small_sets` (:func:`small_specs`), a descriptive stratum beside the scan;
* resampled splits: ``scratch`` and ``spt`` on the paper's sets at each of :attr:`Tier.resamples`
  (stratified resamples of the pooled train+test series, class counts kept:
  :mod:`toyspt.ucr.resample`; 0 is the archive's split), one seed per resample,
  :func:`resample_seed` (1000 + r: none of the one-split study's seeds 0-39, so no resample's
  runs share an initialisation or data order with a one-split run), test measured as the
  ``peak`` policy says (the summaries, the primary metric among them, are those of ``all``).

Metrics the study compares (:data:`STUDY_METRICS`, columns of :func:`toyspt.analysis.rows.label_row`):
the **primary** metric, chosen before any run of the study was looked at, is ``mean_test_last20``,
the mean test accuracy over the last fifth of the label epochs: it selects nothing (no validation
split of 5-27 series decides anything), cannot saturate the way validation accuracy does, and
averages 40 evaluations, so it is the least noisy summary of where training ends. Secondary:
``test_at_min_val_loss`` (selection by validation cross-entropy, which does not saturate at
1.0), ``final_test_acc``; and the paper's ``peak_held_out`` (max over epochs of test accuracy:
selection on the test split itself, optimistic by construction; only where test was measured
every epoch).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar, Sequence

from toyspt.analysis.basin import EARLY_EPOCHS
from toyspt.runs.arms import arm_spec
from toyspt.runs.ledger import StudyLedger
from toyspt.runs.specs import RunSpec
from toyspt.train.recipes import TrainConfig
from toyspt.ucr.data import PAPER_DATASETS, UCRData, UCRSource, available, load_ucr
from toyspt.ucr.runs import ucr_run, ucr_spec, ucr_train_config

POWER_ARMS = ("scratch", "spt")
DECOMPOSITION = ("qk_transfer", "vo_transfer", "embed_transfer", "mlp_transfer", "norm_transfer",
                 "all_but_qk_transfer")
CONTROLS = ("spt_norms", "spt_permuted", "scratch_matched")
POSITIONAL_ARMS = ("alibi", "fire", "rope")
ARCHIVE_ARMS = ("scratch", "spt", "qk_transfer")
EVERY_EPOCH = ("scratch", "spt", "scratch_matched")  # evaluated every epoch (peak held-out; parents)
# the study's results ledger (docs/ledger.md): every entry of UCR data (its runs, their probes, the
# init probes, the reference classifiers), relative to the repository root
KINDS = ("ucr",)  # the data kinds of the study's entries (toyspt.ucr.kind)
LEDGER = StudyLedger(Path("figures/ledger/ucr.jsonl"), kinds=KINDS)
PRIMARY = "mean_test_last20"
STUDY_METRICS = (PRIMARY, "test_at_min_val_loss", "final_test_acc", "peak_held_out")  # compared, primary first


@dataclass(frozen=True)
class Tier:
    """Seeds and training of one tier of the real-data study (every seed tuple may be empty)."""

    name: str  # default | study | quick
    power_seeds: tuple[int, ...]  # scratch and spt on the paper's sets (evaluated every epoch)
    qk_seeds: tuple[int, ...]  # qk_transfer on the paper's sets
    arm_seeds: tuple[int, ...]  # the other decomposition arms and the controls on the paper's sets
    positional_seeds: tuple[int, ...]  # alibi, fire, rope on the paper's sets
    basin_seeds: tuple[int, ...]  # tracked SPT-only runs (beta and proximity along SPT)
    archive_seeds: tuple[int, ...]  # scratch, spt, qk_transfer on the admitted archive sets
    archive_sets: int  # how many admitted archive sets, in the archive rule's order
    train: TrainConfig  # epochs, SPT epochs, batch size
    numerics: str = "eager"  # eager | compiled (toyspt.train.compiled)
    resamples: tuple[int, ...] = ()  # scratch and spt on the paper's sets at these resampled splits
    small_sets: bool = False  # scratch and spt on the archive's excluded small sets at archive_seeds


SEEDS_5, SEEDS_10, SEEDS_40 = tuple(range(5)), tuple(range(10)), tuple(range(40))
CONFIRMATORY_SEEDS = tuple(range(20, 40))  # the power seeds no one had seen when the protocol was fixed
TIERS = {
    # what python paper_figs.py draws by default (the ucr and real_data figures), no dearer than
    # before the study: scratch, spt and qk_transfer at 5 seeds (the baselines only at the study's 10)
    "default": Tier("default", SEEDS_5, SEEDS_5, (), (), SEEDS_10, (), 0, ucr_train_config()),
    # python paper_figs.py --tier study: the powered study (adds the real_gain and archive_scan figures)
    "study": Tier("study", SEEDS_40, SEEDS_10, SEEDS_10, SEEDS_10, SEEDS_10, SEEDS_10, 12, ucr_train_config(),
                  resamples=tuple(range(20)), small_sets=True),
}
RESAMPLE_SEED_BASE = 1000  # resample r trains at seed 1000 + r: apart from every seed of the one-split study
QUICK_TRAIN = TrainConfig(epochs=5, pre_epochs=3, batch_size=8)  # smoke test only


def tier(name: str, quick: bool = False, seeds: Sequence[int] = (0, 1), numerics: str = "eager") -> Tier:
    """The tier ``name``; with ``quick``, a smoke version of it on ``seeds`` with a few epochs
    (and the two cheapest archive sets, where the tier scans the archive)."""
    if name not in TIERS:
        raise ValueError(f"tier: choose one of {tuple(TIERS)}, got {name!r}")
    t = replace(TIERS[name], numerics=numerics)
    if not quick:
        return t
    s = tuple(seeds)
    return replace(t, power_seeds=s, qk_seeds=s, arm_seeds=s if t.arm_seeds else (),
                   positional_seeds=s if t.positional_seeds else (),
                   basin_seeds=s, archive_seeds=s if t.archive_sets else (), archive_sets=min(t.archive_sets, 2),
                   train=QUICK_TRAIN, resamples=(0, 1) if t.resamples else ())


PHASES = ("power", "decomposition", "positional", "archive", "small_sets", "resamples")  # the study's order


def phase_of(facts: tuple) -> int:
    """Which phase of :data:`PHASES` an entry of the study belongs to, from its label's facts
    (``(source, arm, seed)``, ``("archive", source, arm, seed)``, ``("basin", source, seed)``,
    ``("small", source, arm, seed)``, ``("resample", r, source, arm, seed)``, ...): scratch, spt
    and what they read (basin runs, probes) first, then the decomposition and controls (with
    ``qk_transfer``), then the positional arms, then the archive scan, then its excluded small sets,
    then the resampled splits, one resample after another (phase 5 + r: a budget that stops
    early leaves whole resamples, every set's pair)."""
    if facts and facts[0] == "resample":
        return len(PHASES) - 1 + int(facts[1])
    if facts and facts[0] == "small":
        return PHASES.index("small_sets")
    words = {x for x in facts if isinstance(x, str)}
    if "archive" in words:
        return 3
    if words & set(POSITIONAL_ARMS):
        return 2
    return 1 if words & set(DECOMPOSITION + CONTROLS) else 0


@dataclass(frozen=True)
class Study:
    """The real-data study as one figure job sees it: its tier, the paper's sets found (once) and
    those skipped with the reason, its order of phases."""

    tier: Tier  # seeds and training (:func:`tier`)
    datasets: tuple[UCRData, ...]  # the paper's sets found here, loaded
    skipped: dict[str, str]  # the paper's sets not found -> why

    name: ClassVar[str] = "ucr"  # its name in the registry (toyspt.studies.registry)
    ledger: ClassVar[StudyLedger] = LEDGER
    tiers: ClassVar[tuple[str, ...]] = tuple(TIERS)  # the figure job's tiers that run this study
    lockstep: ClassVar[bool] = True  # its runs may train in lockstep groups (one config over seeds)
    figures: ClassVar[tuple[str, ...]] = ("ucr", "real_data", "real_gain", "archive_scan", "archive_small",
                                          "real_gain_splits")
    preregistration: ClassVar[str] = 'docs/reports/ucr.md, "The powered study: protocol"'

    @classmethod
    def found(cls, t: Tier) -> "Study":
        """The study of tier ``t`` on the paper's sets this machine has (:func:`toyspt.ucr.data.available`)."""
        datasets, skipped = available(PAPER_DATASETS)
        return cls(t, tuple(datasets), skipped)

    @classmethod
    def for_tier(cls, name: str, quick: bool = False, seeds: Sequence[int] = (0, 1),
                 numerics: str = "eager") -> "Study":
        """The study of tier ``name`` (:func:`tier`) on the paper's sets found here."""
        return cls.found(tier(name, quick, seeds, numerics))

    @classmethod
    def refuse(cls, quick: bool, seeds, numerics: str, contrast: bool | None) -> None:
        """Every flag of the figure job is honoured by this study's tiers (the toy figures read
        ``--seeds`` and ``--contrast``): nothing to refuse."""

    def label_specs(self, arms: Sequence[str]) -> dict:
        """``(source, arm, seed)`` -> the label run of ``arms`` on every set found, at the tier's seeds,
        and ``("proximity", source, arm, seed)`` -> the cached proximity probe of those that carry one."""
        from toyspt.analysis.rows import probe_specs

        runs = {(UCRSource.of(d), arm, s.seed): s for d, arm, s in paper_specs(list(self.datasets), self.tier, arms)}
        return runs | probe_specs(runs)

    def specs(self) -> dict:
        """``(source, arm, seed)`` -> every label run of the study's arms on the paper's sets, power arms
        first (:func:`paper_specs`), with their proximity probes; the tracked basin runs, the archive
        scan, its small sets and the resampled splits are the figures' own (:func:`basin_specs`, ...)."""
        return self.label_specs(POWER_ARMS + DECOMPOSITION + CONTROLS + POSITIONAL_ARMS)

    def progress(self, ledger) -> dict:
        """How many of :meth:`specs` ``ledger`` records (a spec or one of its alternatives), and their
        CPU-seconds."""
        lines = ledger.lines()
        found = [next((lines[k] for k in (s.key(), *(a.key() for a in s.alternatives())) if k in lines), None)
                 for s in self.specs().values()]
        seconds = sum(float(line.record.get("seconds") or 0.0) for line in found if line is not None)
        return dict(ledger=str(ledger.path), planned=len(found), recorded=sum(line is not None for line in found),
                    cpu_hours=seconds / 3600, skipped=dict(self.skipped))

    @staticmethod
    def describe(progress: dict) -> str:
        """:meth:`progress` in one sentence."""
        return (f"{progress['recorded']} of {progress['planned']} runs on the paper's sets recorded, "
                f"{progress['cpu_hours']:.2f} CPU-hours" + (f"; sets not found: {', '.join(progress['skipped'])}"
                                                            if progress["skipped"] else ""))

    @classmethod
    def pilot(cls, out, quick: bool = False, progress: bool = False, **options) -> None:
        """None: the study had no pilot (its protocol fixed its metric before any run was looked at)."""
        return None

    @staticmethod
    def phase(spec, facts) -> int | None:
        """The phase (:data:`PHASES`) of an entry of the study, from its label's ``facts``; None for
        an entry of other data (not part of the study's order)."""
        from toyspt.runs.ledger import data_kind

        if data_kind(spec) not in KINDS:
            return None
        return phase_of(facts if isinstance(facts, tuple) else (facts,))


def arm_seeds(t: Tier, arm: str) -> tuple[int, ...]:
    """The seeds an arm is trained at on the paper's sets."""
    if arm in POWER_ARMS:
        return t.power_seeds
    if arm == "qk_transfer":
        return t.qk_seeds
    return t.positional_seeds if arm in POSITIONAL_ARMS else t.arm_seeds


def _arm(data: UCRData, arm: str, seed: int, t: Tier) -> RunSpec:
    ev = "all" if arm in EVERY_EPOCH else "peak"
    base = ucr_spec(ucr_run("scratch", train=t.train, evaluate=ev, numerics=t.numerics), data, seed=seed)
    return arm_spec(arm, base)


def paper_specs(datasets: Sequence[UCRData], t: Tier, arms: Sequence[str] | None = None
                ) -> list[tuple[UCRData, str, RunSpec]]:
    """(data set, arm, spec) of the paper's sets at the tier's seeds: power arms first (every
    set), then the decomposition and controls, then the positional arms, so the headline's runs come
    first; ``arms``: only these."""
    groups = (POWER_ARMS, DECOMPOSITION + CONTROLS, POSITIONAL_ARMS)
    return [(d, a, _arm(d, a, s, t)) for g in groups for d in datasets for a in g if arms is None or a in arms
            for s in arm_seeds(t, a)]


def basin_trackers(train: TrainConfig) -> tuple[str, ...]:
    """The basin runs' trackers: the model's beta and proximity index along SPT, recorded after
    the SPT epochs the study reads (:data:`toyspt.analysis.basin.EARLY_EPOCHS` and the last; the
    real_data figure draws beta's trajectory through them) and at the start: recording after
    every epoch made a GunPoint SPT-only run 1.4-3x slower than the run itself."""
    at = sorted({e for e in EARLY_EPOCHS if e <= train.pre_epochs} | {train.pre_epochs})
    when = "/".join(str(e) for e in at)
    return (f"beta:at={when}", f"profile:every=1000,at={when}")


def basin_specs(datasets: Sequence[UCRData], t: Tier) -> list[tuple[UCRData, RunSpec]]:
    """(data set, tracked SPT-only spec) per data set and basin seed; each answers for the
    untracked SPT-only run that its seed's spt and transfer runs continue (its twin)."""
    run = ucr_run("spt_only", train=t.train, evaluate="peak", numerics=t.numerics)
    return [(d, ucr_spec(run, d, seed=s, trackers=basin_trackers(t.train))) for d in datasets for s in t.basin_seeds]


def archive_specs(datasets: Sequence[UCRData], t: Tier) -> list[tuple[UCRData, str, RunSpec]]:
    """(data set, arm, spec) of the archive scan; test is measured where the ``peak`` policy says
    (the archive's test splits are up to 40x the training split)."""
    run = ucr_run("scratch", train=t.train, evaluate="peak", numerics=t.numerics)
    return [(d, a, arm_spec(a, ucr_spec(run, d, seed=s)))
            for d in datasets for a in ARCHIVE_ARMS for s in t.archive_seeds]


def small_specs(datasets: Sequence[UCRData], t: Tier) -> list[tuple[UCRData, str, RunSpec]]:
    """(data set, arm, spec) of the archive's excluded small sets (pass
    ``load_ucr`` of :func:`toyspt.ucr.archive.small_sets`): scratch and spt at the archive
    scan's seeds, evaluated as the scan's runs are (``peak``); none where the tier has no
    small-set stratum. Labels ``("small", source, arm, seed)`` put them in their phase."""
    if not t.small_sets:
        return []
    run = ucr_run("scratch", train=t.train, evaluate="peak", numerics=t.numerics)
    return [(d, a, arm_spec(a, ucr_spec(run, d, seed=s)))
            for d in datasets for a in POWER_ARMS for s in t.archive_seeds]


def resample_seed(resample: int) -> int:
    """The seed of the runs on resampled split ``resample`` (:data:`RESAMPLE_SEED_BASE` + r)."""
    return RESAMPLE_SEED_BASE + resample


def resample_specs(datasets: Sequence[UCRData], t: Tier) -> list[tuple[UCRData, str, int, RunSpec]]:
    """(data set on the archive's split, arm, resample, spec): scratch and spt on every set at
    every resample of the tier, resample by resample, at :func:`resample_seed`."""
    out = []
    for r in t.resamples:
        for d in datasets:
            src = UCRSource.of(d) if r == 0 else UCRSource.of(load_ucr(replace(d.config, resample=r)))
            base = ucr_spec(ucr_run("scratch", train=t.train, evaluate="peak", numerics=t.numerics), src,
                            seed=resample_seed(r))
            out += [(d, a, r, arm_spec(a, base)) for a in POWER_ARMS]
    return out


__all__ = ["KINDS", "LEDGER", "Study", "PHASES", "RESAMPLE_SEED_BASE", "resample_seed", "resample_specs",
           "small_specs", "phase_of", "CONFIRMATORY_SEEDS",
           "POWER_ARMS", "DECOMPOSITION", "CONTROLS", "POSITIONAL_ARMS", "ARCHIVE_ARMS", "EVERY_EPOCH", "PRIMARY",
           "STUDY_METRICS", "basin_trackers", "Tier", "TIERS", "tier", "arm_seeds", "paper_specs", "basin_specs",
           "archive_specs"]
