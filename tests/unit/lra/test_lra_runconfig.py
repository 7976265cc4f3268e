"""The run-config field table: every field honoured or refused (never ignored); and the
conventions it honours (FF activations, block-local look-around, rotary, pooling) checked
against references written independently from that code's definitions."""
import math

import pytest
import torch
import torch.nn.functional as F

from toyspt.lra import runconfig as rc
from toyspt.lra.checkpoint import ArchHints, infer_config, load_lra, lra_state_dict, run_config, save_lra
from toyspt.lra.lightning import CheckpointError
from toyspt.lra.model import ACTIVATIONS, LRAConfig, build_lra, rotate_pairs

LOCAL = LRAConfig(n_layers=1, d_model=16, n_heads=2, d_ff=32, max_len=64, window=4,
                  look_backward=2, look_forward=1, rotary=True, activation="relu")
GLOBAL = LRAConfig(n_layers=1, d_model=16, n_heads=2, d_ff=32, max_len=64)
MHA_ONLY = {"add_bias_kv", "add_zero_attn", "kdim", "vdim"}  # fields mhfa/mhfla drop


def _full_config(cfg, attn_kind):
    conf = run_config(cfg, attn_kind=attn_kind, dataset={"mlm_prob": 0.0, "causal_lm": False,
                                                         "lm_loss": None, "ignore_val": True})
    m = conf["model"]
    m.update(n_repeat=1, transposed=False, pool=None, n_apply=1, dropinp=0.0, tie_dropout=False,
             track_norms=True, encoder=None)
    attn, ff = m["layer"]
    attn.update(transposed=False)
    if attn_kind == "mha":
        attn.update(add_bias_kv=False, add_zero_attn=False, kdim=None, vdim=None)
    else:
        attn.update(use_pykeops=False)
    ff.update(transposed=False, tie_dropout=None, initializer=None, d_output=None)
    conf["decoder"].update(l_output=0, d_output=None, type="mlp", nli=True, activation="relu",
                           d_model=None)
    conf["task"] = {"_name_": "base"}
    return conf


def _base_for(path):
    if path.split(".")[-1] in MHA_ONLY:
        return GLOBAL, "mha"
    if path == "model.layer[attn].dropout":  # 0.1 is refused for mhfa (dropout in evaluation)
        return GLOBAL, "linears"
    return LOCAL, "linears"


def test_full_configs_are_read():
    for cfg, kind in ((LOCAL, "linears"), (GLOBAL, "mha")):
        vals, notes = rc.read_fields(_full_config(cfg, kind))
        assert vals["model.layer[ff].activation"] == cfg.activation and not notes
    assert rc.table_markdown().count("\n") == len(rc.FIELDS) + 1


@pytest.mark.parametrize("field", rc.FIELDS, ids=lambda f: f.path)
def test_every_field_refuses_an_unknown_value(field):
    cfg, kind = _base_for(field.path)
    conf = _full_config(cfg, kind)
    rc.read_fields(conf)  # the base config is accepted
    rc.set_field(conf, field.path, field.bad)
    with pytest.raises(CheckpointError) as e:
        rc.read_fields(conf)
    assert field.path in str(e.value) and repr(field.bad) in str(e.value)


def test_unknown_keys_are_refused_not_ignored():
    conf = _full_config(GLOBAL, "linears")
    conf["decoder"]["temperature"] = 2.0
    with pytest.raises(CheckpointError, match=r"decoder has keys the bridge does not know: \['temperature'\]"):
        rc.read_fields(conf)
    conf = _full_config(GLOBAL, "linears")
    conf["model"]["layer"][0]["something"] = 1  # mhfa's constructor drops unknown keywords
    assert "dropped by that code" in rc.read_fields(conf)[1][0]


def test_arguments_must_agree_with_the_run_config(tmp_path):
    sd = lra_state_dict(build_lra(GLOBAL))
    conf = _full_config(GLOBAL, "linears")
    with pytest.raises(CheckpointError, match="contradicts the run config field model.layer\\[attn\\].causal"):
        infer_config(sd, conf, ArchHints(causal=True))
    with pytest.raises(CheckpointError, match="decoder.mode"):
        infer_config(sd, conf, ArchHints(pool="max"))
    assert infer_config(sd, conf, ArchHints(causal=False))[0] == GLOBAL


# ------------------------------------------------------------------ honoured conventions

REF_ACT = {"gelu": F.gelu, "relu": F.relu, "silu": F.silu, "swish": F.silu, "tanh": torch.tanh,
           "sigmoid": torch.sigmoid, "softplus": F.softplus, "glu": lambda z: F.glu(z, -1),
           "sqrelu": lambda z: F.relu(z) ** 2, "relu2": lambda z: F.relu(z) ** 2,
           "laplace": lambda z: 0.5 * (1 + torch.erf((z - 0.707107) / (0.282095 * math.sqrt(2)))),
           "id": lambda z: z, "identity": lambda z: z, "linear": lambda z: z}


@pytest.mark.parametrize("act", sorted(ACTIVATIONS))
def test_feed_forward_activation_is_honoured(tmp_path, act):
    cfg = LRAConfig(**{**vars(GLOBAL), "activation": act})
    model = build_lra(cfg, seed=4).double()
    p = tmp_path / "m.ckpt"
    save_lra(p, model)
    loaded = load_lra(p)
    assert loaded.cfg.activation == rc.activation(act, {})
    mlp = loaded.model.blocks[0].mlp
    x = torch.randn(3, 5, 16, dtype=torch.float64)
    ref = F.linear(REF_ACT[act](F.linear(x, mlp[0].weight, mlp[0].bias)), mlp[2].weight, mlp[2].bias)
    # same operations in float64; only erf/exp implementations may round differently
    torch.testing.assert_close(mlp(x), ref, rtol=0, atol=1e-12)


def _look_around_reference(q, k, v, window, back, fwd, causal):
    """Block-local attention as that code's LocalFlashAttention defines it: keys of blocks
    w-back..w+fwd padded with position -1 outside the sequence, masked where padded (and
    where key position > query position if causal); fused attention per query block."""
    B, T, D = q.shape
    n = T // window
    bq, bk, bv = (t.reshape(B, n, window, D) for t in (q, k, v))
    pos = torch.arange(T).reshape(1, n, window)

    def around(t, pad):
        padded = F.pad(t, (0, 0) * (t.dim() - 2) + (back, fwd), value=pad)
        return torch.cat([padded[:, i:i + n] for i in range(back + fwd + 1)], dim=2)

    bk, bv = around(bk, -1.0), around(bv, -1.0)
    kpos = around(pos, -1)
    masked = (kpos == -1)[:, :, None, :].expand(1, n, window, kpos.shape[-1])
    if causal:
        masked = masked | (pos[..., :, None] < kpos[..., None, :])
    out = F.scaled_dot_product_attention(bq, bk, bv, attn_mask=~masked)
    return out.reshape(B, T, D)


@pytest.mark.parametrize("back,fwd,causal", [(1, 1, False), (2, 1, False), (2, 2, False),
                                             (0, 2, False), (2, 0, True), (1, 0, True)])
def test_local_attention_look_around(back, fwd, causal):
    cfg = LRAConfig(**{**vars(GLOBAL), "window": 4, "look_backward": back, "look_forward": fwd,
                       "causal": causal, "rotary": False})
    model = build_lra(cfg, seed=5).double()
    attn = model.blocks[0].attn
    with torch.no_grad():
        attn.W_Q.weight.mul_(3)
    x = torch.randn(2, 16, 16, dtype=torch.float64)
    got = attn(x, None, model.allowed(16)[None])
    q, k, v = (attn._heads(lin(x)) for lin in (attn.W_Q, attn.W_K, attn.W_V))
    H, K = cfg.n_heads, cfg.d_model // cfg.n_heads
    z = _look_around_reference(*(t.reshape(2 * H, 16, K) for t in (q, k, v)), 4, back, fwd, causal)
    ref = attn.W_O(z.reshape(2, H, 16, K).transpose(1, 2).reshape(2, 16, 16))
    # float64, the same sums in a different order
    torch.testing.assert_close(got, ref, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="not a multiple of the local-attention window"):
        model.allowed(18)


def _rope_reference(x, freqs):
    """That code's RotaryEmbedding: per pair (2m, 2m+1) the matrix [[cos, -sin], [sin, cos]]
    of angle p * freqs[m], contracted as 'r c, c -> r'."""
    L = x.shape[-2]
    ang = torch.arange(L).to(freqs).view(-1, 1) * freqs
    rot = torch.stack((ang.cos(), -ang.sin(), ang.sin(), ang.cos()), dim=-1).view(L, -1, 2, 2)
    pairs = x.reshape(*x.shape[:-1], -1, 2)
    return torch.einsum("...rc,...c->...r", rot.to(x.dtype), pairs).flatten(-2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_rotary_matches_that_codes_convention(dtype):
    K = 8
    freqs = 10000 ** (-torch.arange(0, K, 2) / K)  # float32, as that code's buffer
    x = torch.randn(2, 3, 300, K, dtype=dtype)
    got = rotate_pairs(x, freqs.to(dtype))
    ref = _rope_reference(x, freqs.to(dtype))
    # one product-and-sum per output; float32 eps 1.2e-7 * |x| ~ 4
    torch.testing.assert_close(got, ref, rtol=0, atol={torch.float32: 1e-5, torch.float64: 1e-12}[dtype])


def test_rotary_checkpoint_round_trip_and_buffer(tmp_path):
    model = build_lra(LOCAL, seed=6).double()
    p = tmp_path / "r.ckpt"
    save_lra(p, model)
    sd = lra_state_dict(model)
    assert "model.layers.0.layer.rope.freqs" in sd
    loaded = load_lra(p)
    assert loaded.cfg == LOCAL and any("rotary" in n for n in loaded.report.notes)
    x = torch.randint(0, 19, (2, 8))
    torch.testing.assert_close(loaded.model.classify(x), model.classify(x), rtol=0, atol=0)
    torch.testing.assert_close(loaded.model.classify(x, impl="sdpa"), model.classify(x), rtol=0, atol=1e-12)
    conf = run_config(LOCAL)
    conf["model"]["layer"][0]["rotary"] = False
    with pytest.raises(CheckpointError, match="rotary=False but the tensors hold rope.freqs"):
        infer_config(sd, conf)


def test_relu_silu_runs_differ_from_gelu(tmp_path):
    """The case that used to load silently as GELU: the activation now follows the file."""
    outs = {}
    for act in ("gelu", "relu", "silu"):
        model = build_lra(LRAConfig(**{**vars(GLOBAL), "activation": act}), seed=7)
        p = tmp_path / f"{act}.ckpt"
        save_lra(p, model)
        x = torch.randint(0, 19, (2, 8))
        outs[act] = load_lra(p).model.classify(x)
        torch.testing.assert_close(outs[act], model.double().classify(x))
    assert (outs["relu"] - outs["gelu"]).abs().max() > 1e-3


@pytest.mark.parametrize("path,value,match", [
    ("decoder.d_output", 3, "decoder.d_output = 3 but the head tensors have 10 outputs"),
    ("decoder.l_output", None, "decoder.l_output = None but the tensors hold a pooled head"),
    ("model.d_model", 32, "model.d_model = 32 but the tensors say 16"),
    ("model.layer[ff].expand", 4, "expand = 4 but the feed-forward width"),
    ("model.n_layers", 2, "n_layers = 2"),
    ("encoder", "linear", "encoder = 'linear' but the tensors say 'embedding'"),
    ("model.prenorm", False, "prenorm = False"),
])
def test_run_config_must_agree_with_the_tensors(path, value, match):
    sd = lra_state_dict(build_lra(GLOBAL))
    conf = _full_config(GLOBAL, "linears")
    rc.set_field(conf, path, value)
    with pytest.raises(CheckpointError, match=match.replace("[", r"\[").replace("]", r"\]")):
        infer_config(sd, conf)


def _deep(n):
    t = ()
    for _ in range(n):
        t = (t,)
    return t


@pytest.mark.parametrize("key,needle", [(1, "a key 1 of type int"),
                                        (_deep(5000), "of type tuple")])
def test_odd_run_config_keys_are_one_line_refusals(key, needle):
    """Keys of mixed types (sorting them raised TypeError) and a 5,000-deep key (its repr
    raised RecursionError while the refusal was being written)."""
    conf = _full_config(GLOBAL, "linears")
    conf["decoder"][key] = 2.0
    with pytest.raises(CheckpointError) as e:
        rc.read_fields(conf)
    assert needle in str(e.value) and "\n" not in str(e.value) and len(str(e.value)) < 300


def test_odd_keys_in_a_checkpoint_config_are_refused(tmp_path):
    from toyspt.lra.lightning import to_plain
    with pytest.raises(CheckpointError, match="a key .* of type tuple; config keys are plain values"):
        to_plain({"model": {_deep(900): 1}})
