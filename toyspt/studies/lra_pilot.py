"""The pilot of the LRA study (issue 43, item 4): a few short runs per task, on seeds of the
pilot range (:data:`PILOT_SEEDS`, never used by the study), that fix the sizes, difficulty and
epochs before any confirmatory seed trains (docs/reports/lra.md, "Pilot").

Every pilot run is a :class:`toyspt.runs.specs.RunSpec` of a data kind of
:mod:`toyspt.kinds.tasks`, trained by the toolkit's one trainer through the run cache
(``toyspt study pilot lra --out DIR``; ``--quick``: tiny sizes for the tests). What it
reports per run: the paper's primary metric (peak held-out validation accuracy), the toolkit's
(mean test accuracy over the last fifth of label epochs), the final training accuracy, and for
SPT its reconstruction loss at the start and end of pretraining and the relative change over its
last fifth of epochs (``spt_tail_change``: converged when it is small).
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, replace
from pathlib import Path

import pandas as pd

from toyspt.kinds import listops as lo
from toyspt.kinds.pathfinder import PathfinderConfig
from toyspt.kinds.tasks import PIXEL_TRAIN, TOKEN_TRAIN, DigitsSource, ListOpsSource, PathfinderSource
from toyspt.nn.model import ModelConfig
from toyspt.runs.specs import RunSpec
from toyspt.train.evaluation import tail
from toyspt.train.recipes import TrainConfig

PILOT_SEEDS = (1000, 1001)  # the pilot's seeds; the study's seeds lie below 1000 and never reuse these
MODEL_1L = ModelConfig(d_model=32, n_heads=1, d_mlp=64, max_len=1025)  # the LRA architecture, 1 layer, d = 32
PF = PathfinderSource(PathfinderConfig(), n_train=2000, n_val=500, n_test=1000)  # 16px, 6 dashes
PF_MORE = replace(PF, n_train=4000)
LISTOPS_SHORT = ListOpsSource(lo.ListOpsConfig(max_depth=6, max_args=10, min_len=32, max_len=128), n_train=2000,
                              n_val=500, n_test=1000)
EPOCHS = dict(epochs=30, pre_epochs=20, batch_size=64, lr=1e-3)


PF_CLEAN = replace(PF_MORE, pathfinder=replace(PF.pathfinder, n_distractors=0))
WIDE = dict(d_model=64, n_heads=4, d_mlp=128)  # LRA's small PathFinder width (d 128, 4 heads) halved
# stage 2 (after stage 1 left PathFinder at chance for scratch and SPT alike): what makes it learnable?
STAGE2 = [  # (task label, data, train settings, arms, seeds, model changes)
    ("pathfinder16_n4000_d64h4", PF_MORE, PIXEL_TRAIN, ("scratch",), PILOT_SEEDS[:1], WIDE),
    ("pathfinder16_n4000_2layers", PF_MORE, PIXEL_TRAIN, ("scratch",), PILOT_SEEDS[:1], dict(n_layers=2)),
    ("pathfinder16_n4000_nodistractors", PF_CLEAN, PIXEL_TRAIN, ("scratch",), PILOT_SEEDS[:1], {}),
    ("pathfinder16_n4000", PF_MORE, PIXEL_TRAIN, ("scratch_matched",), PILOT_SEEDS[:1], {}),
    ("pathfinder16_n4000_lr3e-3", PF_MORE, dict(PIXEL_TRAIN, lr=3e-3), ("scratch",), PILOT_SEEDS[:1], {}),
]


def pilot_specs(quick: bool = False, stage: int = 1) -> dict[str, RunSpec]:
    """label -> spec of every pilot run of ``stage`` (``quick``: the same design at tiny sizes)."""
    plan = STAGE2 if stage == 2 else [  # (task label, data, train settings, arms, seeds[, model changes])
        ("digits8", DigitsSource(side=8), PIXEL_TRAIN, ("scratch", "spt"), PILOT_SEEDS),
        ("pathfinder16_n2000", PF, PIXEL_TRAIN, ("scratch", "spt"), PILOT_SEEDS),
        ("listops128_m10", LISTOPS_SHORT, TOKEN_TRAIN, ("scratch", "spt"), PILOT_SEEDS),
        ("listops128_m50", LISTOPS_SHORT, dict(TOKEN_TRAIN, mask_rate=0.5), ("spt",), PILOT_SEEDS),
        ("digits16", DigitsSource(side=16), PIXEL_TRAIN, ("scratch", "spt"), PILOT_SEEDS[:1]),
        ("pathfinder16_n4000", PF_MORE, PIXEL_TRAIN, ("scratch", "spt"), PILOT_SEEDS[:1]),
    ]
    out = {}
    for task, data, train, arms, seeds, *changes in plan:
        epochs = EPOCHS
        model = replace(MODEL_1L, **(changes[0] if changes else {}))
        if quick:
            data = tiny(data)
            epochs = dict(EPOCHS, epochs=2, pre_epochs=1, batch_size=16)
            model = replace(model, d_model=8, d_mlp=8, n_heads=min(model.n_heads, 2))
        model = data.fit(model)
        for arm in arms:
            for s in seeds:
                out[f"{task}/{arm}/{s}"] = RunSpec(arm, seed=s, data=data, model=model,
                                                   train=TrainConfig(**{**epochs, **train}), evaluate="peak")
    return out


def tiny(data):
    """``data`` at the pilot's and the study's smoke-test sizes (seconds per run)."""
    if isinstance(data, DigitsSource):
        return replace(data, n_val=40, n_test=40)
    if isinstance(data, PathfinderSource):
        return replace(data, pathfinder=replace(data.pathfinder, size=8, origin_distance=3.0, contour_length=2,
                                                n_distractors=1, distractor_length=1, dash_length=1.5),
                       n_train=64, n_val=32, n_test=32)
    return replace(data, listops=lo.ListOpsConfig(max_depth=3, max_args=4, min_len=8, max_len=24), n_train=64,
                   n_val=32, n_test=32)


def summary_row(label: str, spec: RunSpec, result) -> dict:
    """One row per pilot run: the metrics the choices read."""
    task, arm, seed = label.split("/")
    s = result.summary
    val_y = spec.data.load().val.y
    row = dict(task=task, arm=arm, seed=int(seed), data=spec.data.name,
               majority_val=float(val_y.bincount().max()) / len(val_y), d_model=spec.model.d_model,
               n_heads=spec.model.n_heads, n_layers=spec.model.n_layers, label_epochs=sum(
                   h["phase"] == "finetune" for h in result.history), n_train=len(spec.data.load().train),
               mask_rate=spec.train.mask_rate, peak_val_acc=s["peak_val_acc"], mean_test_last20=s["mean_test_last20"],
               final_train_acc=s["final_train_acc"], seconds=result.seconds)
    pre = [h["val_loss"] for h in result.history if h["phase"] == "pretrain"]
    if pre:
        k = tail(len(pre))
        row.update(spt_val_loss_first=pre[0], spt_val_loss_last=pre[-1],
                   spt_tail_change=(pre[-1] - pre[-k - 1]) / abs(pre[-k - 1]) if len(pre) > k else float("nan"))
    return row


def run_pilot(out: Path | None, quick: bool = False, store=None, progress: bool = False,
              stages: tuple[int, ...] = (1, 2)) -> pd.DataFrame:
    """Train (or read from ``store``, default: the run cache) every pilot run of ``stages``; write
    ``pilot.csv`` and ``pilot.json`` to ``out``."""
    from toyspt.runs import RunCache
    from toyspt.runs.sweeps import SweepOptions, sweep

    specs = {}
    for st in stages:
        specs.update({f"{k}": v for k, v in pilot_specs(quick, st).items()})
    t0 = time.perf_counter()
    store = store if store is not None else RunCache()
    results = sweep(list(specs.values()), store, SweepOptions(progress=progress, desc="lra pilot"))
    frame = pd.DataFrame([summary_row(k, s, r) for (k, s), r in zip(specs.items(), results)])
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        frame.to_csv(out / "pilot.csv", index=False, float_format="%.6g")
        meta = dict(seeds=list(PILOT_SEEDS), epochs=EPOCHS, model=asdict(MODEL_1L), quick=quick,
                    wall_seconds=time.perf_counter() - t0, run_seconds=float(frame["seconds"].fillna(0).sum()),
                    run_minutes=float(frame["seconds"].fillna(0).sum()) / 60,
                    keys={k: s.key() for k, s in specs.items()},
                    runs={k: {c: v for c, v in row.items() if c not in ("task", "arm", "seed", "data")}
                          for k, row in zip(specs, frame.to_dict("records"))})
        (out / "pilot.json").write_text(_json(meta))
    return frame


def _json(meta: dict) -> str:
    """JSON text with NaN written as null."""
    def clean(v):
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        if isinstance(v, list):
            return [clean(x) for x in v]
        return None if isinstance(v, float) and v != v else v
    return json.dumps(clean(meta), indent=1) + "\n"


def markdown_table(frame: pd.DataFrame) -> str:
    """The pilot's runs as the Markdown table docs/reports/lra.md holds (rendered from
    figures/studies/lra/pilot.csv by :mod:`toyspt.figs.reports`, never typed)."""
    cols = ["task", "arm", "seed", "n_train", "majority_val", "d_model", "n_heads", "n_layers",
            "label_epochs", "mask_rate",
            "peak_val_acc", "mean_test_last20", "final_train_acc",
            "spt_val_loss_first", "spt_val_loss_last", "spt_tail_change", "seconds"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in frame.to_dict("records"):
        cells = []
        for c in cols:
            v = r.get(c)
            if isinstance(v, float):
                cells.append("" if v != v else f"{v:.0f}" if c == "seconds" else f"{v:.3f}")
            else:
                cells.append(str(v))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
