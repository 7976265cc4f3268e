import math

import pytest
import torch
import torch.nn.functional as F

from toyspt.nn.attention import Attention, active_hook_count, hooks
from toyspt.nn.model import ModelConfig, build_model


def test_matches_fused_sdpa_in_float64():
    torch.manual_seed(0)
    att = Attention(16, 4).double()
    for lin in (att.W_Q, att.W_K, att.W_V, att.W_O):
        torch.nn.init.normal_(lin.bias)
    x = torch.randn(3, 10, 16, dtype=torch.float64)
    q, k, v = (att._heads(lin(x)) for lin in (att.W_Q, att.W_K, att.W_V))
    ref = att.W_O(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(3, 10, 16))
    # float64 rounding on O(10)-term sums of O(1) values: 1e-12 is ~1e4 ulps of slack
    assert torch.allclose(att(x), ref, atol=1e-12, rtol=0)


def test_qk_matrix_reproduces_scores_without_bias():
    torch.manual_seed(1)
    att = Attention(8, 2).double()
    torch.nn.init.zeros_(att.W_Q.bias)
    torch.nn.init.zeros_(att.W_K.bias)
    x = torch.randn(1, 5, 8, dtype=torch.float64)
    seen = {}
    with hooks(att, [("hook_attn_scores", lambda s, n: seen.setdefault("s", s))]):
        att(x)
    for h in range(2):
        S = x[0] @ att.qk_matrix(h) @ x[0].T
        assert torch.allclose(seen["s"][0, h], S, atol=1e-12)


def test_hooks_read_perturb_and_are_removed():
    model = build_model(ModelConfig(), 0)
    x = torch.randn(2, 12, 2)
    name = "blocks.0.attn.hook_attn_scores"
    base = model(x)
    seen = []
    with hooks(model, [(name, lambda s, n: seen.append((n, s.shape)))]):
        assert active_hook_count(model) == 1
        out = model(x)
    assert seen == [(name, torch.Size([2, 1, 12, 12]))] and torch.equal(out, base)
    with hooks(model, [(name, lambda s, n: s + 5.0 * torch.eye(12))]):
        assert not torch.allclose(model(x), base)
    assert active_hook_count(model) == 0
    assert torch.equal(model(x), base)


def test_hooks_removed_after_exception_and_unknown_name():
    model = build_model(ModelConfig(), 0)
    with pytest.raises(RuntimeError, match="boom"):
        with hooks(model, [(lambda n: n.endswith("hook_pattern"), lambda s, n: None)]):
            assert active_hook_count(model) == 1
            raise RuntimeError("boom")
    assert active_hook_count(model) == 0
    with pytest.raises(KeyError, match="no hook point"):
        with hooks(model, [("blocks.0.attn.hook_nothing", lambda s, n: None)]):
            pass
    assert active_hook_count(model) == 0


def test_score_gradient_through_a_zero_perturbation():
    model = build_model(ModelConfig(), 0)
    x = torch.randn(2, 8, 2)
    delta = torch.zeros(2, 1, 8, 8, requires_grad=True)
    with hooks(model, [("blocks.0.attn.hook_attn_scores", lambda s, n: s + delta)]):
        model(x).sum().backward()
    assert delta.grad is not None and delta.grad.abs().sum() > 0
    # softmax shift invariance: each row of dL/dS sums to zero (float32 rounding of O(1) terms)
    assert torch.allclose(delta.grad.sum(-1), torch.zeros(2, 1, 8), atol=1e-6)


def test_scale_of_scores():
    att = Attention(8, 2)
    assert att.d_head == 4
    with pytest.raises(ValueError, match="divisible"):
        Attention(10, 3)
    assert math.isclose(1 / math.sqrt(att.d_head), 0.5)
