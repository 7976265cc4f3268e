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
  the small CNN (:mod:`toyspt.studies.lra_cnn`) beside the 1- and 2-layer Transformers on the same images.

Every run is a spec through one store, a run cache behind a committed ledger
(:data:`LEDGER`), so a pilot that outlives one stretch of work resumes from the ledger. Stages
(:data:`STAGES`) are trained in order, cheapest first. ``python -m toyspt.studies.lra_pilot2 --out DIR``
writes ``lra_pilot2.csv`` and ``lra_pilot2.json`` (one row per run: test accuracy, SPT's loss
against its constant, seconds).
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import pandas as pd

from toyspt.kinds import listops as lo
from toyspt.kinds.pathfinder import PathfinderConfig
from toyspt.kinds.tasks import DigitsSource, ListOpsSource, PathfinderSource
from toyspt.nn.model import ModelConfig
from toyspt.runs.ledger import StudyLedger
from toyspt.runs.specs import RunSpec
from toyspt.studies.lra_cnn import REFERENCE, CNNReferenceSpec
from toyspt.train.recipes import TrainConfig

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


def stage_specs(stage: str) -> dict[str, object]:
    """label -> spec of every run of ``stage`` (a: digits and ListOps; b: PathFinder at 20,000
    images; c: PathFinder at 50,000)."""
    if stage == "a":
        out = {"digits8/scratch": _scratch(DIGITS), "listops128/scratch": _scratch(LISTOPS),
               "listops128/spt_only_ce": _spt(LISTOPS, "ce"), "digits8/cnn": CNNReferenceSpec(DIGITS, SEED, CNN)}
        out.update({f"digits8/spt_only_{r}": _spt(DIGITS, r) for r in PIXEL_LOSSES})
        return out
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


STAGES = ("a", "b", "c")


def row(label: str, spec, entry) -> dict:
    """One row per pilot run: what the choices read."""
    from toyspt.studies.lra_mechanism import constant_recon_loss

    task, arm = label.split("/")
    base = dict(task=task, arm=arm, seed=SEED, data=spec.data.name, n_train=spec.data.n_train
                if hasattr(spec.data, "n_train") else len(spec.data.load().train), seconds=entry.seconds)
    if isinstance(spec, CNNReferenceSpec):
        return dict(base, model="cnn", **{k: v for k, v in entry.details.items() if k != "cnn_version"})
    s, d = entry.summary, spec.data.load()
    base.update(model=f"transformer {spec.model.n_layers}L", recon=spec.train.recon if spec.recipe == "spt_only"
                else "", majority_test=float(d.test.y.bincount().max()) / len(d.test.y))
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

    specs = {k: v for st in stages for k, v in stage_specs(st).items()}
    book = LEDGER.open(ledger, tier="pilot2")
    if recorded:
        found = {k: (s, book.load(s)) for k, s in specs.items()}
        specs = {k: s for k, (s, e) in found.items() if e is not None}
        entries = [found[k][1] for k in specs]
    else:
        store = layered(RunCache(cache) if cache else RunCache(), book)
        entries = sweep(list(specs.values()), store, SweepOptions(workers=workers, progress=True, desc="lra pilot 2"))
    frame = pd.DataFrame([row(k, s, e) for (k, s), e in zip(specs.items(), entries)])
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        frame.to_csv(out / "lra_pilot2.csv", index=False, float_format="%.6g")
        meta = dict(seed=SEED, patience=PATIENCE, label_cap=LABEL_CAP, pre_patience=PRE_PATIENCE, spt_cap=SPT_CAP,
                    stages=list(stages), estimate=estimate(frame), keys={k: s.key() for k, s in specs.items()},
                    runs={k: {c: v for c, v in r.items() if c not in ("task", "arm")}
                          for k, r in zip(specs, frame.to_dict("records"))})
        (out / "lra_pilot2.json").write_text(json.dumps(meta, indent=1, default=str).replace("NaN", "null") + "\n")
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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m toyspt.studies.lra_pilot2", description=__doc__.splitlines()[0])
    p.add_argument("--stages", default=",".join(STAGES), help=f"which stages, in order ({', '.join(STAGES)})")
    p.add_argument("--out", type=Path, default=None, help="folder for lra_pilot2.csv and lra_pilot2.json")
    p.add_argument("--cache", type=Path, default=None, help="the run cache's folder (default: TOYSPT_CACHE)")
    p.add_argument("--ledger", type=Path, default=None, help=f"the pilot's ledger (default: {LEDGER.path})")
    p.add_argument("--workers", type=int, default=1, help="training processes")
    p.add_argument("--recorded", action="store_true", help="train nothing: the table of the runs the ledger records")
    args = p.parse_args(argv)
    stages = tuple(args.stages.split(","))
    bad = [s for s in stages if s not in STAGES]
    if bad:
        p.error(f"--stages: unknown {bad[0]!r}; known: {', '.join(STAGES)}")
    frame = run(stages, args.out, args.cache, args.ledger, args.workers, args.recorded)
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(frame.to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
