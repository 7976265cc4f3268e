"""The recipe table: what each training recipe does, read by the training loop.

A recipe is a row of :data:`TABLE`: whether it runs a self-pretraining (SPT) phase and on
which data, which parameters the label phase takes from the SPT weights, whether W_Q/W_K
are frozen, and how many label epochs it trains. :mod:`toyspt.train.run` (a recipe on
K >= 1 seeds) reads this table, :class:`TrainConfig` and the optimizer factory below, so
adding a recipe is one row here (plus its test).

``E`` = ``TrainConfig.epochs``, ``E_pre`` = ``TrainConfig.pre_epochs``:

* ``scratch``: labels for E epochs from the seed's random init.
* ``spt``: masked reconstruction for E_pre epochs on the training inputs, then labels for
  E epochs; everything but the heads is transferred (the classifier starts at the seed's
  scratch init).
* ``scratch_matched``: labels for E_pre + E epochs (same total budget as ``spt``).
* ``qk_transfer``: only W_Q, W_K (weights and biases) from the SPT run of the same seed,
  every other weight the seed's scratch init; then labels for E epochs.
* ``all_but_qk_transfer``: the complement: everything from SPT but W_Q, W_K and the heads.
* ``vo_transfer``, ``embed_transfer``, ``mlp_transfer``, ``norm_transfer``: only one weight group
  (:data:`toyspt.nn.model.GROUPS`: W_V and W_O; the embedding and the absolute positional
  table; the blocks' MLPs; the LayerNorms) from SPT, the rest the seed's scratch init. A model
  without the group (no MLP, no positional table) is refused by name.
* ``spt_norms``: the seed's scratch init with every non-head tensor rescaled to the norm of its
  SPT counterpart (SPT's scale, random directions; a tensor whose init is zero takes a seeded
  Gaussian direction); ``spt_permuted``: SPT's weights with each tensor's entries permuted
  (SPT's scale and values, content destroyed). Controls that separate what SPT's weights
  carry from the scale they have.
* ``frozen_attention``: W_Q, W_K fixed at their random init; labels for E epochs.
* ``data_swap``: SPT on ``pretrain_data`` (another family or seed), then as ``spt``.
* ``spt_only``: the SPT phase alone (E_pre epochs, no label phase): what the basin of SPT
  is, without paying for fine-tuning. Its "final" weights are the pretrained ones.
* ``spt_swap_start``: SPT whose first ``swap_epochs`` epochs run on ``pretrain_data`` (e.g.
  the task with a per-sequence offset) and the remaining E_pre - swap_epochs on the task's
  own inputs, one optimizer throughout; then as ``spt``. Started in the proximity basin,
  does SPT stay there on the task's own data?

Recipes whose run begins with another recipe's entire run name it in ``starts_from``:
``spt`` and every transfer recipe begin with the SPT phase of
``spt_only`` (same seed and configs: same weights, masks and data order), and
``scratch_matched`` with the E label epochs of ``scratch`` (then E_pre more, same
optimizer). A run may continue from that run's stored end state (weights, optimizer state,
generator state) instead of recomputing it, with bitwise the same result
(``toyspt.train.run.run_recipe(start=...)``; the run cache does this by itself).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import torch
from torch import nn

from toyspt.nn.model import GROUPS, SPT_ATTENTION, ModelConfig, group_param_names, head_param_names, missing_group
from toyspt.util.validation import MAX_COUNT, Float, Int, Text, validate, validated

# largest learning rate / weight decay: an AdamW step moves each weight by about lr, so at 100
# a few steps put weights (and logits, their products) past what float32 training survives
MAX_LR = 100.0

# no SPT phase / the task's own inputs / pretrain_data / pretrain_data first, then the task's inputs
PRETRAIN_ON = (None, "task", "swap", "swap_then_task")
# what the label phase keeps from SPT (heads never): nothing, everything, one weight group of
# toyspt.nn.model.GROUPS, or everything but W_Q, W_K
KEEP = ("none", "all", *GROUPS, "all_but_qk")
# what is done to the kept SPT weights before the label phase: nothing; "norms": the seed's
# scratch init rescaled, tensor by tensor, to the SPT weights' Frobenius norms (SPT's scale,
# random directions); "permute": each SPT tensor's entries permuted at random (SPT's scale and
# values, their arrangement destroyed)
TRANSFORMS = (None, "norms", "permute")
OPTIMIZERS = ("adamw", "sgd")
RECON_LOSSES = ("l1", "mse", "ce", "levels")  # SPT losses (toyspt.data.tasks.recon_loss)
# SPT's plateau: an epoch improves on the lowest validation loss only by more than this fraction of it
PLATEAU_TOL = 1e-3


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = validated(60, Int(gt=0, le=MAX_COUNT))  # label (fine-tuning) epochs
    # SPT epochs; scratch_matched trains pre_epochs + epochs with labels
    pre_epochs: int = validated(30, Int(ge=0, le=MAX_COUNT))
    batch_size: int = validated(64, Int(gt=0, le=MAX_COUNT))  # minibatch size in both phases
    lr: float = validated(1e-3, Float(gt=0, le=MAX_LR))  # learning rate of the label phase
    # learning rate of the SPT phase; None = lr
    pre_lr: float | None = validated(None, Float(gt=0, le=MAX_LR, optional=True))
    weight_decay: float = validated(0.01, Float(ge=0, le=MAX_LR))  # decoupled (AdamW) or L2 (SGD) weight decay
    optimizer: str = validated("adamw", Text(OPTIMIZERS))  # adamw | sgd
    momentum: float = validated(0.9, Float(ge=0, lt=1))  # SGD momentum
    # SPT: each position masked i.i.d. with this probability
    mask_rate: float = validated(0.5, Float(gt=0, le=1))
    # SPT loss on masked positions: l1 | mse | ce (token tasks: cross-entropy against one-hot inputs)
    # | levels (cross-entropy over the model's rec_levels grey levels of each value in [-1, 1])
    recon: str = validated("l1", Text(RECON_LOSSES))
    # SPT: what masked queries attend to: all | no_masked_keys | no_self
    spt_attention: str = validated("all", Text(SPT_ATTENTION))
    # spt_swap_start: SPT epochs on pretrain_data before the task's own inputs
    swap_epochs: int = validated(3, Int(ge=0, le=MAX_COUNT))
    # label phase: stop after this many epochs without a higher validation accuracy (epochs is then
    # the cap); None: train every epoch. Runs with a stopping rule train alone, not in lockstep
    patience: int | None = validated(None, Int(gt=0, le=MAX_COUNT, optional=True), later=True)
    # SPT: stop after this many epochs whose validation loss is not PLATEAU_TOL below the lowest so
    # far (pre_epochs is then the cap); None: train every SPT epoch
    pre_patience: int | None = validated(None, Int(gt=0, le=MAX_COUNT, optional=True), later=True)

    def __post_init__(self):
        validate(self)

    @property
    def stops(self) -> bool:
        """Whether a phase may end before its cap (a stopping rule is set)."""
        return self.patience is not None or self.pre_patience is not None


@dataclass(frozen=True)
class Recipe:
    """One training recipe (a row of :data:`TABLE`)."""

    name: str  # the recipe's name (RunSpec.recipe)
    pretrain_on: str | None = None  # SPT data: None (no SPT), "task" or "swap" (pretrain_data)
    keep: str = "none"  # parameters taken from the SPT weights: none | all | qk | all_but_qk
    freeze_qk: bool = False  # W_Q, W_K (weights and biases) fixed during the label phase
    transform: str | None = None  # what is done to the kept SPT weights: one of TRANSFORMS
    matched_budget: bool = False  # label phase trains pre_epochs + epochs (SPT's total budget)
    label_phase: bool = True  # False: the run ends after SPT (its final weights = pretrained)
    starts_from: str | None = None  # the recipe whose whole run is this one's beginning

    def __post_init__(self):
        if self.pretrain_on not in PRETRAIN_ON:
            raise ValueError(f"recipe {self.name}: pretrain_on must be one of {PRETRAIN_ON}")
        if self.keep not in KEEP:
            raise ValueError(f"recipe {self.name}: keep must be one of {KEEP}")
        if (self.pretrain_on is None) != (self.keep == "none"):
            raise ValueError(f"recipe {self.name}: keep={self.keep!r} needs an SPT phase and vice versa")
        if self.transform not in TRANSFORMS:
            raise ValueError(f"recipe {self.name}: transform must be one of {TRANSFORMS}")
        if self.transform is not None and self.keep == "none":
            raise ValueError(f"recipe {self.name}: transform {self.transform!r} needs kept SPT weights")
        if not self.label_phase and self.pretrain_on is None:
            raise ValueError(f"recipe {self.name}: a recipe without label phase needs an SPT phase")

    @property
    def needs_swap(self) -> bool:
        """Whether the recipe pretrains (in part) on ``pretrain_data``."""
        return self.pretrain_on in ("swap", "swap_then_task")

    def spt_schedule(self, cfg: TrainConfig) -> list[str]:
        """Per SPT epoch, which data it runs on: "swap" or "task"."""
        if self.pretrain_on is None:
            return []
        if self.pretrain_on == "swap_then_task":
            if cfg.swap_epochs > cfg.pre_epochs:
                raise ValueError(f"recipe {self.name}: swap_epochs={cfg.swap_epochs} exceeds "
                                 f"pre_epochs={cfg.pre_epochs}")
            return ["swap"] * cfg.swap_epochs + ["task"] * (cfg.pre_epochs - cfg.swap_epochs)
        return [self.pretrain_on] * cfg.pre_epochs

    @property
    def pretrains(self) -> bool:
        return self.pretrain_on is not None

    def label_epochs(self, cfg: TrainConfig) -> int:
        """Epochs of the label phase."""
        if not self.label_phase:
            return 0
        return cfg.epochs + (cfg.pre_epochs if self.matched_budget else 0)

    def check_model(self, cfg: ModelConfig) -> None:
        """Refuse, by name, a model that lacks the weight group this recipe transfers."""
        if self.keep in GROUPS and (why := missing_group(cfg, self.keep)) is not None:
            raise ValueError(f"recipe {self.name} transfers weight group {self.keep!r}, but {why}")

    def transferred(self, model: nn.Module) -> list[str]:
        """Parameters the label phase takes from the SPT weights (state-dict order)."""
        if self.keep == "none":
            return []
        if self.keep in GROUPS:
            return group_param_names(model, self.keep)
        qk, heads = set(group_param_names(model, "qk")), set(head_param_names(model))
        names = [n for n, _ in model.named_parameters() if n not in heads]
        if self.keep == "all_but_qk":
            return [n for n in names if n not in qk]
        return names

    def frozen(self, model: nn.Module) -> set[str]:
        """Parameters fixed during the label phase."""
        return set(group_param_names(model, "qk")) if self.freeze_qk else set()


TABLE: dict[str, Recipe] = {r.name: r for r in (
    Recipe("scratch"),
    Recipe("spt", pretrain_on="task", keep="all", starts_from="spt_only"),
    Recipe("scratch_matched", matched_budget=True, starts_from="scratch"),
    Recipe("qk_transfer", pretrain_on="task", keep="qk", starts_from="spt_only"),
    Recipe("all_but_qk_transfer", pretrain_on="task", keep="all_but_qk", starts_from="spt_only"),
    Recipe("vo_transfer", pretrain_on="task", keep="vo", starts_from="spt_only"),
    Recipe("embed_transfer", pretrain_on="task", keep="embed", starts_from="spt_only"),
    Recipe("mlp_transfer", pretrain_on="task", keep="mlp", starts_from="spt_only"),
    Recipe("norm_transfer", pretrain_on="task", keep="norm", starts_from="spt_only"),
    Recipe("spt_norms", pretrain_on="task", keep="all", transform="norms", starts_from="spt_only"),
    Recipe("spt_permuted", pretrain_on="task", keep="all", transform="permute", starts_from="spt_only"),
    Recipe("frozen_attention", freeze_qk=True),
    Recipe("data_swap", pretrain_on="swap", keep="all"),
    Recipe("spt_only", pretrain_on="task", keep="all", label_phase=False),
    Recipe("spt_swap_start", pretrain_on="swap_then_task", keep="all"),
)}
RECIPES = tuple(TABLE)  # recipe names, in table order
PRETRAINED = tuple(n for n, r in TABLE.items() if r.pretrains)


def get_recipe(name: str) -> Recipe:
    """The table row of ``name``; a clear error for an unknown recipe."""
    try:
        return TABLE[name]
    except KeyError:
        raise ValueError(f"recipe: unknown {name!r}; choose one of {RECIPES}") from None


def make_optimizer(params: Iterable[torch.Tensor], cfg: TrainConfig, lr: float,
                   fused: bool = False) -> torch.optim.Optimizer:
    """The optimizer of the training loop: AdamW or SGD with momentum, with ``cfg``'s
    settings, over the parameters that require a gradient: torch's default implementation,
    or with ``fused`` its fused kernels (the compiled numerics path)."""
    params = [p for p in params if p.requires_grad]
    kw = dict(fused=True) if fused else {}
    if cfg.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=lr, weight_decay=cfg.weight_decay, **kw)
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay, **kw)
    raise ValueError(f"optimizer: choose one of {OPTIMIZERS}, got {cfg.optimizer!r}")


__all__ = ["RECON_LOSSES", "PLATEAU_TOL",
           "TrainConfig", "Recipe", "TABLE", "RECIPES", "PRETRAINED", "OPTIMIZERS", "KEEP", "TRANSFORMS", "get_recipe",
           "make_optimizer"]
