"""The LRA Transformer of the self-pretraining code, rebuilt on toyspt's own Attention.

Input encoder (``nn.Embedding`` for token tasks, ``nn.Linear`` for pixel tasks), plus a
fixed sinusoidal table, no sqrt(d) scaling of the embedding; ``n_layers`` pairs of
pre-norm residual blocks (``x + attn(LN(x))``, then ``x + W2 GELU(W1 LN(x))``); a final
LayerNorm; pooling over the valid length (mean by default) and a classifier (linear, MLP,
or the retrieval head on ``[a, b, a-b, a*b]``), or a per-token decoder for SPT.

Module names mirror :class:`toyspt.nn.model.ToyTransformer` (``embed``, ``pe.table``,
``blocks.{l}.ln1|attn|ln2|mlp``, ``ln_f``, ``head_cls``, ``head_rec``), so the probes and
hook filters (``blocks.{l}.attn.hook_attn_scores`` ...) work unchanged. Attention scores are
explicit; ``impl="sdpa"`` runs the same weights through torch's fused
``scaled_dot_product_attention`` instead (the parity reference, no hook points for scores).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from toyspt.nn.attention import Attention, HookPoint
from toyspt.nn.positional import sinusoidal_table
from toyspt.util.validation import (
    MAX_COUNT,
    MAX_LENGTH,
    MAX_WIDTH,
    Bool,
    Float,
    Int,
    Text,
    validate,
    validated,
    within_memory,
)

ENCODERS = ("embedding", "linear")
HEADS = ("linear", "mlp", "retrieval", "none")
POOLS = ("mean", "max", "last", "first", "sum")
IMPLS = ("explicit", "sdpa")


class SquaredReLU(nn.Module):
    def forward(self, x):
        return torch.square(F.relu(x))


class Laplace(nn.Module):
    """0.5 (1 + erf((x - mu) / (sigma sqrt 2))) with that code's mu, sigma."""

    def forward(self, x):
        return 0.5 * (1.0 + torch.erf((x - 0.707107) / (0.282095 * math.sqrt(2.0))))


# the feed-forward activations of that code's FF (its ``Activation``) that the bridge runs;
# "glu" doubles the first linear's outputs. modrelu and ln (parameterised) are refused.
ACTIVATIONS = {"gelu": nn.GELU, "relu": nn.ReLU, "silu": nn.SiLU, "swish": nn.SiLU,
               "tanh": nn.Tanh, "sigmoid": nn.Sigmoid, "softplus": nn.Softplus,
               "glu": lambda: nn.GLU(dim=-1), "sqrelu": SquaredReLU, "relu2": SquaredReLU,
               "laplace": Laplace, "id": nn.Identity, "identity": nn.Identity,
               "linear": nn.Identity}


@dataclass(frozen=True)
class LRAConfig:
    n_layers: int = validated(6, Int(gt=0, le=1024))  # attention + feed-forward block pairs (the code's n_layers)
    d_model: int = validated(512, Int(gt=0, le=MAX_WIDTH))  # residual width
    # heads per attention layer (contiguous row blocks of d_model / n_heads)
    n_heads: int = validated(8, Int(gt=0, le=MAX_WIDTH))
    d_ff: int = validated(2048, Int(gt=0, le=8 * MAX_WIDTH))  # feed-forward hidden width (expand * d_model)
    encoder: str = validated("embedding", Text(ENCODERS))  # embedding (token ids) | linear (pixel values)
    # embedding rows (token tasks): 4 specials + 15 ListOps symbols
    n_tokens: int = validated(19, Int(gt=0, le=MAX_COUNT))
    # linear encoder inputs (pixel tasks): 1 grayscale value or 3 RGB values, + 1 SPT mask indicator
    d_input: int = validated(1, Int(ge=1, le=4))
    max_len: int = validated(16384, Int(gt=0, le=MAX_LENGTH))  # rows of the positional table
    # pre-norm blocks + final norm (every LRA config); False = post-norm
    prenorm: bool = validated(True, Bool())
    causal: bool = validated(False, Bool())  # causal attention mask (False in every LRA config)
    window: int = validated(0, Int(ge=0, le=MAX_LENGTH))  # block-local attention: block size (Path-X: 4096); 0 = global
    # block-local attention: blocks each query block sees before it
    look_backward: int = validated(1, Int(ge=0, le=MAX_LENGTH))
    # block-local attention: blocks each query block sees after it
    look_forward: int = validated(1, Int(ge=0, le=MAX_LENGTH))
    # rotary q/k embedding of that code (interleaved pairs, stored freqs)
    rotary: bool = validated(False, Bool())
    activation: str = validated("gelu", Text(tuple(ACTIVATIONS)))  # feed-forward activation (ACTIVATIONS)
    head: str = validated("linear", Text(HEADS))  # classifier: linear | mlp | retrieval | none
    n_classes: int = validated(10, Int(gt=0, le=MAX_COUNT))  # classifier outputs
    # hidden width of the mlp / retrieval head (0 = d_model)
    head_hidden: int = validated(0, Int(ge=0, le=8 * MAX_WIDTH))
    # activation inside the mlp / retrieval head: relu | gelu
    head_activation: str = validated("relu", Text(("relu", "gelu")))
    # outputs per token of the SPT decoder (vocab size, 1 for L1 pixels); 0 = none
    rec_out: int = validated(0, Int(ge=0, le=MAX_COUNT))
    pool: str = validated("mean", Text(POOLS))  # mean | max | last | first over positions
    # pool over each sequence's valid length only (padding excluded)
    use_lengths: bool = validated(True, Bool())
    ln_eps: float = validated(1e-5, Float(gt=0, le=1))  # LayerNorm epsilon (torch default, as in the code)

    def __post_init__(self):
        validate(self)
        within_memory("model", "n_layers x (4 d_model^2 + 2 d_model d_ff) parameters (float32)",
                      self.n_layers * (4 * self.d_model ** 2 + 2 * self.d_model * self.d_ff), 4)
        within_memory("model", "max_len x d_model positional table (float32)",
                      self.max_len * self.d_model, 4)
        if self.d_model % self.n_heads:
            raise ValueError(f"n_heads: d_model={self.d_model} is not divisible by {self.n_heads}")
        if self.rotary and (self.d_model // self.n_heads) % 2:
            raise ValueError(f"rotary: needs an even head dimension, got {self.d_model // self.n_heads}")

    @property
    def token_task(self) -> bool:
        return self.encoder == "embedding"


class PositionTable(nn.Module):
    """The positional table (a buffer, as in the code) added to the embeddings."""

    def __init__(self, max_len: int, d: int):
        super().__init__()
        self.register_buffer("table", sinusoidal_table(max_len, d))

    def forward(self, x_BxTxD: torch.Tensor) -> torch.Tensor:
        T = x_BxTxD.shape[1]
        if T > self.table.shape[0]:
            raise ValueError(f"sequence length {T} exceeds the positional table ({self.table.shape[0]})")
        return x_BxTxD + self.table[:T].to(x_BxTxD.dtype)


def rotate_pairs(x_BxHxTxE: torch.Tensor, freqs_F: torch.Tensor) -> torch.Tensor:
    """That code's rotary embedding: dims (2m, 2m+1) rotated by angle p * freqs[m], with the
    angle formed in the dtype of the stored ``freqs`` buffer (as the code does)."""
    T = x_BxHxTxE.shape[-2]
    ang_TxF = torch.arange(T, device=freqs_F.device).to(freqs_F)[:, None] * freqs_F[None, :]
    cos, sin = ang_TxF.cos().to(x_BxHxTxE.dtype), ang_TxF.sin().to(x_BxHxTxE.dtype)
    x0, x1 = x_BxHxTxE[..., 0::2], x_BxHxTxE[..., 1::2]
    return torch.stack([cos * x0 - sin * x1, sin * x0 + cos * x1], dim=-1).flatten(-2)


class LRAAttention(Attention):
    """toyspt's Attention plus that code's rotary embedding (applied after the hook_q/hook_k
    points, before the scores); ``rope_freqs`` is the checkpoint's ``rope.freqs`` buffer."""

    def __init__(self, d_model: int, n_heads: int, rotary: bool = False):
        super().__init__(d_model, n_heads, bias=True)
        self.rotary = rotary
        if rotary:
            K = d_model // n_heads
            self.register_buffer("rope_freqs", 10000 ** (-torch.arange(0, K, 2) / K))

    def rotate(self, q_BxHxTxE: torch.Tensor, k_BxHxTxE: torch.Tensor):
        """That code's rotary convention (interleaved pairs) instead of toyspt's RoPE."""
        if self.rotary:
            return rotate_pairs(q_BxHxTxE, self.rope_freqs), rotate_pairs(k_BxHxTxE, self.rope_freqs)
        return q_BxHxTxE, k_BxHxTxE


def sdpa_attention(attn: LRAAttention, x_BxTxD: torch.Tensor,
                   allowed_TxT: torch.Tensor | None = None) -> torch.Tensor:
    """The same weights as ``attn`` through torch's fused attention (parity reference)."""
    B, T, D = x_BxTxD.shape
    q, k, v = attn.qkv(x_BxTxD, hooked=False)
    z_BxHxTxE = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed_TxT)
    return attn.W_O(z_BxHxTxE.transpose(1, 2).reshape(B, T, D))


class LRABlock(nn.Module):
    """One attention + feed-forward pair (two residual blocks of the code)."""

    def __init__(self, cfg: LRAConfig):
        super().__init__()
        self.prenorm = cfg.prenorm
        self.ln1 = nn.LayerNorm(cfg.d_model, eps=cfg.ln_eps)
        self.attn = LRAAttention(cfg.d_model, cfg.n_heads, rotary=cfg.rotary)
        self.ln2 = nn.LayerNorm(cfg.d_model, eps=cfg.ln_eps)
        first = 2 * cfg.d_ff if cfg.activation == "glu" else cfg.d_ff
        self.mlp = nn.Sequential(nn.Linear(cfg.d_model, first), ACTIVATIONS[cfg.activation](),
                                 nn.Linear(cfg.d_ff, cfg.d_model))
        self.hook_resid_pre, self.hook_resid_mid = HookPoint(), HookPoint()

    def _attend(self, x, allowed_TxT, impl):
        if impl == "sdpa":
            return sdpa_attention(self.attn, x, allowed_TxT)
        return self.attn(x, None, None if allowed_TxT is None else allowed_TxT[None])

    def forward(self, x, allowed_TxT=None, impl="explicit"):
        x = self.hook_resid_pre(x)
        if self.prenorm:
            x = self.hook_resid_mid(x + self._attend(self.ln1(x), allowed_TxT, impl))
            return x + self.mlp(self.ln2(x))
        x = self.hook_resid_mid(self.ln1(x + self._attend(x, allowed_TxT, impl)))
        return self.ln2(x + self.mlp(x))


def _mlp_head(d_in: int, hidden: int, out: int, act: str) -> nn.Sequential:
    return nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU() if act == "relu" else nn.GELU(),
                         nn.Linear(hidden, out))


class LRATransformer(nn.Module):
    """See the module docstring. Inputs: token ids (B, T) long, or pixels (B, T, d_input)."""

    def __init__(self, cfg: LRAConfig):
        super().__init__()
        self.cfg = cfg
        d = cfg.d_model
        self.embed = nn.Embedding(cfg.n_tokens, d) if cfg.token_task else nn.Linear(cfg.d_input, d)
        self.pe = PositionTable(cfg.max_len, d)
        self.blocks = nn.ModuleList(LRABlock(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(d, eps=cfg.ln_eps) if cfg.prenorm else nn.Identity()
        self.hook_pooled = HookPoint()
        hidden = cfg.head_hidden or d
        if cfg.head == "linear":
            self.head_cls = nn.Linear(d, cfg.n_classes)
        elif cfg.head == "mlp":
            self.head_cls = _mlp_head(d, hidden, cfg.n_classes, cfg.head_activation)
        elif cfg.head == "retrieval":
            self.head_cls = _mlp_head(4 * d, hidden, cfg.n_classes, cfg.head_activation)
        else:
            self.head_cls = None
        self.head_rec = nn.Linear(d, cfg.rec_out) if cfg.rec_out else None

    @property
    def attentions(self) -> list[LRAAttention]:
        return [blk.attn for blk in self.blocks]

    def allowed(self, T: int) -> torch.Tensor | None:
        """(T, T) bool keys-allowed mask for causal / block-local attention, else None."""
        cfg = self.cfg
        if not cfg.causal and not cfg.window:
            return None
        i = torch.arange(T, device=self.pe.table.device)
        ok = torch.ones(T, T, dtype=torch.bool, device=i.device)
        if cfg.causal:
            ok &= i[None, :] <= i[:, None]
        if cfg.window:
            if T % cfg.window:
                raise ValueError(f"sequence length {T} is not a multiple of the local-attention "
                                 f"window {cfg.window} (that code asserts the same)")
            step_TxT = i[None, :] // cfg.window - i[:, None] // cfg.window  # key block - query block
            ok &= (step_TxT >= -cfg.look_backward) & (step_TxT <= cfg.look_forward)
        return ok

    def embed_inputs(self, inputs: torch.Tensor) -> torch.Tensor:
        cfg = self.cfg
        if cfg.token_task:
            if inputs.dim() != 2 or inputs.dtype not in (torch.long, torch.int32, torch.int64):
                raise ValueError(f"token model expects ids (B, T) of integer dtype, got "
                                 f"{tuple(inputs.shape)} {inputs.dtype}")
            if inputs.numel() and (int(inputs.min()) < 0 or int(inputs.max()) >= cfg.n_tokens):
                raise ValueError(f"token ids must lie in [0, {cfg.n_tokens}), got range "
                                 f"[{int(inputs.min())}, {int(inputs.max())}]")
            return self.embed(inputs.long())
        if inputs.dim() == 2 and cfg.d_input == 1:
            inputs = inputs[..., None]
        if inputs.dim() != 3 or inputs.shape[-1] != cfg.d_input:
            raise ValueError(f"pixel model expects (B, T, {cfg.d_input}) values, got {tuple(inputs.shape)}")
        return self.embed(inputs.to(self.embed.weight.dtype))

    def encode(self, inputs: torch.Tensor, impl: str = "explicit") -> torch.Tensor:
        """Hidden states (B, T, d_model) after the final norm."""
        return self.encode_embedded(self.embed_inputs(inputs), impl)

    def encode_embedded(self, e_BxTxD: torch.Tensor, impl: str = "explicit") -> torch.Tensor:
        """The same from already-embedded inputs (positional table still added here)."""
        if impl not in IMPLS:
            raise ValueError(f"impl must be one of {IMPLS}, got {impl!r}")
        x = self.pe(e_BxTxD)
        allowed = self.allowed(x.shape[1])
        for blk in self.blocks:
            x = blk(x, allowed, impl)
        return self.ln_f(x)

    def pool(self, h_BxTxD: torch.Tensor, lengths: torch.Tensor | None) -> torch.Tensor:
        """Pool positions as the code's sequence decoder does (valid length only if use_lengths)."""
        B, T, _ = h_BxTxD.shape
        if lengths is None or not self.cfg.use_lengths:
            lengths = torch.full((B,), T, dtype=torch.long, device=h_BxTxD.device)
        if lengths.shape != (B,) or int(lengths.min()) < 1 or int(lengths.max()) > T:
            raise ValueError(f"lengths must be (B,) = ({B},) in [1, {T}], got {tuple(lengths.shape)}")
        valid_BxT = torch.arange(T, device=h_BxTxD.device)[None] < lengths[:, None]
        mode = self.cfg.pool
        if mode == "mean":
            return (h_BxTxD * valid_BxT[..., None]).sum(1) / lengths[:, None].to(h_BxTxD.dtype)
        if mode == "max":
            return h_BxTxD.masked_fill(~valid_BxT[..., None], float("-inf")).amax(1)
        if mode == "sum":
            return (h_BxTxD * valid_BxT[..., None]).sum(1)
        if mode == "last":
            return h_BxTxD[torch.arange(B), lengths - 1]
        return h_BxTxD[:, 0]

    def features(self, inputs: torch.Tensor, lengths: torch.Tensor | None = None,
                 impl: str = "explicit") -> torch.Tensor:
        """What the classifier sees: pooled states (B, d), or for retrieval ``[a, b, a-b, a*b]``
        (B, 4d) where ``inputs`` stacks the first documents of the B pairs, then the second
        ones (2B rows, as the code's collate does)."""
        pooled = self.hook_pooled(self.pool(self.encode(inputs, impl), lengths))
        if self.cfg.head != "retrieval":
            return pooled
        if pooled.shape[0] % 2:
            raise ValueError("retrieval inputs must stack 2B documents (pairs)")
        a, b = pooled.chunk(2, dim=0)
        return torch.cat([a, b, a - b, a * b], dim=-1)

    def classify(self, inputs: torch.Tensor, lengths: torch.Tensor | None = None,
                 impl: str = "explicit") -> torch.Tensor:
        """Class logits from :meth:`features`."""
        if self.head_cls is None:
            raise ValueError("this model has no classifier head (an SPT checkpoint?)")
        return self.head_cls(self.features(inputs, lengths, impl))

    forward = classify

    def reconstruct(self, inputs: torch.Tensor, impl: str = "explicit") -> torch.Tensor:
        """Per-token SPT decoder outputs (B, T, rec_out) on already-masked inputs."""
        if self.head_rec is None:
            raise ValueError("this model has no per-token decoder (rec_out = 0)")
        return self.head_rec(self.encode(inputs, impl))


def build_lra(cfg: LRAConfig, seed: int = 0) -> LRATransformer:
    """A model whose initial weights depend only on (cfg, seed) (torch default inits)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return LRATransformer(cfg)


__all__ = ["LRAConfig", "LRATransformer", "LRABlock", "build_lra", "sdpa_attention",
           "ENCODERS", "HEADS", "POOLS", "ACTIVATIONS", "LRAAttention", "rotate_pairs"]
