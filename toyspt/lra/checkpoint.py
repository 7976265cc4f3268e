"""From a Lightning checkpoint of the LRA code to an :class:`LRATransformer`, and back.

The architecture is read off the state dict (layer pairs, width, FFN width, embedding kind,
head kind, table length); what the tensors cannot tell (heads, causal/local attention,
pooling, whether ``decoder.0.output_transform`` is a classifier or an SPT decoder) comes
from the run config, then from arguments, then from the code's LRA defaults, and the
report says which. Every tensor of the file is mapped or listed; missing keys, shape
mismatches and (when ``strict``) unexpected keys raise :class:`CheckpointError` naming the
key and the shapes.

Key layout (i = layer pair, a = 2i, f = 2i + 1), as written by that code:
``encoder.0.weight`` (+ ``.bias`` for the pixel Linear), ``encoder.1.pe``;
``model.layers.{a}.norm.norm.*``, ``model.layers.{a}.layer.linears.{0,1,2,3}.*`` = Q, K, V, O
(or ``layer.mha.in_proj_weight`` rows [Q; K; V] + ``mha.out_proj.*``);
``model.layers.{f}.norm.norm.*``, ``model.layers.{f}.layer.ff.0.0.*`` and ``ff.2.*``;
``model.norm.norm.*``; ``decoder.0.output_transform[.0|.2].*`` or
``decoder.0.retrieval.classifier.{0,2}.*``.
"""
from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field

import torch

from ..positional import sinusoidal_table
from .lightning import CheckpointError, RawCheckpoint, read_checkpoint, write_checkpoint
from .model import LRAConfig, LRATransformer

ATTN_KINDS = ("linears", "mha")
HEAD_OVERRIDES = ("cls", "rec", "none")


@dataclass
class LoadReport:
    """What was loaded and how each architectural fact was decided."""
    path: str
    cfg: dict  # asdict(LRAConfig)
    attn_kind: str  # linears (four nn.Linear) | mha (nn.MultiheadAttention, packed in_proj)
    used: list[str] = field(default_factory=list)  # checkpoint keys mapped onto the model
    unused: list[str] = field(default_factory=list)  # checkpoint keys not used ("key shape")
    notes: list[str] = field(default_factory=list)  # where heads/head kind/pooling came from, PE check


@dataclass
class LoadedLRA:
    model: LRATransformer
    cfg: LRAConfig
    report: LoadReport
    raw: RawCheckpoint


# --------------------------------------------------------------------------- config reading

def _get(tree, *path, default=None):
    for p in path:
        if isinstance(tree, dict) and p in tree:
            tree = tree[p]
        elif isinstance(tree, list) and isinstance(p, int) and -len(tree) <= p < len(tree):
            tree = tree[p]
        else:
            return default
    return tree


def _attn_layer_cfg(config: dict | None) -> dict:
    """The attention layer's config (``model.layer`` is a list [attention, ff] in LRA runs)."""
    layer = _get(config, "model", "layer")
    if isinstance(layer, list):
        layer = next((item for item in layer if isinstance(item, dict)
                      and item.get("_name_") in ("mha", "mhfa", "mhfla")), None)
    return layer if isinstance(layer, dict) else {}


def _decoder_cfg(config: dict | None) -> dict:
    dec = _get(config, "decoder")
    if isinstance(dec, list):
        dec = next((d for d in dec if isinstance(d, dict)), {})
    if isinstance(dec, str):
        dec = {"_name_": dec}
    return dec if isinstance(dec, dict) else {}


def _spt_from_config(config: dict | None) -> bool | None:
    ds = _get(config, "dataset")
    if not isinstance(ds, dict):
        return None
    if ds.get("mlm_prob") or ds.get("causal_lm"):
        return True
    return False


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


def _shape(sd, key):
    if key not in sd:
        raise CheckpointError(f"missing key {key!r}")
    return tuple(sd[key].shape)


def infer_config(sd: dict, config: dict | None = None, *, n_heads: int | None = None,
                 head: str | None = None, window: int | None = None,
                 pool: str | None = None) -> tuple[LRAConfig, str, list[str]]:
    """(LRAConfig, attention kind, notes) from a state dict + optional run config/overrides."""
    notes: list[str] = []
    idx = _layer_indices(sd)
    n_layers = len(idx) // 2
    kinds = {_attn_kind(sd, 2 * i) for i in range(n_layers)}
    if len(kinds) > 1:
        raise CheckpointError(f"mixed attention layouts across layers: {sorted(kinds)}")
    kind = kinds.pop()
    if kind == "linears":
        d_model = _shape(sd, "model.layers.0.layer.linears.0.weight")[0]
    else:
        d_model = _shape(sd, "model.layers.0.layer.mha.in_proj_weight")[1]
    d_ff = _shape(sd, "model.layers.1.layer.ff.0.0.weight")[0]

    w = _shape(sd, "encoder.0.weight")
    if "encoder.0.bias" in sd:
        enc = dict(encoder="linear", d_input=w[1])
    else:
        enc = dict(encoder="embedding", n_tokens=w[0])
    pe = _shape(sd, "encoder.1.pe")
    max_len = pe[0]
    if pe[-1] != d_model or len(pe) not in (2, 3):
        raise CheckpointError(f"encoder.1.pe has shape {pe}, expected (max_len, {d_model})")

    attn_cfg = _attn_layer_cfg(config)
    if n_heads is not None:
        notes.append(f"heads: {n_heads} (argument)")
    elif isinstance(attn_cfg.get("n_heads"), int):
        n_heads = attn_cfg["n_heads"]
        notes.append(f"heads: {n_heads} (run config model.layer.n_heads)")
    else:
        raise CheckpointError("the number of heads is not in the state dict and the checkpoint has "
                              "no readable run config; pass n_heads (--heads)")
    if attn_cfg.get("rotary"):
        raise CheckpointError("run config has rotary=True: rotary embeddings are not supported")
    if "causal" in attn_cfg:
        causal = bool(attn_cfg["causal"])
    else:  # the nn.MultiheadAttention wrapper of the code is causal by default, the others not
        causal = kind == "mha"
        if causal:
            notes.append("causal attention assumed: the MultiheadAttention layout's default "
                         "(no 'causal' in the run config)")
    if window is None:
        window = int(attn_cfg.get("window_size") or 0) if attn_cfg.get("_name_") == "mhfla" else 0
    if window:
        notes.append(f"block-local attention, window {window}, look-around 1")
    if causal and "causal" in attn_cfg:
        notes.append("causal attention (run config)")
    prenorm = "model.norm.norm.weight" in sd
    if not prenorm:
        if _get(config, "model", "prenorm") is False:
            notes.append("post-norm blocks (run config prenorm=false)")
        else:
            raise CheckpointError("missing key 'model.norm.norm.weight' (final LayerNorm of a "
                                  "pre-norm model)")

    # heads
    dec = _decoder_cfg(config)
    hcfg: dict = {}
    if "decoder.0.retrieval.classifier.0.weight" in sd:
        hw = _shape(sd, "decoder.0.retrieval.classifier.0.weight")
        if hw[1] != 4 * d_model or "decoder.0.retrieval.classifier.4.weight" in sd:
            raise CheckpointError("retrieval head: only the nli head on [a, b, a-b, a*b] is supported "
                                  f"(decoder.0.retrieval.classifier.0.weight {hw})")
        act = dec.get("activation", "gelu")
        hcfg = dict(head="retrieval", head_hidden=0 if hw[0] == d_model else hw[0],
                    head_activation=act,
                    n_classes=_shape(sd, "decoder.0.retrieval.classifier.2.weight")[0])
        notes.append(f"head: retrieval MLP, {act} ({'run config' if 'activation' in dec else 'LRA aan default'})")
    elif "decoder.0.output_transform.0.weight" in sd:
        hidden = _shape(sd, "decoder.0.output_transform.0.weight")[0]
        hcfg = dict(head="mlp", head_hidden=0 if hidden == d_model else hidden,
                    n_classes=_shape(sd, "decoder.0.output_transform.2.weight")[0])
        notes.append("head: MLP Linear-ReLU-Linear")
    elif "decoder.0.output_transform.weight" in sd:
        out = _shape(sd, "decoder.0.output_transform.weight")[0]
        if head in ("cls", "rec"):
            is_rec, why = head == "rec", "argument"
        elif (spt := _spt_from_config(config)) is not None:
            is_rec, why = spt, "run config dataset.mlm_prob/causal_lm"
        elif enc["encoder"] == "embedding":
            is_rec, why = out == enc["n_tokens"], "output size vs vocabulary (guess)"
        else:
            is_rec, why = out in (1, 256), "output size 1/256 = pixel reconstruction (guess)"
        if is_rec:
            hcfg = dict(head="none", rec_out=out)
            notes.append(f"head: per-token SPT decoder with {out} outputs ({why})")
        else:
            hcfg = dict(head="linear", n_classes=out)
            notes.append(f"head: linear classifier with {out} classes ({why})")
    else:
        hcfg = dict(head="none")
        notes.append("head: none (no decoder keys)")
    if head == "none":
        hcfg = dict(head="none")

    mode = pool or dec.get("mode")
    pool_mode = {"pool": "mean", "max": "max", "last": "last", "first": "first",
                 "mean": "mean"}.get(mode or "pool")
    if pool_mode is None:
        raise CheckpointError(f"decoder mode {mode!r} is not supported (pool, max, last, first)")
    use_lengths = bool(dec.get("use_lengths", enc["encoder"] == "embedding"))
    if hcfg.get("head") in ("linear", "mlp", "retrieval"):
        notes.append(f"pooling: {pool_mode}, {'valid length' if use_lengths else 'all positions'} "
                     f"({'run config' if dec else 'LRA default'})")
    cfg = LRAConfig(n_layers=n_layers, d_model=d_model, n_heads=n_heads, d_ff=d_ff,
                    max_len=max_len, prenorm=prenorm, causal=causal, window=window,
                    pool=pool_mode, use_lengths=use_lengths, **enc, **hcfg)
    return cfg, kind, notes


# ------------------------------------------------------------------------------ key mapping

def key_map(cfg: LRAConfig, attn_kind: str = "linears") -> list[tuple[str, str, int | None]]:
    """(checkpoint key, model key, row block of a packed in_proj or None) for every tensor."""
    m = [("encoder.0.weight", "embed.weight", None)]
    if cfg.encoder == "linear":
        m.append(("encoder.0.bias", "embed.bias", None))
    m.append(("encoder.1.pe", "pe.table", None))
    for i in range(cfg.n_layers):
        a, f, b = f"model.layers.{2 * i}", f"model.layers.{2 * i + 1}", f"blocks.{i}"
        for p in ("weight", "bias"):
            m.append((f"{a}.norm.norm.{p}", f"{b}.ln1.{p}", None))
            if attn_kind == "linears":
                m += [(f"{a}.layer.linears.{j}.{p}", f"{b}.attn.W_{n}.{p}", None)
                      for j, n in enumerate("QKVO")]
            else:
                m += [(f"{a}.layer.mha.in_proj_{p}", f"{b}.attn.W_{n}.{p}", j)
                      for j, n in enumerate("QKV")]
                m.append((f"{a}.layer.mha.out_proj.{p}", f"{b}.attn.W_O.{p}", None))
            m.append((f"{f}.norm.norm.{p}", f"{b}.ln2.{p}", None))
            m.append((f"{f}.layer.ff.0.0.{p}", f"{b}.mlp.0.{p}", None))
            m.append((f"{f}.layer.ff.2.{p}", f"{b}.mlp.2.{p}", None))
    for p in ("weight", "bias"):
        if cfg.prenorm:
            m.append((f"model.norm.norm.{p}", f"ln_f.{p}", None))
        if cfg.head == "linear":
            m.append((f"decoder.0.output_transform.{p}", f"head_cls.{p}", None))
        elif cfg.head == "mlp":
            m += [(f"decoder.0.output_transform.{j}.{p}", f"head_cls.{j}.{p}", None) for j in (0, 2)]
        elif cfg.head == "retrieval":
            m += [(f"decoder.0.retrieval.classifier.{j}.{p}", f"head_cls.{j}.{p}", None)
                  for j in (0, 2)]
        if cfg.rec_out:
            m.append((f"decoder.0.output_transform.{p}", f"head_rec.{p}", None))
    return m


def _fmt(sd, keys):
    return [f"{k} {tuple(sd[k].shape)}" for k in keys]


def load_state(model: LRATransformer, sd: dict, attn_kind: str, strict: bool = True
               ) -> tuple[list[str], list[str]]:
    """Copy checkpoint tensors into ``model``; returns (used keys, unused keys with shapes)."""
    own = model.state_dict()
    d = model.cfg.d_model
    used, missing = [], []
    new = {}
    for src, dst, block in key_map(model.cfg, attn_kind):
        if src not in sd:
            missing.append(f"{src} (expected {tuple(own[dst].shape)})")
            continue
        t = sd[src]
        if block is not None:
            if t.shape[0] != 3 * d:
                raise CheckpointError(f"shape mismatch at {src}: found {tuple(t.shape)}, expected "
                                      f"({3 * d}{', ' + str(d) if t.dim() == 2 else ''}) = [Q; K; V]")
            t = t[block * d:(block + 1) * d]
        if dst == "pe.table" and t.dim() == 3 and t.shape[1] == 1:
            t = t[:, 0]  # learned table stored as (max_len, 1, d)
        if tuple(t.shape) != tuple(own[dst].shape):
            raise CheckpointError(f"shape mismatch at {src}: found {tuple(sd[src].shape)}, "
                                  f"expected {tuple(own[dst].shape)} (for {dst})")
        new[dst] = t.to(own[dst].dtype)
        if src not in used:
            used.append(src)
    if missing:
        raise CheckpointError(f"missing keys: {missing}")
    unused = [k for k in sd if k not in set(used)]
    if strict and unused:
        raise CheckpointError(f"unexpected keys (not part of the inferred architecture): "
                              f"{_fmt(sd, unused)}")
    model.load_state_dict(new, strict=True)
    return used, _fmt(sd, unused)


def load_lra(path: str | os.PathLike, *, n_heads: int | None = None, head: str | None = None,
             window: int | None = None, pool: str | None = None, trust: bool = False,
             strict: bool = True, dtype: torch.dtype = torch.float64) -> LoadedLRA:
    """Load an LRA checkpoint onto toyspt's attention; see the module docstring.

    ``head``: force ``cls`` / ``rec`` for ``decoder.0.output_transform`` or ``none``.
    ``dtype``: float64 by default (probes); float32 for speed.
    """
    if head is not None and head not in HEAD_OVERRIDES:
        raise ValueError(f"head must be one of {HEAD_OVERRIDES}, got {head!r}")
    raw = read_checkpoint(path, trust=trust)
    sd = raw.state_dict
    cfg, kind, notes = infer_config(sd, raw.config, n_heads=n_heads, head=head, window=window,
                                    pool=pool)
    if head == "none":
        strict = False
    model = LRATransformer(cfg).to(dtype)
    used, unused = load_state(model, sd, kind, strict=strict)
    pe = sd["encoder.1.pe"].double().reshape(cfg.max_len, cfg.d_model)
    dev = float((pe - sinusoidal_table(cfg.max_len, cfg.d_model, torch.float64)).abs().max())
    # The code computes its table in float32 (sin of p * 10000^(-2i/d) with p up to 16383), so
    # a genuine sinusoidal table differs from the float64 formula by up to ~1e-3 at the far end.
    kind_pe = "sinusoidal" if dev < 1e-2 else "not the sinusoidal formula (learned?)"
    notes.append(f"positional table {cfg.max_len}x{cfg.d_model}: {kind_pe}, max |diff| to the "
                 f"float64 formula {dev:.2e}")
    if raw.config is None:
        notes.append("no run config in the file")
    others = [k for k in raw.entries if k not in ("state_dict", "hyper_parameters")
              and "state_dict" in raw.entries]
    if others:
        notes.append(f"other entries of the file (not used by the model): {others}")
    report = LoadReport(os.fspath(path), asdict(cfg), kind, used, unused, notes)
    return LoadedLRA(model.eval(), cfg, report, raw)


# ------------------------------------------------------------------------------- writing

def lra_state_dict(model: LRATransformer, attn_kind: str = "linears") -> dict[str, torch.Tensor]:
    """The model's tensors under the checkpoint keys of the LRA code (inverse of loading)."""
    if attn_kind not in ATTN_KINDS:
        raise ValueError(f"attn_kind must be one of {ATTN_KINDS}")
    own = model.state_dict()
    out: dict[str, torch.Tensor] = {}
    for src, dst, block in key_map(model.cfg, attn_kind):
        t = own[dst].detach().float().clone()
        if block is None:
            out[src] = t
        elif src in out:
            out[src] = torch.cat([out[src], t])
        else:
            out[src] = t
    return out


def run_config(cfg: LRAConfig, *, dataset: dict | None = None, extra: dict | None = None) -> dict:
    """A run config shaped like the code's Hydra config for this architecture (plain dict)."""
    attn = {"_name_": "mhfla" if cfg.window else "mhfa", "causal": cfg.causal,
            "n_heads": cfg.n_heads, "dropout": None, "bias": True, "rotary": False}
    if cfg.window:
        attn.update(window_size=cfg.window, look_forward=1, look_backward=1)
    decoder = {"_name_": {"linear": "sequence", "mlp": "sequence_nonelinear",
                          "retrieval": "retrieval"}.get(cfg.head, "sequence"),
               "mode": {"mean": "pool"}.get(cfg.pool, cfg.pool), "use_lengths": cfg.use_lengths}
    conf = {"model": {"_name_": "model", "n_layers": cfg.n_layers, "d_model": cfg.d_model,
                      "prenorm": cfg.prenorm, "norm": "layer", "dropout": 0.0, "residual": "R",
                      "layer": [attn, {"_name_": "ff", "expand": cfg.d_ff // cfg.d_model,
                                       "activation": "gelu", "dropout": "${...dropout}"}]},
            "encoder": cfg.encoder, "decoder": decoder, "dataset": dict(dataset or {})}
    conf.update(extra or {})
    return conf


def save_lra(path: str | os.PathLike, model: LRATransformer, *, dataset: dict | None = None,
             attn_kind: str = "linears", epoch: int = 0, global_step: int = 0,
             extra_config: dict | None = None) -> None:
    """Write ``model`` as a Lightning checkpoint of the LRA code (pickled DictConfig included)."""
    write_checkpoint(path, lra_state_dict(model, attn_kind),
                     run_config(model.cfg, dataset=dataset, extra=extra_config),
                     epoch=epoch, global_step=global_step)


__all__ = ["LoadReport", "LoadedLRA", "infer_config", "key_map", "load_state", "load_lra",
           "lra_state_dict", "run_config", "save_lra", "ATTN_KINDS"]
