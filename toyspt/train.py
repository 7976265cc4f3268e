"""Training recipes: from scratch, self-pretraining (SPT) then fine-tuning, and the
transfer / freezing ablations. Every recipe is a pure function of its configs and seed.

Recipes (``E`` = ``epochs``, ``E_pre`` = ``pre_epochs``):

* ``scratch``: labels for E epochs from the seed's random init.
* ``spt``: masked reconstruction for E_pre epochs on the training inputs, then labels for
  E epochs; everything but the heads is transferred (the classifier starts at the seed's
  scratch init).
* ``scratch_matched``: labels for E_pre + E epochs (same total budget as ``spt``).
* ``qk_transfer``: only W_Q, W_K (weights and biases) from the SPT run of the same seed,
  every other weight the seed's scratch init; then labels for E epochs.
* ``all_but_qk_transfer``: the complement: everything from SPT but W_Q, W_K and the heads.
* ``frozen_attention``: W_Q, W_K fixed at their random init; labels for E epochs.
* ``data_swap``: SPT on ``pretrain_data`` (another family or seed), then as ``spt``.
"""
from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from .model import ModelConfig, ToyTransformer, build_model, head_param_names, qk_param_names
from .model import SPT_ATTENTION
from .tasks import TaskData, recon_loss, sample_mask
from .validation import Float, Int, Text, validate, validated

RECIPES = ("scratch", "spt", "scratch_matched", "qk_transfer", "all_but_qk_transfer",
           "frozen_attention", "data_swap")
PRETRAINED = ("spt", "qk_transfer", "all_but_qk_transfer", "data_swap")
OPTIMIZERS = ("adamw", "sgd")


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = validated(60, Int(gt=0))  # label (fine-tuning) epochs
    # SPT epochs; scratch_matched trains pre_epochs + epochs with labels
    pre_epochs: int = validated(30, Int(ge=0))
    batch_size: int = validated(64, Int(gt=0))  # minibatch size in both phases
    lr: float = validated(1e-3, Float(gt=0))  # learning rate of the label phase
    # learning rate of the SPT phase; None = lr
    pre_lr: float | None = validated(None, Float(gt=0, optional=True))
    weight_decay: float = validated(0.01, Float(ge=0))  # decoupled (AdamW) or L2 (SGD) weight decay
    optimizer: str = validated("adamw", Text(OPTIMIZERS))  # adamw | sgd
    momentum: float = validated(0.9, Float(ge=0, lt=1))  # SGD momentum
    # SPT: each position masked i.i.d. with this probability
    mask_rate: float = validated(0.5, Float(gt=0, le=1))
    recon: str = validated("l1", Text(("l1", "mse")))  # SPT loss on masked positions: l1 | mse
    # SPT: what masked queries attend to: all | no_masked_keys | no_self
    spt_attention: str = validated("all", Text(SPT_ATTENTION))

    def __post_init__(self):
        validate(self)


@dataclass
class RunContext:
    """What callbacks see: the live model and where the run is."""

    model: ToyTransformer
    recipe: str
    seed: int
    init_state: dict[str, torch.Tensor]  # global initialisation (the seed's scratch init)
    phase: str = ""  # "pretrain" (SPT) or "finetune" (labels)
    phase_start_state: dict[str, torch.Tensor] = field(default_factory=dict)
    step: int = 0  # optimizer steps so far, over all phases
    epoch: int = 0  # epoch within the phase, 1-based once an epoch has finished
    records: list[dict[str, Any]] = field(default_factory=list)  # tidy tracker records

    def record(self, name: str, metric: str, value: float, **extra) -> None:
        """Append one tidy record (recipe, seed, phase, step, epoch, name, metric, value)."""
        self.records.append(dict(recipe=self.recipe, seed=self.seed, phase=self.phase,
                                 step=self.step, epoch=self.epoch, name=name, metric=metric,
                                 value=float(value), **extra))


@dataclass
class RunResult:
    """History (one dict per epoch and phase), summary, tracker records and weights."""

    recipe: str
    seed: int
    history: list[dict[str, Any]]
    summary: dict[str, float]
    records: list[dict[str, Any]]
    states: dict[str, dict[str, torch.Tensor]]  # "init", "pretrained" (if any), "final"
    config: dict[str, Any]  # asdict of the model and train configs


def clone_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _optimizer(params, cfg: TrainConfig, lr: float) -> torch.optim.Optimizer:
    params = [p for p in params if p.requires_grad]
    if cfg.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=lr, weight_decay=cfg.weight_decay)
    return torch.optim.SGD(params, lr=lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)


def _call(callbacks, hook: str, *args) -> None:
    for cb in callbacks:
        fn = getattr(cb, hook, None)
        if fn is not None:
            fn(*args)


@torch.no_grad()
def accuracy(model: ToyTransformer, x: torch.Tensor, y: torch.Tensor, batch: int = 512) -> float:
    """Fraction of correctly classified sequences."""
    correct = sum((model.classify(x[i:i + batch]).argmax(-1) == y[i:i + batch]).sum().item()
                  for i in range(0, len(y), batch))
    return correct / len(y)


def _check_finite(loss: torch.Tensor, ctx: RunContext) -> None:
    if not torch.isfinite(loss):
        raise FloatingPointError(f"non-finite loss ({loss.item()}) in recipe {ctx.recipe!r}, seed "
                                 f"{ctx.seed}, phase {ctx.phase}, epoch {ctx.epoch + 1}, step {ctx.step}")


def _epochs(n: int, ctx: RunContext, progress: bool):
    return tqdm(range(n), desc=f"{ctx.recipe} s{ctx.seed} {ctx.phase}", leave=False,
                disable=not progress)


def _epoch(ctx: RunContext, opt, n: int, batch_size: int, gen: torch.Generator, loss_fn,
           callbacks: Sequence) -> list[float]:
    """One pass over a fresh permutation of n examples; ``loss_fn(indices)`` gives the loss."""
    ctx.model.train()
    perm = torch.randperm(n, generator=gen)
    losses = []
    for i in range(0, n, batch_size):
        loss = loss_fn(perm[i:i + batch_size])
        _check_finite(loss, ctx)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        ctx.step += 1
        losses.append(loss.item())
        _call(callbacks, "on_step", ctx, losses[-1])
    return losses


def pretrain(ctx: RunContext, data: TaskData, cfg: TrainConfig, gen: torch.Generator,
             callbacks: Sequence = (), progress: bool = False) -> list[dict]:
    """SPT phase: masked reconstruction of the training inputs (labels unused)."""
    model, x = ctx.model, data.train.x
    ctx.phase, ctx.epoch = "pretrain", 0
    ctx.phase_start_state = clone_state(model)
    _call(callbacks, "on_phase_start", ctx)
    opt = _optimizer(model.parameters(), cfg, cfg.pre_lr or cfg.lr)
    val_mask = sample_mask(len(data.val), x.shape[1], cfg.mask_rate,
                           torch.Generator().manual_seed(ctx.seed + 7919))
    history = []

    def loss_fn(idx):
        xb = x[idx]
        mb = sample_mask(len(xb), xb.shape[1], cfg.mask_rate, gen)
        return recon_loss(model.reconstruct(xb, mb, cfg.spt_attention), xb, mb, cfg.recon)

    for _ in _epochs(cfg.pre_epochs, ctx, progress):
        losses = _epoch(ctx, opt, len(x), cfg.batch_size, gen, loss_fn, callbacks)
        ctx.epoch += 1
        model.eval()
        with torch.no_grad():
            xv = data.val.x
            val = recon_loss(model.reconstruct(xv, val_mask, cfg.spt_attention), xv, val_mask, cfg.recon)
        rec = dict(phase="pretrain", epoch=ctx.epoch, step=ctx.step,
                   train_loss=sum(losses) / len(losses), val_loss=val.item())
        history.append(rec)
        _call(callbacks, "on_epoch", ctx, rec)
    return history


def finetune(ctx: RunContext, data: TaskData, cfg: TrainConfig, epochs: int, gen: torch.Generator,
             callbacks: Sequence = (), progress: bool = False) -> list[dict]:
    """Label phase: cross-entropy of the mean-pooled classifier."""
    model, x, y = ctx.model, data.train.x, data.train.y
    ctx.phase, ctx.epoch = "finetune", 0
    ctx.phase_start_state = clone_state(model)
    _call(callbacks, "on_phase_start", ctx)
    opt = _optimizer(model.parameters(), cfg, cfg.lr)
    history = []

    def loss_fn(idx):
        return F.cross_entropy(model.classify(x[idx]), y[idx])

    for _ in _epochs(epochs, ctx, progress):
        losses = _epoch(ctx, opt, len(x), cfg.batch_size, gen, loss_fn, callbacks)
        ctx.epoch += 1
        model.eval()
        rec = dict(phase="finetune", epoch=ctx.epoch, step=ctx.step,
                   train_loss=sum(losses) / len(losses),
                   train_acc=accuracy(model, x, y), val_acc=accuracy(model, data.val.x, data.val.y),
                   test_acc=accuracy(model, data.test.x, data.test.y))
        history.append(rec)
        _call(callbacks, "on_epoch", ctx, rec)
    return history


def summarize(history: list[dict]) -> dict[str, float]:
    """Peak validation accuracy, test accuracy at that (first) epoch, final accuracies."""
    ft = [h for h in history if h["phase"] == "finetune"]
    if not ft:
        raise ValueError("history has no label-phase epochs to summarise")
    best = max(ft, key=lambda h: h["val_acc"])  # max keeps the first epoch among ties
    return dict(peak_val_acc=best["val_acc"], test_at_peak=best["test_acc"], peak_epoch=best["epoch"],
                final_train_acc=ft[-1]["train_acc"], final_val_acc=ft[-1]["val_acc"],
                final_test_acc=ft[-1]["test_acc"])


def transfer(target: ToyTransformer, source_state: dict[str, torch.Tensor], names: Sequence[str]) -> None:
    """Copy the named tensors of ``source_state`` into ``target`` (in place)."""
    with torch.no_grad():
        params = dict(target.named_parameters())
        for n in names:
            params[n].copy_(source_state[n])


def transferred_names(recipe: str, model: ToyTransformer) -> list[str]:
    """Which parameters a recipe takes from the SPT weights (empty for label-only recipes)."""
    if recipe not in PRETRAINED:
        return []
    qk, heads = set(qk_param_names(model)), set(head_param_names(model))
    names = [n for n, _ in model.named_parameters() if n not in heads]
    if recipe == "qk_transfer":
        return [n for n in names if n in qk]
    if recipe == "all_but_qk_transfer":
        return [n for n in names if n not in qk]
    return names


def run_recipe(recipe: str, data: TaskData, model_cfg: ModelConfig | None = None,
               train_cfg: TrainConfig | None = None, seed: int = 0, callbacks: Sequence = (),
               pretrain_data: TaskData | None = None, progress: bool = False) -> RunResult:
    """Train one recipe with one seed. ``pretrain_data`` is required by ``data_swap``."""
    if recipe not in RECIPES:
        raise ValueError(f"recipe: unknown {recipe!r}; choose one of {RECIPES}")
    model_cfg = model_cfg or ModelConfig()
    train_cfg = train_cfg or TrainConfig()
    if recipe == "data_swap" and pretrain_data is None:
        raise ValueError("recipe data_swap needs pretrain_data (the data set SPT runs on)")
    if data.train.x.shape[-1] != model_cfg.d_in:
        raise ValueError(f"data has {data.train.x.shape[-1]} features per token, "
                         f"ModelConfig.d_in={model_cfg.d_in}")
    model = build_model(model_cfg, seed)
    ctx = RunContext(model, recipe, seed, init_state=clone_state(model))
    states = {"init": ctx.init_state}
    history: list[dict] = []
    gen = torch.Generator().manual_seed(10_007 * seed + 1)
    if recipe in PRETRAINED:
        history += pretrain(ctx, pretrain_data if recipe == "data_swap" else data, train_cfg, gen,
                            callbacks, progress)
        states["pretrained"] = clone_state(model)
        model.load_state_dict(ctx.init_state)
        transfer(model, states["pretrained"], transferred_names(recipe, model))
    if recipe == "frozen_attention":
        for n, p in model.named_parameters():
            p.requires_grad_(n not in qk_param_names(model))
    epochs = train_cfg.epochs + (train_cfg.pre_epochs if recipe == "scratch_matched" else 0)
    history += finetune(ctx, data, train_cfg, epochs, gen, callbacks, progress)
    for p in model.parameters():
        p.requires_grad_(True)
    states["final"] = clone_state(model)
    config = dict(model=asdict(model_cfg), train=asdict(train_cfg))
    return RunResult(recipe, seed, history, summarize(history), ctx.records, states, config)


def load_model(result: RunResult, which: str = "final", cfg: ModelConfig | None = None) -> ToyTransformer:
    """Rebuild a model from a run's stored weights (``init``, ``pretrained`` or ``final``)."""
    if which not in result.states:
        raise KeyError(f"run has no {which!r} weights; it has {sorted(result.states)}")
    model = build_model(cfg or ModelConfig(**result.config["model"]), 0)
    model.load_state_dict(copy.deepcopy(result.states[which]))
    return model.eval()


__all__ = ["RECIPES", "TrainConfig", "RunContext", "RunResult", "run_recipe", "pretrain",
           "finetune", "summarize", "transfer", "transferred_names", "accuracy", "load_model",
           "clone_state"]
