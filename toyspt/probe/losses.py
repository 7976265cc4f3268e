"""The toy model's probe losses and their batch format.

A probe loss is any ``loss_fn(model, batch) -> scalar`` (:data:`LossFn`). These adapt
:class:`toyspt.nn.model.ToyTransformer` to that form: ``label`` (cross-entropy of the
mean-pooled classifier) and ``recon`` (masked reconstruction, the SPT loss), reading a batch
``{"x", "y", "mask"}`` built by :func:`make_batch`. :data:`TOY_LOSSES` is the table of names
:mod:`toyspt.probe.engine` resolves by default; the LRA bridge's adapters live in
:mod:`toyspt.lra.inputs`.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

import torch
import torch.nn.functional as F
from torch import nn

from toyspt.data.tasks import recon_loss, sample_mask

LossFn = Callable[[nn.Module, Any], torch.Tensor]


def make_batch(x: torch.Tensor, y: torch.Tensor | None = None, mask_rate: float = 0.5,
               seed: int = 0) -> dict[str, torch.Tensor]:
    """``{"x", "y", "mask"}`` with a Bernoulli(mask_rate) SPT mask drawn from ``seed``."""
    if x.dim() != 3:
        raise ValueError(f"x: expected (B, T, dim), got {tuple(x.shape)}")
    mask = sample_mask(x.shape[0], x.shape[1], mask_rate, torch.Generator().manual_seed(seed))
    batch = dict(x=x, mask=mask)
    if y is not None:
        if y.shape != x.shape[:1]:
            raise ValueError(f"y: expected shape ({x.shape[0]},), got {tuple(y.shape)}")
        batch["y"] = y
    return batch


def label_loss(model: nn.Module, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """Mean cross-entropy of ``model.classify(x)`` (mean-pooled classifier) against ``y``."""
    if "y" not in batch:
        raise KeyError("the 'label' loss needs labels: batch has no 'y'")
    return F.cross_entropy(model.classify(batch["x"]), batch["y"])


def recon(kind: str = "l1", attend: str = "all") -> LossFn:
    """Masked reconstruction (``model.reconstruct`` + :func:`toyspt.data.tasks.recon_loss`) on
    the batch's ``mask``; ``kind`` l1 (the SPT default) or mse (theory.md T3)."""

    def recon_loss_fn(model: nn.Module, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        if "mask" not in batch:
            raise KeyError("the 'recon' loss needs a mask: build the batch with make_batch")
        x, m = batch["x"], batch["mask"]
        return recon_loss(model.reconstruct(x, m, attend), x, m, kind)

    recon_loss_fn.__name__ = f"recon_{kind}"
    return recon_loss_fn


TOY_LOSSES: dict[str, LossFn] = {"label": label_loss, "recon": recon("l1")}

__all__ = ["LossFn", "make_batch", "label_loss", "recon", "TOY_LOSSES"]
