"""From the LRA code's checkpoint layout to the bridge model: architecture inference, the
key map (both attention layouts), and errors that name the key and shapes."""
import pytest
import torch
from torch import nn

from toyspt.lra.checkpoint import ArchHints, infer_config, load_lra, load_state, lra_state_dict, run_config, save_lra
from toyspt.lra.lightning import CheckpointError, write_checkpoint
from toyspt.lra.model import LRAConfig, build_lra

LISTOPS = LRAConfig(n_layers=2, d_model=16, n_heads=4, d_ff=64, max_len=128)
VARIANTS = {
    "listops": LISTOPS,
    "image_mlp": LRAConfig(n_layers=1, d_model=8, n_heads=2, d_ff=16, encoder="linear", d_input=1,
                           head="mlp", max_len=64, use_lengths=False),
    "retrieval": LRAConfig(n_layers=1, d_model=8, n_heads=2, d_ff=32, head="retrieval", n_classes=2,
                           head_activation="gelu", max_len=64),
    "spt_tokens": LRAConfig(n_layers=1, d_model=8, n_heads=2, d_ff=32, head="none", rec_out=19, max_len=64),
    "spt_pixels": LRAConfig(n_layers=1, d_model=8, n_heads=2, d_ff=8, encoder="linear", d_input=2,
                            head="none", rec_out=1, max_len=64, use_lengths=False),
    "pathx_local": LRAConfig(n_layers=1, d_model=8, n_heads=2, d_ff=8, encoder="linear", d_input=1,
                             max_len=64, window=4, pool="max", use_lengths=False, n_classes=2),
}


def _inputs(cfg, B=4, T=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    if cfg.encoder == "embedding":
        return torch.randint(0, cfg.n_tokens, (B, T), generator=g)
    return torch.randn(B, T, cfg.d_input, generator=g)


def _out(model, x):
    return model.reconstruct(x) if model.cfg.rec_out else model.classify(x)


@pytest.mark.parametrize("name", sorted(VARIANTS))
@pytest.mark.parametrize("attn_kind", ["linears", "mha"])
def test_roundtrip_through_the_checkpoint_format(tmp_path, name, attn_kind):
    cfg = VARIANTS[name]
    if attn_kind == "mha" and cfg.window:
        pytest.skip("the mha layout has no local attention")
    model = build_lra(cfg, seed=1)
    p = tmp_path / "m.ckpt"
    save_lra(p, model, dataset={"_name_": name, "mlm_prob": 0.5 if cfg.rec_out else 0.0},
             attn_kind=attn_kind)
    loaded = load_lra(p, dtype=torch.float32)
    assert loaded.cfg == cfg
    assert loaded.report.attn_kind == attn_kind and loaded.report.unused == []
    assert sorted(loaded.report.used) == sorted(loaded.raw.state_dict)
    x = _inputs(cfg)
    torch.testing.assert_close(_out(loaded.model, x), _out(model, x), rtol=0, atol=0)


def test_key_layout_of_the_code():
    sd = lra_state_dict(build_lra(LISTOPS))
    assert sd["encoder.0.weight"].shape == (19, 16) and "encoder.0.bias" not in sd
    assert sd["encoder.1.pe"].shape == (128, 16)
    for j in range(4):
        assert sd[f"model.layers.2.layer.linears.{j}.weight"].shape == (16, 16)
    assert sd["model.layers.3.layer.ff.0.0.weight"].shape == (64, 16)
    assert sd["model.layers.3.layer.ff.2.weight"].shape == (16, 64)
    assert sd["model.norm.norm.weight"].shape == (16,)
    assert sd["decoder.0.output_transform.weight"].shape == (10, 16)
    # pairs x (attention block + ff block)
    assert len([k for k in sd if k.startswith("model.layers.")]) == 2 * ((2 + 8) + (2 + 4))


def test_packed_in_proj_matches_torch_multiheadattention():
    """The mha layout (rows [Q; K; V] of in_proj) maps onto W_Q/W_K/W_V so that toyspt's
    Attention equals nn.MultiheadAttention on the same weights."""
    torch.manual_seed(0)
    d, H = 16, 4
    mha = nn.MultiheadAttention(d, H, batch_first=True).double()
    with torch.no_grad():
        for p in mha.parameters():
            p.copy_(torch.randn_like(p).float().double())  # exactly representable in float32
    cfg = LRAConfig(n_layers=1, d_model=d, n_heads=H, d_ff=8, max_len=32)
    sd = lra_state_dict(build_lra(cfg), attn_kind="mha")
    sd["model.layers.0.layer.mha.in_proj_weight"] = mha.in_proj_weight.detach().float()
    sd["model.layers.0.layer.mha.in_proj_bias"] = mha.in_proj_bias.detach().float()
    sd["model.layers.0.layer.mha.out_proj.weight"] = mha.out_proj.weight.detach().float()
    sd["model.layers.0.layer.mha.out_proj.bias"] = mha.out_proj.bias.detach().float()
    model = build_lra(cfg).double()
    load_state(model, sd, "mha")
    x = torch.randn(3, 7, d, dtype=torch.float64)
    ref, _ = mha(x, x, x, need_weights=False)
    # float64, same math in a different order: rounding ~1e-16 * |scores| * depth
    torch.testing.assert_close(model.blocks[0].attn(x), ref, rtol=0, atol=1e-10)


def _write(tmp_path, sd, config=None, name="x.ckpt"):
    p = tmp_path / name
    write_checkpoint(p, sd, config)
    return p


def test_heads_come_from_config_or_argument(tmp_path):
    sd = lra_state_dict(build_lra(LISTOPS))
    p = _write(tmp_path, sd)  # no run config at all
    with pytest.raises(CheckpointError, match="number of heads"):
        load_lra(p)
    loaded = load_lra(p, ArchHints(n_heads=4, causal=False, window=0, activation="gelu", pool="mean", use_lengths=True))
    assert loaded.cfg.n_heads == 4 and any("argument" in n for n in loaded.report.notes)
    with pytest.raises(ValueError, match="not divisible"):
        load_lra(p, ArchHints(n_heads=3, causal=False, window=0, activation="gelu", pool="mean", use_lengths=True))


def test_missing_unexpected_and_mismatched_keys_are_named(tmp_path):
    sd = lra_state_dict(build_lra(LISTOPS))
    conf = run_config(LISTOPS, dataset={"mlm_prob": 0.0})
    bad = dict(sd)
    del bad["model.layers.1.layer.ff.2.bias"]
    with pytest.raises(CheckpointError, match=r"model\.layers\.1\.layer\.ff\.2\.bias \(expected \(16,\)\)"):
        load_lra(_write(tmp_path, bad, conf))
    bad = dict(sd)
    bad["model.layers.0.layer.linears.2.weight"] = torch.zeros(16, 15)
    with pytest.raises(CheckpointError, match=r"shape mismatch at model\.layers\.0\.layer\.linears\.2\.weight: "
                                              r"found \(16, 15\), expected \(16, 16\)"):
        load_lra(_write(tmp_path, bad, conf))
    bad = dict(sd, **{"encoder.2.mask_token": torch.zeros(16)})
    with pytest.raises(CheckpointError, match=r"unexpected keys.*encoder\.2\.mask_token \(16,\)"):
        load_lra(_write(tmp_path, bad, conf))
    loaded = load_lra(_write(tmp_path, bad, conf), strict=False)
    assert loaded.report.unused == ["encoder.2.mask_token (16,)"]
    bad = {k: v for k, v in sd.items() if ".layer.linears." not in k or not k.startswith("model.layers.2.")}
    with pytest.raises(CheckpointError, match=r"model\.layers\.2 should be an attention layer"):
        load_lra(_write(tmp_path, bad, conf))
    with pytest.raises(CheckpointError, match="not a Transformer checkpoint"):
        load_lra(_write(tmp_path, {"encoder.0.weight": torch.zeros(3, 4)}, conf))


def test_classifier_or_spt_decoder(tmp_path):
    """decoder.0.output_transform is a classifier or the SPT decoder: config, argument, guess."""
    cfg = LRAConfig(n_layers=1, d_model=8, n_heads=2, d_ff=8, max_len=32, head="none", rec_out=19)
    sd = lra_state_dict(build_lra(cfg))
    c, _, notes = infer_config(sd, None, ArchHints(n_heads=2, causal=False, window=0, activation="gelu"))
    assert c.rec_out == 19 and "guess" in " ".join(notes)
    c, _, _ = infer_config(sd, {"dataset": {"mlm_prob": 0.0}},
                           ArchHints(n_heads=2, causal=False, pool="mean", use_lengths=True))
    assert c.head == "linear" and c.n_classes == 19
    c, _, _ = infer_config(sd, None, ArchHints(n_heads=2, head="cls", causal=False, window=0, activation="gelu",
                                               pool="max", use_lengths=False))
    assert c.head == "linear" and c.pool == "max" and not c.use_lengths
    c, _, _ = infer_config(sd, {"dataset": {"mlm_prob": 0.5}}, ArchHints(n_heads=2, causal=False))
    assert c.rec_out == 19 and c.head == "none"


def test_positional_table_is_taken_from_the_file(tmp_path):
    model = build_lra(LISTOPS)
    sd = lra_state_dict(model)
    sd["encoder.1.pe"] = sd["encoder.1.pe"] + 0.5
    conf = run_config(LISTOPS)
    loaded = load_lra(_write(tmp_path, sd, conf))
    assert torch.equal(loaded.model.pe.table.float(), sd["encoder.1.pe"])
    assert any("not the sinusoidal" in n for n in loaded.report.notes)


@pytest.mark.parametrize("attn_kind", ["mha", "linears"])
def test_config_less_files_need_causal_and_pooling_stated(tmp_path, attn_kind):
    """Without a run config nothing about causality or pooling is assumed: the caller says
    it, and the loaded model follows what was said."""
    for causal in (False, True):
        model = build_lra(LRAConfig(**{**vars(LISTOPS), "causal": causal, "pool": "max",
                                       "use_lengths": False}), seed=3)
        p = _write(tmp_path, lra_state_dict(model, attn_kind=attn_kind), name=f"{causal}.ckpt")
        with pytest.raises(CheckpointError, match="causal"):
            load_lra(p, ArchHints(n_heads=4))
        with pytest.raises(CheckpointError, match="pool"):
            load_lra(p, ArchHints(n_heads=4, causal=causal, window=0, activation="gelu"))
        loaded = load_lra(p, ArchHints(n_heads=4, causal=causal, window=0, activation="gelu", pool="max",
                                        use_lengths=False))
        assert loaded.cfg == model.cfg
        x = torch.randint(0, 19, (2, 9))
        torch.testing.assert_close(loaded.model.classify(x), model.double().classify(x))


def test_learned_table_is_refused_with_the_reason(tmp_path):
    sd = lra_state_dict(build_lra(LISTOPS))
    sd["encoder.1.pe"] = sd["encoder.1.pe"][:, None, :].clone()
    with pytest.raises(CheckpointError, match="learned table.*broadcasts over the batch"):
        load_lra(_write(tmp_path, sd, run_config(LISTOPS)))


@pytest.mark.parametrize("what", ["0-d", "nan", "int"])
def test_bad_tensors_are_named(tmp_path, what):
    sd = lra_state_dict(build_lra(LISTOPS))
    key = "model.layers.0.layer.linears.0.weight"
    sd[key] = {"0-d": torch.tensor(1.0), "nan": sd[key].masked_fill(torch.eye(16, dtype=torch.bool), float("nan")),
               "int": sd[key].long()}[what]
    match = {"0-d": "expected a 2-d tensor", "nan": "16 non-finite values", "int": "floating point"}[what]
    with pytest.raises(CheckpointError, match=f"{key}.*{match}" if what != "0-d" else match):
        load_lra(_write(tmp_path, sd, run_config(LISTOPS)))
