"""The pilot of the second LRA study: where can each claim be answered? On seeds of the pilot
range (never used by a study), it asks per task

* which SPT loss learns: SPT alone under L1, MSE and the LRA SPT code's 256-way cross-entropy over
  grey levels (``levels``), each trained to its plateau (``pre_patience`` epochs without a 0.1%
  lower validation loss, at most :data:`SPT_CAP`), and its validation loss against the best
  context-free prediction's (:func:`toyspt.studies.lra_mechanism.constant_recon_loss`): the loss that
  beats its constant by the largest fraction is the task's;
* whether scratch trains out: label training stopped by the one rule every arm will use
  (:data:`PATIENCE` epochs without a higher validation accuracy, at most :data:`LABEL_CAP`);
* for PathFinder, whether the task can be learned at all at 20,000 and 50,000 training images:
  the small CNN (:mod:`toyspt.studies.lra_cnn`) beside the 1- and 2-layer Transformers on the same images;
  then (stage d) SPT and fine-tuning under the loss stage b chose (:func:`chosen_loss`): does SPT lift a
  Transformer off chance where scratch stays there? :func:`pathfinder_rule` applies the second study's
  admission rule (:data:`toyspt.studies.lra2_design.PATHFINDER_RULE`) to the table.

Every run is a spec through one store, a run cache behind a committed ledger
(:data:`LEDGER`), so a pilot that outlives one stretch of work resumes from the ledger. Stages
(:data:`STAGES`) are trained in order, cheapest first. ``toyspt study pilot lra --stages a,b,c,d --out DIR``
(``--cache``, ``--ledger``, ``--workers``; ``--recorded``: the table of what the ledger holds, training
nothing) writes ``pilot2.csv`` and ``pilot2.json`` (one row per run: test accuracy, SPT's loss
against its constant, seconds).
"""
from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pandas as pd

from toyspt.analysis.stats import accuracy_bound
from toyspt.kinds import listops as lo
from toyspt.kinds.pathfinder import PathfinderConfig
from toyspt.kinds.tasks import DigitsSource, ListOpsSource, PathfinderSource
from toyspt.nn.model import ModelConfig
from toyspt.runs.ledger import StudyLedger
from toyspt.runs.specs import RunSpec
from toyspt.studies.lra_cnn import REFERENCE, CNNReferenceSpec
from toyspt.train.recipes import TrainConfig
from toyspt.util.atomic import write_text

SEED = 1000  # the pilot's seed (a study's seeds lie below 1000)
PATIENCE, LABEL_CAP = 10, 200  # label phase: epochs without a higher validation accuracy; the cap
PRE_PATIENCE, SPT_CAP = 10, 200  # SPT: epochs without a 0.1% lower validation loss; the cap
PF_SPT_CAP = 100  # PathFinder's SPT cap in the pilot (an epoch of 20,000 images costs 25 s: the loss is chosen by 100)
LEVELS = 256  # grey levels of the levels loss (the LRA SPT code's PathFinder decoder)
MODEL = ModelConfig(d_model=32, n_heads=1, d_mlp=64, max_len=1025)  # the first study's 1-layer model
TRAIN = TrainConfig(epochs=LABEL_CAP, pre_epochs=SPT_CAP, batch_size=64, lr=1e-3, mask_rate=0.5, recon="l1",
                    patience=PATIENCE, pre_patience=PRE_PATIENCE)
PIXEL_LOSSES = ("l1", "mse", "levels")
KINDS = ("pathfinder", "digits", "listops")
LEDGER = StudyLedger(Path("figures/ledger/lra_pilot2.jsonl"), kinds=KINDS)
CNN = REFERENCE  # the studies' CNN reference (toyspt.studies.lra_cnn)


def pathfinder(n_train: int) -> PathfinderSource:
    """The first study's 16x16 PathFinder with ``n_train`` training images, 2,000 validation and test."""
    return PathfinderSource(PathfinderConfig(), n_train=n_train, n_val=2000, n_test=2000)


DIGITS = DigitsSource(side=8)
LISTOPS = ListOpsSource(lo.ListOpsConfig(max_depth=6, max_args=10, min_len=32, max_len=128), n_train=2000,
                        n_val=2000, n_test=2000)


def _spt(data, recon: str, model: ModelConfig = MODEL) -> RunSpec:
    model = data.fit(replace(model, rec_levels=LEVELS if recon == "levels" else 0))
    mask = 0.1 if recon == "ce" else 0.5  # the LRA SPT code's masking: 10% of tokens, 50% of pixels
    return RunSpec("spt_only", seed=SEED, data=data, model=model, train=replace(TRAIN, recon=recon, mask_rate=mask),
                   evaluate="all")


def _scratch(data, n_layers: int = 1) -> RunSpec:
    return RunSpec("scratch", seed=SEED, data=data, model=data.fit(replace(MODEL, n_layers=n_layers)), train=TRAIN,
                   evaluate="peak")


def stage_specs(stage: str, ledger: Path | None = None) -> dict[str, object]:
    """label -> spec of every run of ``stage`` (a: digits and ListOps; b: PathFinder at 20,000
    images; c: PathFinder at 50,000)."""
    if stage == "a":
        out = {"digits8/scratch": _scratch(DIGITS), "listops128/scratch": _scratch(LISTOPS),
               "listops128/spt_only_ce": _spt(LISTOPS, "ce"), "digits8/cnn": CNNReferenceSpec(DIGITS, SEED, CNN)}
        out.update({f"digits8/spt_only_{r}": _spt(DIGITS, r) for r in PIXEL_LOSSES})
        return out
    if stage == "d":
        return _spt_arm(ledger)
    if stage in ("b", "c"):
        n = 20_000 if stage == "b" else 50_000
        pf, task = pathfinder(n), f"pathfinder16_n{n}"
        out = {f"{task}/cnn": CNNReferenceSpec(pf, SEED, CNN), f"{task}/scratch": _scratch(pf)}
        if stage == "b":
            out[f"{task}/scratch_patience30"] = replace(out[f"{task}/scratch"],
                                                        train=replace(TRAIN, patience=3 * PATIENCE))
            out.update({f"{task}/spt_only_{r}": replace(s, train=replace(s.train, pre_epochs=PF_SPT_CAP))
                        for r in PIXEL_LOSSES for s in [_spt(pf, r)]})
            out[f"{task}/scratch_2layers"] = _scratch(pf, 2)
        return out
    raise ValueError(f"stage: one of {STAGES}, got {stage!r}")


STAGES = ("a", "b", "c", "d")
PF20 = "pathfinder16_n20000"  # stage b's task: PathFinder at 20,000 training images
ALPHA = 0.05  # the admission rule's level
CNN_MIN = 0.70  # the admission rule's CNN test accuracy
BUDGET_HOURS = 30.0  # the admission rule's price of the whole study


def chosen_loss(frame: pd.DataFrame, task: str) -> str | None:
    """The SPT loss of ``task``'s pilot rows whose validation loss is the smallest fraction of its
    constant, if below 1 (SPT learned something from the context); None where none is, or where not
    every loss of :data:`PIXEL_LOSSES` is recorded."""
    rows = frame[(frame.task == task) & frame.arm.isin([f"spt_only_{r}" for r in PIXEL_LOSSES])]
    if len(rows) < len(PIXEL_LOSSES):
        return None
    best = rows.loc[rows.loss_over_constant.idxmin()]
    return str(best.recon) if best.loss_over_constant < 1 else None


def _spt_arm(ledger: Path | None) -> dict:
    """Stage d: SPT then fine-tuning at 20,000 images under the loss stage b chose, continuing
    stage b's SPT-only run of that loss (recorded in the pilot's ``ledger``, default :data:`LEDGER`)."""
    frame = run(("b",), None, None, ledger, recorded=True)
    loss = chosen_loss(frame, PF20)
    if loss is None:
        missing = sorted({f"spt_only_{r}" for r in PIXEL_LOSSES} - set(frame.arm))
        raise ValueError(f"stage d needs stage b's SPT runs recorded ({', '.join(missing) or 'none missing'}) and "
                         "one of them below its constant: run stage b first")
    parent = stage_specs("b")[f"{PF20}/spt_only_{loss}"]
    return {f"{PF20}/spt_{loss}": replace(parent, recipe="spt", evaluate="peak")}


def _price(frame: pd.DataFrame, scratch: float, spt_only: float) -> float:
    """The second study's CPU-hours with PathFinder at a setting whose scratch and SPT-only runs
    took these seconds (:func:`toyspt.studies.lra2_design.estimate_seconds`), the other tasks' added."""
    from toyspt.studies.lra2_design import estimate_seconds

    extra = estimate_seconds({"pathfinder": {"scratch": scratch, "spt_only": spt_only}})["pathfinder"]
    return estimate(frame)["total_hours"] + extra / 3600


def pathfinder_rule(frame: pd.DataFrame) -> dict:
    """The second study's PathFinder admission rule on the pilot's table: per setting (20,000 and
    50,000 images), the CNN's test accuracy against :data:`CNN_MIN`; each Transformer arm's test
    accuracy at its validation peak against the majority class (the largest exact McNemar p its
    accuracy allows, :func:`toyspt.analysis.stats.accuracy_bound`; Holm over the setting's arms); the
    study's price with PathFinder at that setting (``study_hours_at_least`` while SPT's seconds are not
    measured: ``priced_out`` where even that is over :data:`BUDGET_HOURS`). ``admitted``: the cheapest
    setting passing all three; ``pending`` names the runs of each setting the table lacks (the verdict
    may change with them)."""
    from toyspt.analysis.multiplicity import holm

    out, pending = {}, []
    for n, stage in ((20_000, "b"), (50_000, "c")):
        task = f"pathfinder16_n{n}"
        rows = frame[frame.task == task]
        want = [k.split("/")[1] for k in stage_specs(stage)]
        loss = chosen_loss(frame, PF20)
        want += [f"spt_{loss}"] if n == 20_000 and loss is not None else []  # stage d
        missing = [a for a in want if a not in set(rows.arm)]
        if missing:
            pending.append(f"{task}: {', '.join(missing)}")
        cnn = rows[rows.model == "cnn"]
        arms = rows[rows.model.str.startswith("transformer") & ~rows.arm.str.startswith("spt_only")]
        if cnn.empty or arms.empty:
            continue
        p = [accuracy_bound(a, t, m) for a, t, m in zip(arms.test_at_peak, arms.n_test, arms.majority_count)]
        adj = dict(zip(arms.arm, holm(p)))
        loss = chosen_loss(frame, task) or chosen_loss(frame, PF20)
        scratch, spt = rows.seconds[rows.arm == "scratch"], rows.seconds[rows.arm == f"spt_only_{loss}"]
        hours = at_least = None
        if len(scratch):
            at_least = _price(frame, float(scratch.iloc[0]), 0.0)  # SPT's seconds not measured yet count as none
            hours = _price(frame, float(scratch.iloc[0]), float(spt.iloc[0])) if len(spt) else None
        cnn_acc = float(cnn.test_at_peak.iloc[0])
        out[task] = dict(cnn_test=cnn_acc, cnn_ok=cnn_acc >= CNN_MIN, arms_p_holm=adj,
                         off_chance=sorted(a for a, q in adj.items() if q <= ALPHA), spt_loss=loss,
                         study_hours=hours, study_hours_at_least=at_least,
                         priced_ok=hours is not None and hours <= BUDGET_HOURS,
                         priced_out=at_least is not None and at_least > BUDGET_HOURS)
    ok = [t for t, v in out.items() if v["cnn_ok"] and v["off_chance"] and v["priced_ok"]]
    return dict(admitted=bool(ok), setting=ok[0] if ok else None, settings=out, pending=pending)


def row(label: str, spec, entry) -> dict:
    """One row per pilot run: what the choices read."""
    from toyspt.studies.lra_mechanism import constant_recon_loss

    task, arm = label.split("/")
    base = dict(task=task, arm=arm, seed=SEED, data=spec.data.name, n_train=spec.data.n_train
                if hasattr(spec.data, "n_train") else len(spec.data.load().train), seconds=entry.seconds)
    if isinstance(spec, CNNReferenceSpec):
        return dict(base, model="cnn", **{k: v for k, v in entry.details.items() if k != "cnn_version"})
    s, d = entry.summary, spec.data.load()
    count = int(d.test.y.bincount().max())
    recon = spec.train.recon if spec.recipe in ("spt_only", "spt") else ""
    base.update(model=f"transformer {spec.model.n_layers}L", recon=recon, majority_test=count / len(d.test.y),
                majority_count=count, n_test=len(d.test.y))
    if spec.recipe == "spt_only":
        const = constant_recon_loss(d.train.x, d.val.x, spec.train.recon, LEVELS)
        last = s["final_recon_val_loss"]
        return dict(base, spt_val_loss=last, constant_loss=const, loss_over_constant=last / const,
                    spt_epochs=s["spt_epochs"], spt_plateaued=s["spt_plateaued"])
    return dict(base, peak_val_acc=s["peak_val_acc"], test_at_peak=s["test_at_peak"], peak_epoch=s["peak_epoch"],
                final_test_acc=s["final_test_acc"], stop_epoch=s["stop_epoch"], stopped_early=s["stopped_early"])


def run(stages, out: Path | None, cache: Path | None, ledger: Path | None, workers: int = 1,
        recorded: bool = False) -> pd.DataFrame:
    """Train (or read) every run of ``stages`` through the cache and the ledger; write the table.
    ``recorded``: train nothing, the table of the runs the ledger records (a pilot under way)."""
    from toyspt.runs.cache import RunCache
    from toyspt.runs.store import layered
    from toyspt.runs.sweeps import SweepOptions, sweep

    specs, built = {}, []
    for st in stages:
        try:
            specs.update(stage_specs(st, ledger))
            built.append(st)
        except ValueError as e:  # the table of recorded runs says so and goes on; training stops here
            if not (recorded and st == "d"):
                raise
            print(f"lra pilot 2: no stage d in the table: {e}", file=sys.stderr)
    if recorded and not Path(ledger or LEDGER.path).is_file():
        raise ValueError(f"{ledger or LEDGER.path}: no such ledger file")
    book = LEDGER.open(ledger, tier="pilot2")
    if recorded:
        found = {k: (s, book.load(s)) for k, s in specs.items()}
        specs = {k: s for k, (s, e) in found.items() if e is not None}
        entries = [found[k][1] for k in specs]
        if not specs:
            raise ValueError(f"{ledger or LEDGER.path}: records no run of stages {', '.join(built)}")
    else:
        store = layered(RunCache(cache) if cache else RunCache(), book)
        entries = sweep(list(specs.values()), store, SweepOptions(workers=workers, progress=True, desc="lra pilot 2"))
    frame = pd.DataFrame([row(k, s, e) for (k, s), e in zip(specs.items(), entries)])
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        write_text(out / "pilot2.csv", frame.to_csv(index=False, float_format="%.6g"))
        meta = dict(seed=SEED, patience=PATIENCE, label_cap=LABEL_CAP, pre_patience=PRE_PATIENCE, spt_cap=SPT_CAP,
                    stages=built, estimate=estimate(frame),
                    pathfinder_rule=pathfinder_rule(frame), keys={k: s.key() for k, s in specs.items()},
                    runs={k: {c: v for c, v in r.items() if c not in ("task", "arm")}
                          for k, r in zip(specs, frame.to_dict("records"))})
        write_text(out / "pilot2.json", json.dumps(meta, indent=1, default=str).replace("NaN", "null") + "\n")
    return frame


STUDY_TASKS = {"image": ("digits8", "mse"), "listops": ("listops128", "ce")}  # study 2's task -> pilot task, loss


def estimate(frame: pd.DataFrame) -> dict:
    """The second study's cost from the pilot's seconds (:func:`toyspt.studies.lra2_design.estimate_seconds`),
    per task and in all, in CPU-hours; tasks whose pilot runs are not all recorded are left out."""
    from toyspt.studies.lra2_design import estimate_seconds

    got = {}
    for task, (pilot, recon) in STUDY_TASKS.items():
        sec = {a: frame.seconds[(frame.task == pilot) & (frame.arm == name)]
               for a, name in (("scratch", "scratch"), ("spt_only", f"spt_only_{recon}"))}
        if all(len(v) == 1 for v in sec.values()):
            got[task] = {a: float(v.iloc[0]) for a, v in sec.items()}
    hours = {t: v / 3600 for t, v in estimate_seconds(got).items()}
    return dict(hours=hours, total_hours=sum(hours.values()), from_seconds=got)
