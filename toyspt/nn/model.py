"""The toy attention classifier: linear embedding (+ mask channel), positional encoding,
L pre-norm blocks of explicit attention and an optional MLP, final norm, mean pooling and
a linear classifier, plus a per-token reconstruction head for self-pretraining.

Parameter names are stable and used by the recipes: ``embed``, ``pe.table`` (learned PE),
``pos_bias.*`` (FIRE), ``blocks.{l}.ln1|attn.W_Q|W_K|W_V|W_O|ln2|mlp.{0,2}``, ``ln_f``,
``head_cls`` (classifier) and ``head_rec`` (reconstruction).
"""
from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass

import torch
from torch import nn

from toyspt.data.tasks import mask_inputs
from toyspt.nn.attention import Attention, HookPoint
from toyspt.nn.positional import ABSOLUTE, FIRE, POS_KINDS, AbsolutePE, ALiBi
from toyspt.util.validation import (
    MAX_LENGTH,
    MAX_SCALE,
    MAX_WIDTH,
    Bool,
    Float,
    Int,
    Text,
    validate,
    validated,
    within_memory,
)

SPT_ATTENTION = ("all", "no_masked_keys", "no_self")
HEAD_PREFIXES = ("head_cls.", "head_rec.")


@dataclass(frozen=True)
class ModelConfig:
    d_in: int = validated(2, Int(gt=0, le=MAX_WIDTH))  # raw features per token (the embedding adds a mask channel)
    d_model: int = validated(32, Int(gt=0, le=MAX_WIDTH))  # residual width
    n_heads: int = validated(1, Int(gt=0, le=MAX_WIDTH))  # heads per layer (contiguous blocks of d_model / n_heads)
    n_layers: int = validated(1, Int(gt=0, le=1024))  # number of pre-norm blocks
    d_mlp: int = validated(128, Int(ge=0, le=8 * MAX_WIDTH))  # hidden width of each block's MLP; 0 removes the MLP
    pos: str = validated("sinusoidal", Text(POS_KINDS))  # positional encoding, one of POS_KINDS
    max_len: int = validated(512, Int(gt=0, le=MAX_LENGTH))  # longest sequence the positional table covers
    n_classes: int = validated(2, Int(ge=2, le=MAX_WIDTH))  # classifier outputs
    # multiplies the default init of W_Q, W_K; 0 = uniform attention
    qk_init_scale: float = validated(1.0, Float(ge=0, le=MAX_SCALE))
    # LayerNorm before pooling; False (+ d_mlp=0) is theory.md's T1 setting
    final_norm: bool = validated(True, Bool())
    fire_hidden: int = validated(32, Int(gt=0, le=MAX_WIDTH))  # hidden width of FIRE's bias MLP
    # ALiBi slopes 2^(-base*h/H); 8 is standard (1/256 for one head)
    alibi_base: float = validated(8.0, Float(gt=0, le=MAX_SCALE))
    # 0: the reconstruction head regresses each of the d_in values; L > 1: it gives L logits per
    # value, one per grey level of [-1, 1] (the LRA SPT code's 256-way pixel loss, recon "levels")
    rec_levels: int = validated(0, Int(ge=0, le=MAX_WIDTH), later=True)

    def __post_init__(self):
        validate(self)
        within_memory("model", "n_layers x (4 d_model^2 + 2 d_model d_mlp) parameters (float32)",
                      self.n_layers * (4 * self.d_model ** 2 + 2 * self.d_model * self.d_mlp), 4)
        if self.d_model % self.n_heads:
            raise ValueError(f"n_heads: d_model={self.d_model} is not divisible by {self.n_heads}")
        if self.pos == "rope" and (self.d_model // self.n_heads) % 2:
            raise ValueError("pos: rope needs an even head dimension")
        if self.rec_levels == 1:
            raise ValueError("rec_levels: 0 (regress values) or at least 2 grey levels, got 1")


class Block(nn.Module):
    """Pre-norm residual block: x + attn(ln1(x)), then x + mlp(ln2(x)) if d_mlp > 0."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = Attention(cfg.d_model, cfg.n_heads, bias=True, use_rope=cfg.pos == "rope")
        self.hook_resid_pre = HookPoint()
        self.hook_resid_mid = HookPoint()
        if cfg.d_mlp > 0:
            self.ln2 = nn.LayerNorm(cfg.d_model)
            self.mlp = nn.Sequential(nn.Linear(cfg.d_model, cfg.d_mlp), nn.GELU(),
                                     nn.Linear(cfg.d_mlp, cfg.d_model))
        else:
            self.ln2, self.mlp = None, None

    def forward(self, x, bias=None, allowed=None):
        x = self.hook_resid_pre(x)
        x = self.hook_resid_mid(x + self.attn(self.ln1(x), bias, allowed))
        if self.mlp is not None:
            x = x + self.mlp(self.ln2(x))
        return x


class ToyTransformer(nn.Module):
    """Attention classifier over (B, T, d_in) sequences; see the module docstring."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Linear(cfg.d_in + 1, cfg.d_model)
        self.pe = AbsolutePE(cfg.pos, cfg.max_len, cfg.d_model) if cfg.pos in ABSOLUTE else None
        if cfg.pos == "alibi":
            self.pos_bias = ALiBi(cfg.n_heads, cfg.alibi_base)
        elif cfg.pos == "fire":
            self.pos_bias = FIRE(cfg.n_heads, cfg.fire_hidden, init_L=float(cfg.max_len))
        else:
            self.pos_bias = None
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model) if cfg.final_norm else nn.Identity()
        self.hook_pooled = HookPoint()
        self.head_cls = nn.Linear(cfg.d_model, cfg.n_classes)
        self.head_rec = nn.Linear(cfg.d_model, cfg.d_in * (cfg.rec_levels or 1))
        for blk in self.blocks:
            for lin in (blk.attn.W_Q, blk.attn.W_K):
                with torch.no_grad():
                    lin.weight.mul_(cfg.qk_init_scale)
                    lin.bias.zero_()
            nn.init.zeros_(blk.attn.W_V.bias)
            nn.init.zeros_(blk.attn.W_O.bias)

    @property
    def attentions(self) -> list[Attention]:
        return [blk.attn for blk in self.blocks]

    def encode(self, tokens_BxTxC: torch.Tensor, allowed_BxTxT: torch.Tensor | None = None
               ) -> torch.Tensor:
        """Hidden states (B, T, d_model) after the final norm; tokens include the mask channel."""
        if tokens_BxTxC.dim() != 3 or tokens_BxTxC.shape[-1] != self.cfg.d_in + 1:
            raise ValueError(f"expected tokens of shape (B, T, {self.cfg.d_in + 1}), "
                             f"got {tuple(tokens_BxTxC.shape)}")
        T = tokens_BxTxC.shape[1]
        if T > self.cfg.max_len:
            raise ValueError(f"sequence length {T} exceeds max_len={self.cfg.max_len}")
        x = self.embed(tokens_BxTxC)
        if self.pe is not None:
            x = self.pe(x)
        bias = self.pos_bias(T, x.dtype) if self.pos_bias is not None else None
        for blk in self.blocks:
            x = blk(x, bias, allowed_BxTxT)
        return self.ln_f(x)

    def classify(self, x_BxTxD: torch.Tensor) -> torch.Tensor:
        """Class logits (B, n_classes) from unmasked inputs: mean pooling over tokens."""
        h = self.encode(mask_inputs(x_BxTxD, None))
        return self.head_cls(self.hook_pooled(h.mean(dim=1)))

    forward = classify

    def reconstruct(self, x_BxTxD: torch.Tensor, mask_BxT: torch.Tensor, attend: str = "all"
                    ) -> torch.Tensor:
        """Per-token predictions (B, T, d_in), or (B, T, d_in * rec_levels) grey-level logits, from
        masked inputs (values zeroed + indicator)."""
        allowed = spt_allowed(mask_BxT, attend)
        return self.head_rec(self.encode(mask_inputs(x_BxTxD, mask_BxT), allowed))


def spt_allowed(mask_BxT: torch.Tensor, attend: str) -> torch.Tensor | None:
    """Which keys masked queries may attend to during SPT (unmasked queries see all).

    ``all``: every key; ``no_masked_keys``: only unmasked keys (a row with none left keeps
    all); ``no_self``: every key but itself.
    """
    if attend == "all":
        return None
    B, T = mask_BxT.shape
    if attend == "no_masked_keys":
        allowed = (~mask_BxT)[:, None, :].expand(B, T, T).clone()
        allowed = allowed | ~allowed.any(dim=-1, keepdim=True)  # vmap-friendly, no in-place
    elif attend == "no_self":
        allowed = ~torch.eye(T, dtype=torch.bool, device=mask_BxT.device).expand(B, T, T)
    else:
        raise ValueError(f"spt attention option must be one of {SPT_ATTENTION}, got {attend!r}")
    query_masked = mask_BxT[:, :, None].expand(B, T, T)
    return torch.where(query_masked, allowed, torch.ones_like(allowed))


@contextlib.contextmanager
def seeded(seed: int):
    """Run a block under a fixed torch seed without disturbing the global RNG."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def build_model(cfg: ModelConfig | None = None, seed: int = 0) -> ToyTransformer:
    """A model whose initial weights depend only on (cfg, seed)."""
    with seeded(seed):
        return ToyTransformer(cfg or ModelConfig())


# weight groups: regular expressions over ToyTransformer's parameter names (what a transfer recipe copies)
GROUPS = {
    "qk": r"blocks\.\d+\.attn\.W_[QK]\.",  # query and key maps, weights and biases
    "vo": r"blocks\.\d+\.attn\.W_[VO]\.",  # value and output maps
    "embed": r"embed\.|pe\.table$",  # input embedding and the absolute positional table
    "mlp": r"blocks\.\d+\.mlp\.",  # every block's MLP (not FIRE's bias MLP)
    "norm": r"blocks\.\d+\.ln[12]\.|ln_f\.",  # every LayerNorm
}


def group_param_names(model: nn.Module, group: str) -> list[str]:
    """Names of the parameters of weight group ``group`` (:data:`GROUPS`), state-dict order."""
    if group not in GROUPS:
        raise ValueError(f"weight group: choose one of {tuple(GROUPS)}, got {group!r}")
    return [n for n, _ in model.named_parameters() if re.match(GROUPS[group], n)]


def missing_group(cfg: ModelConfig, group: str) -> str | None:
    """Why a model of ``cfg`` lacks (part of) weight group ``group``, or None if it has it."""
    if group == "mlp" and cfg.d_mlp == 0:
        return "it has no MLP (d_mlp=0)"
    if group == "embed" and cfg.pos not in ABSOLUTE:
        return f"it has no positional table (pos={cfg.pos}; tables: {ABSOLUTE})"
    return None


def qk_param_names(model: nn.Module) -> list[str]:
    """Names of every W_Q, W_K weight and bias."""
    return group_param_names(model, "qk")


def head_param_names(model: nn.Module) -> list[str]:
    return [n for n, _ in model.named_parameters() if n.startswith(HEAD_PREFIXES)]
