"""Training one run: the SPT phase, the label phase, and one recipe of the table in
:mod:`toyspt.train.recipes` applied to a seed. Every run is a pure function of its configs and
seed; callbacks (trackers) see the live model through :class:`RunContext`."""
from __future__ import annotations

import copy
import functools
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from toyspt.train.evaluation import best_val, check_policy, extra_splits, record
from toyspt.nn.model import SPT_ATTENTION, ModelConfig, ToyTransformer, build_model
from toyspt.train.recipes import (OPTIMIZERS, PRETRAINED, RECIPES, get_recipe, load_optimizer_state,
    make_optimizer, optimizer_state)
from toyspt.data.tasks import TaskData, recon_loss, sample_mask
from toyspt.util.validation import MAX_COUNT, Float, Int, Text, validate, validated

# largest learning rate / weight decay: an AdamW step moves each weight by about lr, so at 100
# a few steps put weights (and logits, their products) past what float32 training survives
MAX_LR = 100.0


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
    recon: str = validated("l1", Text(("l1", "mse")))  # SPT loss on masked positions: l1 | mse
    # SPT: what masked queries attend to: all | no_masked_keys | no_self
    spt_attention: str = validated("all", Text(SPT_ATTENTION))
    # spt_swap_start: SPT epochs on pretrain_data before the task's own inputs
    swap_epochs: int = validated(3, Int(ge=0, le=MAX_COUNT))

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
    optimizer: Any = None  # the optimizer of the phase that ran last

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
    # "init", "pretrained" (if any), "final"; "resume": what continuing the run needs
    # ("generator": the data-order/mask generator's state; "<param>/<slot>": the optimizer
    # state of the label phase; see toyspt.train.recipes.optimizer_state)
    states: dict[str, dict[str, torch.Tensor]]
    config: dict[str, Any]  # asdict of the model and train configs, and the evaluation policy
    # wall seconds its training took (a lockstep job's time split evenly over its seeds; only
    # this run's own phases, not a run it continued); None where not measured
    seconds: float | None = None


def clone_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


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
             callbacks: Sequence = (), progress: bool = False, schedule: Sequence[str] | None = None,
             swap: TaskData | None = None) -> list[dict]:
    """SPT phase: masked reconstruction of the training inputs (labels unused). ``schedule``
    says per epoch whether it trains on ``data`` ("task") or on ``swap`` ("swap"); the
    validation loss is always that of ``data``."""
    model = ctx.model
    schedule = list(schedule) if schedule is not None else ["task"] * cfg.pre_epochs
    ctx.phase, ctx.epoch = "pretrain", 0
    ctx.phase_start_state = clone_state(model)
    _call(callbacks, "on_phase_start", ctx)
    opt = ctx.optimizer = make_optimizer(model.parameters(), cfg, cfg.pre_lr or cfg.lr)
    val_mask = sample_mask(len(data.val), data.val.x.shape[1], cfg.mask_rate,
                           torch.Generator().manual_seed(ctx.seed + 7919))
    history = []

    def loss_fn(x, idx):
        xb = x[idx]
        mb = sample_mask(len(xb), xb.shape[1], cfg.mask_rate, gen)
        return recon_loss(model.reconstruct(xb, mb, cfg.spt_attention), xb, mb, cfg.recon)

    for e in _epochs(len(schedule), ctx, progress):
        x = (swap if schedule[e] == "swap" else data).train.x
        losses = _epoch(ctx, opt, len(x), cfg.batch_size, gen, functools.partial(loss_fn, x), callbacks)
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
             callbacks: Sequence = (), progress: bool = False, evaluate: str = "all",
             done: Sequence[dict] = (), opt_state: dict[str, torch.Tensor] | None = None) -> list[dict]:
    """Label phase: cross-entropy of the mean-pooled classifier, ``epochs`` epochs after the
    label epochs in ``done`` (those of a run this one continues, whose optimizer state is
    ``opt_state``). ``evaluate``: the evaluation policy (:mod:`toyspt.train.evaluation`)."""
    model, x, y = ctx.model, data.train.x, data.train.y
    ctx.phase, ctx.epoch = "finetune", len(done)
    ctx.phase_start_state = clone_state(model)
    _call(callbacks, "on_phase_start", ctx)
    opt = ctx.optimizer = make_optimizer(model.parameters(), cfg, cfg.lr)
    if opt_state is not None:
        load_optimizer_state(opt, model.named_parameters(), opt_state)
    best, last = best_val(list(done)), len(done) + epochs
    history = []

    def loss_fn(idx):
        return F.cross_entropy(model.classify(x[idx]), y[idx])

    for _ in _epochs(epochs, ctx, progress):
        losses = _epoch(ctx, opt, len(x), cfg.batch_size, gen, loss_fn, callbacks)
        ctx.epoch += 1
        model.eval()
        acc = dict(val=accuracy(model, data.val.x, data.val.y))
        for split in extra_splits(evaluate, ctx.epoch, last, cfg.epochs, acc["val"], best):
            part = getattr(data, split)
            acc[split] = accuracy(model, part.x, part.y)
        best = max(best, acc["val"])
        rec = record(ctx.epoch, ctx.step, sum(losses) / len(losses), acc)
        history.append(rec)
        _call(callbacks, "on_epoch", ctx, rec)
    return history


def summarize(history: list[dict]) -> dict[str, float]:
    """Peak validation accuracy, test accuracy at that (first) epoch, final accuracies; for a
    run without label phase, the final SPT losses."""
    ft = [h for h in history if h["phase"] == "finetune"]
    if not ft:
        pre = [h for h in history if h["phase"] == "pretrain"]
        if not pre:
            raise ValueError("history has no epochs to summarise")
        return dict(final_recon_train_loss=pre[-1]["train_loss"], final_recon_val_loss=pre[-1]["val_loss"])
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
    return get_recipe(recipe).transferred(model)


def run_recipe(recipe: str, data: TaskData, model_cfg: ModelConfig | None = None,
               train_cfg: TrainConfig | None = None, seed: int = 0, callbacks: Sequence = (),
               pretrain_data: TaskData | None = None, progress: bool = False, evaluate: str = "all",
               start: RunResult | None = None) -> RunResult:
    """Train one recipe with one seed. ``pretrain_data`` is required by recipes that
    pretrain on another data set (``data_swap``). ``evaluate``: what the label phase
    measures (:mod:`toyspt.train.evaluation`). ``start``: a finished run of the recipe this one
    starts from (``Recipe.starts_from``, same seed and configs), continued from its stored
    end state instead of recomputing it; the result is bitwise that of training afresh."""
    rec = get_recipe(recipe)
    model_cfg = model_cfg or ModelConfig()
    train_cfg = train_cfg or TrainConfig()
    check_policy(evaluate)
    spt_data = check_inputs(rec, data, model_cfg, pretrain_data)
    config = dict(model=asdict(model_cfg), train=asdict(train_cfg), evaluate=evaluate)
    if start is not None:
        check_start(rec, start, seed, config, callbacks)
    model = build_model(model_cfg, seed)
    ctx = RunContext(model, recipe, seed, init_state=clone_state(model))
    states = {"init": ctx.init_state}
    history: list[dict] = []
    gen = torch.Generator().manual_seed(seed_stream(seed))
    done, opt_state = [], None
    if start is not None:  # the prefix run's end: its history, weights, generator (and optimizer)
        history = copy.deepcopy(start.history)
        ctx.step = history[-1]["step"]
        gen.set_state(start.states["resume"]["generator"])
        if rec.pretrains:
            states["pretrained"] = copy.deepcopy(start.states["final"])
        else:
            model.load_state_dict(start.states["final"])
            done = [h for h in history if h["phase"] == "finetune"]
            opt_state = {k: v for k, v in start.states["resume"].items() if k != "generator"}
    elif rec.pretrains:
        history += pretrain(ctx, spt_data, train_cfg, gen, callbacks, progress, rec.spt_schedule(train_cfg),
                            pretrain_data)
        states["pretrained"] = clone_state(model)
    if rec.pretrains and not rec.label_phase:
        states["final"] = clone_state(model)
        states["resume"] = {"generator": gen.get_state()}
        return RunResult(recipe, seed, history, summarize(history), ctx.records, states, config)
    if rec.pretrains:
        model.load_state_dict(ctx.init_state)
        transfer(model, states["pretrained"], rec.transferred(model))
    frozen = rec.frozen(model)
    for n, p in model.named_parameters():
        p.requires_grad_(n not in frozen)
    history += finetune(ctx, data, train_cfg, rec.label_epochs(train_cfg) - len(done), gen, callbacks,
                        progress, evaluate, done, opt_state)
    for p in model.parameters():
        p.requires_grad_(True)
    states["final"] = clone_state(model)
    states["resume"] = {"generator": gen.get_state(), **optimizer_state(ctx.optimizer, model.named_parameters())}
    return RunResult(recipe, seed, history, summarize(history), ctx.records, states, config)


def _plain(config: dict) -> Any:
    """``config`` as JSON would give it back (tuples as lists), to compare stored configs."""
    return json.loads(json.dumps(config))


def check_start(rec, start: RunResult, seed: int, config: dict, callbacks: Sequence) -> None:
    """Refuse a ``start`` run this recipe cannot continue from, naming what differs."""
    if rec.starts_from is None:
        raise ValueError(f"recipe {rec.name} does not start from another recipe's run")
    if callbacks:
        raise ValueError(f"a {rec.name} run continued from a {rec.starts_from} run takes no callbacks "
                         "(trackers would miss the phase it skips)")
    got = dict(recipe=start.recipe, seed=start.seed)
    want = dict(recipe=rec.starts_from, seed=seed)
    if got != want:
        raise ValueError(f"a {rec.name} run (seed {seed}) starts from a {want['recipe']} run of seed {seed}, "
                         f"got a {got['recipe']} run of seed {got['seed']}")
    # an SPT-only run evaluates nothing: its policy does not matter to the runs it starts
    parts = ("model", "train") if rec.pretrains else ("model", "train", "evaluate")
    mine, theirs = _plain({p: config[p] for p in parts}), _plain({p: start.config.get(p) for p in parts})
    if mine != theirs:
        diff = []
        for p in parts:
            a, b = mine[p], theirs[p]
            if isinstance(a, dict) and isinstance(b, dict):
                diff += [f"{p}.{k}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
            elif a != b:
                diff.append(p)
        raise ValueError(f"the {rec.starts_from} run to start from has other settings: {diff}")
    if "resume" not in start.states or "generator" not in start.states["resume"]:
        raise ValueError(f"the {rec.starts_from} run to start from stored no resume state")
    if not rec.pretrains:
        n = sum(h["phase"] == "finetune" for h in start.history)
        want_n = get_recipe(rec.starts_from).label_epochs(TrainConfig(**config["train"]))
        if n != want_n:
            raise ValueError(f"the {rec.starts_from} run to start from has {n} label epochs, not {want_n}")


def seed_stream(seed: int) -> int:
    """The seed of a run's data-order and mask generator (shared by every trainer)."""
    return 10_007 * seed + 1


def check_inputs(rec, data: TaskData, model_cfg: ModelConfig, pretrain_data: TaskData | None) -> TaskData | None:
    """Refuse data that does not fit the recipe or model; returns the data whose validation
    split the SPT phase reports (pretrain_data for data_swap, else the task's)."""
    if rec.needs_swap and pretrain_data is None:
        raise ValueError(f"recipe {rec.name} needs pretrain_data (the data set SPT runs on)")
    for name, d in (("data", data), ("pretrain_data", pretrain_data if rec.needs_swap else None)):
        if d is not None and d.train.x.shape[-1] != model_cfg.d_in:
            raise ValueError(f"{name} has {d.train.x.shape[-1]} features per token, "
                             f"ModelConfig.d_in={model_cfg.d_in}")
    return pretrain_data if rec.pretrain_on == "swap" else data if rec.pretrains else None


def load_model(result: RunResult, which: str = "final", cfg: ModelConfig | None = None) -> ToyTransformer:
    """Rebuild a model from a run's stored weights (``init``, ``pretrained`` or ``final``)."""
    if which not in result.states:
        raise KeyError(f"run has no {which!r} weights; it has {sorted(result.states)}")
    model = build_model(cfg or ModelConfig(**result.config["model"]), 0)
    model.load_state_dict(copy.deepcopy(result.states[which]))
    return model.eval()


__all__ = ["RECIPES", "PRETRAINED", "OPTIMIZERS", "TrainConfig", "seed_stream", "check_inputs", "RunContext", "RunResult", "run_recipe", "pretrain",
           "finetune", "summarize", "transfer", "transferred_names", "accuracy", "load_model",
           "clone_state", "check_start"]
