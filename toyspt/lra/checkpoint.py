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
from dataclasses import asdict, dataclass, field

import torch

from toyspt.lra.infer import ArchHints, infer_config
from toyspt.lra.lightning import CheckpointError, RawCheckpoint, read_checkpoint, write_checkpoint
from toyspt.lra.model import LRAConfig, LRATransformer
from toyspt.nn.positional import sinusoidal_table

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
    # the toyspt run the file was written from (run config section "toyspt": arm, task, seed, state), or None
    provenance: dict | None = None


@dataclass
class LoadedLRA:
    model: LRATransformer
    cfg: LRAConfig
    report: LoadReport
    raw: RawCheckpoint


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
            if p == "weight" and cfg.rotary:
                m.append((f"{a}.layer.rope.freqs", f"{b}.attn.rope_freqs", None))
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
        if not t.is_floating_point():
            raise CheckpointError(f"{src} has dtype {t.dtype}; weights must be floating point")
        if tuple(t.shape) != tuple(own[dst].shape):
            raise CheckpointError(f"shape mismatch at {src}: found {tuple(sd[src].shape)}, "
                                  f"expected {tuple(own[dst].shape)} (for {dst})")
        finite = torch.isfinite(t)
        if not bool(finite.all()):
            raise CheckpointError(f"{src} holds {int((~finite).sum())} non-finite values (NaN/inf) "
                                  f"of {t.numel()}; the file is corrupt or the run diverged")
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


def load_lra(path: str | os.PathLike, hints: ArchHints | None = None, *, trust: bool = False,
             strict: bool = True, dtype: torch.dtype = torch.float64) -> LoadedLRA:
    """Load an LRA checkpoint onto toyspt's attention; see the module docstring.

    ``hints`` state what a file without run config cannot tell (:class:`ArchHints`; every
    output-changing field the tensors do not determine); they must agree with a run config
    that is present. ``hints.head``: force ``cls`` / ``rec`` for
    ``decoder.0.output_transform`` or ``none``. ``dtype``: float64 by default (probes).
    """
    hints = hints or ArchHints()
    head = hints.head
    if head is not None and head not in HEAD_OVERRIDES:
        raise ValueError(f"head must be one of {HEAD_OVERRIDES}, got {head!r}")
    raw = read_checkpoint(path, trust=trust)
    sd = raw.state_dict
    cfg, kind, notes = infer_config(sd, raw.config, hints)
    if head == "none":
        strict = False
    model = LRATransformer(cfg).to(dtype)
    used, unused = load_state(model, sd, kind, strict=strict)
    pe = sd["encoder.1.pe"].double().reshape(cfg.max_len, cfg.d_model)
    dev = float((pe - sinusoidal_table(cfg.max_len, cfg.d_model, torch.float64)).abs().max())
    # The code computes its table in float32 (sin of p * 10000^(-2i/d) with p up to 16383), so
    # a genuine sinusoidal table differs from the float64 formula by up to ~1e-3 at the far end.
    kind_pe = ("sinusoidal" if dev < 1e-2 else "not the sinusoidal formula; the stored "
               "buffer is used as is, as that code adds whatever buffer the file holds")
    notes.append(f"positional table {cfg.max_len}x{cfg.d_model}: {kind_pe}, max |diff| to the "
                 f"float64 formula {dev:.2e}")
    if raw.config is None:
        notes.append("no run config in the file")
    others = [k for k in raw.entries if k not in ("state_dict", "hyper_parameters")
              and "state_dict" in raw.entries]
    if others:
        notes.append(f"other entries of the file (not used by the model): {others}")
    provenance = None
    if raw.config is not None and PROVENANCE in raw.config:
        provenance = check_provenance(raw.config[PROVENANCE])
        notes.append("toyspt run: " + ", ".join(f"{k} {v}" for k, v in provenance.items()))
    report = LoadReport(os.fspath(path), asdict(cfg), kind, used, unused, notes, provenance)
    return LoadedLRA(model.eval(), cfg, report, raw)


# ------------------------------------------------------------------------------- writing

def lra_state_dict(model: LRATransformer, attn_kind: str = "linears") -> dict[str, torch.Tensor]:
    """The model's tensors under the checkpoint keys of the LRA code (inverse of loading)."""
    if attn_kind not in ATTN_KINDS:
        raise ValueError(f"attn_kind must be one of {ATTN_KINDS}")
    if model.cfg.head != "none" and model.cfg.rec_out:
        raise ValueError("a model with both a classifier and a per-token decoder cannot be written in that "
                         "code's layout (both are decoder.0.output_transform); write one of them "
                         "(toyspt.lra.convert.checkpoint_form)")
    own = model.state_dict()
    out: dict[str, torch.Tensor] = {}
    for src, dst, block in key_map(model.cfg, attn_kind):
        t = own[dst].detach().clone()  # in the model's own dtype: float64 weights are not rounded
        if block is None:
            out[src] = t
        elif src in out:
            out[src] = torch.cat([out[src], t])
        else:
            out[src] = t
    return out


def run_config(cfg: LRAConfig, *, dataset: dict | None = None, extra: dict | None = None,
               attn_kind: str = "linears") -> dict:
    """A run config shaped like the code's Hydra config for this architecture (plain dict)."""
    name = "mha" if attn_kind == "mha" else "mhfla" if cfg.window else "mhfa"
    if name == "mha" and (cfg.window or cfg.rotary):
        raise ValueError("the mha layout has no local attention or rotary embedding")
    attn = {"_name_": name, "causal": cfg.causal,
            "n_heads": cfg.n_heads, "dropout": None, "bias": True}
    if name != "mha":
        attn["rotary"] = cfg.rotary
    if cfg.window:
        attn.update(window_size=cfg.window, look_forward=cfg.look_forward,
                    look_backward=cfg.look_backward)
    decoder = {"_name_": {"linear": "sequence", "mlp": "sequence_nonelinear",
                          "retrieval": "retrieval"}.get(cfg.head, "sequence"),
               "mode": {"mean": "pool"}.get(cfg.pool, cfg.pool), "use_lengths": cfg.use_lengths}
    if cfg.head == "retrieval":
        decoder.update(nli=True, activation=cfg.head_activation)
    conf = {"model": {"_name_": "model", "n_layers": cfg.n_layers, "d_model": cfg.d_model,
                      "prenorm": cfg.prenorm, "norm": "layer", "dropout": 0.0, "residual": "R",
                      "layer": [attn, {"_name_": "ff", "expand": cfg.d_ff // cfg.d_model,
                                       "activation": cfg.activation, "dropout": None}]},
            "encoder": cfg.encoder, "decoder": decoder, "dataset": dict(dataset or {})}
    conf.update(extra or {})
    return conf


def save_lra(path: str | os.PathLike, model: LRATransformer, *, dataset: dict | None = None,
             attn_kind: str = "linears", epoch: int = 0, global_step: int = 0,
             extra_config: dict | None = None, provenance: dict | None = None) -> None:
    """Write ``model`` as a Lightning checkpoint of the LRA code (pickled DictConfig included);
    ``provenance`` (the toyspt run it came from: arm, task, seed, state) goes into the run config's
    own section ``toyspt``, which that code never reads, and comes back as ``LoadReport.provenance``."""
    extra = dict(extra_config or {})
    if provenance is not None:
        extra[PROVENANCE] = check_provenance(provenance)
    write_checkpoint(path, lra_state_dict(model, attn_kind),
                     run_config(model.cfg, dataset=dataset, extra=extra, attn_kind=attn_kind),
                     epoch=epoch, global_step=global_step)


PROVENANCE = "toyspt"  # the run config's section naming the toyspt run a checkpoint was written from


def check_provenance(value) -> dict:
    """A provenance section as plain data: a dict of at most 16 short names to strings, integers or
    None, with an ``arm``; anything else is refused (it is read from files)."""
    if not isinstance(value, dict) or len(value) > 16 or not isinstance(value.get("arm"), str):
        raise CheckpointError(f"run config section {PROVENANCE!r} must be a dict with an 'arm' name, got "
                              f"{type(value).__name__}")
    for k, v in value.items():
        if not (isinstance(k, str) and len(k) <= 64) or not (v is None or isinstance(v, (str, int))) \
                or isinstance(v, bool) or len(str(v)) > 256:
            raise CheckpointError(f"run config section {PROVENANCE!r}: entry {k!r} must be a short name with a "
                                  "string, an integer or null")
    return dict(value)


__all__ = ["LoadReport", "LoadedLRA", "ArchHints", "infer_config", "key_map", "load_state", "load_lra",
           "lra_state_dict", "run_config", "save_lra", "ATTN_KINDS", "PROVENANCE", "check_provenance"]
