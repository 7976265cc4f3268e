"""K seeds of one recipe trained together in one process.

Each seed keeps its own initialisation, data order, masks and optimizer state, exactly as
:func:`toyspt.train.run_recipe` gives them (one ``torch.Generator`` per seed, consumed in
the same order). Two engines:

* ``lockstep`` (default; what sweeps use): K ordinary models. Per seed the same forward,
  loss and backward calls as ``run_recipe``; then one optimizer step over one flat buffer
  that holds every seed's trainable parameters (AdamW and SGD are elementwise, so this is
  K independent optimizers), and evaluation in cache-sized chunks. Results are bitwise
  equal to ``run_recipe`` (tested with ``torch.equal``), so a cached run never depends on
  how it was computed. It saves what a run spends outside its arithmetic: the
  per-parameter optimizer loop, per-run set-up, and evaluation passes too large for the
  cache. Measured on one CPU thread: 1.4-1.7x the throughput of run_recipe at the default
  size, almost all of it also reached with one seed at a time through this engine,
  because a default step is ~70% kernel work that batching cannot shrink
  (benchmarks/bench_flops.py: fixed per-op cost 31% of a step).
* ``vmap``: parameters stacked (K, ...) and one batched forward for all seeds
  (``torch.func.functional_call`` + ``vmap``). Fewer, larger kernels: it wins where
  per-op overhead dominates (small models, short sequences) and loses where the batched
  tensors outgrow the CPU cache (the default model at batch 64 x T 32). Equal to
  ``run_recipe`` up to float32 rounding: batched and single matrix products sum in
  different orders and biases/norm affines are applied as separate ops, a few ulp
  (~1e-7 relative) per op, carried forward by training; W_K's bias, whose exact gradient
  is zero, walks on rounding noise (~1e-4 apart after tens of steps) without changing any
  output. ``tests/test_vectorized.py`` requires it to be as close to float64 arithmetic
  as run_recipe itself is. Not used by sweeps, so the cache never holds its results.

Measured speed and why it is what it is: ``benchmarks/bench_vectorized.py``.
Runs with tracker callbacks are not supported here; they go through ``run_recipe``.
"""
from __future__ import annotations

import math
from dataclasses import asdict
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, vmap
from tqdm.auto import tqdm

from .model import ModelConfig, build_model
from .recipes import get_recipe, make_optimizer
from .tasks import TaskData, recon_loss, sample_mask
from .train import RunResult, TrainConfig, check_inputs, clone_state, seed_stream, summarize

ENGINES = ("lockstep", "vmap")
# sequences per evaluation forward: a (512, 32, 128) MLP activation (8 MB) is about the
# largest that stays fast here; run_recipe's 2048 runs ~2x slower per sequence (measured).
# Rows of a matrix product do not depend on how many rows are in the call, so chunking
# does not change the logits (the lockstep test checks the accuracies bit for bit).
EVAL_CHUNK = 512


# --------------------------------------------------------------------------------------
# engines: K models behind one interface

class Lockstep:
    """K models stepping together; one optimizer over a flat buffer of their parameters."""

    def __init__(self, cfg: ModelConfig, states: Sequence[dict[str, torch.Tensor]]):
        self.models = []
        for s in states:
            m = build_model(cfg, 0)
            m.load_state_dict(s)
            self.models.append(m)
        self.K = len(self.models)

    def freeze(self, names) -> None:
        for m in self.models:
            for n, p in m.named_parameters():
                p.requires_grad_(n not in names)

    def start_phase(self, cfg: TrainConfig, lr: float) -> None:
        self.cfg, self.lr, self.opt, self.live = cfg, lr, None, []

    def label_step(self, x, y, idx: list[torch.Tensor], check) -> list[float]:
        return self._step([lambda m, i=i: F.cross_entropy(m.classify(x[i]), y[i]) for i in idx], check)

    def recon_step(self, x, idx, masks, attend: str, kind: str, check) -> list[float]:
        def loss(m, i, mb):
            xb = x[i]
            return recon_loss(m.reconstruct(xb, mb, attend), xb, mb, kind)
        return self._step([lambda m, i=i, mb=mb: loss(m, i, mb) for i, mb in zip(idx, masks)], check)

    def _step(self, loss_fns, check) -> list[float]:
        """Per seed: forward, check, backward (each graph is freed while its tensors are
        still in cache); then one optimizer step for all seeds."""
        values = []
        for k, (m, fn) in enumerate(zip(self.models, loss_fns)):
            loss = fn(m)
            values.append(loss.item())
            check(k, values[-1])
            loss.backward()
        if self.opt is None:  # first step of the phase: the parameters that got a gradient
            self._flatten()  # are exactly those run_recipe's optimizer updates
        self.flat.grad = torch.cat([p.grad.reshape(-1) for p in self.live])
        for p in self.live:
            p.grad = None
        self.opt.step()
        return values

    def _flatten(self) -> None:
        self.live = [p for m in self.models for p in m.parameters() if p.grad is not None]
        self.flat = nn.Parameter(torch.cat([p.detach().reshape(-1) for p in self.live]))
        off = 0
        for p in self.live:  # parameters become views of the flat buffer the optimizer updates
            p.data = self.flat.data[off:off + p.numel()].view_as(p)
            off += p.numel()
        self.opt = make_optimizer([self.flat], self.cfg, self.lr)

    @torch.no_grad()
    def correct(self, x, y, chunk: int = EVAL_CHUNK) -> list[int]:
        return [sum(int((m.classify(x[i:i + chunk]).argmax(-1) == y[i:i + chunk]).sum())
                    for i in range(0, len(y), chunk)) for m in self.models]

    @torch.no_grad()
    def val_recon(self, x, masks, attend: str, kind: str) -> list[float]:
        return [recon_loss(m.reconstruct(x, mb, attend), x, mb, kind).item()
                for m, mb in zip(self.models, masks)]

    def state(self, k: int) -> dict[str, torch.Tensor]:
        return clone_state(self.models[k])


class _Forward(nn.Module):
    """Lets functional_call reach both entry points of the model."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x, mask=None, attend="all"):
        return self.model.classify(x) if mask is None else self.model.reconstruct(x, mask, attend)


class Stacked:
    """K copies of one architecture with parameters stacked (K, ...), run through vmap."""

    def __init__(self, cfg: ModelConfig, states: Sequence[dict[str, torch.Tensor]]):
        base = build_model(cfg, 0)
        self.fwd = _Forward(base)
        self.keys = list(states[0])  # state_dict order
        self.buffers = {n: b for n, b in base.named_buffers()}
        for n, b in self.buffers.items():  # buffers come from the config, never from a seed
            if any(not torch.equal(s[n], b) for s in states):
                raise ValueError(f"buffer {n!r} differs between the stacked states")
        self.params = {n: nn.Parameter(torch.stack([s[n] for s in states])) for n, _ in base.named_parameters()}
        self.K = len(states)

    def freeze(self, names) -> None:
        for n, p in self.params.items():
            p.requires_grad_(n not in names)

    def start_phase(self, cfg: TrainConfig, lr: float) -> None:
        # parameters the loss does not reach keep grad None, and the optimizer skips them
        self.opt = make_optimizer([p for p in self.params.values() if p.requires_grad], cfg, lr)

    def _call(self, p, x, mask=None, attend="all"):
        full = {f"model.{n}": v for n, v in p.items()}
        full.update({f"model.{n}": b for n, b in self.buffers.items()})
        return functional_call(self.fwd, full, (x, mask, attend))

    def classify(self, x_KxBxTxD):
        return vmap(self._call)(self.params, x_KxBxTxD)

    def reconstruct(self, x_KxBxTxD, mask_KxBxT, attend: str):
        return vmap(lambda p, x, m: self._call(p, x, m, attend))(self.params, x_KxBxTxD, mask_KxBxT)

    def label_step(self, x, y, idx, check) -> list[float]:
        i = torch.stack(idx)
        loss = F.cross_entropy(self.classify(x[i]).flatten(0, 1), y[i].flatten(), reduction="none")
        return self._step(loss.view(self.K, -1).mean(1), check)

    def recon_step(self, x, idx, masks, attend, kind, check) -> list[float]:
        xb, mb = x[torch.stack(idx)], torch.stack(masks)
        return self._step(_recon_loss_K(self.reconstruct(xb, mb, attend), xb, mb, kind), check)

    def _step(self, loss_K, check) -> list[float]:
        values = loss_K.tolist()
        for k, v in enumerate(values):
            check(k, v)
        self.opt.zero_grad(set_to_none=True)
        loss_K.sum().backward()  # d(sum)/d(params of seed k) = d(loss_k)/d(params of seed k)
        self.opt.step()
        return values

    @torch.no_grad()
    def correct(self, x, y, chunk: int = EVAL_CHUNK) -> list[int]:
        c = torch.zeros(self.K, dtype=torch.long)
        per = max(1, chunk // self.K)  # keep the batched activations cache-sized
        for i in range(0, len(y), per):
            xb = x[i:i + per]
            c += (self.classify(xb.expand(self.K, *xb.shape)).argmax(-1) == y[i:i + per]).sum(-1)
        return c.tolist()

    @torch.no_grad()
    def val_recon(self, x, masks, attend, kind) -> list[float]:
        xb, mb = x.expand(self.K, *x.shape), torch.stack(list(masks))
        return _recon_loss_K(self.reconstruct(xb, mb, attend), xb, mb, kind).tolist()

    def state(self, k: int) -> dict[str, torch.Tensor]:
        return {n: (self.params[n][k] if n in self.params else self.buffers[n]).detach().clone()
                for n in self.keys}


def _recon_loss_K(pred, x, mask, kind: str) -> torch.Tensor:
    """toyspt.tasks.recon_loss of each seed: (K,) means over masked entries."""
    err = (pred - x).abs() if kind == "l1" else (pred - x).pow(2)
    m = mask.to(err.dtype).unsqueeze(-1)
    return (err * m).sum((1, 2, 3)) / (m.sum((1, 2, 3)) * err.shape[-1]).clamp_min(1.0)


def _checker(recipe: str, seeds: Sequence[int], phase: str, epoch: int, step: int):
    """check(k, value): the error run_recipe raises for a non-finite loss of seed k."""
    def check(k: int, value: float) -> None:
        if not math.isfinite(value):
            raise FloatingPointError(f"non-finite loss ({value}) in recipe {recipe!r}, seed {seeds[k]}, "
                                     f"phase {phase}, epoch {epoch}, step {step}")
    return check


# --------------------------------------------------------------------------------------
# the two phases, mirroring toyspt.train.pretrain / finetune step for step

def _pretrain(stack, data: TaskData, cfg: TrainConfig, gens, seeds, recipe, histories, progress,
              schedule, swap):
    T = data.val.x.shape[1]
    stack.start_phase(cfg, cfg.pre_lr or cfg.lr)
    val_masks = [sample_mask(len(data.val), T, cfg.mask_rate,
                             torch.Generator().manual_seed(s + 7919)) for s in seeds]
    step = 0
    for epoch in tqdm(range(1, len(schedule) + 1), desc=f"{recipe} x{len(seeds)} pretrain",
                      leave=False, disable=not progress):
        x = (swap if schedule[epoch - 1] == "swap" else data).train.x
        perms = [torch.randperm(len(x), generator=g) for g in gens]
        losses = [[] for _ in seeds]
        for i in range(0, len(x), cfg.batch_size):
            idx = [p[i:i + cfg.batch_size] for p in perms]
            masks = [sample_mask(len(ix), x.shape[1], cfg.mask_rate, g) for ix, g in zip(idx, gens)]
            values = stack.recon_step(x, idx, masks, cfg.spt_attention, cfg.recon,
                                      _checker(recipe, seeds, "pretrain", epoch, step))
            step = _record(values, losses, step)
        val = stack.val_recon(data.val.x, val_masks, cfg.spt_attention, cfg.recon)
        for k, h in enumerate(histories):
            h.append(dict(phase="pretrain", epoch=epoch, step=step,
                          train_loss=sum(losses[k]) / len(losses[k]), val_loss=val[k]))
    return step


def _finetune(stack, data: TaskData, cfg: TrainConfig, epochs: int, gens, seeds, recipe, histories,
              step, progress, eval_chunk):
    x, y = data.train.x, data.train.y
    stack.start_phase(cfg, cfg.lr)
    for epoch in tqdm(range(1, epochs + 1), desc=f"{recipe} x{len(seeds)} finetune", leave=False,
                      disable=not progress):
        perms = [torch.randperm(len(x), generator=g) for g in gens]
        losses = [[] for _ in seeds]
        for i in range(0, len(x), cfg.batch_size):
            values = stack.label_step(x, y, [p[i:i + cfg.batch_size] for p in perms],
                                      _checker(recipe, seeds, "finetune", epoch, step))
            step = _record(values, losses, step)
        acc = {}
        for split in ("train", "val", "test"):
            part = getattr(data, split)
            acc[split] = [c / len(part) for c in stack.correct(part.x, part.y, eval_chunk)]
        for k, h in enumerate(histories):
            h.append(dict(phase="finetune", epoch=epoch, step=step,
                          train_loss=sum(losses[k]) / len(losses[k]), train_acc=acc["train"][k],
                          val_acc=acc["val"][k], test_acc=acc["test"][k]))
    return step


def _record(values: list[float], losses: list[list[float]], step: int) -> int:
    for k, v in enumerate(values):
        losses[k].append(v)
    return step + 1


# --------------------------------------------------------------------------------------
# entry points

def run_recipe_seeds(recipe: str, data: TaskData, model_cfg: ModelConfig | None = None,
                     train_cfg: TrainConfig | None = None, seeds: Sequence[int] = (0,),
                     pretrain_data: TaskData | None = None, engine: str = "lockstep",
                     progress: bool = False, eval_chunk: int = EVAL_CHUNK) -> list[RunResult]:
    """``[run_recipe(recipe, data, model_cfg, train_cfg, s, pretrain_data=...) for s in seeds]``
    trained together: bitwise equal with ``engine="lockstep"``, within float32 rounding with
    ``engine="vmap"`` (see the module docstring). No tracker callbacks."""
    rec = get_recipe(recipe)
    if engine not in ENGINES:
        raise ValueError(f"engine: choose one of {ENGINES}, got {engine!r}")
    seeds = [int(s) for s in seeds]
    if not seeds:
        raise ValueError("seeds: need at least one seed")
    if eval_chunk <= 0:
        raise ValueError(f"eval_chunk: must be positive, got {eval_chunk}")
    model_cfg, train_cfg = model_cfg or ModelConfig(), train_cfg or TrainConfig()
    spt_data = check_inputs(rec, data, model_cfg, pretrain_data)
    make = Lockstep if engine == "lockstep" else Stacked
    inits = [clone_state(build_model(model_cfg, s)) for s in seeds]
    names = build_model(model_cfg, 0)  # parameter names only
    gens = [torch.Generator().manual_seed(seed_stream(s)) for s in seeds]
    histories: list[list[dict]] = [[] for _ in seeds]
    stack, step, pretrained = make(model_cfg, inits), 0, None
    if rec.pretrains:
        step = _pretrain(stack, spt_data, train_cfg, gens, seeds, recipe, histories, progress,
                         rec.spt_schedule(train_cfg), pretrain_data)
        pretrained = [stack.state(k) for k in range(len(seeds))]
    if not rec.label_phase:
        config = dict(model=asdict(model_cfg), train=asdict(train_cfg))
        return [RunResult(recipe, s, histories[k], summarize(histories[k]), [],
                          {"init": inits[k], "pretrained": pretrained[k], "final": pretrained[k]}, config)
                for k, s in enumerate(seeds)]
    if rec.pretrains:
        moved = set(rec.transferred(names))
        stack = make(model_cfg, [{n: (pre if n in moved else init)[n] for n in init}
                                 for init, pre in zip(inits, pretrained)])
    stack.freeze(rec.frozen(names))
    _finetune(stack, data, train_cfg, rec.label_epochs(train_cfg), gens, seeds, recipe, histories, step,
              progress, eval_chunk)
    config = dict(model=asdict(model_cfg), train=asdict(train_cfg))
    out = []
    for k, s in enumerate(seeds):
        states = {"init": inits[k]}
        if pretrained is not None:
            states["pretrained"] = pretrained[k]
        states["final"] = stack.state(k)
        out.append(RunResult(recipe, s, histories[k], summarize(histories[k]), [], states, config))
    return out


__all__ = ["ENGINES", "EVAL_CHUNK", "Lockstep", "Stacked", "run_recipe_seeds"]
