"""The second LRA study's design, fixed by its pilot (:mod:`toyspt.studies.lra_pilot2`) and written
here before any of its seeds trained. It asks the first study's claims where they can be
answered (:mod:`toyspt.studies.lra_claim_gates`): SPT that learns its reconstruction, every arm
trained out by one stopping rule, validation sets large enough for the margin, and gates that
say "not tested" where a claim could not have failed.

* **Tasks** (:data:`TASKS`): the image task (scikit-learn's digits at 8x8: 1,197 training, 200
  validation, 400 test images, as in the first study; the data set allows no larger validation
  split) and ListOps (32-128 tokens, depth 6, up to 10 arguments; 2,000 training, 2,000 validation
  and 2,000 test trees). PathFinder joins by the rule :data:`PATHFINDER_RULE` once its pilot
  stages have run: a setting where the CNN reference is far above chance and a Transformer arm
  leaves chance, priced within the budget; otherwise its claims are reported "not tested at this
  scale" with the pilot's evidence.
* **Training, one rule for every arm**: AdamW lr 1e-3, weight decay 0.01, batch 64; the label
  phase stops after :data:`PATIENCE` epochs without a higher validation accuracy, at most
  :data:`LABEL_CAP`; SPT stops after :data:`PRE_PATIENCE` epochs whose validation loss is not 0.1%
  below its lowest, at most :data:`SPT_CAP` (the paper ran 200). SPT's loss per task is the one the
  pilot found to beat its context-free constant by the largest fraction (:data:`RECON`): on digits
  MSE (0.42 of its constant, L1 0.54, 256-level cross-entropy 0.78), on ListOps token
  cross-entropy at 10% masking (the LRA SPT code's). The first study's 1-layer model (d 32, one
  head, MLP 64).
* **Arms**, paired by seed from one initialisation: confirmatory, each against scratch
  (:data:`CONFIRMATORY_ARMS`): spt, qk_transfer, frozen_attention; descriptive
  (:data:`DESCRIPTIVE_ARMS`): scratch at SPT's budget (``scratch_matched``: the same rule, a cap of
  SPT's plus the label epochs; where scratch stops before its cap it trains the same epochs),
  no_attention, all_but_qk_transfer. Seeds 0-19 for scratch, spt and qk_transfer, 0-9 for the rest.
* **Tests**: primary metric peak validation accuracy; per claim the exact signed-rank test of arm
  - scratch, Holm over the confirmatory family (tasks x 3 arms) at alpha 0.05; equivalence by TOST,
  Holm-adjusted over the family, within a margin per task of at least twice one evaluation's
  standard error (:data:`MARGINS`: digits ±0.075 on 200 validation images, ListOps ±0.025 on 2,000);
  beside each claimed gain the one-sided t test of "smaller than half the paper's gain". A failed
  gate makes a verdict "not tested: <gate>".
"""
from __future__ import annotations

from dataclasses import replace

from toyspt.kinds import listops as lo
from toyspt.kinds.tasks import DigitsSource, ListOpsSource
from toyspt.runs.arms import arm_spec
from toyspt.runs.specs import RunSpec
from toyspt.studies.lra_pilot import MODEL_1L
from toyspt.train.recipes import TrainConfig

STUDY = 2  # its number in the claims table (the first study is 1)
PATIENCE, LABEL_CAP = 10, 200  # the label rule: epochs without a higher validation accuracy; the cap
PRE_PATIENCE, SPT_CAP = 10, 200  # SPT's rule: epochs without a 0.1% lower validation loss; the cap
RECON = {"image": ("mse", 0.5), "listops": ("ce", 0.1)}  # task -> (SPT loss, masking rate), from the pilot
MARGINS = {"image": 0.075, "listops": 0.025}  # >= 2 x sqrt(0.25 / n_val), rounded up to 0.005
CONFIRMATORY_ARMS = ("spt", "qk_transfer", "frozen_attention")
DESCRIPTIVE_ARMS = ("scratch_matched", "no_attention", "all_but_qk_transfer")
ARMS = {"no_attention": "frozen_attention:qk_init_scale=0"}  # arm name -> arm string (others: the recipe)
MAIN_SEEDS, OTHER_SEEDS = tuple(range(20)), tuple(range(10))
PATHFINDER_RULE = ("the cheapest pilot setting (20,000 or 50,000 training images) where the CNN reference's test "
                   "accuracy is at least 0.70 and some Transformer arm's exceeds chance by the exact McNemar test, "
                   "its runs priced at most 30 CPU-hours for the whole study")
DATA = {
    "image": DigitsSource(side=8),
    "listops": ListOpsSource(lo.ListOpsConfig(max_depth=6, max_args=10, min_len=32, max_len=128), n_train=2000,
                             n_val=2000, n_test=2000),
}


def train_config(task: str) -> TrainConfig:
    """The one rule of every arm on ``task``, with its SPT loss and masking."""
    recon, mask = RECON[task]
    return TrainConfig(epochs=LABEL_CAP, pre_epochs=SPT_CAP, batch_size=64, lr=1e-3, mask_rate=mask, recon=recon,
                       patience=PATIENCE, pre_patience=PRE_PATIENCE)


def study_specs(data: dict | None = None, quick: bool = False, seeds=None) -> dict[tuple[str, str, int], RunSpec]:
    """``(task, arm, seed)`` -> spec of every run, seed by seed (any prefix holds whole paired seeds),
    tasks, then arms (scratch first). ``quick``: the smoke version (tiny data and epochs) at ``seeds``."""
    from toyspt.studies.lra_pilot import tiny

    data = data or DATA
    out = {}
    main, other = (tuple(seeds), tuple(seeds)) if seeds is not None else (MAIN_SEEDS, OTHER_SEEDS)
    for s in sorted(set(main) | set(other)):
        for task, src in data.items():
            train, model = train_config(task), MODEL_1L
            if quick:
                src = tiny(src)
                train = replace(train, epochs=3, pre_epochs=2, batch_size=16, patience=1, pre_patience=1)
                model = replace(model, d_model=8, d_mlp=8)
            base = RunSpec("scratch", seed=s, data=src, model=src.fit(model), train=train, evaluate="peak")
            arms = (["scratch", "spt", "qk_transfer"] if s in main else []) + \
                ([*CONFIRMATORY_ARMS[2:], *DESCRIPTIVE_ARMS] if s in other else [])
            for a in arms:
                out[task, a, s] = arm_spec(ARMS.get(a, a), base)
    return out


def estimate_seconds(pilot: dict[str, dict]) -> dict[str, float]:
    """The study's CPU-seconds per task, from the pilot's measured seconds (``pilot``: task -> its
    ``scratch`` and ``spt_only`` seconds): per main seed scratch, SPT alone and two label phases
    (spt, qk_transfer) priced as scratch; per other seed four label runs priced as scratch. SPT runs
    continue their SPT-only parent, so its seconds are paid once a seed."""
    out = {}
    for task, sec in pilot.items():
        out[task] = len(MAIN_SEEDS) * (3 * sec["scratch"] + sec["spt_only"]) + \
            len(OTHER_SEEDS) * (len(CONFIRMATORY_ARMS) - 2 + len(DESCRIPTIVE_ARMS)) * sec["scratch"]
    return out


__all__ = ["STUDY", "PATIENCE", "LABEL_CAP", "PRE_PATIENCE", "SPT_CAP", "RECON", "MARGINS", "CONFIRMATORY_ARMS",
           "DESCRIPTIVE_ARMS", "ARMS", "MAIN_SEEDS", "OTHER_SEEDS", "PATHFINDER_RULE", "DATA", "train_config",
           "study_specs", "estimate_seconds"]
