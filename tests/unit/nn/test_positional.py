import math

import pytest
import torch

from toyspt.nn.positional import FIRE, AbsolutePE, ALiBi, alibi_slopes, rope, sinusoidal_table


def test_sinusoidal_formula():
    pe = sinusoidal_table(50, 8, torch.float64)
    p, i = 7, 2
    assert pe[p, 2 * i].item() == pytest.approx(math.sin(p / 10000 ** (2 * i / 8)), abs=1e-15)
    assert pe[p, 2 * i + 1].item() == pytest.approx(math.cos(p / 10000 ** (2 * i / 8)), abs=1e-15)


def test_absolute_pe_kinds_and_length_check():
    x = torch.zeros(1, 5, 8)
    assert torch.allclose(AbsolutePE("sinusoidal", 10, 8)(x)[0], sinusoidal_table(5, 8))
    learned = AbsolutePE("learned", 10, 8)
    assert isinstance(learned.table, torch.nn.Parameter)
    with pytest.raises(ValueError, match="exceeds"):
        AbsolutePE("sinusoidal", 4, 8)(x)
    with pytest.raises(ValueError, match="kind"):
        AbsolutePE("rope", 4, 8)


def test_alibi_is_symmetric_and_uses_geometric_slopes():
    b = ALiBi(4)(6)
    assert b.shape == (4, 6, 6)
    assert torch.equal(b, b.transpose(1, 2))
    assert torch.allclose(alibi_slopes(4), torch.tensor([2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8], dtype=torch.float64))
    assert b[1, 0, 3].item() == pytest.approx(-3 * 2 ** -4)


def test_rope_is_relative():
    """Rotated q.k depends only on the offset: shifting both positions keeps the score."""
    torch.manual_seed(0)
    q = torch.randn(8, dtype=torch.float64)
    k = torch.randn(8, dtype=torch.float64)
    X = torch.stack([q] * 10)[None, None]
    K = torch.stack([k] * 10)[None, None]
    s = (rope(X) @ rope(K).transpose(-1, -2))[0, 0]
    assert torch.allclose(s[2, 5], s[4, 7], atol=1e-12) and torch.allclose(s[0, 3], s[6, 9], atol=1e-12)
    assert not torch.allclose(s[2, 5], s[2, 6])
    with pytest.raises(ValueError, match="even"):
        rope(torch.zeros(1, 1, 3, 5))


def test_fire_bias_shape_and_gradient():
    f = FIRE(2, hidden=8, init_L=16.0)
    b = f(12)
    assert b.shape == (2, 12, 12) and torch.isfinite(b).all()
    b.sum().backward()
    assert f.L.grad is not None and f.log_c.grad is not None
