"""Offline demo of the LRA bridge: small Transformers of the LRA architecture trained on
generated ListOps, from scratch and with self-pretraining (SPT), saved as checkpoints of
the LRA code's format, then loaded back through the bridge and probed.

Per seed: ``init.ckpt`` (the shared initialisation), ``scratch.ckpt`` (classifier trained
from init), ``spt_pretrained.ckpt`` (masked-token reconstruction from init: ``<mask>``
inputs, cross-entropy on masked positions, per-token decoder only, as the code's SPT runs
save) and ``spt_finetuned.ckpt`` (its backbone + a fresh classifier, trained like scratch).
Every model is probed against ``init.ckpt`` as reference.

One seed of the demo is a run spec (:class:`DemoSpec`) like the toy's: it trains, writes
the four checkpoints to a temporary folder, loads them back through the bridge and probes
them, and its result (weights, tidy probe records, accuracies) goes through the run cache
and the sweep, so ``--recompute``, ``--workers`` and ``--dask`` reach it. :func:`run_demo`
sweeps the seeds and writes the checkpoints out again from the cached weights.
"""
from __future__ import annotations

import math
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, Sequence

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn

from toyspt.kinds import listops as lo
from toyspt.lra.checkpoint import load_lra, save_lra
from toyspt.lra.inputs import make_batch, mask_tokens, select, spt_mask
from toyspt.lra.model import LRAConfig, build_lra
from toyspt.lra.report import ReportConfig, lra_report
from toyspt.runs.cache import RunCache
from toyspt.runs.specs import FORMAT_VERSION, Spec, single_thread
from toyspt.train.evaluation import accuracy
from toyspt.train.loop import Lockstep, RunContext
from toyspt.util.atomic import write_text
from toyspt.util.hashing import digest
from toyspt.util.validation import Float, Instance, Int, validate, validated

MODELS = ("scratch", "spt_pretrained", "spt_finetuned")
SECONDS_PER_TOKEN_STEP = 1.5e-7  # reference-machine seconds per token-step x layer x width (a demo run's prior)


@dataclass(frozen=True)
class DemoConfig:
    # the generated ListOps (short trees: the demo trains in seconds per epoch)
    listops: lo.ListOpsConfig = validated(lo.ListOpsConfig(max_depth=4, max_args=5, min_len=16, max_len=64),
                                          Instance(lo.ListOpsConfig))
    # generated training examples (the SPT data is the same set)
    n_train: int = validated(4000, Int(gt=0))
    n_val: int = validated(500, Int(gt=0))  # held-out examples for accuracy
    n_probe: int = validated(16, Int(gt=0))  # held-out examples probed per model
    # the LRA architecture, small
    model: LRAConfig = validated(LRAConfig(n_layers=2, d_model=32, n_heads=4, d_ff=64, max_len=128),
                                 Instance(LRAConfig))
    epochs: int = validated(12, Int(gt=0))  # epochs of each phase (scratch, SPT pretraining, fine-tuning)
    # sequences per step, padded to the longest (the code's collate)
    batch_size: int = validated(32, Int(gt=0))
    lr: float = validated(1e-3, Float(gt=0))  # AdamW learning rate, constant
    weight_decay: float = validated(0.0, Float(ge=0))  # AdamW weight decay (0 in the code's ListOps config)
    p_mask: float = validated(0.5, Float(gt=0, le=1))  # SPT mask probability
    # what the probes report
    report: ReportConfig = validated(rule=Instance(ReportConfig), factory=ReportConfig)

    def __post_init__(self):
        validate(self)

    @classmethod
    def quick(cls) -> "DemoConfig":
        """A smoke-test version (seconds): fewer examples and epochs."""
        return cls(listops=lo.ListOpsConfig(max_depth=3, max_args=4, min_len=8, max_len=32),
                   n_train=400, n_val=100, n_probe=4, epochs=2,
                   model=LRAConfig(n_layers=2, d_model=16, n_heads=2, d_ff=32, max_len=64))

    def key(self) -> str:
        return digest(asdict(self))[:16]


@dataclass
class DemoResult:
    records: pd.DataFrame  # tidy per-layer/head records of every model and seed
    summary: pd.DataFrame  # one row per model and seed: accuracy, losses, headline probe numbers
    paths: dict  # (seed, model) -> checkpoint path


# ------------------------------------------------------------------------------ training

def _classify_loss(model, data, idx):
    b = select(data, idx)
    return F.cross_entropy(_logits(model, b), b["y"])


def _spt_loss(model, data, idx, p, g):
    b = select(data, idx)
    m = spt_mask(tuple(b["inputs"].shape), p, b["lengths"], g)
    if not bool(m.any()):
        return None
    logits = model.reconstruct(mask_tokens(b["inputs"], m))
    return F.cross_entropy(logits[m], b["inputs"][m])


def label_accuracy(model, data) -> float:
    """The classifier's accuracy (:func:`toyspt.train.evaluation.accuracy`) on padded token
    batches of 256."""
    model.eval()
    return accuracy(lambda rows: _logits(model, select(data, rows)), data["y"], 256)


def _logits(model, b):
    return model.classify(b["inputs"], b["lengths"])


@torch.no_grad()
def masked_token_accuracy(model, data, p: float, seed: int) -> float:
    model.eval()
    g = torch.Generator().manual_seed(seed)
    hit = tot = 0
    for i in range(0, len(data["y"]), 256):
        b = select(data, slice(i, i + 256))
        m = spt_mask(tuple(b["inputs"].shape), p, b["lengths"], g)
        pred = model.reconstruct(mask_tokens(b["inputs"], m)).argmax(-1)
        hit += int((pred[m] == b["inputs"][m]).sum())
        tot += int(m.sum())
    return hit / max(tot, 1)


def train_phase(model: nn.Module, data: dict, cfg: DemoConfig, seed: int, spt: bool,
                progress: str | None = None) -> list[float]:
    """AdamW over ``cfg.epochs`` epochs through the one training loop
    (:class:`toyspt.train.loop.Lockstep`, one model; a batch without a masked token is
    skipped); returns the mean training loss of each epoch."""
    lock = Lockstep([RunContext(model, "lra_demo", seed)])
    lock.start_phase("spt" if spt else "labels",
                     lambda ps: torch.optim.AdamW(ps, lr=cfg.lr, weight_decay=cfg.weight_decay))
    g = torch.Generator().manual_seed(seed)

    def loss(k, m, rows, gen):
        return _spt_loss(m, data, rows, cfg.p_mask, gen) if spt else _classify_loss(m, data, rows)

    history = []
    for epoch in range(cfg.epochs):
        (losses,) = lock.epoch(len(data["y"]), cfg.batch_size, [g], loss)
        history.append(sum(losses) / max(len(losses), 1))
        if progress:
            print(f"  {progress} epoch {epoch + 1}/{cfg.epochs}: loss {history[-1]:.4f}", flush=True)
    lock.release()
    return history


# ------------------------------------------------------------------------------- the demo

def _data(cfg: DemoConfig, seed: int):
    n = cfg.n_train + cfg.n_val
    trees = lo.generate(cfg.listops, n, seed=10_000 + seed)
    toks = [lo.tokens(t) for t in trees]
    vocab = lo.build_vocab(toks[: cfg.n_train])  # the code builds it from the training split
    for s in lo.SYMBOLS:  # a symbol absent from a tiny training set still gets a row
        if s not in vocab.stoi:
            vocab = lo.Vocab(vocab.itos + [s])
    b = lo.encode_batch(toks, [lo.evaluate(t) for t in trees], vocab)
    full = make_batch(b.ids, b.y, b.lengths, cfg.p_mask, seed)
    return select(full, slice(0, cfg.n_train)), select(full, slice(cfg.n_train, n)), vocab


def _model_configs(cfg: DemoConfig, n_tokens: int) -> tuple[LRAConfig, LRAConfig]:
    """(classifier config, SPT-pretraining config) for a vocabulary of ``n_tokens``."""
    mcfg = replace(cfg.model, n_tokens=n_tokens)
    return mcfg, replace(mcfg, head="none", rec_out=n_tokens)


def _datasets(cfg: DemoConfig, mcfg: LRAConfig) -> tuple[dict, dict]:
    """The run-config ``dataset`` entries of the classifier and SPT checkpoints."""
    ds = {"_name_": "listops_new", "l_max": mcfg.max_len, "append_eos": True, "mlm_prob": 0.0}
    return ds, dict(ds, _name_="listops_lm", mlm_prob=cfg.p_mask)


def _train_models(cfg: DemoConfig, seed: int, out: Path, progress: bool) -> tuple[dict, dict]:
    train, val, vocab = _data(cfg, seed)
    mcfg, pcfg = _model_configs(cfg, len(vocab))
    ds, ds_spt = _datasets(cfg, mcfg)
    info = {}
    write_text(out / "vocab.txt", "\n".join(vocab.itos) + "\n")
    init = build_lra(mcfg, seed)
    save_lra(out / "init.ckpt", init, dataset=ds)
    tag = (lambda s: f"seed {seed} {s}") if progress else (lambda s: None)

    t0 = time.perf_counter()
    scratch = build_lra(mcfg, seed)
    hist = train_phase(scratch, train, cfg, seed, spt=False, progress=tag("scratch"))
    save_lra(out / "scratch.ckpt", scratch, dataset=ds, epoch=cfg.epochs)
    info["scratch"] = dict(train_loss=hist[-1], val_acc=label_accuracy(scratch, val), seconds=time.perf_counter() - t0)

    t0 = time.perf_counter()
    pre = build_lra(pcfg, seed)
    pre.load_state_dict({k: v for k, v in init.state_dict().items() if not k.startswith("head_")}, strict=False)
    hist = train_phase(pre, train, cfg, seed, spt=True, progress=tag("spt pretraining"))
    save_lra(out / "spt_pretrained.ckpt", pre, dataset=ds_spt, epoch=cfg.epochs)
    info["spt_pretrained"] = dict(train_loss=hist[-1], val_masked_acc=masked_token_accuracy(pre, val, cfg.p_mask, seed),
                                  seconds=time.perf_counter() - t0)

    t0 = time.perf_counter()
    ft = build_lra(mcfg, seed)  # its fresh classifier head = init's; the backbone from SPT
    ft.load_state_dict({k: v for k, v in pre.state_dict().items() if not k.startswith("head_")}, strict=False)
    hist = train_phase(ft, train, cfg, seed + 1, spt=False, progress=tag("spt fine-tuning"))
    save_lra(out / "spt_finetuned.ckpt", ft, dataset=ds, epoch=cfg.epochs)
    info["spt_finetuned"] = dict(train_loss=hist[-1], val_acc=label_accuracy(ft, val), seconds=time.perf_counter() - t0)
    models = {"init": init, "scratch": scratch, "spt_pretrained": pre, "spt_finetuned": ft}
    return info, {k: {n: t.detach().clone() for n, t in m.state_dict().items()} for k, m in models.items()}


def _probe_all(cfg: DemoConfig, seed: int, out: Path) -> tuple[pd.DataFrame, list[dict]]:
    _, val, vocab = _data(cfg, seed)
    probe_batch = select(val, slice(0, cfg.n_probe))
    fit_batch = select(val, slice(cfg.n_probe, len(val["y"])))
    ref = load_lra(out / "init.ckpt").model
    frames, rows = [], []
    for name in MODELS:
        loaded = load_lra(out / f"{name}.ckpt")
        rep = lra_report(loaded.model, probe_batch, fit_batch=fit_batch, ref=ref, cfg=cfg.report,
                         notes=loaded.report.notes)
        frames.append(rep.records().assign(model=name, seed=seed))
        t = rep.table()
        row = dict(model=name, seed=seed)
        for col in t.columns:
            if col not in ("layer", "head"):
                row[col] = float(t[col].median())
        rows.append(row)
        rep.write(out / f"report_{name}", figure=False)
    return pd.concat(frames, ignore_index=True), rows


# --------------------------------------------------------------------------- the run spec

@dataclass
class DemoRun:
    """One seed of the demo, a cache entry of its own: the four models' weights, the tidy
    probe records, one summary row per model (accuracies, losses, seconds, probe medians)."""

    seed: int
    records: list[dict]  # tidy probe records (toyspt.lra.report)
    models: list[dict]  # one summary row per model
    states: dict[str, dict[str, torch.Tensor]]  # init, scratch, spt_pretrained, spt_finetuned
    config: dict[str, Any]  # the demo config (asdict) and the generated vocabulary
    seconds: float | None = None  # wall seconds the seed took

    def to_json(self) -> dict[str, Any]:
        return dict(seed=self.seed, records=self.records, models=self.models, config=self.config,
                    seconds=self.seconds)

    def tensors(self) -> dict[str, dict[str, torch.Tensor]]:
        return self.states

    @classmethod
    def from_stored(cls, blob: dict[str, Any], tensors: dict) -> "DemoRun":
        return cls(blob["seed"], blob["records"], blob["models"], tensors, blob["config"], blob.get("seconds"))


@dataclass(frozen=True)
class DemoSpec(Spec):
    """One seed of the demo: train, save, load back, probe (see the module docstring)."""

    kind: ClassVar[str] = "lra_demo"
    result_type: ClassVar[type] = DemoRun

    seed: int  # data, initialisation and data order
    config: DemoConfig = field(default_factory=DemoConfig)  # sizes and training settings

    def to_dict(self) -> dict[str, Any]:
        return dict(kind=self.kind, format=FORMAT_VERSION, seed=self.seed, config=asdict(self.config))

    def label(self) -> str:
        return f"LRA demo run {self.key()} (seed {self.seed})"

    def seconds(self) -> float:
        """Its three phases (scratch, SPT, fine-tuning; the same epochs each): token-steps x layers
        x width, at :data:`SECONDS_PER_TOKEN_STEP` on the reference machine."""
        cfg = self.config
        T = (cfg.listops.min_len + cfg.listops.max_len) / 2
        return SECONDS_PER_TOKEN_STEP * cfg.n_train * T * 3 * cfg.epochs * cfg.model.n_layers * cfg.model.d_model

    def execute(self, progress: bool = False, start=None) -> DemoRun:
        if start is not None:
            raise ValueError(f"{self.label()}: has no parent run to continue")
        return single_thread(self._execute, progress)

    def _execute(self, progress: bool) -> DemoRun:
        cfg, seed = self.config, self.seed
        with tempfile.TemporaryDirectory(prefix="toyspt-lra-demo-") as d:
            info, states = _train_models(cfg, seed, Path(d), progress)
            recs, rows = _probe_all(cfg, seed, Path(d))
            vocab = (Path(d) / "vocab.txt").read_text().splitlines()
        for r in rows:
            r.update({k: v for k, v in info[r["model"]].items() if not math.isnan(v)})
        return DemoRun(seed, _plain(recs), _plain(pd.DataFrame(rows)), states, dict(demo=asdict(cfg), vocab=vocab))


def _plain(frame: pd.DataFrame) -> list[dict]:
    """Rows of ``frame`` with numpy scalars as Python numbers (JSON-ready)."""
    return [{k: (v.item() if hasattr(v, "item") else v) for k, v in row.items()} for row in frame.to_dict("records")]


def _frame(rows: Sequence[dict]) -> pd.DataFrame:
    """Inverse of :func:`_plain` after the cache's JSON round trip ("nan" strings -> NaN)."""
    f = pd.DataFrame(list(rows)).replace("nan", np.nan)
    for c in f.columns:
        if f[c].dtype == object:
            try:
                f[c] = pd.to_numeric(f[c])
            except (ValueError, TypeError):
                pass
    return f


def demo_frames(results: Sequence[DemoRun]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(tidy probe records, one summary row per model and seed) of finished demo runs."""
    return (pd.concat([_frame(r.records) for r in results], ignore_index=True),
            pd.concat([_frame(r.models) for r in results], ignore_index=True))


def write_checkpoints(result: DemoRun, out: Path) -> dict[str, Path]:
    """The four checkpoints (and ``vocab.txt``) of a demo run, written from its weights."""
    cfg = _config_of(result.config["demo"])
    vocab = result.config["vocab"]
    mcfg, pcfg = _model_configs(cfg, len(vocab))
    ds, ds_spt = _datasets(cfg, mcfg)
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / "vocab.txt", "\n".join(vocab) + "\n")
    paths = {}
    for name, mc, dset, epoch in (("init", mcfg, ds, 0), ("scratch", mcfg, ds, cfg.epochs),
                                  ("spt_pretrained", pcfg, ds_spt, cfg.epochs),
                                  ("spt_finetuned", mcfg, ds, cfg.epochs)):
        model = build_lra(mc, 0)
        model.load_state_dict(result.states[name])
        paths[name] = out / f"{name}.ckpt"
        save_lra(paths[name], model, dataset=dset, epoch=epoch)
    return paths


def _config_of(d: dict) -> DemoConfig:
    return DemoConfig(listops=lo.ListOpsConfig(**_tuples(d["listops"])), model=LRAConfig(**_tuples(d["model"])),
                      report=ReportConfig(**_tuples(d["report"])),
                      **{k: v for k, v in d.items() if k not in ("listops", "model", "report")})


def _tuples(d: dict) -> dict:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}


def run_demo(cfg: DemoConfig = DemoConfig(), out: Path | str | None = "lra_demo", seeds: Sequence[int] = (0, 1, 2),
             progress: bool = False, recompute: bool = False, cache: RunCache | None = None,
             workers: int = 1, executor=None) -> DemoResult:
    """Every seed through the run cache (trained on a miss), the checkpoints written to
    ``out/seed<k>/`` (unless ``out`` is None), the records and summary gathered."""
    from toyspt.runs.sweeps import SweepOptions, sweep

    specs = [DemoSpec(int(s), cfg) for s in seeds]
    if not specs:
        raise ValueError("seeds: need at least one seed")
    results = sweep(specs, cache or RunCache(), SweepOptions(workers=workers, executor=executor, progress=progress,
                                                             desc="lra demo"), recompute=recompute)
    paths = {}
    if out is not None:
        for spec, res in zip(specs, results):
            for name, path in write_checkpoints(res, Path(out) / f"seed{spec.seed}").items():
                paths[spec.seed, name] = path
    records, summary = demo_frames(results)
    return DemoResult(records, summary, paths)


__all__ = ["DemoConfig", "DemoSpec", "DemoRun", "DemoResult", "run_demo", "demo_frames", "write_checkpoints",
           "train_phase",
           "label_accuracy", "masked_token_accuracy", "MODELS"]
