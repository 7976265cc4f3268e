"""The value checks of the LRA run-config table (:mod:`toyspt.lra.runconfig`): each takes a
value and the fields read so far, returns the value the bridge uses, or raises
:class:`Unhonoured` with the reason."""
from __future__ import annotations

from toyspt.lra.model import ACTIVATIONS

ATTN_NAMES = ("mha", "mhfa", "mhfla")


class Unhonoured(Exception):
    """Raised by a field check with the reason the value is not honoured."""


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _num(v):
    return (isinstance(v, (int, float)) and not isinstance(v, bool))


def positive_int(v, ctx):
    if not _is_int(v) or v <= 0:
        raise Unhonoured("expected a positive integer")
    return v


def nonneg_int(v, ctx):
    if not _is_int(v) or v < 0:
        raise Unhonoured("expected an integer >= 0")
    return v


def boolean(v, ctx):
    if not isinstance(v, bool):
        raise Unhonoured("expected true or false")
    return v


def rate(v, ctx):
    if v is None:
        return 0.0
    if not _num(v) or not 0 <= v < 1:
        raise Unhonoured("expected a probability in [0, 1)")
    return float(v)


def one_of(*allowed, why: str = ""):
    def check(v, ctx):
        if v not in allowed:
            raise Unhonoured(f"honoured values: {list(allowed)}{'; ' + why if why else ''}")
        return v
    return check


def _name(v):
    if isinstance(v, str) or v is None:
        return v
    if isinstance(v, dict):
        return v.get("_name_")
    if isinstance(v, list) and len(v) == 1:
        return _name(v[0])
    raise Unhonoured("expected a name or a {_name_: ...} config")


def residual(v, ctx):
    name, extra = _name(v), (v if isinstance(v, dict) else {})
    if name not in ("R", "residual"):
        raise Unhonoured("only the plain residual x + f(x) ('R') is honoured")
    if extra.get("alpha", 1.0) != 1.0 or extra.get("beta", 1.0) != 1.0:
        raise Unhonoured("only alpha = beta = 1 is honoured")
    return "R"


def norm(v, ctx):
    if _name(v) != "layer" or (isinstance(v, dict) and set(v) - {"_name_"}):
        raise Unhonoured("only LayerNorm ('layer', default arguments) is honoured")
    return "layer"


def pool(v, ctx):
    if v is None:
        return None
    if not isinstance(v, dict) or v.get("_name_") not in ("pool", "avg", "sample") \
            or v.get("stride", 1) != 1 or v.get("expand") not in (None, 1) \
            or set(v) - {"_name_", "stride", "expand"}:
        raise Unhonoured("only the identity pool (stride 1, expand null) is honoured")
    return None


def attn_dropout(v, ctx):
    p = rate(v, ctx) if v is not None else rate(ctx.get("model.dropout"), ctx)
    if p and ctx.get("model.layer[attn]._name_") == "mhfa":
        raise Unhonoured("mhfa passes dropout_p to torch's fused attention even in evaluation, "
                      "so that code's own outputs are random; only 0 is honoured")
    return p


def ignored_by_flash(default):
    """Keys that nn.MultiheadAttention uses but the mhfa/mhfla wrappers swallow (**kwargs)."""
    def check(v, ctx):
        if ctx.get("model.layer[attn]._name_") in ("mhfa", "mhfla"):
            return v  # that code's constructor drops it: no effect on the computation
        if v != default:
            raise Unhonoured(f"nn.MultiheadAttention with {v!r} is not supported; only {default!r}")
        return v
    return check


def rotary(v, ctx):
    boolean(v, ctx)
    if v and ctx.get("model.layer[attn]._name_") == "mha":
        raise Unhonoured("the mha wrapper has no rotary embedding")
    return v


def look_forward(v, ctx):
    nonneg_int(v, ctx)
    if v and ctx.get("model.layer[attn].causal", True):
        raise Unhonoured("causal local attention cannot look forward (that code asserts this)")
    return v


def window_size(v, ctx):
    if ctx.get("model.layer[attn]._name_") != "mhfla":
        raise Unhonoured("window_size belongs to mhfla only")
    return positive_int(v, ctx)


def activation(v, ctx):
    if v is None:
        raise Unhonoured("activation null makes the first FF linear bare (no ff.0.0 keys); "
                      "use 'id' for no activation")
    if v not in ACTIVATIONS:
        raise Unhonoured(f"honoured activations: {sorted(ACTIVATIONS)} (modrelu and ln carry "
                      "parameters the bridge does not map)")
    return {"swish": "silu", "identity": "id", "linear": "id", "relu2": "sqrelu"}.get(v, v)


def initializer(v, ctx):
    if v not in (None, "uniform", "normal", "xavier", "zero", "one"):
        raise Unhonoured("unknown initializer (it only sets initial weights, but that code "
                      "knows no other)")
    return v


def same_as_d_model(v, ctx):
    if v is not None and v != ctx.get("model.d_model"):
        raise Unhonoured("only null (= d_model) is honoured")
    return v


def encoder(v, ctx):
    name = _name(v)
    if name not in ("embedding", "linear") or (isinstance(v, dict) and set(v) - {"_name_"}):
        raise Unhonoured("honoured encoders: 'embedding' (tokens) or 'linear' (pixels)")
    return name


def model_encoder(v, ctx):
    if v is None:
        return None
    if _name(v) != "position" or (isinstance(v, dict) and (
            v.get("pe_init") is not None or set(v) - {"_name_", "dropout", "max_len", "pe_init"})):
        raise Unhonoured("only the fixed sinusoidal 'position' encoder (pe_init null) is honoured")
    return "position"


def decoder_name(v, ctx):
    if v not in (None, "sequence", "sequence_nonelinear", "retrieval"):
        raise Unhonoured("honoured decoders: sequence, sequence_nonelinear, retrieval")
    return v


def l_output(v, ctx):
    if v not in (None, 0):
        raise Unhonoured("only null (per-token outputs) or 0 (one pooled output) is honoured")
    return v


def optional_int(v, ctx):
    return v if v is None else positive_int(v, ctx)


def spt_prob(v, ctx):
    return rate(v, ctx)


def lm_loss(v, ctx):
    if v not in (None, "l1", "ce"):
        raise Unhonoured("honoured SPT losses: l1 (pixels), ce (tokens, or pixels with a 256-way decoder)")
    return v


def ignore_val(v, ctx):
    if v not in (None, True):
        raise Unhonoured("only true (the SPT loss on masked positions only) is honoured")
    return v
