"""Weight groups of a Transformer's state dict, each as one (1, N) matrix, so that
:func:`toyspt.probe.tracking.displacement` gives its Frobenius displacement: per layer the
query, key, value and output maps (weights and biases), the MLP and the two LayerNorms; per
head the row blocks of W_Q, W_K, W_V (with their biases) and the column block of W_O; and the
embedding and the final LayerNorm. The names are those toyspt's toy model and the LRA bridge
model share (``blocks.{l}.attn.W_Q`` ..., ``embed``, ``ln_f``); heads (classifier, decoder)
and the fixed positional table are not groups.
"""
from __future__ import annotations

import re
from typing import Mapping

import torch

LAYER_GROUPS = {"Q": r"attn\.W_Q\.", "K": r"attn\.W_K\.", "V": r"attn\.W_V\.", "O": r"attn\.W_O\.",
                "mlp": r"mlp\.", "norm": r"ln[12]\."}  # within blocks.{l}.
GLOBAL_GROUPS = {"embed": r"embed\.", "final_norm": r"ln_f\."}


def _flat(ts) -> torch.Tensor:
    return torch.cat([t.detach().double().flatten() for t in ts])[None]


def group_matrices(state: Mapping[str, torch.Tensor], n_heads: int) -> dict[str, torch.Tensor]:
    """``{"<group>.weight": (1, N)}`` with group names ``blocks.{l}.{Q,K,V,O,mlp,norm}``,
    ``blocks.{l}.{Q,K,V,O}.h{h}``, ``embed`` and ``final_norm`` (see the module docstring)."""
    out: dict[str, torch.Tensor] = {}
    for name, pat in GLOBAL_GROUPS.items():
        ts = [t for k, t in state.items() if re.match(pat, k)]
        if ts:
            out[f"{name}.weight"] = _flat(ts)
    layers = sorted({int(m.group(1)) for k in state if (m := re.match(r"blocks\.(\d+)\.", k))})
    for L in layers:
        pre = f"blocks.{L}."
        for name, pat in LAYER_GROUPS.items():
            ts = [t for k, t in state.items() if k.startswith(pre) and re.match(pat, k[len(pre):])]
            if ts:
                out[f"{pre}{name}.weight"] = _flat(ts)
        W = {n: state[f"{pre}attn.W_{n}.weight"] for n in "QKVO"}
        dh = W["Q"].shape[0] // n_heads
        for h in range(n_heads):
            sl = slice(h * dh, (h + 1) * dh)
            for n in "QKV":
                out[f"{pre}{n}.h{h}.weight"] = _flat([W[n][sl], state[f"{pre}attn.W_{n}.bias"][sl]])
            out[f"{pre}O.h{h}.weight"] = _flat([W["O"][:, sl]])
    return out


__all__ = ["LAYER_GROUPS", "GLOBAL_GROUPS", "group_matrices"]
