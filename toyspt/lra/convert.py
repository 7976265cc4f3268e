"""A run's model (:class:`toyspt.nn.model.ToyTransformer`, what the one trainer trains) as the
LRA Transformer of :mod:`toyspt.lra.model`, computing the same function.

The toy model with a sinusoidal table, an MLP and a final norm *is* the LRA architecture
(pre-norm attention and GELU feed-forward blocks, the same sinusoidal table, no scaling of the
embedding, a final LayerNorm, mean pooling, a linear classifier and a per-token decoder):

* pixel tasks (``d_in = 1``): the toy's embedding reads ``[value (1 - m), m]``, exactly the
  LRA SPT code's pixel encoder ``nn.Linear(2, d)`` (fine-tuning there drops the mask column,
  which multiplies zeros once nothing is masked);
* token tasks (one-hot inputs over :data:`toyspt.kinds.tasks.VOCAB`, ``d_in = V``): a linear map
  of a one-hot vector is an embedding row plus the bias; a masked token (zeros, mask channel 1)
  is the ``<mask>`` row (id 0), as the LRA code feeds it. Pooling covers every position
  (``use_lengths=False``: padding included, as the toy model pools).

The LRA model's attention biases start at torch's default init where the toy zeroes them; a
converted model carries whatever values the run's weights hold.

A converted model has a ``form`` (:data:`FORMS`): ``both`` keeps the classifier and the SPT
decoder (the toy model entire, which no file of that code holds); a checkpoint holds one of
them, as that code writes it (:func:`save_run`): ``spt`` (the SPT decoder, the pixel encoder
with its mask column, no classifier: a pretrained model) or ``classifier`` (the classifier,
no decoder, and for pixels the encoder without its mask column, shape (d, 1), as that code's
fine-tuning leaves it: exact for classification, where the indicator is zero).
"""
from __future__ import annotations

import copy

import torch

from toyspt.lra.checkpoint import save_lra
from toyspt.lra.model import LRAConfig, LRATransformer, build_lra
from toyspt.nn.model import ToyTransformer

FORMS = ("both", "spt", "classifier")


def lra_config(model: ToyTransformer, token_task: bool, form: str = "both") -> LRAConfig:
    """The LRA config of the same architecture as ``model``, in ``form`` (:data:`FORMS`)."""
    c = model.cfg
    if form not in FORMS:
        raise ValueError(f"form: choose one of {FORMS}, got {form!r}")
    if c.pos != "sinusoidal" or c.d_mlp == 0 or not c.final_norm:
        raise ValueError(f"the LRA architecture has a sinusoidal table, an MLP and a final norm; this model has "
                         f"pos={c.pos}, d_mlp={c.d_mlp}, final_norm={c.final_norm}")
    common = dict(n_layers=c.n_layers, d_model=c.d_model, n_heads=c.n_heads, d_ff=c.d_mlp, max_len=c.max_len,
                  head="none" if form == "spt" else "linear", n_classes=c.n_classes,
                  rec_out=0 if form == "classifier" else c.d_in, use_lengths=False)
    if token_task:
        return LRAConfig(encoder="embedding", n_tokens=c.d_in, **common)
    if c.d_in != 1:
        raise ValueError(f"a pixel model reads one value per position, this one {c.d_in}")
    return LRAConfig(encoder="linear", d_input=1 if form == "classifier" else 2, **common)


@torch.no_grad()
def to_lra(model: ToyTransformer, token_task: bool, form: str = "both") -> LRATransformer:
    """An :class:`LRATransformer` computing ``model``'s logits (and reconstructions; ``form``
    keeps one of them, see the module docstring); for a token task, ids are those of the one-hot
    channels, with id 0 (``<mask>``) the mask channel's row."""
    cfg = lra_config(model, token_task, form)
    out = build_lra(cfg, 0).to(model.embed.weight.dtype)
    drop = {"spt": "head_cls.", "classifier": "head_rec."}.get(form, "-")
    state = {k: v.clone() for k, v in model.state_dict().items() if not k.startswith(drop)}
    w, b = state.pop("embed.weight"), state.pop("embed.bias")  # (d, d_in + 1), (d,)
    if token_task:
        rows = (w[:, :-1] + b[:, None]).T.clone()  # id i -> W[:, i] + b
        rows[0] = w[:, -1] + b  # <mask> (id 0 never appears unmasked): the mask channel's column
        out.embed.weight.copy_(rows)
    else:
        out.embed.weight.copy_(w[:, :cfg.d_input])  # classifier: the mask column dropped
        out.embed.bias.copy_(b)
    missing, unexpected = out.load_state_dict(state, strict=False)
    left = [k for k in missing if not k.startswith("embed.")]
    if left or unexpected:
        raise ValueError(f"weights that do not map: missing {left}, unexpected {unexpected}")
    return out.eval()


def state_form(state: str, label_phase: bool = True) -> str:
    """The form a run's stored weights are written in: ``pretrained`` (and the final weights of a
    run without label phase, ``spt_only``) as ``spt``, ``final`` as ``classifier``; ``init`` has
    no form of its own (it is written in the form of the state it is the reference of)."""
    if state == "pretrained" or (state == "final" and not label_phase):
        return "spt"
    if state == "final":
        return "classifier"
    raise ValueError(f"state {state!r}: the form of init weights is the form of the state they are compared with")


def save_run(path, model: ToyTransformer, token_task: bool, form: str, *, provenance: dict,
             mask_rate: float, task: str = "toyspt") -> LRATransformer:
    """Write a run's model as a checkpoint of that code in ``form`` (``spt`` or ``classifier``),
    its run config naming the SPT setting (``mlm_prob`` = ``mask_rate`` for ``spt``, else 0;
    ``lm_loss`` ce for tokens, l1 for pixels) and ``provenance`` (the arm's name, task, seed,
    state: ``LoadReport.provenance`` when read back). The tensors are float64, so the file holds
    the run's function exactly (that code loads them into its float32 modules). Returns the
    model as written."""
    if form not in ("spt", "classifier"):
        raise ValueError(f"a checkpoint holds one head: form 'spt' or 'classifier', got {form!r}")
    lra = to_lra(copy.deepcopy(model).double(), token_task, form)  # float64: a token row W[:, i] + b is exact
    dataset = {"_name_": task, "mlm_prob": mask_rate if form == "spt" else 0.0,
               "lm_loss": "ce" if token_task else "l1"}
    save_lra(path, lra, dataset=dataset, provenance=provenance)
    return lra


__all__ = ["FORMS", "lra_config", "to_lra", "state_form", "save_run"]
