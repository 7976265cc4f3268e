"""The checks' window on the real toy model (toyspt.model), in float64, through its hooks.

``T1_MODEL`` is theory.md's T1 setting on the real model: no MLP, no final LayerNorm and
W_Q = W_K = 0 (so the scores are exactly 0 and attention is uniform). The default model
has an MLP and a final LayerNorm, so T1/T2's identities are *not* expected there; the
checks report it as a measured figure.

Score gradients are read at the hook point ``blocks.0.attn.hook_attn_scores`` (retain_grad
on the hooked tensor); perturbations are added at the same point, or at ``hook_pattern``.
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F

from toyspt.attention import hooks
from toyspt.model import ModelConfig, ToyTransformer, build_model
from toyspt.tasks import TaskConfig, make_task, mask_inputs

HOOK_S = "blocks.0.attn.hook_attn_scores"
HOOK_A = "blocks.0.attn.hook_pattern"
T1_MODEL = ModelConfig(d_mlp=0, final_norm=False, qk_init_scale=0.0)
DEFAULT_UNIFORM = ModelConfig(qk_init_scale=0.0)  # MLP + final norm, uniform attention

LossOfModel = Callable[[ToyTransformer], torch.Tensor]  # per-example losses, shape (B,)


def toy_model(cfg: ModelConfig, seed: int = 0) -> ToyTransformer:
    return build_model(cfg, seed).double().eval()


def toy_batch(T: int, n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """n training sequences of the default task family at length T, float64."""
    data = make_task(TaskConfig(T=T, n_train=n, n_val=1, n_test=1, seed=seed))
    return data.train.x.double(), data.train.y


def label_losses(x: torch.Tensor, y: torch.Tensor) -> LossOfModel:
    return lambda model: F.cross_entropy(model.classify(x), y, reduction="none")


def recon_losses(x: torch.Tensor, mask: torch.Tensor, attend: str = "all") -> LossOfModel:
    """Per-example mean squared error on masked positions (recon_loss 'mse' per sequence)."""
    def fn(model):
        err = (model.reconstruct(x, mask, attend) - x) ** 2
        m = mask.to(x.dtype)
        return (err.mean(-1) * m).sum(-1) / m.sum(-1)
    return fn


def score_grad(model: ToyTransformer, loss: LossOfModel, head: int = 0
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """(scores, dL_b/dS_b) of layer 0, one head, per example: both (B, T, T)."""
    kept = {}

    def keep(t, name):
        t.retain_grad()
        kept["S"] = t
        return t

    model.zero_grad(set_to_none=True)
    with torch.enable_grad(), hooks(model, [(HOOK_S, keep)]):
        loss(model).sum().backward()
    S = kept["S"]
    if S.grad is None:
        raise RuntimeError("no gradient reached the attention scores")
    model.zero_grad(set_to_none=True)
    return S.detach()[:, head], S.grad.detach()[:, head]


def losses_with(model: ToyTransformer, loss: LossOfModel, point: str, delta: torch.Tensor,
                head: int = 0) -> torch.Tensor:
    """Per-example losses with ``delta`` (T x T or B x T x T) added to one head at ``point``."""
    def add(t, name):
        t = t.clone()
        t[:, head] = t[:, head] + delta
        return t

    with torch.no_grad(), hooks(model, [(point, add)]):
        return loss(model)


def logits_with_pattern(model: ToyTransformer, x: torch.Tensor, delta: torch.Tensor,
                        head: int = 0) -> torch.Tensor:
    def add(t, name):
        t = t.clone()
        t[:, head] = t[:, head] + delta
        return t

    with torch.no_grad(), hooks(model, [(HOOK_A, add)]):
        return model.classify(x)


def first_ln_input(model: ToyTransformer, x: torch.Tensor) -> torch.Tensor:
    """H = ln1(embed + PE) of block 0, (B, T, d_model): the scores are H M H^T when the
    Q/K biases are zero (M = W_Q^T W_K / sqrt(d_head))."""
    h = model.embed(mask_inputs(x, None))
    if model.pe is not None:
        h = model.pe(h)
    return model.blocks[0].ln1(h)


def positional_scores(model: ToyTransformer, T: int, head: int = 0) -> torch.Tensor:
    """Scores (T, T) of layer 0 for an all-zero input: only biases and positions remain."""
    kept = {}

    def keep(t, name):
        kept["S"] = t.detach()

    x = torch.zeros(1, T, model.cfg.d_in, dtype=next(model.parameters()).dtype)
    with torch.no_grad(), hooks(model, [(HOOK_S, keep)]):
        model.classify(x)
    return kept["S"][0, head]


def neighbour_contrast(S: torch.Tensor) -> float:
    """mean_{|i-j|=1} S_ij - mean_{i != j} S_ij after row-centring, in nats: > 0 means keys
    next to the query get more attention than the average key (proximity), < 0 anti-local."""
    T = S.shape[-1]
    Sc = S - S.mean(-1, keepdim=True)
    i = torch.arange(T)
    dist = (i[:, None] - i[None, :]).abs()
    return float(Sc[dist == 1].mean() - Sc[dist > 0].mean())


__all__ = ["HOOK_S", "HOOK_A", "T1_MODEL", "DEFAULT_UNIFORM", "toy_model", "toy_batch",
           "label_losses", "recon_losses", "score_grad", "losses_with", "logits_with_pattern",
           "first_ln_input", "positional_scores", "neighbour_contrast"]
