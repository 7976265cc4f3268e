"""Architecture inference: an :class:`LRAConfig` from a checkpoint's state dict, its run
config (every field through :mod:`toyspt.lra.runconfig`) and the caller's
:class:`ArchHints`.

The tensors decide width, depth, FF width, encoder, table length, attention layout, rotary
(the ``rope.freqs`` buffers), a GLU feed-forward (its doubled first linear) and head kind;
the run config decides heads, causality, local attention, activation and pooling. A file
without a run config is never completed by assumption: every field that changes the output
and that the tensors do not determine must be given as a hint (the error names the flag),
and a hint the layout cannot honour is refused (a window on the packed-MHA layout, looking
forward under a causal mask). Tensors and run config must agree, and a hint that
contradicts the run config raises; each decision is noted.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from toyspt.data.pixels import PIXEL_LEVELS
from toyspt.lra import runconfig as rc
from toyspt.lra.guard import CheckpointError
from toyspt.lra.model import LRAConfig

A = rc.A  # the attention item of the run config's model.layer list


# ---------------------------------------------------------------------- state-dict reading

def _layer_indices(sd) -> list[int]:
    idx = sorted({int(m.group(1)) for k in sd if (m := re.match(r"model\.layers\.(\d+)\.", k))})
    if not idx:
        raise CheckpointError("no 'model.layers.N.*' keys: not a Transformer checkpoint of the LRA "
                              f"code (first keys: {list(sd)[:6]})")
    if idx != list(range(len(idx))) or len(idx) % 2:
        raise CheckpointError(f"model.layers indices {idx} are not an even, contiguous range "
                              "(expected attention/feed-forward pairs 0..2L-1)")
    return idx


def _attn_kind(sd, a: int) -> str:
    pre = f"model.layers.{a}.layer."
    if pre + "linears.0.weight" in sd:
        return "linears"
    if pre + "mha.in_proj_weight" in sd:
        return "mha"
    found = sorted(k for k in sd if k.startswith(pre))[:6]
    raise CheckpointError(f"model.layers.{a} should be an attention layer; unknown format, "
                          f"keys found: {found}")


def _shape(sd, key, ndim: int | tuple = 2):
    if key not in sd:
        raise CheckpointError(f"missing key {key!r}")
    shape = tuple(sd[key].shape)
    if len(shape) not in (ndim if isinstance(ndim, tuple) else (ndim,)):
        raise CheckpointError(f"{key} has shape {shape}: expected a {ndim}-d tensor")
    if 0 in shape:
        raise CheckpointError(f"{key} has shape {shape}: an empty tensor")
    return shape


@dataclass(frozen=True)
class ArchHints:
    """What the caller states about the architecture (the CLI's flags); None = not given.
    Needed where a file has no run config and the tensors do not tell; where the run config
    has the field, a hint must agree with it."""
    n_heads: int | None = None  # --heads: attention heads per layer
    causal: bool | None = None  # --causal / --no-causal: causal attention mask
    window: int | None = None  # --window: block size of local attention; 0 = global attention
    look_backward: int | None = None  # --look-backward: blocks before the query block (local)
    look_forward: int | None = None  # --look-forward: blocks after it (local; 0 when causal)
    activation: str | None = None  # --activation: the feed-forward activation
    pool: str | None = None  # --pool: the classifier's pooling over positions
    use_lengths: bool | None = None  # --use-lengths / --all-positions: pool within valid lengths
    head: str | None = None  # --head cls|rec|none: what decoder.0.output_transform is


FLAGS = {"n_heads": "--heads", "causal": "--causal or --no-causal", "window": "--window N (0 = global attention)",
         "look_backward": "--look-backward", "look_forward": "--look-forward", "activation": "--activation",
         "pool": "--pool", "use_lengths": "--use-lengths or --all-positions"}


def _needed(field: str, what: str) -> str:
    return f"{what} is not in the state dict and the file has no run config; pass {FLAGS[field]} ({field}=...)"


class _Resolver:
    """Decides each architectural fact from (argument, run config, default) and notes how."""

    def __init__(self, config, notes):
        self.config, self.notes = config, notes
        self.vals, extra = rc.read_fields(config) if config is not None else ({}, [])
        notes += extra

    def present(self, path):
        return self.config is not None and rc.lookup(self.config, path) is not rc.MISSING

    def __call__(self, what, arg, path, *, default=rc.MISSING, why_default="", missing=""):
        if arg is not None:
            if self.present(path) and self.vals.get(path) != arg:
                raise CheckpointError(f"argument {what}={arg!r} contradicts the run config field "
                                      f"{path} = {self.vals.get(path)!r}")
            self.notes.append(f"{what}: {arg} (argument)")
            return arg
        if path in self.vals:
            src = "run config" if self.present(path) else "that code's default; absent from the run config"
            self.notes.append(f"{what}: {self.vals[path]} ({src} {path})")
            return self.vals[path]
        if default is not rc.MISSING:
            self.notes.append(f"{what}: {default} (assumed: {why_default})")
            return default
        raise CheckpointError(missing)


def _tensors(sd) -> tuple[str, dict]:
    """(attention layout, what the tensors decide: depth, widths, encoder, table length)."""
    idx = _layer_indices(sd)
    n_layers = len(idx) // 2
    kinds = {_attn_kind(sd, 2 * i) for i in range(n_layers)}
    if len(kinds) > 1:
        raise CheckpointError(f"mixed attention layouts across layers: {sorted(kinds)}")
    kind = kinds.pop()
    d_model = (_shape(sd, "model.layers.0.layer.linears.0.weight")[0] if kind == "linears"
               else _shape(sd, "model.layers.0.layer.mha.in_proj_weight")[1])
    d_ff = _shape(sd, "model.layers.1.layer.ff.2.weight")[1]
    if "model.layers.1.layer.ff.0.weight" in sd:
        raise CheckpointError("model.layers.1.layer.ff.0.weight: a feed-forward without activation module "
                              "(activation null) is not supported")
    w = _shape(sd, "encoder.0.weight")
    enc = (dict(encoder="linear", d_input=w[1]) if "encoder.0.bias" in sd
           else dict(encoder="embedding", n_tokens=w[0]))
    pe = _shape(sd, "encoder.1.pe", (2, 3))
    if pe[-1] != d_model:
        raise CheckpointError(f"encoder.1.pe has shape {pe}, expected (max_len, {d_model})")
    if len(pe) == 3:
        raise CheckpointError(f"encoder.1.pe has shape {pe}: a learned table (pe_init). That code adds it as pe[:L] "
                              "(L, 1, d) to (B, L, d) inputs, which broadcasts over the batch axis (example b gets "
                              "pe[b] at every position when B = L, and it fails otherwise) instead of by position; "
                              "the bridge refuses rather than reproduce or guess that")
    return kind, dict(n_layers=n_layers, d_model=d_model, d_ff=d_ff, max_len=pe[0], **enc)


def _agree(r: _Resolver, kind: str, t: dict) -> str | None:
    """Values the tensors carry must agree with the run config; the config's attention name."""
    for path, tensor_value in (("model.d_model", t["d_model"]), ("encoder", t["encoder"])):
        if path in r.vals and r.vals[path] != tensor_value:
            raise CheckpointError(f"run config field {path} = {r.vals[path]!r} but the tensors say {tensor_value!r}")
    if "model.n_layers" in r.vals and r.vals["model.n_layers"] * r.vals["model.n_repeat"] != t["n_layers"]:
        raise CheckpointError(f"run config model.n_layers = {r.vals['model.n_layers']} (x n_repeat "
                              f"{r.vals['model.n_repeat']}) but the tensors hold {t['n_layers']} layer pairs")
    expand = r.vals.get("model.layer[ff].expand")
    if expand is not None and expand * t["d_model"] != t["d_ff"]:
        raise CheckpointError(f"run config model.layer[ff].expand = {expand} but the feed-forward "
                              f"width in the tensors is {t['d_ff']} (d_model {t['d_model']})")
    attn_name = r.vals.get("model.layer[attn]._name_")
    if attn_name is not None and (attn_name == "mha") != (kind == "mha"):
        raise CheckpointError(f"run config model.layer[attn]._name_ = {attn_name!r} but the tensors have the {kind} "
                              "layout")
    return attn_name


def _pooling(r: _Resolver, h: ArchHints, hcfg: dict, no_cfg: str) -> tuple[str, bool]:
    """(pool, use_lengths) of a pooled classifier; a pooling hint for a head that does not pool is refused."""
    unused = [f for f, v in ((f"--pool {h.pool}", h.pool),
                             ("--use-lengths" if h.use_lengths else "--all-positions", h.use_lengths)) if v is not None]
    if unused and hcfg.get("head") not in ("linear", "mlp", "retrieval"):
        raise CheckpointError(f"{' and '.join(unused)}: the model has {_head_words(hcfg, h.head)}, which does not "
                              "pool over positions, so the flag would be ignored; drop it")
    pool_mode = {"pool": "mean"}.get(r.vals.get("decoder.mode"), r.vals.get("decoder.mode", "mean"))
    use_len = r.vals.get("decoder.use_lengths", True)  # unused without a pooled classifier
    if hcfg.get("head") in ("linear", "mlp", "retrieval"):
        mode = r("pooling", {"mean": "pool"}.get(h.pool, h.pool), "decoder.mode",
                 missing=f"the pooling of the classifier is not in the state dict{no_cfg}; pass pool (--pool "
                         "mean|max|last|first|sum) and use_lengths (--use-lengths / --all-positions)")
        pool_mode = {"pool": "mean"}.get(mode, mode)
        if pool_mode not in ("mean", "max", "last", "first", "sum"):
            raise CheckpointError(f"pool {mode!r}: choose pool/mean, max, last, first or sum")
        use_len = r("pool over valid lengths", h.use_lengths, "decoder.use_lengths",
                    missing=f"whether pooling stops at each sequence's length is not in the state dict{no_cfg}; "
                            "pass --use-lengths or --all-positions")
    return pool_mode, use_len


def infer_config(sd: dict, config: dict | None = None, hints: ArchHints | None = None
                 ) -> tuple[LRAConfig, str, list[str]]:
    """(LRAConfig, attention kind, notes) from a state dict + optional run config and hints.

    Every run-config field is read through :mod:`toyspt.lra.runconfig` (honoured or
    refused); a hint that contradicts the run config raises; a file without a run config
    needs every output-changing field the tensors do not determine (see the module doc)."""
    h = hints or ArchHints()
    notes: list[str] = []
    activation = h.activation
    if activation is not None:
        try:
            activation = rc.activation(activation, {})
        except rc.Unhonoured as e:
            raise CheckpointError(f"activation {activation!r}: {e}") from None
    r = _Resolver(config, notes)
    no_cfg = " and the file has no run config" if config is None else ""
    kind, t = _tensors(sd)
    attn_name = _agree(r, kind, t)
    n_heads = r("heads", h.n_heads, "model.layer[attn].n_heads",
                missing=_needed("n_heads", "the number of heads") if config is None else
                f"the run config has no {A}.n_heads; pass --heads")
    causal = r("causal attention", h.causal, "model.layer[attn].causal",
               missing=_needed("causal", "whether attention was causal"))
    rotary = _rotary(r, config, kind, [k for k in sd if k.endswith(".layer.rope.freqs")], notes)
    window, look_backward, look_forward = _locality(r, config, kind, attn_name, causal, h.window,
                                                    h.look_backward, h.look_forward, notes)
    act = _activation(r, config, sd, activation, t["d_ff"])
    prenorm = r.vals.get("model.prenorm", "model.norm.norm.weight" in sd)
    if prenorm != ("model.norm.norm.weight" in sd):
        raise CheckpointError(f"run config model.prenorm = {prenorm} but the final LayerNorm "
                              f"'model.norm.norm.weight' is {'absent' if prenorm else 'present'}")
    hcfg, head_notes = _head_config(sd, r, h.head, t, t["d_model"])
    notes += head_notes
    pool_mode, use_len = _pooling(r, h, hcfg, no_cfg)
    try:
        cfg = LRAConfig(**t, n_heads=n_heads, prenorm=prenorm, causal=causal, window=window,
                        look_backward=look_backward, look_forward=look_forward, rotary=rotary,
                        activation=act, pool=pool_mode, use_lengths=use_len, **hcfg)
    except ValueError as e:
        raise CheckpointError(f"inconsistent architecture: {e}") from None
    return cfg, kind, notes


def _rotary(r: _Resolver, config, kind: str, rotary_keys: list, notes: list) -> bool:
    """Rotary q/k embedding: the tensors decide (``rope.freqs`` buffers); a run config must agree."""
    rotary = bool(rotary_keys)
    if rotary and kind == "mha":
        raise CheckpointError("rope.freqs buffers beside the packed nn.MultiheadAttention layout, "
                              "which has no rotary embedding; unknown format")
    if config is not None:
        said = bool(r.vals.get(f"{A}.rotary", False))
        if said != rotary:
            raise CheckpointError(f"the run config says rotary={said} but the tensors "
                                  f"{'hold' if rotary else 'lack'} rope.freqs buffers")
    if rotary:
        notes.append("rotary q/k embedding (interleaved pairs; read from the file's rope.freqs)")
    return rotary


def _locality(r: _Resolver, config, kind, attn_name, causal, window, back, fwd, notes):
    """(window, look_backward, look_forward): block-local attention or global (0, 1, 1)."""
    if kind == "mha" and window:
        raise CheckpointError(f"window={window} (--window): the packed nn.MultiheadAttention layout "
                              "has no local attention")
    if attn_name in ("mha", "mhfa") and window:
        raise CheckpointError(f"argument window={window} (--window) contradicts the run config "
                              f"field {A}._name_ = {attn_name!r} (global attention)")
    if config is None and kind == "linears" and window is None:
        raise CheckpointError(_needed("window", "whether attention was block-local (and its block size)"))
    if attn_name == "mhfla" or window:
        window = r("local-attention window", window, f"{A}.window_size",
                   missing="mhfla needs window_size in the run config")
        if config is None:
            for field, v in (("look_backward", back), ("look_forward", fwd)):
                if v is None:
                    raise CheckpointError(_needed(field, f"block-local attention's {field}"))
        back = r("look-backward blocks", back, f"{A}.look_backward",
                 default=1, why_default="the mhfla default")
        fwd = r("look-forward blocks", fwd, f"{A}.look_forward",
                default=0 if causal else 1, why_default="the mhfla default")
        if causal and fwd:
            raise CheckpointError(f"look_forward={fwd} with causal attention: that code's local "
                                  "attention asserts a causal mask never looks forward")
        return window, back, fwd
    if back is not None or fwd is not None:
        raise CheckpointError("look_backward/look_forward need block-local attention (--window N > 0)")
    if config is None:
        notes.append("global attention (given: window 0)" if kind == "linears"
                     else "global attention (the packed nn.MultiheadAttention layout)")
    return 0, 1, 1


def _activation(r: _Resolver, config, sd, activation, d_ff) -> str:
    """The FF activation: GLU is visible in the tensors (a doubled first linear); any other
    must come from the run config or the hint."""
    first = tuple(sd["model.layers.1.layer.ff.0.0.weight"].shape) if (
        "model.layers.1.layer.ff.0.0.weight" in sd) else None
    glu = first is not None and first[0] == 2 * d_ff
    if config is None:
        if glu and activation not in (None, "glu"):
            raise CheckpointError(f"activation {activation!r} (--activation): the tensors hold a "
                                  f"GLU feed-forward (first linear {first[0]} = 2 x {d_ff} rows)")
        if glu:
            r.notes.append("feed-forward activation: glu (the tensors: a doubled first linear)")
            return "glu"
        if activation is None:
            raise CheckpointError(_needed("activation", "the feed-forward activation"))
    return r("feed-forward activation", activation, "model.layer[ff].activation", default="gelu",
             why_default="that code's FF default")


def _head_config(sd, r: _Resolver, head, enc, d_model) -> tuple[dict, list[str]]:
    notes: list[str] = []
    dname = r.vals.get("decoder._name_")
    if "decoder.0.retrieval.classifier.0.weight" in sd:
        hw = _shape(sd, "decoder.0.retrieval.classifier.0.weight")
        if hw[1] != 4 * d_model or "decoder.0.retrieval.classifier.4.weight" in sd:
            raise CheckpointError("retrieval head: only the nli head on [a, b, a-b, a*b] is supported "
                                  f"(decoder.0.retrieval.classifier.0.weight {hw})")
        if dname not in (None, "retrieval"):
            raise CheckpointError(f"run config decoder._name_ = {dname!r} but the tensors hold a "
                                  "retrieval head")
        act = r("retrieval head activation", None, "decoder.activation", default="gelu",
                why_default="the LRA retrieval pipeline's value")
        hcfg = dict(head="retrieval", head_hidden=0 if hw[0] == d_model else hw[0],
                    head_activation=act,
                    n_classes=_shape(sd, "decoder.0.retrieval.classifier.2.weight")[0])
    elif "decoder.0.output_transform.0.weight" in sd:
        if dname not in (None, "sequence_nonelinear") or r.vals.get("decoder.type", "mlp") != "mlp":
            raise CheckpointError(f"run config decoder {dname!r} (type {r.vals.get('decoder.type')}) "
                                  "but the tensors hold a Linear-ReLU-Linear head")
        hidden = _shape(sd, "decoder.0.output_transform.0.weight")[0]
        hcfg = dict(head="mlp", head_hidden=0 if hidden == d_model else hidden,
                    n_classes=_shape(sd, "decoder.0.output_transform.2.weight")[0])
        notes.append("head: MLP Linear-ReLU-Linear")
    elif "decoder.0.output_transform.weight" in sd:
        out = _shape(sd, "decoder.0.output_transform.weight")[0]
        spt = None
        if r.config is not None:
            spt = bool(r.vals.get("dataset.mlm_prob")) or bool(r.vals.get("dataset.causal_lm"))
        if head in ("cls", "rec"):
            if spt is not None and spt != (head == "rec"):
                raise CheckpointError(f"argument head={head!r} contradicts the run config "
                                      "(dataset.mlm_prob/causal_lm)")
            is_rec, why = head == "rec", "argument"
        elif spt is not None:
            is_rec, why = spt, "run config dataset.mlm_prob/causal_lm"
        elif enc["encoder"] == "embedding":
            is_rec, why = out == enc["n_tokens"], "output size vs vocabulary (guess)"
        else:
            is_rec, why = out in (1, 256), "output size 1/256 = pixel reconstruction (guess)"
        if is_rec:
            hcfg = dict(head="none", rec_out=out)
            notes.append(f"head: per-token SPT decoder with {out} outputs ({why}); "
                         f"{_rec_loss(r.vals.get('dataset.lm_loss'), enc['encoder'], out)}")
        else:
            hcfg = dict(head="linear", n_classes=out)
            notes.append(f"head: linear classifier with {out} classes ({why})")
    else:
        hcfg = dict(head="none")
        notes.append("head: none (no decoder keys)")
    if (head == "rec" and hcfg["head"] in ("mlp", "retrieval")
            or head in ("cls", "rec") and hcfg["head"] == "none" and not hcfg.get("rec_out")):
        raise CheckpointError(f"--head {head} says what decoder.0.output_transform is, but the tensors hold "
                              f"{_head_words(hcfg, None)}; the flag would be ignored; drop it")
    if head == "none":
        hcfg = dict(head="none")
    _check_decoder_sizes(r, hcfg, d_model)
    return hcfg, notes


def _rec_loss(loss: str | None, encoder: str, out: int) -> str:
    """The SPT loss a decoder of ``out`` outputs is probed with (pixels: L1 on one output, or that
    code's PathFinder ``lm_loss: ce``, 256-way over grey levels); refuses a contradicting lm_loss."""
    levels = encoder == "linear" and out == PIXEL_LEVELS
    if loss is not None and (loss == "ce") != (levels or encoder == "embedding"):
        raise CheckpointError(f"run config field dataset.lm_loss = {loss!r} contradicts the {encoder} encoder's "
                              f"decoder of {out} outputs (tokens: ce; pixels: ce with {PIXEL_LEVELS}, l1 with 1)")
    if encoder == "linear" and not levels and out != 1:
        raise CheckpointError(f"a pixel SPT decoder with {out} outputs: the bridge probes 1 (L1) or {PIXEL_LEVELS}")
    return ("loss: cross-entropy on masked tokens" if encoder == "embedding" else
            "loss: cross-entropy over 256 grey levels on masked pixels" if levels else "loss: L1 on masked pixels")


def _head_words(hcfg: dict, head: str | None) -> str:
    """What the head is, in words (for refusals of flags it cannot honour)."""
    if head == "none":
        return "no head (--head none ignores the decoder)"
    return {"linear": "a linear classifier", "mlp": "an MLP classifier (Linear-ReLU-Linear)",
            "retrieval": "a retrieval classifier"}.get(
        hcfg.get("head"), "a per-token SPT decoder" if hcfg.get("rec_out") else "no decoder (no decoder keys)")


def _check_decoder_sizes(r: _Resolver, hcfg: dict, d_model: int) -> None:
    """decoder.d_output / d_model / l_output of the run config against the head tensors."""
    kind = hcfg.get("head")
    out = hcfg.get("rec_out") if kind == "none" else hcfg.get("n_classes")
    d_out = r.vals.get("decoder.d_output")
    if d_out is not None and out and d_out != out:
        raise CheckpointError(f"run config field decoder.d_output = {d_out} but the head "
                              f"tensors have {out} outputs")
    if kind == "retrieval":
        hidden = hcfg["head_hidden"] or d_model
        want = r.vals.get("decoder.d_model") or d_model
        if want != hidden:
            raise CheckpointError(f"run config field decoder.d_model = "
                                  f"{r.vals.get('decoder.d_model')!r} (hidden {want}) but the "
                                  f"retrieval head tensors have hidden width {hidden}")
    if r.present("decoder.l_output"):
        l_out = r.vals.get("decoder.l_output")
        if (l_out is None) != bool(hcfg.get("rec_out")):
            raise CheckpointError(f"run config field decoder.l_output = {l_out!r} but the tensors "
                                  f"hold a {'per-token decoder' if hcfg.get('rec_out') else 'pooled head'}")


__all__ = ["infer_config", "ArchHints", "FLAGS"]
