"""The heads an LRA checkpoint lacks, constructed on its frozen features so that both probe
losses (label and reconstruction) exist for every model the bridge loads.

* **No classifier** (an SPT checkpoint): a linear classifier fitted on the frozen pooled
  features (ridge-penalised cross-entropy, LBFGS, from a seeded init).
* **No token decoder** (a ListOps classifier): a linear decoder fitted the same way on the
  frozen features of masked positions (cross-entropy against the masked ids; the embedding
  keeps its ``<mask>`` row, so the masked input is the one SPT saw).
* **No pixel decoder** (a fine-tuned or scratch pixel classifier, CIFAR and PathFinder alike:
  that code's fine-tuning drops the SPT decoder and the encoder's mask column, so the file has
  an input weight of shape (d, 1)): the encoder is given a **zero mask column**, which is what
  the fine-tuned encoder is, the SPT encoder minus that column, so a masked position is the
  value 0 with no indicator and clean inputs are unchanged; the decoder is the
  **least-squares linear readout** ``[H, 1] w ~ x`` of the masked pixel values ``x`` from the
  frozen final features ``H`` at the masked positions (closed form, ``torch.linalg.lstsq``,
  minimum-norm where ``H`` is rank-deficient). Why least squares: the recon gradient a probe
  measures needs a decoder that reads what the features carry about the masked pixels; a
  zero decoder gives the recon loss no gradient at all (the ratio is undefined), a random one
  an arbitrary direction, and an iterative fit of the non-smooth L1 loss stops wherever its
  iterations end, while the least-squares readout is unique, deterministic and seed-free, the
  decoder a first SPT step on frozen features moves towards. The probed loss stays that
  code's (L1 on masked pixels); notes give the fit's R^2 and L1.
"""
from __future__ import annotations

import copy
from dataclasses import replace

import torch
import torch.nn.functional as F
from torch import nn

from toyspt.lra.inputs import documents, mask_pixels, mask_tokens
from toyspt.lra.model import LRATransformer

FIT_STEPS, FIT_L2, FIT_SEED = 200, 1e-3, 0  # LBFGS iterations, ridge penalty, init seed of fitted linear heads


def clean_inputs(model: LRATransformer, x: torch.Tensor) -> torch.Tensor:
    """Classification inputs: ids, or pixel values (+ an all-zero indicator channel)."""
    if model.cfg.token_task or model.cfg.d_input == 1:
        return x
    return torch.cat([x, torch.zeros_like(x)], dim=-1)


def _ridge_fit(head: nn.Linear, X: torch.Tensor, loss_fn, steps: int, l2: float) -> float:
    opt = torch.optim.LBFGS(head.parameters(), max_iter=steps, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = loss_fn(head(X)) + l2 * head.weight.pow(2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        return float(loss_fn(head(X)))


@torch.no_grad()
def with_mask_column(model: LRATransformer) -> LRATransformer:
    """A pixel model with a 1-value encoder (d, 1) as the same model with a zero mask column
    (d, 2): identical on clean inputs; a masked pixel reads as the value 0 without indicator."""
    if model.cfg.token_task or model.cfg.d_input != 1:
        raise ValueError("with_mask_column: only a pixel model reading one value per position (d_input 1)")
    wide = copy.deepcopy(model)
    wide.cfg = replace(model.cfg, d_input=2)
    w = model.embed.weight
    wide.embed = nn.Linear(2, w.shape[0]).to(w.dtype)
    wide.embed.weight.copy_(torch.cat([w, torch.zeros_like(w)], dim=1))
    wide.embed.bias.copy_(model.embed.bias)
    return wide


@torch.no_grad()
def least_squares_decoder(model: LRATransformer, x: torch.Tensor, m: torch.Tensor) -> tuple[nn.Linear, float, float]:
    """(decoder, R^2, L1) of the least-squares readout of masked pixel values ``x[m]`` from the
    frozen features of the masked input ``[x (1 - m), m]`` (see the module docstring)."""
    H = model.encode(mask_pixels(x, m))[m].double()
    t = x[m][:, 0].double()
    A = torch.cat([H, torch.ones(len(H), 1, dtype=H.dtype)], dim=1)
    w = torch.linalg.lstsq(A, t[:, None], driver="gelsd").solution[:, 0]
    head = nn.Linear(model.cfg.d_model, 1).to(model.embed.weight.dtype)
    head.weight.copy_(w[:-1][None])
    head.bias.copy_(w[-1:])
    pred = A @ w
    r2 = 1.0 - float(((pred - t) ** 2).sum() / ((t - t.mean()) ** 2).sum().clamp_min(1e-300))
    return head, r2, float((pred - t).abs().mean())


def _fit_classifier(model, fit_batch, x, n_classes, steps, l2, notes):
    if "y" not in fit_batch:
        raise ValueError("the model has no classifier and the data has no labels to fit one")
    dtype = next(model.parameters()).dtype
    with torch.no_grad():
        X = model.features(clean_inputs(model, x), fit_batch["lengths"])
    y = fit_batch["y"]
    seen = int(y.max()) + 1
    if n_classes is None:
        n_classes = seen
        notes.append(f"classifier classes: {seen}, from the labels seen (pass the task's class count to fix it)")
    elif seen > n_classes:
        raise ValueError(f"labels reach {seen - 1} but the task has {n_classes} classes")
    model.head_cls = nn.Linear(X.shape[-1], n_classes).to(dtype)
    loss = _ridge_fit(model.head_cls, X, lambda z: F.cross_entropy(z, y), steps, l2)
    acc = float((model.head_cls(X).argmax(-1) == y).double().mean())
    notes.append(f"classifier: none in the checkpoint; a linear head was fitted on frozen pooled features of "
                 f"{len(y)} examples (train CE {loss:.3f}, acc {acc:.2f})")


def _fit_decoder(model, fit_batch, steps, l2, notes):
    docs = documents(fit_batch)  # retrieval pairs: both documents
    x, m = docs["inputs"], docs["mask"]
    x = x.to(next(model.parameters()).dtype) if x.is_floating_point() else x
    if not model.cfg.token_task:
        if model.cfg.d_input == 1:
            model = with_mask_column(model)
            notes.append("encoder: no mask column (a fine-tuned or scratch pixel classifier); a zero mask column "
                         "was added, so a masked pixel reads as the value 0 without indicator")
        head, r2, l1 = least_squares_decoder(model, x, m)
        model.head_rec = head
        notes.append(f"per-token decoder: none in the checkpoint; the least-squares linear readout of the masked "
                     f"pixel values from frozen features of {int(m.sum())} masked positions (R^2 {r2:.3f}, "
                     f"L1 {l1:.3f}); the probed loss is L1")
        return model
    with torch.no_grad():
        H = model.encode(mask_tokens(x, m))[m]
    target = x[m]
    model.head_rec = nn.Linear(model.cfg.d_model, model.cfg.n_tokens).to(H.dtype)
    loss = _ridge_fit(model.head_rec, H, lambda z: F.cross_entropy(z, target), steps, l2)
    notes.append(f"per-token decoder: none in the checkpoint; a linear decoder was fitted on frozen features of "
                 f"{int(m.sum())} masked positions (train loss {loss:.3f})")
    return model


def fit_missing_heads(model: LRATransformer, fit_batch: dict, cfg=None,
                      n_classes: int | None = None) -> tuple[LRATransformer, list[str]]:
    """A copy of ``model`` with the heads it lacks constructed on frozen features of
    ``fit_batch`` (see the module docstring); notes say what was constructed. ``cfg``: any
    object with ``fit_steps`` and ``fit_l2`` (a :class:`toyspt.lra.report.ReportConfig`). The
    fitted classifier has ``n_classes`` outputs (the task's count), never fewer than the labels
    seen, so a small fit set cannot leave a probed label out of range."""
    notes: list[str] = []
    if model.head_cls is not None and model.head_rec is not None:
        return model, notes
    steps, l2 = getattr(cfg, "fit_steps", FIT_STEPS), getattr(cfg, "fit_l2", FIT_L2)
    model = copy.deepcopy(model)
    x = fit_batch["inputs"]
    x = x.to(next(model.parameters()).dtype) if x.is_floating_point() else x
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(FIT_SEED)
        if model.head_cls is None:
            _fit_classifier(model, fit_batch, x, n_classes, steps, l2, notes)
        if model.head_rec is None:
            model = _fit_decoder(model, fit_batch, steps, l2, notes)
    return model.eval(), notes


__all__ = ["FIT_STEPS", "FIT_L2", "FIT_SEED", "clean_inputs", "with_mask_column", "least_squares_decoder",
           "fit_missing_heads"]
