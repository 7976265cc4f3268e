"""The training loop: K >= 1 models trained together, step for step; one run is K = 1.

Each model keeps its own data order and masks (one ``torch.Generator`` per model, consumed
as a run alone consumes it). A step is, per model, the forward, the loss and its backward
(each graph freed while its tensors are still in cache); then one optimizer step over one
flat buffer that holds every model's trainable parameters. AdamW and SGD are elementwise,
so that is K independent optimizers, bitwise: a run's numbers do not depend on which runs
trained beside it (tests/unit/train/test_loop.py), and a cached run never depends on how
it was computed. What K > 1 saves is what a run spends outside its arithmetic (the
per-parameter optimizer loop, per-run set-up); a default toy step is ~70% kernel work that
batching cannot shrink (benchmarks/bench_flops.py, benchmarks/bench_lockstep.py).

Callbacks (trackers) see each model live through its :class:`RunContext`: ``on_phase_start``,
``on_step`` after every optimizer step, ``on_epoch`` with the epoch's history record.

The loop knows nothing of recipes or data sets: a phase is ``start_phase`` (an optimizer
factory), ``epoch(n, batch_size, gens, loss)`` per epoch with ``loss(k, model, rows, gen)`` the
loss of model ``k`` on the examples ``rows`` (``gen`` for further draws, e.g. masks), and
``report`` with the epoch's records. The toy and UCR recipes (:mod:`toyspt.train.run`)
and the LRA demo (:mod:`toyspt.lra.demo`) train through it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import torch
from torch import nn
from tqdm.auto import tqdm

# loss(k, model, rows, gen): model k's loss on the examples ``rows``; None skips the step
Loss = Callable[[int, nn.Module, torch.Tensor, torch.Generator], "torch.Tensor | None"]
OptimizerFactory = Callable[[list[torch.Tensor]], torch.optim.Optimizer]


@dataclass(frozen=True)
class Objective:
    """A loss in two parts, as the compiled path needs it: ``draw(rows, gen)`` makes the
    batch's tensors (every random draw happens here), ``value(model, *batch, *static)`` is
    a pure function of the model and the batch (module-level, so it can be compiled once
    for every run). Called like any :data:`Loss`."""

    draw: Callable[[torch.Tensor, torch.Generator], tuple]
    value: Callable[..., torch.Tensor]
    static: tuple = ()  # hashable extra arguments of value (e.g. the SPT loss kind)

    def __call__(self, k: int, model: nn.Module, rows: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        return self.value(model, *self.draw(rows, gen), *self.static)


@dataclass
class RunContext:
    """What callbacks see: the live model and where its run is."""

    model: nn.Module
    recipe: str  # what the run trains (a recipe name, or e.g. "lra_demo")
    seed: int
    init_state: dict[str, torch.Tensor] = field(default_factory=dict)  # the seed's initialisation
    phase: str = ""  # e.g. "pretrain" (SPT) or "finetune" (labels)
    phase_start_state: dict[str, torch.Tensor] = field(default_factory=dict)  # (runs with callbacks)
    step: int = 0  # optimizer steps so far, over all phases
    epoch: int = 0  # epoch within the phase, 1-based once an epoch has finished
    records: list[dict[str, Any]] = field(default_factory=list)  # tidy tracker records

    def record(self, name: str, metric: str, value: float, **extra) -> None:
        """Append one tidy record (recipe, seed, phase, step, epoch, name, metric, value)."""
        self.records.append(dict(recipe=self.recipe, seed=self.seed, phase=self.phase,
                                 step=self.step, epoch=self.epoch, name=name, metric=metric,
                                 value=float(value), **extra))


def clone_state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _checked(loss: torch.Tensor, ctx: RunContext) -> float:
    """The loss's value; FloatingPointError naming the run and step where it is not finite."""
    value = loss.item()
    if not math.isfinite(value):
        raise FloatingPointError(f"non-finite loss ({value}) in recipe {ctx.recipe!r}, seed {ctx.seed}, "
                                 f"phase {ctx.phase}, epoch {ctx.epoch + 1}, step {ctx.step}")
    return value


def _call(callbacks: Iterable, hook: str, *args) -> None:
    for cb in callbacks:
        fn = getattr(cb, hook, None)
        if fn is not None:
            fn(*args)


class Lockstep:
    """K models (their contexts) stepping together; one optimizer over flat buffers of their
    trainable parameters. ``callbacks``: one sequence per model. ``template``: a model of
    the same architecture kept for the process; given, steps whose loss is an
    :class:`Objective` run compiled (:mod:`toyspt.train.compiled`: one flat buffer per
    model, the objective's forward and backward compiled, the optimizer's own kernels)."""

    def __init__(self, contexts: Sequence[RunContext], callbacks: Sequence[Sequence] | None = None,
                 template: nn.Module | None = None):
        self.ctxs = list(contexts)
        if not self.ctxs:
            raise ValueError("seeds: need at least one seed")
        self.callbacks = [list(c) for c in callbacks] if callbacks is not None else [[] for _ in self.ctxs]
        if len(self.callbacks) != len(self.ctxs):
            raise ValueError(f"callbacks: one list per seed, got {len(self.callbacks)} for {len(self.ctxs)}")
        self.template = template
        self.opt, self.live, self.slices, self.flats = None, [], [], []

    @property
    def models(self) -> list[nn.Module]:
        return [c.model for c in self.ctxs]

    def epochs(self, n: int, progress: bool = False):
        """range(n) for a phase's epochs, with a progress bar if asked."""
        c = self.ctxs[0]
        who = f"s{c.seed}" if len(self.ctxs) == 1 else f"x{len(self.ctxs)}"
        return tqdm(range(n), desc=f"{c.recipe} {who} {c.phase}", leave=False, disable=not progress)

    def start_phase(self, phase: str, make_optimizer: OptimizerFactory, epoch: int = 0,
                    opt_states: Sequence[dict[str, torch.Tensor]] | None = None) -> None:
        """A new phase with a new optimizer (made at its first step, over the parameters that
        got a gradient); ``opt_states``: per model, the optimizer state it continues
        (``"<parameter>/<slot>"`` -> tensor, as :meth:`opt_state` gives it); ``epoch``: epochs already done."""
        for ctx, cbs in zip(self.ctxs, self.callbacks):
            ctx.phase, ctx.epoch = phase, epoch
            if cbs:
                ctx.phase_start_state = clone_state(ctx.model)
            _call(cbs, "on_phase_start", ctx)
        self.make_optimizer, self.pending, self.opt, self.live = make_optimizer, opt_states, None, []

    def epoch(self, n: int, batch_size: int, gens: Sequence[torch.Generator], loss: Loss) -> list[list[float]]:
        """One pass over a fresh permutation of ``n`` examples per model; each model's step losses."""
        for m in self.models:
            m.train()
        perms = [torch.randperm(n, generator=g) for g in gens]
        losses: list[list[float]] = [[] for _ in self.ctxs]
        compiled = self.template is not None and isinstance(loss, Objective)
        for i in range(0, n, batch_size):
            if compiled:
                values = self.compiled_step(loss, [loss.draw(p[i:i + batch_size], g) for p, g in zip(perms, gens)])
            else:
                values = self.step([lambda k=k, m=m, p=p, g=g: loss(k, m, p[i:i + batch_size], g)
                                    for k, (m, p, g) in enumerate(zip(self.models, perms, gens))])
            if values is None:
                continue
            for ctx, cbs, ls, v in zip(self.ctxs, self.callbacks, losses, values):
                ctx.step += 1
                ls.append(v)
                _call(cbs, "on_step", ctx, v)
        for ctx in self.ctxs:
            ctx.epoch += 1
        return losses

    def report(self, records: Sequence[dict]) -> None:
        """The end of an epoch: each model's history record to its ``on_epoch`` callbacks."""
        for ctx, cbs, rec in zip(self.ctxs, self.callbacks, records):
            _call(cbs, "on_epoch", ctx, rec)

    def step(self, losses: Sequence[Callable[[], torch.Tensor | None]]) -> list[float] | None:
        """Per model: loss, finiteness check, backward; then one optimizer step for all.
        None where every loss is None (a batch with nothing to learn: no step)."""
        values = []
        for ctx, fn in zip(self.ctxs, losses):
            loss = fn()
            if loss is None:
                values.append(None)
                continue
            values.append(_checked(loss, ctx))
            ctx.model.zero_grad(set_to_none=True)  # a callback's own backward leaves no gradient behind
            loss.backward()
        if all(v is None for v in values):
            return None
        if any(v is None for v in values):
            raise ValueError("a step that some models skip and others take cannot run in lockstep")
        if self.opt is None:  # the parameters that got a gradient are exactly those an optimizer
            self._flatten()  # of the model alone would update (it skips grad-less ones)
        self.flat.grad = torch.cat([p.grad.reshape(-1) for p in self.live])
        for p in self.live:
            p.grad = None
        self.opt.step()
        return values

    def compiled_step(self, objective: Objective, batches: Sequence[tuple]) -> list[float]:
        """:meth:`step` on the compiled path: per model the compiled loss and its backward
        into the model's flat buffer, then one (fused) optimizer step over all buffers."""
        if self.opt is None:
            self._flatten_compiled(objective, batches[0])
        values = []
        for ctx, flat, rest, batch in zip(self.ctxs, self.flats, self.rests, batches):
            loss = self.fn(flat, rest, *batch)
            values.append(_checked(loss, ctx))
            flat.grad = None
            loss.backward()
        self.opt.step()
        return values

    def _flatten_compiled(self, objective: Objective, batch: tuple) -> None:
        from toyspt.train.compiled import step_function

        m = self.models[0]  # which parameters the loss reaches: one eager gradient, as the eager path finds them
        named = [(n, p) for n, p in m.named_parameters() if p.requires_grad]
        grads = torch.autograd.grad(objective.value(m, *batch, *objective.static), [p for _, p in named],
                                    allow_unused=True)
        names = [n for (n, _), g in zip(named, grads) if g is not None]
        self._lay_out([[(n, dict(mm.named_parameters())[n]) for n in names] for mm in self.models])
        live = set(names)
        self.rests = [{n: t for n, t in mm.state_dict().items() if n not in live} for mm in self.models]
        self.fn = step_function(self.template, objective.value, objective.static,
                                tuple((n, dict(m.named_parameters())[n].shape) for n in names))

    def _flatten(self) -> None:
        """The eager path: one flat buffer for every model's parameters that got a gradient."""
        self._lay_out([[(n, p) for m in self.models for n, p in m.named_parameters() if p.grad is not None]],
                      owners=[k for k, m in enumerate(self.models) for _, p in m.named_parameters()
                              if p.grad is not None])

    def _lay_out(self, groups: list[list[tuple[str, torch.Tensor]]], owners: list[int] | None = None) -> None:
        """One flat leaf per group of (name, parameter); the parameters become views of it.
        ``owners``: the model of each parameter (default: group j is model j). Then the
        optimizer over the buffers, with the state it continues laid out the same way."""
        self.flats, self.slices, self.live, i = [], [], [], 0
        for j, group in enumerate(groups):
            flat = nn.Parameter(torch.cat([p.detach().reshape(-1) for _, p in group]))
            off = 0
            for n, p in group:  # parameters become views of the flat buffer the optimizer updates
                p.data = flat.data[off:off + p.numel()].view_as(p)
                self.slices.append((owners[i] if owners is not None else j, n, j, off, p.shape))
                self.live.append(p)
                off, i = off + p.numel(), i + 1
            self.flats.append(flat)
        self.flat = self.flats[0]
        self.opt = self.make_optimizer(self.flats)
        if self.pending is None:
            return
        for j, flat in enumerate(self.flats):  # each buffer's state: its parameters' states end to end
            mine = [(k, n) for k, n, jj, _, _ in self.slices if jj == j]
            slots = dict.fromkeys(key.split("/", 1)[1] for k, _ in mine for key in self.pending[k])
            state = {}
            for slot in slots:  # in the order the optimizer made them
                parts = [self.pending[k].get(f"{n}/{slot}") for k, n in mine]
                if any(t is None for t in parts):
                    raise ValueError(f"optimizer state: slot {slot!r} missing for some parameters")
                if slot == "step":  # AdamW's step count, one for all
                    if any(not torch.equal(t, parts[0]) for t in parts):
                        raise ValueError(f"optimizer state: {slot!r} differs between parameters")
                    state[slot] = parts[0].clone()
                else:
                    state[slot] = torch.cat([t.reshape(-1) for t in parts])
            self.opt.state[flat] = state

    def release(self) -> None:
        """The end of a phase: every parameter owns its storage again (not a view of the flat
        buffer), so the models save, load and copy as ordinary modules."""
        for p in self.live:
            p.data = p.data.clone()

    def opt_state(self, k: int) -> dict[str, torch.Tensor]:
        """Model k's optimizer state, ``"<parameter>/<slot>"`` -> tensor (AdamW: step, exp_avg,
        exp_avg_sq; SGD: momentum_buffer), copied; parameters without state are absent."""
        out = {}
        for kk, n, j, off, shape in self.slices if self.opt is not None else []:
            if kk == k:
                for slot, t in self.opt.state.get(self.flats[j], {}).items():
                    out[f"{n}/{slot}"] = (t.clone() if slot == "step" else
                                          t[off:off + shape.numel()].view(shape).clone())
        return out


__all__ = ["Lockstep", "Objective", "RunContext", "Loss", "OptimizerFactory", "clone_state"]
