"""theory.toy and theory.onehead: the helpers the checks stand on, against slow references."""
import math

import torch
from torch.func import jacrev
from toyspt.theory import onehead as oh
from toyspt.theory import toy

from toyspt.nn.attention import hooks
from toyspt.nn.model import ModelConfig


def test_effective_gain_matches_jacrev_reference():
    model = toy.toy_model(ModelConfig(d_model=16, d_mlp=32), seed=1)
    batch = toy.toy_batch(8, 3, seed=2)
    fast = toy.effective_gain(model, batch)
    num = den = 0.0
    T = 8
    for b in range(3):
        x, mask = batch["x"][b:b + 1], batch["mask"][b:b + 1]

        def f(delta):
            with hooks(model, [(toy.HOOK_A, lambda t, n: t + delta)]):
                return model.reconstruct(x, mask)[0]

        J = jacrev(f)(torch.zeros(T, T, dtype=torch.float64)).detach()  # (m, d_in, T, T)
        for m in range(T):
            if not mask[0, m]:
                continue
            keys = [j for j in range(T) if j != m and not mask[0, j]]
            if len(keys) < 2:
                continue
            Jm = torch.stack([J[m, :, m, j] for j in keys])
            xm = x[0, keys]
            Jm, xm = Jm - Jm.mean(0), xm - xm.mean(0)
            num += float((Jm * xm).sum())
            den += float((xm * xm).sum())
    assert math.isclose(fast, num / den, rel_tol=1e-10, abs_tol=1e-14)


def test_attention_input_gives_the_scores():
    model = toy.toy_model(ModelConfig(d_model=16, d_mlp=0, final_norm=False), seed=0)
    with torch.no_grad():
        for lin in (model.blocks[0].attn.W_Q, model.blocks[0].attn.W_K):
            lin.bias.zero_()
    x = toy.toy_batch(8, 2, seed=0)["x"]
    H = toy.attention_input(model, x)
    M = model.blocks[0].attn.qk_matrix(0).detach()
    got = {}
    with torch.no_grad(), hooks(model, [(toy.HOOK_S, lambda t, n: got.setdefault("S", t))]):
        model.classify(x)
    assert torch.allclose(got["S"][:, 0], H @ M @ H.transpose(-1, -2), atol=1e-12)


def test_onehead_per_example_grad_equals_loop():
    cfg = oh.OneHeadConfig(T=5, d=4)
    p = oh.init_params(cfg)
    X, y = oh.sample_tokens(cfg, 3, seed=0)
    S = torch.randn(3, 5, 5, dtype=torch.float64)
    G = oh.score_grad(lambda s: oh.label_losses(p, X, y, s), S)
    for b in range(3):
        g1 = oh.score_grad(lambda s: oh.label_losses(p, X[b:b + 1], y[b:b + 1], s), S[b:b + 1])
        assert torch.allclose(G[b], g1[0], atol=1e-15)
