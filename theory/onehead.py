"""The analysed model: one attention head in float64, written as functions of the scores S.

Label path (theory.md T1 setting): tokens X (T x d), values V = X W_V, head output
O = A V with A = softmax_row(S), a residual that is affine per token
(Y = O W_O + X), mean pooling z = mean_i Y_i and a linear classifier with cross-entropy.

Reconstruction path (T3/T4): tokens X~ in which masked rows' content is replaced by a mask
embedding e (positions, when used, are added after masking), yhat = (A X~ W_V W_O + X~) W_r + b_r per token, and
L_rec = (1/|M|) sum_{m masked} ||yhat_m - x_m||^2 with x_m the first d_out coordinates of
the clean token.

Every loss is returned per example, shape (B,), so ``score_grad`` gives per-example
gradients dL_b/dS_b in one backward pass.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from toyspt.data import tasks
from toyspt.nn.positional import sinusoidal_table

DTYPE = torch.float64


@dataclass(frozen=True)
class OneHeadConfig:
    T: int = 8  # tokens per sequence
    d: int = 6  # token (residual) width
    d_head: int = 6  # query/key width
    n_classes: int = 3  # classifier outputs
    d_out: int = 2  # reconstructed coordinates per token
    sigma_qk: float = 0.0  # W_Q, W_K = sigma_qk * N(0, 1/d); 0 gives S = 0 (uniform attention)
    pos: bool = False  # add the sinusoidal position table to the tokens
    seed: int = 0  # seeds the weights

    def __post_init__(self):
        for name in ("T", "d", "d_head", "n_classes", "d_out"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name}: must be positive, got {getattr(self, name)}")
        if self.T < 2:
            raise ValueError(f"T: need at least 2 tokens, got {self.T}")
        if self.d_out > self.d:
            raise ValueError(f"d_out={self.d_out} cannot exceed d={self.d}")
        if self.sigma_qk < 0:
            raise ValueError(f"sigma_qk: must be >= 0, got {self.sigma_qk}")


def init_params(cfg: OneHeadConfig) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(cfg.seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=DTYPE)  # noqa: E731
    d = cfg.d
    return dict(W_Q=cfg.sigma_qk * r(d, cfg.d_head) / math.sqrt(d),
                W_K=cfg.sigma_qk * r(d, cfg.d_head) / math.sqrt(d),
                W_V=r(d, d) / math.sqrt(d), W_O=r(d, d) / math.sqrt(d),
                W_c=r(d, cfg.n_classes), b_c=0.1 * r(cfg.n_classes),
                W_r=r(d, cfg.d_out) / math.sqrt(d), b_r=0.1 * r(cfg.d_out),
                e_mask=r(d))


def sample_tokens(cfg: OneHeadConfig, B: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token *content* X (B, T, d), i.i.d. N(0, 1), and labels y (B,). Positions are added
    by :func:`positions` (label path) or after masking (:func:`masked_tokens`)."""
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(B, cfg.T, cfg.d, generator=g, dtype=DTYPE)
    y = torch.randint(cfg.n_classes, (B,), generator=g)
    return X, y


def positions(cfg: OneHeadConfig) -> torch.Tensor | None:
    """The sinusoidal table (T, d) when cfg.pos, else None."""
    return sinusoidal_table(cfg.T, cfg.d, DTYPE) if cfg.pos else None


def with_positions(cfg: OneHeadConfig, X: torch.Tensor) -> torch.Tensor:
    pe = positions(cfg)
    return X if pe is None else X + pe


def sample_mask(B: int, T: int, rate: float, seed: int) -> torch.Tensor:
    """toyspt's SPT mask (B, T): Bernoulli(rate), True = masked, never empty; seeded."""
    return tasks.sample_mask(B, T, rate, torch.Generator().manual_seed(seed))


def scores(p: dict, X: torch.Tensor) -> torch.Tensor:
    """S = X W_Q (X W_K)^T / sqrt(d_head), (B, T, T)."""
    return (X @ p["W_Q"]) @ (X @ p["W_K"]).transpose(-1, -2) / math.sqrt(p["W_Q"].shape[1])


def label_logits(p: dict, X: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
    Y = (A @ (X @ p["W_V"])) @ p["W_O"] + X  # affine per token after the head
    return Y.mean(dim=1) @ p["W_c"] + p["b_c"]


def label_losses(p: dict, X: torch.Tensor, y: torch.Tensor, S: torch.Tensor) -> torch.Tensor:
    """Per-example cross-entropy of the mean-pooled classifier, as a function of S."""
    return F.cross_entropy(label_logits(p, X, torch.softmax(S, dim=-1)), y, reduction="none")


def masked_tokens(p: dict, X: torch.Tensor, mask: torch.Tensor, pe: torch.Tensor | None = None
                  ) -> torch.Tensor:
    """Masked rows' content replaced by the mask embedding; then positions (as in the toy
    model, where the mask zeroes the content and the positional table is added after)."""
    m = mask.to(X.dtype)[..., None]
    Xt = X * (1 - m) + m * p["e_mask"]
    return Xt if pe is None else Xt + pe


def recon_preds(p: dict, Xt: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
    return ((A @ (Xt @ p["W_V"])) @ p["W_O"] + Xt) @ p["W_r"] + p["b_r"]


def recon_losses(p: dict, X: torch.Tensor, mask: torch.Tensor, S: torch.Tensor,
                 pe: torch.Tensor | None = None) -> torch.Tensor:
    """Per-example (1/|M|) sum_{m in M} ||yhat_m - x_m||^2 (squared error on masked rows;
    x_m the first d_out content coordinates)."""
    d_out = p["W_r"].shape[1]
    err = (recon_preds(p, masked_tokens(p, X, mask, pe), torch.softmax(S, dim=-1))
           - X[..., :d_out]) ** 2
    m = mask.to(X.dtype)
    return (err.sum(-1) * m).sum(-1) / m.sum(-1)


LossOfScores = Callable[[torch.Tensor], torch.Tensor]


def score_grad(loss_fn: LossOfScores, S: torch.Tensor) -> torch.Tensor:
    """Per-example dL_b/dS_b, (B, T, T), by autograd (losses of different examples do not
    share scores, so the gradient of their sum is the stack of per-example gradients)."""
    S = S.detach().clone().requires_grad_(True)
    (g,) = torch.autograd.grad(loss_fn(S).sum(), S)
    if g is None:
        raise RuntimeError("loss does not depend on the scores")
    return g


def directional_fd(loss_fn: LossOfScores, S: torch.Tensor, D: torch.Tensor, h: float
                   ) -> torch.Tensor:
    """Central difference (L(S + hD) - L(S - hD)) / 2h, per example."""
    with torch.no_grad():
        return (loss_fn(S + h * D) - loss_fn(S - h * D)) / (2 * h)


__all__ = ["OneHeadConfig", "init_params", "sample_tokens", "sample_mask", "scores",
           "positions", "with_positions", "label_logits", "label_losses", "masked_tokens", "recon_preds",
           "recon_losses",
           "score_grad", "directional_fd", "DTYPE"]
