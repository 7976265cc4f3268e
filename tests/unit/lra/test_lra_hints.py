"""The bridge never assumes what changes logits: every parity fixture, stripped of its run
config, loads only when each output-changing field the tensors do not determine is given
(the refusal names the flag), then matches that code's outputs; flags a layout cannot honour
are refused; RGB pixel models load; Q/K/V/O are distinct, so a swap fails parity."""
from dataclasses import fields, replace
from pathlib import Path

import pytest
import torch
from helpers.parity import parity_tol

from toyspt.lra.checkpoint import ArchHints, load_lra, lra_state_dict
from toyspt.lra.infer import FLAGS
from toyspt.lra.lightning import CheckpointError, read_checkpoint, write_checkpoint
from toyspt.lra.model import LRAConfig, build_lra

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "lra"
NAMES = sorted(p.name[:-5] for p in FIXTURES.glob("*.ckpt"))


def _bare(name, tmp_path) -> Path:
    """The fixture's tensors without its run config (what a user may bring)."""
    raw = read_checkpoint(FIXTURES / f"{name}.ckpt")
    out = tmp_path / f"{name}.bare.ckpt"
    write_checkpoint(out, raw.state_dict, None)
    return out


def _hints_of(cfg: LRAConfig, attn_kind: str, glu: bool) -> dict:
    """The hints a user states for this architecture (all the flags that apply)."""
    h = dict(n_heads=cfg.n_heads, causal=cfg.causal)
    if attn_kind == "linears":
        h["window"] = cfg.window
    if cfg.window:
        h.update(look_backward=cfg.look_backward, look_forward=cfg.look_forward)
    if not glu:
        h["activation"] = cfg.activation
    if cfg.head in ("linear", "mlp", "retrieval"):
        h.update(pool=cfg.pool, use_lengths=cfg.use_lengths)
    if cfg.rec_out:
        h["head"] = "rec"
    return h


def _tol(loaded, ref) -> float:
    return parity_tol(loaded.cfg, ref["inputs"].shape[1], torch.float64, ref["out_float64"])


def _out(loaded, ref):
    x = ref["inputs"].double() if ref["inputs"].is_floating_point() else ref["inputs"]
    with torch.no_grad():
        return (loaded.model.reconstruct(x) if loaded.cfg.rec_out
                else loaded.model.classify(x, ref["lengths"]))


@pytest.mark.parametrize("name", NAMES)
def test_config_less_fixture_needs_every_hint_and_then_matches(name, tmp_path):
    full = load_lra(FIXTURES / f"{name}.ckpt")
    ref = torch.load(FIXTURES / f"{name}.ref.pt", weights_only=True)
    bare = _bare(name, tmp_path)
    hints = _hints_of(full.cfg, full.report.attn_kind, full.cfg.activation == "glu")
    for left_out in [k for k in hints if k != "head"]:
        with pytest.raises(CheckpointError) as e:
            load_lra(bare, ArchHints(**{k: v for k, v in hints.items() if k != left_out}))
        assert FLAGS[left_out].split()[0] in str(e.value), (left_out, str(e.value))
    loaded = load_lra(bare, ArchHints(**hints))
    same = full.cfg if full.cfg.head != "none" else replace(  # pooling unused without a classifier
        full.cfg, pool=loaded.cfg.pool, use_lengths=loaded.cfg.use_lengths)
    assert loaded.cfg == same  # rotary read from rope.freqs, GLU from the shapes
    want = ref["out_float64"]
    assert float((_out(loaded, ref) - want).abs().max()) <= _tol(loaded, ref)


def test_a_wrong_hint_changes_the_logits_so_none_is_assumed(tmp_path):
    """The relu fixture read as gelu is off by far more than rounding: why --activation is required."""
    ref = torch.load(FIXTURES / "listops_relu.ref.pt", weights_only=True)
    full = load_lra(FIXTURES / "listops_relu.ckpt")
    h = _hints_of(full.cfg, full.report.attn_kind, False)
    wrong = load_lra(_bare("listops_relu", tmp_path), ArchHints(**{**h, "activation": "gelu"}))
    assert float((_out(wrong, ref) - ref["out_float64"]).abs().max()) > 1e3 * _tol(wrong, ref)


def test_flags_a_layout_cannot_honour_are_refused(tmp_path):
    mha = _bare("mha_noncausal", tmp_path)
    base = dict(n_heads=2, causal=False, activation="gelu", pool="mean", use_lengths=True)
    with pytest.raises(CheckpointError, match="packed nn.MultiheadAttention layout has no local"):
        load_lra(mha, ArchHints(**base, window=4))
    lin = _bare("local_lookaround2", tmp_path)
    with pytest.raises(CheckpointError, match="never looks forward"):
        load_lra(lin, ArchHints(**{**base, "causal": True}, window=4, look_backward=2, look_forward=1))
    with pytest.raises(CheckpointError, match="contradicts the run config"):  # mhfa: global attention
        load_lra(FIXTURES / "listops_gelu.ckpt", ArchHints(window=4))
    with pytest.raises(CheckpointError, match="need block-local attention"):
        load_lra(lin, ArchHints(**base, window=0, look_backward=2))


def test_rotary_is_read_from_the_tensors_without_a_run_config(tmp_path):
    full = load_lra(FIXTURES / "rotary.ckpt")
    loaded = load_lra(_bare("rotary", tmp_path), ArchHints(**_hints_of(full.cfg, "linears", False)))
    assert loaded.cfg.rotary and any("rope.freqs" in n for n in loaded.report.notes)


def test_glu_is_read_from_the_shapes(tmp_path):
    cfg = LRAConfig(n_layers=1, d_model=8, n_heads=2, d_ff=16, max_len=32, activation="glu")
    p = tmp_path / "glu.ckpt"
    write_checkpoint(p, lra_state_dict(build_lra(cfg, 0)), None)
    h = dict(n_heads=2, causal=False, window=0, pool="mean", use_lengths=True)
    assert load_lra(p, ArchHints(**h)).cfg.activation == "glu"
    with pytest.raises(CheckpointError, match="GLU feed-forward"):
        load_lra(p, ArchHints(**h, activation="relu"))


@pytest.mark.parametrize("d_input", [3, 4])  # CIFAR RGB (grayscale=false), and with SPT's mask channel
def test_rgb_pixel_models_load(tmp_path, d_input):
    cfg = LRAConfig(n_layers=1, d_model=8, n_heads=2, d_ff=16, max_len=64, encoder="linear",
                    d_input=d_input, head="mlp", n_classes=10, use_lengths=False)
    model = build_lra(cfg, 0)
    sd = lra_state_dict(model)
    p = tmp_path / "rgb.ckpt"
    write_checkpoint(p, sd, None)
    loaded = load_lra(p, ArchHints(n_heads=2, causal=False, window=0, activation="gelu", pool="mean",
                                   use_lengths=False))
    assert loaded.cfg.d_input == d_input and loaded.cfg == cfg
    x = torch.randn(2, 5, d_input, dtype=torch.float64)
    emb = loaded.model.embed(x)  # the code's nn.Linear(d_input, d) on each pixel's channels
    torch.testing.assert_close(emb, x @ sd["encoder.0.weight"].double().T + sd["encoder.0.bias"].double())


@pytest.mark.parametrize("name", NAMES)
def test_fixtures_keep_distinct_qkvo_and_a_swap_fails_parity(name):
    ref = torch.load(FIXTURES / f"{name}.ref.pt", weights_only=True)
    loaded = load_lra(FIXTURES / f"{name}.ckpt")
    for block in loaded.model.blocks:  # packed in_proj rows too: the bridge splits them into W_Q, W_K, W_V
        w = [getattr(block.attn, f"W_{n}").weight for n in "QKVO"]
        assert all(not torch.equal(w[i], w[j]) for i in range(4) for j in range(i + 1, 4))
    attn = loaded.model.blocks[0].attn
    with torch.no_grad():
        attn.W_Q.weight, attn.W_K.weight = attn.W_K.weight, attn.W_Q.weight
    assert float((_out(loaded, ref) - ref["out_float64"]).abs().max()) > 1e3 * _tol(loaded, ref)


def test_hints_are_one_dataclass_naming_every_flag():
    assert {f.name for f in fields(ArchHints)} - {"head"} == set(FLAGS)
