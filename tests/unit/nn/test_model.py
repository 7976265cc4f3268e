import pytest
import torch

from toyspt.data.tasks import sample_mask
from toyspt.nn.attention import hooks
from toyspt.nn.model import ModelConfig, build_model, qk_param_names, spt_allowed
from toyspt.nn.positional import POS_KINDS


@pytest.mark.parametrize("pos", POS_KINDS)
def test_shapes_for_every_positional_kind(pos):
    m = build_model(ModelConfig(pos=pos, n_heads=2, n_layers=2), 0)
    x = torch.randn(3, 10, 2)
    assert m(x).shape == (3, 2)
    mask = sample_mask(3, 10, 0.5, torch.Generator().manual_seed(0))
    assert m.reconstruct(x, mask, "no_self").shape == (3, 10, 2)


def test_init_is_a_function_of_seed():
    a, b, c = (build_model(ModelConfig(), s) for s in (0, 0, 1))
    for (n, p), (_, q), (_, r) in zip(a.named_parameters(), b.named_parameters(), c.named_parameters()):
        assert torch.equal(p, q), n
    assert not torch.equal(a.blocks[0].attn.W_Q.weight, c.blocks[0].attn.W_Q.weight)
    # building a model leaves the global RNG untouched
    torch.manual_seed(5)
    r0 = torch.rand(1)
    torch.manual_seed(5)
    build_model(ModelConfig(), 3)
    assert torch.equal(torch.rand(1), r0)


def test_zero_qk_init_gives_exactly_uniform_attention():
    m = build_model(ModelConfig(qk_init_scale=0.0), 0)
    pats = []
    with hooks(m, [("blocks.0.attn.hook_pattern", lambda p, n: pats.append(p))]):
        m(torch.randn(2, 9, 2))
    assert torch.equal(pats[0], torch.full_like(pats[0], 1 / 9))


def test_qk_param_names():
    m = build_model(ModelConfig(n_layers=2), 0)
    assert qk_param_names(m) == [f"blocks.{b}.attn.{w}.{t}" for b in range(2) for w in ("W_Q", "W_K")
                                 for t in ("weight", "bias")]


def test_spt_attention_options():
    mask = torch.tensor([[True, False, True, False]])
    assert spt_allowed(mask, "all") is None
    a = spt_allowed(mask, "no_masked_keys")[0]
    assert a[0].tolist() == [False, True, False, True]  # masked query: only unmasked keys
    assert a[1].all()  # unmasked query: every key
    s = spt_allowed(mask, "no_self")[0]
    assert s[0].tolist() == [False, True, True, True] and s[1].all()
    full = spt_allowed(torch.ones(1, 3, dtype=torch.bool), "no_masked_keys")
    assert full.all()  # nothing left to attend to: keep every key rather than NaN
    with pytest.raises(ValueError, match="spt attention"):
        spt_allowed(mask, "nearest")


def test_reconstruction_does_not_see_masked_values():
    m = build_model(ModelConfig(), 0).eval()
    x = torch.randn(1, 8, 2)
    mask = torch.zeros(1, 8, dtype=torch.bool)
    mask[0, 3] = True
    y = x.clone()
    y[0, 3] = 100.0  # changing a masked value changes nothing
    assert torch.equal(m.reconstruct(x, mask), m.reconstruct(y, mask))


@pytest.mark.parametrize("kw,field", [
    (dict(pos="sine"), "pos"), (dict(d_model=0), "d_model"), (dict(n_heads=3), "n_heads"),
    (dict(d_mlp=-1), "d_mlp"), (dict(qk_init_scale=-1.0), "qk_init_scale"),
    (dict(pos="rope", d_model=6, n_heads=2), "rope"),
])
def test_invalid_model_configs(kw, field):
    with pytest.raises(ValueError, match=field):
        ModelConfig(**kw)


def test_wrong_input_shape_is_a_clear_error():
    m = build_model(ModelConfig(), 0)
    with pytest.raises(ValueError, match="tokens of shape"):
        m(torch.randn(2, 8, 3))
    with pytest.raises(ValueError, match="max_len"):
        build_model(ModelConfig(max_len=4), 0)(torch.randn(1, 8, 2))
