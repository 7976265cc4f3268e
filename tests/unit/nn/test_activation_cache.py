"""run_with_cache (toyspt.nn.activation_cache): every hook point of a forward pass by name, on the
toy model and on the LRA bridge model, equal to what the hooks themselves see, hooks removed."""
import pytest
import torch

import toyspt
from toyspt.lra.model import LRAConfig, build_lra
from toyspt.nn.activation_cache import ActivationCache, run_with_cache
from toyspt.nn.attention import active_hook_count, hook_points, hooks
from toyspt.nn.model import ModelConfig, build_model
from toyspt.probe import tracking

CFG = ModelConfig(n_layers=2, d_model=16, n_heads=2, d_mlp=32, max_len=12)
LRA = LRAConfig(n_layers=2, d_model=16, n_heads=4, d_ff=32, max_len=64)
B, T = 3, 12


def _toy():
    return build_model(CFG, seed=0).double(), torch.randn(B, T, CFG.d_in, dtype=torch.float64,
                                                            generator=torch.Generator().manual_seed(1))


def _seen_by_hooks(model, run):
    """The existing path: a hook on every point keeps its tensor."""
    seen = {}
    with torch.no_grad(), hooks(model, [(lambda n: True, lambda t, n: seen.setdefault(n, t.detach()))]):
        out = run()
    return out, seen


def test_one_import_line():
    assert toyspt.run_with_cache is run_with_cache


def test_names_and_shapes_of_the_toy_model():
    model, x = _toy()
    logits, cache = run_with_cache(model, x)
    assert isinstance(cache, ActivationCache) and set(cache) == set(hook_points(model))
    E = CFG.d_model // CFG.n_heads
    for layer in range(CFG.n_layers):
        for name in ("q", "k", "v", "z"):
            assert cache[name, layer].shape == (B, CFG.n_heads, T, E)
        for name in ("attn_scores", "pattern"):
            assert cache[f"blocks.{layer}.attn.hook_{name}"].shape == (B, CFG.n_heads, T, T)
        assert cache[f"blocks.{layer}.hook_resid_pre"].shape == (B, T, CFG.d_model)
    assert cache["hook_pooled"].shape == (B, CFG.d_model) and logits.shape == (B, CFG.n_classes)
    assert torch.allclose(cache["pattern", 0].sum(-1), torch.ones(B, CFG.n_heads, T, dtype=torch.float64))
    assert list(cache.by_module("hook_pattern")) == ["blocks.0.attn", "blocks.1.attn"]
    with pytest.raises(KeyError, match="no cached hook point 'blocks.5.attn.hook_pattern'"):
        cache["pattern", 5]


def test_equals_the_hooks_exactly_on_both_models():
    toy, x = _toy()
    lra = build_lra(LRA, seed=0).double()
    tokens = torch.randint(0, LRA.n_tokens, (2, 20), generator=torch.Generator().manual_seed(0))
    for model, run in ((toy, lambda: toy.classify(x)), (lra, lambda: lra.encode(tokens))):
        want_out, want = _seen_by_hooks(model, run)
        got_out, got = run_with_cache(model, forward=run)
        assert list(got) == list(want)  # every point, in the order the pass reaches it
        assert all(torch.equal(got[n], want[n]) for n in want) and torch.equal(got_out, want_out)
        assert not any(t.requires_grad for t in got.values())
    # the LRA model's attention maps by the TransformerLens short name
    _, cache = run_with_cache(lra, tokens, forward=lra.encode, names_filter="hook_pattern")
    assert list(cache) == ["blocks.0.attn.hook_pattern", "blocks.1.attn.hook_pattern"]
    assert cache["pattern", 1].shape == (2, LRA.n_heads, 20, 20)


def test_the_probes_read_their_maps_through_it():
    model, x = _toy()
    _, cache = run_with_cache(model, x, names_filter="hook_pattern")
    maps = tracking.attention_maps(model, x)
    assert {k: v.mean(0) for k, v in cache.by_module("hook_pattern").items()}.keys() == maps.keys()
    assert all(torch.equal(cache.by_module("hook_pattern")[k].mean(0), maps[k]) for k in maps)


def test_hooks_are_removed_after_the_pass_and_after_an_error():
    model, x = _toy()
    run_with_cache(model, x)
    assert active_hook_count(model) == 0

    def broken(x):
        model.classify(x)
        raise RuntimeError("forward failed")

    with pytest.raises(RuntimeError, match="forward failed"):
        run_with_cache(model, x, forward=broken)
    assert active_hook_count(model) == 0
    with pytest.raises(RuntimeError, match="fired twice"):  # a second pass would overwrite the first
        run_with_cache(model, x, forward=lambda x: (model.classify(x), model.classify(x)))
    assert active_hook_count(model) == 0
    with pytest.raises(KeyError, match="no hook point admitted"):
        run_with_cache(model, x, names_filter="hook_nothing")


def test_reduce_keeps_what_it_returns_and_grad_is_kept_on_request():
    model, x = _toy()
    _, cache = run_with_cache(model, x, names_filter="hook_pattern", reduce=lambda t, n: t.amax().item())
    _, full = run_with_cache(model, x, names_filter="hook_pattern")
    assert cache == {n: t.amax().item() for n, t in full.items()}
    out, _ = run_with_cache(model, x, names_filter="hook_pattern", grad=True)
    assert out.requires_grad
    assert not run_with_cache(model, x, names_filter="hook_pattern")[0].requires_grad
