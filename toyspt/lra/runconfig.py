"""Every run-config field the LRA bridge reads, and what it does with each value.

:data:`FIELDS` is the single table: for each field (a path into the run config stored in
the checkpoint) the values the bridge **honours** and what it does with them; every other
value is **refused** with a :class:`CheckpointError` naming the field and the value. Absent
fields take that code's default (its constructor default; for ``model.residual`` and
``model.norm`` the value of its ``configs/model/base.yaml``, which every run composes). ``model.layer[attn]`` is
the attention item of the ``model.layer`` list, ``model.layer[ff]`` the feed-forward one.

Fields that cannot change an evaluation-mode forward pass (dropout of the residual and
feed-forward, input dropout, norm tracking, initialisers) are still type-checked, so a
value the code itself would reject is not read silently. Architecture facts that the
tensors also carry (width, depth, expand, encoder, head sizes) must agree with them; that
check is in :mod:`toyspt.lra.checkpoint`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from toyspt.lra.guard import CheckpointError
from toyspt.lra.runconfig_rules import (
    ATTN_NAMES,
    Unhonoured,
    activation,
    attn_dropout,
    boolean,
    decoder_name,
    encoder,
    ignore_val,
    ignored_by_flash,
    initializer,
    l_output,
    lm_loss,
    look_forward,
    model_encoder,
    nonneg_int,
    norm,
    one_of,
    optional_int,
    pool,
    positive_int,
    rate,
    residual,
    rotary,
    same_as_d_model,
    spt_prob,
    window_size,
)
from toyspt.util.validation import short_repr

MISSING = object()


@dataclass(frozen=True)
class Field:
    path: str  # where in the run config
    honoured: str  # the values honoured and what the bridge does with them
    check: Callable[[Any, dict], Any]  # value, fields read so far -> value used; raises Unhonoured
    default: Any = MISSING  # that code's value when the field is absent
    bad: Any = "__bogus__"  # a value the table refuses (for the table's own test)


A = "model.layer[attn]"
F = "model.layer[ff]"
FIELDS: tuple[Field, ...] = (
    Field("model._name_", "'model' (the isotropic SequenceModel)", one_of("model"), "model"),
    Field("model.d_model", "positive int; must equal the tensors' width", positive_int),
    Field("model.n_layers", "positive int; n_layers * n_repeat must equal the tensors' layer pairs",
          positive_int),
    Field("model.n_repeat", "positive int (layers repeated; no pooling between them)", positive_int, 1),
    Field("model.prenorm", "true: x + f(LN(x)) and a final LN; false: LN(x + f(x))", boolean, True),
    Field("model.transposed", "false", one_of(False), False, True),
    Field("model.residual", "'R' with alpha = beta = 1: x + f(x)", residual, "R"),
    Field("model.norm", "'layer': LayerNorm(eps 1e-5)", norm, "layer"),
    Field("model.pool", "null or the identity pool (stride 1, expand null)", pool, None,
          {"_name_": "pool", "stride": 2}),
    Field("model.n_apply", "1 (each layer applied once)", one_of(1), 1, 2),
    Field("model.dropout", "probability; no effect in evaluation except as mhfa's attention "
          "dropout (see below)", rate, 0.0, 2.0),
    Field("model.dropinp", "probability; input dropout, no effect in evaluation", rate, 0.0, 2.0),
    Field("model.tie_dropout", "bool; no effect in evaluation", boolean, False),
    Field("model.track_norms", "bool; logging only", boolean, True),
    Field(f"{A}._name_", "mha (nn.MultiheadAttention, packed in_proj), mhfa (four linears, fused "
          "attention), mhfla (four linears, block-local); must match the tensors",
          one_of(*ATTN_NAMES)),
    Field(f"{A}.n_heads", "positive int dividing d_model", positive_int),
    Field(f"{A}.causal", "bool: causal mask (every wrapper's default is true)", boolean, True),
    Field(f"{A}.dropout", "null (= model.dropout) or a probability; 0 needed for mhfa",
          attn_dropout, None, 0.1),
    Field(f"{A}.bias", "true", one_of(True), True, False),
    Field(f"{A}.rotary", "bool: that code's rotary q/k embedding (mhfa/mhfla)", rotary, False),
    Field(f"{A}.window_size", "positive int: block size of mhfla's local attention", window_size),
    Field(f"{A}.look_backward", "int >= 0: blocks before the query block that mhfla attends to",
          nonneg_int, 1, -1),
    Field(f"{A}.look_forward", "int >= 0 (0 when causal): blocks after it", look_forward, 1, -1),
    Field(f"{A}.use_pykeops", "false (the fused local attention)", one_of(False), False, True),
    Field(f"{A}.add_bias_kv", "false; any value for mhfa/mhfla (their constructors drop it)",
          ignored_by_flash(False), False, True),
    Field(f"{A}.add_zero_attn", "false; any value for mhfa/mhfla", ignored_by_flash(False), False, True),
    Field(f"{A}.kdim", "null; any value for mhfa/mhfla", ignored_by_flash(None), None, 7),
    Field(f"{A}.vdim", "null; any value for mhfa/mhfla", ignored_by_flash(None), None, 7),
    Field(f"{A}.transposed", "false", one_of(False), False, True),
    Field(f"{F}._name_", "'ff'", one_of("ff")),
    Field(f"{F}.expand", "positive int; expand * d_model must equal the tensors' FF width",
          positive_int),
    Field(f"{F}.activation", "gelu, relu, silu/swish, tanh, sigmoid, softplus, glu, sqrelu/relu2, "
          "laplace, id/identity/linear", activation, "gelu"),
    Field(f"{F}.dropout", "null or a probability; no effect in evaluation", rate, None, 2.0),
    Field(f"{F}.transposed", "false", one_of(False), False, True),
    Field(f"{F}.tie_dropout", "null or bool; no effect in evaluation", one_of(None, True, False),
          None),
    Field(f"{F}.initializer", "null or one of that code's initialisers (initial weights only)",
          initializer, None),
    Field(f"{F}.d_output", "null (= d_model)", same_as_d_model, None, 7),
    Field("encoder", "'embedding' or 'linear'; must match the tensors", encoder),
    Field("model.encoder", "null or the sinusoidal 'position' encoder (usually popped at setup)",
          model_encoder, None, {"_name_": "position", "pe_init": 0.02}),
    Field("decoder._name_", "sequence (linear head or per-token decoder), sequence_nonelinear "
          "(Linear-ReLU-Linear head), retrieval (two-document head), or absent", decoder_name, None),
    Field("decoder.mode", "pool (mean), max, last, first, sum over positions", one_of(
        "pool", "max", "last", "first", "sum"), "last"),
    Field("decoder.use_lengths", "bool: pool over each sequence's valid length only", boolean, False),
    Field("decoder.l_output", "null or 0", l_output, None, 3),
    Field("decoder.d_output", "null or int; must match the head's outputs", optional_int, None, -1),
    Field("decoder.type", "mlp or linear (sequence_nonelinear head)", one_of("mlp", "linear"), "mlp"),
    Field("decoder.nli", "true: retrieval head on [a, b, a-b, a*b]", one_of(True), True, False),
    Field("decoder.activation", "relu or gelu (retrieval head)", one_of("relu", "gelu"), "relu"),
    Field("decoder.d_model", "null (= d_model) or int: retrieval hidden width", optional_int, None, -1),
    Field("dataset.mlm_prob", "null or a probability; > 0: an SPT run (per-token decoder)",
          spt_prob, None, 2.0),
    Field("dataset.causal_lm", "bool; true: an SPT run (per-token decoder)", boolean, False),
    Field("dataset.lm_loss", "null, l1 (pixels), ce (tokens; pixels: 256-way over grey levels): the SPT loss "
          "probed", lm_loss, None),
    Field("dataset.ignore_val", "null or true: SPT loss on masked positions only", ignore_val, None),
    Field("task._name_", "'base' (no embedding rescaling; 'lm' rescales by sqrt(d))",
          one_of("base"), "base"),
)
FIELD_BY_PATH = {f.path: f for f in FIELDS}
KNOWN_KEYS = {
    "model": {p.split(".")[1] for p in FIELD_BY_PATH if p.startswith("model.") and "[" not in p}
    | {"layer", "decoder"},
    A: {p.split(".")[-1] for p in FIELD_BY_PATH if p.startswith(A)},
    F: {p.split(".")[-1] for p in FIELD_BY_PATH if p.startswith(F)},
    "decoder": {p.split(".")[1] for p in FIELD_BY_PATH if p.startswith("decoder.")} | {"_name_"},
}


def _layers(config: dict) -> tuple[dict | None, dict | None]:
    layer = config.get("model", {}).get("layer") if isinstance(config.get("model"), dict) else None
    if layer is None:
        return None, None
    if isinstance(layer, dict):
        layer = [layer]
    if not isinstance(layer, list) or len(layer) != 2 or not all(isinstance(x, dict) for x in layer):
        raise CheckpointError(f"run config field model.layer = {layer!r}: only the [attention, ff] "
                              "pair of a Transformer is honoured")
    return layer[0], layer[1]


def lookup(config: dict, path: str) -> Any:
    """The raw value at ``path`` (MISSING if absent)."""
    attn, ff = _layers(config)
    head, _, rest = path.partition(".")
    if path.startswith(A):
        node, key = attn, path[len(A) + 1:]
    elif path.startswith(F):
        node, key = ff, path[len(F) + 1:]
    elif head == "decoder":
        node = config.get("decoder")
        if isinstance(node, list) and len(node) == 1:
            node = node[0]
        if isinstance(node, str):
            node = {"_name_": node}
        key = rest
    elif path == "encoder":
        return config.get("encoder", MISSING)
    else:
        node, key = config.get(head), rest
    if not isinstance(node, dict):
        return MISSING
    return node.get(key, MISSING)


def set_field(config: dict, path: str, value: Any) -> None:
    """Set ``path`` in a (plain) run config; used by the tests of the table."""
    attn, ff = _layers(config)
    if path.startswith(A):
        attn[path[len(A) + 1:]] = value
    elif path.startswith(F):
        ff[path[len(F) + 1:]] = value
    elif path == "encoder":
        config["encoder"] = value
    else:
        head, key = path.split(".", 1)
        node = config.setdefault(head, {})
        if isinstance(node, str):
            node = config[head] = {"_name_": node}
        node[key] = value


def _scope_present(config: dict, path: str) -> bool:
    """Defaults apply only inside a section the run config has."""
    if path.startswith(A) or path.startswith(F):
        return _layers(config)[0 if path.startswith(A) else 1] is not None
    if path == "encoder":
        return False
    head = path.split(".")[0]
    node = config.get(head)
    return isinstance(node, (dict, str)) or (isinstance(node, list) and len(node) == 1)


def read_fields(config: dict) -> tuple[dict[str, Any], list[str]]:
    """(path -> value used, notes) for every field of the table that is present or has a
    default; raises CheckpointError naming the field and value for anything refused."""
    values: dict[str, Any] = {}
    notes: list[str] = []
    for scope, keys in KNOWN_KEYS.items():
        if scope == "model":
            node = config.get("model")
        elif scope == "decoder":
            node = config.get("decoder")
            node = node[0] if isinstance(node, list) and len(node) == 1 else node
        else:
            node = _layers(config)[0 if scope == A else 1]
        if not isinstance(node, dict):
            continue
        odd = next((k for k in node if not isinstance(k, str)), None)
        if odd is not None:
            raise CheckpointError(f"run config {scope} has a key {short_repr(odd)} of type "
                                  f"{type(odd).__name__}; run-config keys are strings")
        unknown = sorted(set(node) - keys)
        if unknown and scope == A and node.get("_name_") in ("mhfa", "mhfla"):
            notes.append(f"run config {A} keys {unknown}: dropped by that code's {node['_name_']} "
                         "constructor (**kwargs), so without effect")
        elif unknown:
            raise CheckpointError(f"run config {scope} has keys the bridge does not know: {unknown} "
                                  f"(values {short_repr([node[k] for k in unknown])}); refused rather than ignored")
    attn_name = lookup(config, f"{A}._name_")
    for f in FIELDS:
        raw = lookup(config, f.path)
        if raw is MISSING:
            if not _scope_present(config, f.path):
                continue
            if f.path == f"{A}.window_size" and attn_name != "mhfla":
                continue
            if f.path in (f"{A}.look_backward", f"{A}.look_forward") and attn_name != "mhfla":
                continue
            if f.default is MISSING:
                continue
            raw = f.default
        try:
            values[f.path] = f.check(raw, values)
        except Unhonoured as e:
            raise CheckpointError(f"run config field {f.path} = {short_repr(raw)}: refused ({e})") from None
    return values, notes


def table_markdown() -> str:
    """The table as markdown (for the README and ``toyspt lra fields``)."""
    rows = ["| field | honoured (anything else is refused) | default when absent |",
            "| --- | --- | --- |"]
    for f in FIELDS:
        d = "(required)" if f.default is MISSING else repr(f.default)
        rows.append(f"| `{f.path}` | {f.honoured} | {d} |")
    return "\n".join(rows)


__all__ = ["FIELDS", "Field", "read_fields", "lookup", "set_field", "table_markdown",
           "ATTN_NAMES", "MISSING"]
