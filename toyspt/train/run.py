"""A recipe of :mod:`toyspt.train.recipes` trained on K >= 1 seeds: the SPT phase, the label
phase, and continuing a stored run, through the one training loop
(:class:`toyspt.train.loop.Lockstep`). One run (:func:`run_recipe`) is the case K = 1.

Every run is a pure function of its configs and seed, whatever ran beside it: each seed
keeps its own initialisation, data order, masks and optimizer state, and the one optimizer
step over all seeds is elementwise. Callbacks (trackers) see each live model through its
:class:`RunContext`.
"""
from __future__ import annotations

import copy
import functools
import json
from dataclasses import dataclass
from typing import Any, Sequence

import torch
import torch.nn.functional as F

from toyspt.data.tasks import Split, TaskData, recon_loss, sample_mask
from toyspt.nn.model import ModelConfig, ToyTransformer, build_model
from toyspt.train.config import RunConfig
from toyspt.train.evaluation import best_loss, best_val, eval_rows, extra_splits, label_summary, record, scores
from toyspt.train.loop import Lockstep, Objective, RunContext, clone_state
from toyspt.train.recipes import PLATEAU_TOL, Recipe, TrainConfig, get_recipe, make_optimizer


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
    # state of the label phase; see toyspt.train.loop.Lockstep.opt_state)
    states: dict[str, dict[str, torch.Tensor]]
    config: dict[str, Any]  # asdict of the model and train configs, and the evaluation policy
    # wall seconds its training took (a lockstep job's time split evenly over its seeds; only
    # this run's own phases, not a run it continued); None where not measured
    seconds: float | None = None

    def to_json(self) -> dict[str, Any]:
        """What the run cache stores as ``result.json`` (everything but the tensors)."""
        return dict(recipe=self.recipe, seed=self.seed, history=self.history, summary=self.summary,
                    records=self.records, config=self.config, seconds=self.seconds)

    def tensors(self) -> dict[str, dict[str, torch.Tensor]]:
        """What the run cache stores as ``weights.pt``."""
        return self.states

    @classmethod
    def from_stored(cls, blob: dict[str, Any], tensors: dict[str, Any]) -> "RunResult":
        """Inverse of :meth:`to_json` and :meth:`tensors`; KeyError/TypeError when a part is missing."""
        return cls(blob["recipe"], blob["seed"], blob["history"], blob["summary"], blob["records"], tensors,
                   blob["config"], blob.get("seconds"))


def _scores(model: ToyTransformer, split: Split, tokens: int) -> tuple[float, float]:
    """(accuracy, cross-entropy) of ``model`` on ``split``, ``tokens`` tokens per forward."""
    return scores(lambda rows: model.classify(split.x[rows]), split.y, eval_rows(split.x.shape[1], tokens))


def recon_objective(model: ToyTransformer, xb, mb, attend: str, kind: str) -> torch.Tensor:
    """The SPT loss of a batch ``xb`` with mask ``mb``."""
    return recon_loss(model.reconstruct(xb, mb, attend), xb, mb, kind)


def label_objective(model: ToyTransformer, xb, yb) -> torch.Tensor:
    """The label loss: cross-entropy of the mean-pooled classifier."""
    return F.cross_entropy(model.classify(xb), yb)


@functools.cache
def template(cfg: ModelConfig) -> ToyTransformer:
    """A model of architecture ``cfg`` kept for the process: what compiled steps are traced
    on (its own weights are never used)."""
    return build_model(cfg, 0)


def pretrain(lock: Lockstep, data: TaskData, cfg: TrainConfig, gens: Sequence[torch.Generator],
             schedule: Sequence[str], swap: TaskData | None = None, progress: bool = False) -> list[list[dict]]:
    """SPT phase: masked reconstruction of the training inputs (labels unused). ``schedule``
    says per epoch whether it trains on ``data`` ("task") or on ``swap`` ("swap"); the
    validation loss is always that of ``data``. Returns each seed's history records."""
    lock.start_phase("pretrain", lambda ps: make_optimizer(ps, cfg, cfg.pre_lr or cfg.lr, lock.template is not None))
    xv = data.val.x
    val_masks = [sample_mask(len(data.val), xv.shape[1], cfg.mask_rate,
                             torch.Generator().manual_seed(c.seed + 7919)) for c in lock.ctxs]
    histories: list[list[dict]] = [[] for _ in lock.ctxs]
    for e in lock.epochs(len(schedule), progress):
        x = (swap if schedule[e] == "swap" else data).train.x

        def draw(rows, gen, x=x):
            xb = x[rows]
            return xb, sample_mask(len(xb), xb.shape[1], cfg.mask_rate, gen)

        loss = Objective(draw, recon_objective, (cfg.spt_attention, cfg.recon))
        losses = lock.epoch(len(x), cfg.batch_size, gens, loss)
        recs = []
        for ctx, mb, ls in zip(lock.ctxs, val_masks, losses):
            ctx.model.eval()
            with torch.no_grad():
                val = recon_loss(ctx.model.reconstruct(xv, mb, cfg.spt_attention), xv, mb, cfg.recon)
            recs.append(dict(phase="pretrain", epoch=ctx.epoch, step=ctx.step,
                             train_loss=sum(ls) / len(ls), val_loss=val.item()))
        for h, r in zip(histories, recs):
            h.append(r)
        stop = cfg.pre_patience is not None and plateaued(histories[0], cfg.pre_patience)
        if stop:  # said before the callbacks see the record: a tracker recording phase ends reads it
            histories[0][-1]["stopped"] = "plateau"
        lock.report(recs)
        if stop:
            break
    else:
        if cfg.pre_patience is not None and histories[0]:
            histories[0][-1]["stopped"] = "cap"
    lock.release()
    return histories


def plateaued(history: list[dict], patience: int) -> bool:
    """Whether the last ``patience`` SPT epochs of ``history`` all failed to bring the validation
    loss more than :data:`PLATEAU_TOL` (relative) below the lowest loss before them."""
    losses = [h["val_loss"] for h in history if h["phase"] == "pretrain"]
    if len(losses) <= patience:
        return False
    best = min(losses[:-patience])
    return min(losses[-patience:]) >= best - PLATEAU_TOL * abs(best)


def stalled(history: list[dict], patience: int) -> bool:
    """Whether the last ``patience`` label epochs of ``history`` brought no higher validation
    accuracy than every label epoch before them (the label phase's stopping rule)."""
    accs = [h["val_acc"] for h in history if h["phase"] == "finetune"]
    return len(accs) > patience and max(accs[-patience:]) <= max(accs[:-patience])


def finetune(lock: Lockstep, data: TaskData, run: RunConfig, gens: Sequence[torch.Generator],
             histories: Sequence[list[dict]], done: int = 0,
             opt_states: Sequence[dict[str, torch.Tensor]] | None = None, progress: bool = False) -> None:
    """Label phase: cross-entropy of the mean-pooled classifier, the recipe's label epochs after
    ``done`` earlier ones (those of a run this one continues, whose optimizer states are
    ``opt_states``); appends to each seed's history. ``run.evaluate``: the evaluation policy
    (:mod:`toyspt.train.evaluation`)."""
    x, y, cfg, evaluate = data.train.x, data.train.y, run.train, run.evaluate
    lock.start_phase("finetune", lambda ps: make_optimizer(ps, cfg, cfg.lr, lock.template is not None), done,
                     opt_states)
    last = run.rec.label_epochs(cfg)
    best, low = [best_val(h) for h in histories], [best_loss(h) for h in histories]
    loss = Objective(lambda rows, gen: (x[rows], y[rows]), label_objective)

    for _ in lock.epochs(last - done, progress):
        losses = lock.epoch(len(x), cfg.batch_size, gens, loss)
        recs, stop = [], False
        for k, ctx in enumerate(lock.ctxs):
            ctx.model.eval()
            acc = {}
            acc["val"], val_loss = _scores(ctx.model, data.val, run.eval_tokens)
            if cfg.patience is None:
                splits = extra_splits(evaluate, ctx.epoch, last, cfg.epochs, acc["val"], best[k], val_loss, low[k])
            else:  # test every epoch (the stop is known only once validation has spoken), train at the end
                stop = stalled(histories[k] + [dict(phase="finetune", val_acc=acc["val"])], cfg.patience)
                splits = ("train", "test") if stop or evaluate == "all" or ctx.epoch == last else ("test",)
            for split in splits:
                acc[split] = _scores(ctx.model, getattr(data, split), run.eval_tokens)[0]
            best[k], low[k] = max(best[k], acc["val"]), min(low[k], val_loss)
            recs.append(record(ctx.epoch, ctx.step, sum(losses[k]) / len(losses[k]), acc, val_loss))
            if stop:
                recs[-1]["stopped"] = "patience"
        for h, r in zip(histories, recs):
            h.append(r)
        lock.report(recs)
        if stop:
            break
    else:
        if cfg.patience is not None and last > done:
            histories[0][-1]["stopped"] = "cap"
    lock.release()


def summarize(history: list[dict]) -> dict[str, float]:
    """What a label phase measured (:func:`toyspt.train.evaluation.label_summary`); for a run
    without label phase, the final SPT losses."""
    ft = [h for h in history if h["phase"] == "finetune"]
    pre = [h for h in history if h["phase"] == "pretrain"]
    out = {}
    if pre and "stopped" in pre[-1]:  # a stopping rule ended SPT: at its plateau (1) or its cap (0)
        out.update(spt_epochs=pre[-1]["epoch"], spt_plateaued=float(pre[-1]["stopped"] == "plateau"))
    if not ft:
        if not pre:
            raise ValueError("history has no epochs to summarise")
        return dict(final_recon_train_loss=pre[-1]["train_loss"], final_recon_val_loss=pre[-1]["val_loss"], **out)
    if "stopped" in ft[-1]:  # the label phase's stopping rule: stopped on its own (1) or at its cap (0)
        out.update(stop_epoch=ft[-1]["epoch"], stopped_early=float(ft[-1]["stopped"] == "patience"))
    return {**label_summary(history), **out}


def transfer(target: ToyTransformer, source_state: dict[str, torch.Tensor], names: Sequence[str],
             transform: str | None = None, seed: int = 0) -> None:
    """Copy the named tensors of ``source_state`` into ``target`` (in place); ``transform``
    (:data:`toyspt.train.recipes.TRANSFORMS`): "norms" keeps ``target``'s own tensors and
    rescales each to the norm of its source (a zero tensor takes a Gaussian direction first),
    "permute" copies each source tensor with its entries permuted. The random draws come from
    a generator of their own (:func:`transform_stream`), so data order and masks are untouched."""
    gen = torch.Generator().manual_seed(transform_stream(seed))
    with torch.no_grad():
        params = dict(target.named_parameters())
        for n in names:
            src, p = source_state[n], params[n]
            if transform is None:
                p.copy_(src)
            elif transform == "permute":
                p.copy_(src.reshape(-1)[torch.randperm(src.numel(), generator=gen)].view_as(src))
            elif transform == "norms":
                d = p.detach().clone()
                if float(d.norm()) == 0.0:
                    d = torch.randn(d.shape, generator=gen, dtype=d.dtype)
                p.copy_(d * (src.norm() / d.norm()))
            else:
                raise ValueError(f"transform: unknown {transform!r}")


def run_recipe_seeds(run: RunConfig | str, data: TaskData, seeds: Sequence[int] = (0,), *,
                     pretrain_data: TaskData | None = None, starts: Sequence[RunResult] | None = None,
                     callbacks: Sequence[Sequence] | None = None, progress: bool = False) -> list[RunResult]:
    """Train one run configuration (:class:`toyspt.train.config.RunConfig`, or a recipe name with
    every default) on each of ``seeds`` (together, step for step). ``pretrain_data``: the data SPT
    runs on for recipes that need it (``data_swap``); ``starts``: per seed, a finished run of the
    recipe this one starts from (``Recipe.starts_from``, same seed and configs), continued from its
    stored end state instead of recomputing it (bitwise the same result); ``callbacks``: per seed,
    the trackers that see its live model. ``run.numerics`` "compiled" runs eager, with one line on
    stderr, where inductor cannot compile; the result's config names the path that ran."""
    run = RunConfig.of(run)
    rec, model_cfg, train_cfg = run.rec, run.model, run.train
    seeds = [int(s) for s in seeds]
    if not seeds:
        raise ValueError("seeds: need at least one seed")
    if train_cfg.stops and len(seeds) > 1:
        raise ValueError(f"a run with a stopping rule (patience {train_cfg.patience}, pre_patience "
                         f"{train_cfg.pre_patience}) trains one seed at a time, got {len(seeds)} seeds")
    spt_data = check_inputs(rec, data, model_cfg, pretrain_data)
    numerics = run.numerics
    if numerics == "compiled":
        from toyspt.train.compiled import available

        numerics = "compiled" if available() else "eager"
    config = run.stored(numerics)
    callbacks = [list(c) for c in callbacks] if callbacks is not None else [[] for _ in seeds]
    if starts is not None:
        if len(starts) != len(seeds):
            raise ValueError(f"starts: one run per seed, got {len(starts)} for {len(seeds)} seeds")
        for st, s, cbs in zip(starts, seeds, callbacks):
            check_start(rec, st, s, config, cbs)
    ctxs = []
    for s in seeds:
        model = build_model(model_cfg, s)
        ctxs.append(RunContext(model, run.recipe, s, init_state=clone_state(model)))
    lock = Lockstep(ctxs, callbacks, template(model_cfg) if numerics == "compiled" else None)
    gens = [torch.Generator().manual_seed(seed_stream(s)) for s in seeds]
    histories, pretrained, done, opt_states = [[] for _ in seeds], None, 0, None
    if starts is not None:
        histories, pretrained, done, opt_states = resume(rec, ctxs, gens, starts)
    elif rec.pretrains:
        histories = pretrain(lock, spt_data, train_cfg, gens, rec.spt_schedule(train_cfg), pretrain_data, progress)
        pretrained = [clone_state(c.model) for c in ctxs]
    if rec.label_phase:
        frozen = rec.frozen(ctxs[0].model)
        for k, ctx in enumerate(ctxs):
            if rec.pretrains:
                ctx.model.load_state_dict(ctx.init_state)
                transfer(ctx.model, pretrained[k], rec.transferred(ctx.model), rec.transform, ctx.seed)
            for n, p in ctx.model.named_parameters():
                p.requires_grad_(n not in frozen)
        finetune(lock, data, run, gens, histories, done, opt_states, progress)
        for ctx in ctxs:
            ctx.model.requires_grad_(True)
    out = []
    for k, (ctx, gen, h) in enumerate(zip(ctxs, gens, histories)):
        states = {"init": ctx.init_state}
        if pretrained is not None:
            states["pretrained"] = pretrained[k]
        states["final"] = clone_state(ctx.model)
        states["resume"] = {"generator": gen.get_state(), **(lock.opt_state(k) if rec.label_phase else {})}
        out.append(RunResult(run.recipe, ctx.seed, h, summarize(h), ctx.records, states, config))
    return out


def run_recipe(run: RunConfig | str, data: TaskData, seed: int = 0, *, start: RunResult | None = None,
               callbacks: Sequence = (), pretrain_data: TaskData | None = None, progress: bool = False) -> RunResult:
    """One run configuration (or recipe name), one seed: :func:`run_recipe_seeds` with K = 1
    (``start``: the run it continues; ``callbacks``: its trackers)."""
    return run_recipe_seeds(run, data, [seed], pretrain_data=pretrain_data, starts=None if start is None else [start],
                            callbacks=[callbacks], progress=progress)[0]


def resume(rec: Recipe, ctxs: Sequence[RunContext], gens: Sequence[torch.Generator], starts: Sequence[RunResult]):
    """Each seed takes up its prefix run's end: history, step count, generator state, and
    after a label phase its weights and optimizer state. Returns (histories, pretrained
    weights or None, label epochs done, optimizer states or None)."""
    histories = [copy.deepcopy(st.history) for st in starts]
    for ctx, gen, st, h in zip(ctxs, gens, starts, histories):
        ctx.step = h[-1]["step"]
        gen.set_state(st.states["resume"]["generator"])
    if rec.pretrains:
        return histories, [copy.deepcopy(st.states["final"]) for st in starts], 0, None
    for ctx, st in zip(ctxs, starts):
        ctx.model.load_state_dict(st.states["final"])
    opt_states = [{k: v for k, v in st.states["resume"].items() if k != "generator"} for st in starts]
    return histories, None, sum(h["phase"] == "finetune" for h in histories[0]), opt_states


def _plain(config: dict) -> Any:
    """``config`` as JSON would give it back (tuples as lists), to compare stored configs."""
    return json.loads(json.dumps(config))


def check_start(rec: Recipe, start: RunResult, seed: int, config: dict, callbacks: Sequence) -> None:
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
    parts = ("model", "train", "numerics") if rec.pretrains else ("model", "train", "evaluate", "numerics")
    mine, theirs = _plain({p: config.get(p) for p in parts}), _plain({p: start.config.get(p) for p in parts})
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
    """The seed of a run's data-order and mask generator."""
    return 10_007 * seed + 1


def transform_stream(seed: int) -> int:
    """The seed of the generator a transfer's transform draws from (never the data order's)."""
    return 10_007 * seed + 2


def check_inputs(rec: Recipe, data: TaskData, model_cfg: ModelConfig,
                 pretrain_data: TaskData | None) -> TaskData | None:
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


__all__ = ["RunConfig", "RunResult", "run_recipe", "run_recipe_seeds", "pretrain", "finetune", "resume", "plateaued",
           "stalled",
           "summarize", "transfer", "load_model", "check_start", "check_inputs", "seed_stream",
           "transform_stream"]
