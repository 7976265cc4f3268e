"""A run's model (:class:`toyspt.nn.model.ToyTransformer`, what the one trainer trains) as the
LRA Transformer of :mod:`toyspt.lra.model`, computing the same function.

The toy model with a sinusoidal table, an MLP and a final norm *is* the LRA architecture
(pre-norm attention and GELU feed-forward blocks, the same sinusoidal table, no scaling of the
embedding, a final LayerNorm, mean pooling, a linear classifier and a per-token decoder):

* pixel tasks (``d_in = 1``): the toy's embedding reads ``[value (1 - m), m]``, exactly the
  LRA SPT code's pixel encoder ``nn.Linear(2, d)`` (fine-tuning there drops the mask column,
  which multiplies zeros once nothing is masked);
* token tasks (one-hot inputs over :data:`toyspt.lra.tasks.VOCAB`, ``d_in = V``): a linear map
  of a one-hot vector is an embedding row plus the bias; a masked token (zeros, mask channel 1)
  is the ``<mask>`` row (id 0), as the LRA code feeds it. Pooling covers every position
  (``use_lengths=False``: padding included, as the toy model pools).

The LRA model's attention biases start at torch's default init where the toy zeroes them; a
converted model carries whatever values the run's weights hold.
"""
from __future__ import annotations

import torch

from toyspt.lra.model import LRAConfig, LRATransformer, build_lra
from toyspt.nn.model import ToyTransformer


def lra_config(model: ToyTransformer, token_task: bool) -> LRAConfig:
    """The LRA config of the same architecture as ``model``."""
    c = model.cfg
    if c.pos != "sinusoidal" or c.d_mlp == 0 or not c.final_norm:
        raise ValueError(f"the LRA architecture has a sinusoidal table, an MLP and a final norm; this model has "
                         f"pos={c.pos}, d_mlp={c.d_mlp}, final_norm={c.final_norm}")
    common = dict(n_layers=c.n_layers, d_model=c.d_model, n_heads=c.n_heads, d_ff=c.d_mlp, max_len=c.max_len,
                  head="linear", n_classes=c.n_classes, rec_out=c.d_in, use_lengths=False)
    if token_task:
        return LRAConfig(encoder="embedding", n_tokens=c.d_in, **common)
    if c.d_in != 1:
        raise ValueError(f"a pixel model reads one value per position, this one {c.d_in}")
    return LRAConfig(encoder="linear", d_input=2, **common)


@torch.no_grad()
def to_lra(model: ToyTransformer, token_task: bool) -> LRATransformer:
    """An :class:`LRATransformer` computing ``model``'s logits (and reconstructions); for a token
    task, ids are those of the one-hot channels, with id 0 (``<mask>``) the mask channel's row."""
    cfg = lra_config(model, token_task)
    out = build_lra(cfg, 0).to(model.embed.weight.dtype)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    w, b = state.pop("embed.weight"), state.pop("embed.bias")  # (d, d_in + 1), (d,)
    if token_task:
        rows = (w[:, :-1] + b[:, None]).T.clone()  # id i -> W[:, i] + b
        rows[0] = w[:, -1] + b  # <mask> (id 0 never appears unmasked): the mask channel's column
        out.embed.weight.copy_(rows)
    else:
        out.embed.weight.copy_(w)
        out.embed.bias.copy_(b)
    missing, unexpected = out.load_state_dict(state, strict=False)
    left = [k for k in missing if not k.startswith("embed.")]
    if left or unexpected:
        raise ValueError(f"weights that do not map: missing {left}, unexpected {unexpected}")
    return out.eval()


__all__ = ["lra_config", "to_lra"]
