"""The checks' window on the real toy model (toyspt.nn.model), in float64, through its hooks.

``T1_MODEL`` is theory.md's T1 setting on the real model: no MLP, no final LayerNorm and
W_Q = W_K = 0 (so the scores are exactly 0 and attention is uniform). The default model
has an MLP and a final LayerNorm, so T1/T2's identities are *not* expected there; the
checks report it as a measured figure.

Score gradients (per example), directional derivatives, finite differences and dL/dM come
from :mod:`toyspt.probe.engine`, which perturbs ``blocks.0.attn.hook_attn_scores``; changes of
the attention *pattern* (T1) are added here at ``hook_pattern``.
"""
from __future__ import annotations

import warnings

import torch

from toyspt.data.tasks import TaskConfig, make_task, mask_inputs
from toyspt.nn.attention import hooks
from toyspt.nn.model import ModelConfig, ToyTransformer, build_model
from toyspt.probe import engine as probes
from toyspt.probe import losses
from toyspt.probe.results import LayerProbe

HOOK_S = "blocks.0.attn.hook_attn_scores"
HOOK_A = "blocks.0.attn.hook_pattern"
T1_MODEL = ModelConfig(d_mlp=0, final_norm=False, qk_init_scale=0.0)
DEFAULT_UNIFORM = ModelConfig(qk_init_scale=0.0)  # MLP + final norm, uniform attention


def toy_model(cfg: ModelConfig, seed: int = 0) -> ToyTransformer:
    return build_model(cfg, seed).double().eval()


def toy_batch(T: int, n: int, seed: int = 0, mask_rate: float = 0.5) -> dict[str, torch.Tensor]:
    """n training sequences of the default task family at length T (float64), their
    labels and an SPT mask: the batch format of :mod:`toyspt.probe.engine`."""
    data = make_task(TaskConfig(T=T, n_train=n, n_val=1, n_test=1, seed=seed))
    return losses.make_batch(data.train.x.double(), data.train.y, mask_rate, seed)


def layer_probe(model: ToyTransformer, batch, loss: str = "label",
                directions=("circ_w1", "toep_w1")) -> LayerProbe:
    """toyspt.probe.engine on layer 0 with per-example gradients; ``loss``: label | recon_mse."""
    fn = losses.recon("mse") if loss == "recon_mse" else loss
    return probes.probe(model, batch, fn, list(directions), per_example=True, use_jvp=False)[HOOK_S]


def attention_input(model: ToyTransformer, x: torch.Tensor) -> torch.Tensor:
    """H = ln1(embed + PE) of block 0 (one-layer models), (B, T, d_model): the scores are
    H M H^T when the Q/K biases are zero (M = W_Q^T W_K / sqrt(d_head))."""
    if model.cfg.n_layers != 1:
        raise ValueError("attention_input: defined for one-layer models")
    with torch.no_grad():
        h = model.embed(mask_inputs(x, None))
        if model.pe is not None:
            h = model.pe(h)
        return model.blocks[0].ln1(h)


def pattern_grad(model: ToyTransformer, batch) -> tuple[torch.Tensor, torch.Tensor]:
    """(A, Gamma), each (B, T, T): the layer-0, head-0 attention pattern and the per-example
    label-loss gradient Gamma_b = dl_b/dA_b (B x the gradient of the batch-mean loss), by
    autograd at ``hook_pattern``. What the softmax backward turns into G = dl/dS."""
    B, T = batch["x"].shape[:2]
    delta = torch.zeros(B, T, T, dtype=batch["x"].dtype, requires_grad=True)
    seen = {}

    def add(t, name):
        seen["A"] = t[:, 0].detach()
        sel = torch.zeros(t.shape[1], dtype=t.dtype)
        sel[0] = 1.0
        return t + sel[None, :, None, None] * delta[:, None]

    with hooks(model, [(HOOK_A, add)]):
        (g,) = torch.autograd.grad(losses.label_loss(model, batch), delta)
    return seen["A"], B * g


def autograd_dLdM(model: ToyTransformer, batch) -> torch.Tensor:
    """Per-example dL_b/dM (B, d_model, d_model) of the label loss at W_Q = W_K = 0, by
    autograd through the model's own query/key layers, independent of :mod:`toyspt.probe.engine`.

    On a copy, W_K is set to sqrt(d_head) I, so M = W_Q^T W_K / sqrt(d_head) = W_Q^T (as
    nn.Linear stores it). With W_Q = 0 and b_Q = 0 the queries, hence the scores, stay 0, so
    the forward pass (uniform attention) is unchanged; b_K only adds a row-constant score
    term, which softmax ignores. Then dL/dM = (dL/dW_Q)^T, one backward pass per example."""
    import copy
    import math

    attn = model.blocks[0].attn
    if model.cfg.n_layers != 1 or attn.n_heads != 1:
        raise ValueError("autograd_dLdM: defined for one-layer, one-head models")
    if attn.W_Q.weight.abs().max() != 0 or attn.W_K.weight.abs().max() != 0 or (
            attn.W_Q.bias is not None and attn.W_Q.bias.abs().max() != 0):
        raise ValueError("autograd_dLdM: needs W_Q = W_K = 0 and b_Q = 0 (uniform attention)")
    work = copy.deepcopy(model)
    for p in work.parameters():
        p.requires_grad_(False)
    wq = work.blocks[0].attn.W_Q.weight
    with torch.no_grad():
        work.blocks[0].attn.W_K.weight.copy_(
            math.sqrt(attn.d_head) * torch.eye(attn.d_model, dtype=wq.dtype))
    wq.requires_grad_(True)
    B = batch["x"].shape[0]
    out = []
    for b in range(B):
        one = {k: v[b:b + 1] for k, v in batch.items()}
        (g,) = torch.autograd.grad(losses.label_loss(work, one), wq)
        out.append(g.T)
    return torch.stack(out)


def logits_with_pattern(model: ToyTransformer, x: torch.Tensor, delta: torch.Tensor,
                        head: int = 0) -> torch.Tensor:
    def add(t, name):
        t = t.clone()
        t[:, head] = t[:, head] + delta
        return t

    with torch.no_grad(), hooks(model, [(HOOK_A, add)]):
        return model.classify(x)


def effective_gain(model: ToyTransformer, batch, head: int = 0, attend: str = "all") -> float:
    """The toy model's analogue of T3's scalar gain beta, at its current weights.

    In the scalar model dyhat_m/dA_mj = beta x~_j. Here J_mj = dyhat_m/dA_mj (a d_in
    vector) is regressed on the clean value x_j over masked queries m and unmasked keys
    j != m, both centred per query: beta_eff = sum <J_mj - mean_j J_m., x_j - mean_j x> /
    sum ||x_j - mean_j x||^2. With one layer, row m of the pattern only reaches yhat_m, so a
    forward-mode derivative along the column-j tangent e_j 1^T (added at ``hook_pattern``)
    gives J_mj for every m at once: T jvps in all (vmapped).
    """
    from torch.func import jvp, vmap

    if model.cfg.n_layers != 1:
        raise ValueError("effective_gain: defined for one-layer models (later layers mix rows)")
    x, mask = batch["x"], batch["mask"]
    B, T, _ = x.shape

    def f(delta):
        def add(t, name):
            sel = torch.zeros(t.shape[1], dtype=t.dtype)
            sel[head] = 1.0
            return t + sel[None, :, None, None] * delta

        with hooks(model, [(HOOK_A, add)]):
            return model.reconstruct(x, mask, attend)  # (B, T, d_in)

    zeros = torch.zeros(T, T, dtype=x.dtype)
    tangents = torch.eye(T, dtype=x.dtype)[:, None, :].expand(T, T, T)  # j -> column j ones
    with torch.no_grad(), warnings.catch_warnings():  # forward-AD decompositions load via jit
        warnings.filterwarnings("ignore", message=".*torch.jit.script.*deprecated",
                                category=DeprecationWarning)
        Jcol = vmap(lambda t: jvp(f, (zeros,), (t,))[1])(tangents)  # (j, B, m, d_in)
    J = Jcol.permute(1, 2, 0, 3)  # (B, m, j, d_in)
    eye = torch.eye(T, dtype=torch.bool)
    keys = (~mask)[:, None, :] & ~eye[None]  # (B, m, j): unmasked keys other than m
    rows = mask & (keys.sum(-1) >= 2)  # masked queries with at least two such keys
    w = (keys & rows[..., None]).to(x.dtype)[..., None]  # (B, m, j, 1)
    cnt = w.sum(2, keepdim=True).clamp_min(1.0)
    Jc = J - (J * w).sum(2, keepdim=True) / cnt
    xj = x[:, None, :, :].expand(B, T, T, x.shape[-1])
    xc = xj - (xj * w).sum(2, keepdim=True) / cnt
    den = float((xc * xc * w).sum())
    if den == 0:
        raise ValueError("no masked query with at least two unmasked keys in the batch")
    return float((Jc * xc * w).sum()) / den


__all__ = ["HOOK_S", "HOOK_A", "T1_MODEL", "DEFAULT_UNIFORM", "toy_model", "toy_batch",
           "layer_probe", "attention_input", "pattern_grad", "autograd_dLdM", "logits_with_pattern",
           "effective_gain"]
