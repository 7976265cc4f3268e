"""The bridge model: explicit attention equals torch's fused attention on the same weights
(the parity test), pooling over valid lengths, hook points for the probes."""
import math

import pytest
import torch
from helpers.parity import parity_tol

from toyspt.lra.model import LRAConfig, build_lra
from toyspt.nn.attention import hooks

CASES = {
    "listops": LRAConfig(n_layers=3, d_model=32, n_heads=4, d_ff=128, max_len=256),
    "image_mlp": LRAConfig(n_layers=2, d_model=16, n_heads=4, d_ff=32, encoder="linear", head="mlp",
                           max_len=256, use_lengths=False),
    "retrieval": LRAConfig(n_layers=2, d_model=16, n_heads=4, d_ff=64, head="retrieval", n_classes=2,
                           head_activation="gelu", max_len=256),
    "pathx_local_max": LRAConfig(n_layers=2, d_model=16, n_heads=2, d_ff=16, encoder="linear",
                                 max_len=256, window=16, pool="max", use_lengths=False, n_classes=2),
    "causal_postnorm": LRAConfig(n_layers=2, d_model=16, n_heads=2, d_ff=32, max_len=256,
                                 causal=True, prenorm=False),
}
# Both paths compute the same sums in a different order (fused kernel vs explicit softmax),
# so they differ by the rounding of the reductions along one output: parity.py's bound
# (accumulation count x eps x output size), ~1e-4 in float32 and ~1e-13 in float64 here.


def _sharpen(model, scale=3.0):
    """Larger Q/K weights so attention is far from uniform (a non-trivial parity check)."""
    with torch.no_grad():
        for attn in model.attentions:
            attn.W_Q.weight.mul_(scale)
            attn.W_K.weight.mul_(scale)
    return model


def _inputs(cfg, B=4, T=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    if cfg.encoder == "embedding":
        return torch.randint(0, cfg.n_tokens, (B, T), generator=g)
    return torch.randn(B, T, cfg.d_input, generator=g)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", sorted(CASES))
def test_explicit_attention_equals_fused_sdpa(name, dtype):
    cfg = CASES[name]
    model = _sharpen(build_lra(cfg, seed=2)).to(dtype)
    x = _inputs(cfg)
    if x.is_floating_point():
        x = x.to(dtype)
    lengths = torch.tensor([64, 40, 17, 1])
    with torch.no_grad():
        exp = model.classify(x, lengths)
        ref = model.classify(x, lengths, impl="sdpa")
        h_exp, h_ref = model.encode(x), model.encode(x, impl="sdpa")
    assert exp.dtype == dtype and exp.shape[-1] == cfg.n_classes
    assert (exp - ref).abs().max() <= parity_tol(cfg, x.shape[1], dtype, ref)
    assert (h_exp - h_ref).abs().max() <= parity_tol(cfg, x.shape[1], dtype, h_ref)
    # the two paths are not trivially the same object: attention is far from uniform
    with hooks(model, [("blocks.0.attn.hook_pattern", lambda t, n: seen.append(t))]):
        seen = []
        model.encode(x)
    assert seen[0].max() > 5.0 / x.shape[1]


def test_pooling_over_valid_length_and_hooks():
    cfg = CASES["listops"]
    model = build_lra(cfg, seed=0).double()
    x = _inputs(cfg, B=2, T=20)
    lengths = torch.tensor([20, 7])
    got = {}
    with hooks(model, [("hook_pooled", lambda t, n: got.__setitem__("pooled", t)),
                       ("blocks.1.attn.hook_attn_scores", lambda t, n: got.__setitem__("S", t)),
                       ("blocks.1.attn.hook_q", lambda t, n: got.__setitem__("q", t)),
                       ("blocks.1.attn.hook_k", lambda t, n: got.__setitem__("k", t))]):
        model.classify(x, lengths)
    h = model.encode(x)
    torch.testing.assert_close(got["pooled"][1], h[1, :7].mean(0))
    torch.testing.assert_close(got["pooled"][0], h[0].mean(0))
    S = got["q"] @ got["k"].transpose(-1, -2) / math.sqrt(cfg.d_model // cfg.n_heads)
    torch.testing.assert_close(got["S"], S)
    assert got["S"].shape == (2, cfg.n_heads, 20, 20)


def test_local_window_mask():
    cfg = CASES["pathx_local_max"]
    ok = build_lra(cfg).allowed(64)
    assert ok[0, 31] and not ok[0, 32] and ok[20, 47] and not ok[20, 48] and ok[63, 32] and not ok[63, 31]


def test_bad_inputs_are_named():
    model = build_lra(CASES["listops"])
    with pytest.raises(ValueError, match=r"token ids must lie in \[0, 19\)"):
        model.classify(torch.tensor([[0, 19]]))
    with pytest.raises(ValueError, match="exceeds the positional table"):
        model.classify(torch.zeros(1, 300, dtype=torch.long))
    with pytest.raises(ValueError, match="lengths"):
        model.classify(torch.zeros(2, 5, dtype=torch.long), torch.tensor([6, 1]))
    with pytest.raises(ValueError, match="no per-token decoder"):
        model.reconstruct(torch.zeros(1, 5, dtype=torch.long))
    with pytest.raises(ValueError, match="n_heads"):
        LRAConfig(d_model=10, n_heads=4)
