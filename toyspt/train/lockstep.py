"""K seeds of one recipe trained together in one process.

Each seed keeps its own initialisation, data order, masks and optimizer state, exactly as
:func:`toyspt.train.loop.run_recipe` gives them (one ``torch.Generator`` per seed, consumed in
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

import copy
import math
from dataclasses import asdict
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from toyspt.train.evaluation import best_val, check_policy, extra_splits, record
from toyspt.nn.model import ModelConfig, build_model
from toyspt.train.recipes import get_recipe, make_optimizer
from toyspt.data.tasks import TaskData, recon_loss, sample_mask
from toyspt.train.stacked import EVAL_CHUNK, Stacked
from toyspt.train.loop import (RunResult, TrainConfig, check_inputs, check_start, clone_state, seed_stream,
    summarize)

ENGINES = ("lockstep", "vmap")  # vmap: toyspt.train.stacked.Stacked


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

    def start_phase(self, cfg: TrainConfig, lr: float, opt_states=None) -> None:
        """A new optimizer; ``opt_states``: per seed, the state it continues
        (toyspt.train.recipes.optimizer_state), loaded at the first step."""
        self.cfg, self.lr, self.opt, self.live, self.pending = cfg, lr, None, [], opt_states

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
        named = [(k, n, p) for k, m in enumerate(self.models) for n, p in m.named_parameters()
                 if p.grad is not None]
        self.live = [p for *_, p in named]
        self.flat = nn.Parameter(torch.cat([p.detach().reshape(-1) for p in self.live]))
        self.slices, off = [], 0
        for k, n, p in named:  # parameters become views of the flat buffer the optimizer updates
            p.data = self.flat.data[off:off + p.numel()].view_as(p)
            self.slices.append((k, n, off, p.shape))
            off += p.numel()
        self.opt = make_optimizer([self.flat], self.cfg, self.lr)
        if self.pending is not None:  # the flat state is the seeds' states laid end to end
            slots = dict.fromkeys(key.split("/", 1)[1] for st in self.pending for key in st)
            state = {}
            for slot in slots:  # in the order the optimizer made them
                parts = [self.pending[k].get(f"{n}/{slot}") for k, n, _, _ in self.slices]
                if any(t is None for t in parts):
                    raise ValueError(f"optimizer state: slot {slot!r} missing for some parameters")
                if slot == "step":  # AdamW's step count, one for all
                    if any(not torch.equal(t, parts[0]) for t in parts):
                        raise ValueError(f"optimizer state: {slot!r} differs between parameters")
                    state[slot] = parts[0].clone()
                else:
                    state[slot] = torch.cat([t.reshape(-1) for t in parts])
            self.opt.state[self.flat] = state

    def opt_state(self, k: int) -> dict[str, torch.Tensor]:
        """Seed k's optimizer state as toyspt.train.recipes.optimizer_state gives it."""
        out = {}
        for kk, n, off, shape in self.slices if self.opt is not None else []:
            if kk == k:
                for slot, t in self.opt.state.get(self.flat, {}).items():
                    out[f"{n}/{slot}"] = (t.clone() if slot == "step" else
                                          t[off:off + shape.numel()].view(shape).clone())
        return out

    @torch.no_grad()
    def correct(self, x, y, chunk: int = EVAL_CHUNK, only=None) -> list[int]:
        """Correct predictions of each seed (of the seeds ``only`` lists, if given)."""
        models = self.models if only is None else [self.models[k] for k in only]
        return [sum(int((m.classify(x[i:i + chunk]).argmax(-1) == y[i:i + chunk]).sum())
                    for i in range(0, len(y), chunk)) for m in models]

    @torch.no_grad()
    def val_recon(self, x, masks, attend: str, kind: str) -> list[float]:
        return [recon_loss(m.reconstruct(x, mb, attend), x, mb, kind).item()
                for m, mb in zip(self.models, masks)]

    def state(self, k: int) -> dict[str, torch.Tensor]:
        return clone_state(self.models[k])


def _checker(recipe: str, seeds: Sequence[int], phase: str, epoch: int, step: int):
    """check(k, value): the error run_recipe raises for a non-finite loss of seed k."""
    def check(k: int, value: float) -> None:
        if not math.isfinite(value):
            raise FloatingPointError(f"non-finite loss ({value}) in recipe {recipe!r}, seed {seeds[k]}, "
                                     f"phase {phase}, epoch {epoch}, step {step}")
    return check


# --------------------------------------------------------------------------------------
# the two phases, mirroring toyspt.train.loop.pretrain / finetune step for step

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
              step, progress, eval_chunk, evaluate="all", done=0):
    """``epochs`` label epochs after ``done`` earlier ones (a continued run's)."""
    x, y = data.train.x, data.train.y
    best = [best_val(h) for h in histories]
    last = done + epochs
    for epoch in tqdm(range(done + 1, last + 1), desc=f"{recipe} x{len(seeds)} finetune", leave=False,
                      disable=not progress):
        perms = [torch.randperm(len(x), generator=g) for g in gens]
        losses = [[] for _ in seeds]
        for i in range(0, len(x), cfg.batch_size):
            values = stack.label_step(x, y, [p[i:i + cfg.batch_size] for p in perms],
                                      _checker(recipe, seeds, "finetune", epoch, step))
            step = _record(values, losses, step)
        val = [c / len(data.val) for c in stack.correct(data.val.x, data.val.y, eval_chunk)]
        acc = [dict(val=v) for v in val]
        for split in ("train", "test"):
            ks = [k for k in range(len(seeds))
                  if split in extra_splits(evaluate, epoch, last, cfg.epochs, val[k], best[k])]
            part = getattr(data, split)
            for k, c in zip(ks, stack.correct(part.x, part.y, eval_chunk, only=ks) if ks else []):
                acc[k][split] = c / len(part)
        for k, h in enumerate(histories):
            best[k] = max(best[k], val[k])
            h.append(record(epoch, step, sum(losses[k]) / len(losses[k]), acc[k]))
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
                     progress: bool = False, eval_chunk: int = EVAL_CHUNK, evaluate: str = "all",
                     starts: Sequence[RunResult] | None = None) -> list[RunResult]:
    """``[run_recipe(recipe, data, model_cfg, train_cfg, s, pretrain_data=..., evaluate=...,
    start=starts[k]) for k, s in enumerate(seeds)]`` trained together: bitwise equal with
    ``engine="lockstep"``, within float32 rounding with ``engine="vmap"`` (see the module
    docstring). No tracker callbacks."""
    rec = get_recipe(recipe)
    if engine not in ENGINES:
        raise ValueError(f"engine: choose one of {ENGINES}, got {engine!r}")
    seeds = [int(s) for s in seeds]
    if not seeds:
        raise ValueError("seeds: need at least one seed")
    if eval_chunk <= 0:
        raise ValueError(f"eval_chunk: must be positive, got {eval_chunk}")
    check_policy(evaluate)
    model_cfg, train_cfg = model_cfg or ModelConfig(), train_cfg or TrainConfig()
    spt_data = check_inputs(rec, data, model_cfg, pretrain_data)
    config = dict(model=asdict(model_cfg), train=asdict(train_cfg), evaluate=evaluate)
    if starts is not None:
        if len(starts) != len(seeds):
            raise ValueError(f"starts: one run per seed, got {len(starts)} for {len(seeds)} seeds")
        for st, s in zip(starts, seeds):
            check_start(rec, st, s, config, ())
    make = Lockstep if engine == "lockstep" else Stacked
    inits = [clone_state(build_model(model_cfg, s)) for s in seeds]
    names = build_model(model_cfg, 0)  # parameter names only
    gens = [torch.Generator().manual_seed(seed_stream(s)) for s in seeds]
    histories: list[list[dict]] = [[] for _ in seeds]
    stack, step, pretrained, done, opt_states = make(model_cfg, inits), 0, None, 0, None
    if starts is not None:  # each seed continues its prefix run (see toyspt.train.loop.run_recipe)
        histories = [copy.deepcopy(st.history) for st in starts]
        step = histories[0][-1]["step"]
        for g, st in zip(gens, starts):
            g.set_state(st.states["resume"]["generator"])
        if rec.pretrains:
            pretrained = [copy.deepcopy(st.states["final"]) for st in starts]
        else:
            stack = make(model_cfg, [st.states["final"] for st in starts])
            done = sum(h["phase"] == "finetune" for h in histories[0])
            opt_states = [{k: v for k, v in st.states["resume"].items() if k != "generator"} for st in starts]
    elif rec.pretrains:
        step = _pretrain(stack, spt_data, train_cfg, gens, seeds, recipe, histories, progress,
                         rec.spt_schedule(train_cfg), pretrain_data)
        pretrained = [stack.state(k) for k in range(len(seeds))]
    if not rec.label_phase:
        return [RunResult(recipe, s, histories[k], summarize(histories[k]), [],
                          {"init": inits[k], "pretrained": pretrained[k], "final": pretrained[k],
                           "resume": {"generator": gens[k].get_state()}}, config)
                for k, s in enumerate(seeds)]
    if rec.pretrains:
        moved = set(rec.transferred(names))
        stack = make(model_cfg, [{n: (pre if n in moved else init)[n] for n in init}
                                 for init, pre in zip(inits, pretrained)])
    stack.freeze(rec.frozen(names))
    stack.start_phase(train_cfg, train_cfg.lr, opt_states)
    _finetune(stack, data, train_cfg, rec.label_epochs(train_cfg) - done, gens, seeds, recipe, histories, step,
              progress, eval_chunk, evaluate, done)
    out = []
    for k, s in enumerate(seeds):
        states = {"init": inits[k]}
        if pretrained is not None:
            states["pretrained"] = pretrained[k]
        states["final"] = stack.state(k)
        states["resume"] = {"generator": gens[k].get_state(), **stack.opt_state(k)}
        out.append(RunResult(recipe, s, histories[k], summarize(histories[k]), [], states, config))
    return out


__all__ = ["ENGINES", "EVAL_CHUNK", "Lockstep", "Stacked", "run_recipe_seeds"]
