"""Phase sharing and evaluation policies: a run continued from its prefix run's stored end
state is bitwise the run trained afresh, in both trainers; the ``peak`` policy measures
less and summarises exactly as ``all``."""
from dataclasses import replace

import pytest
import torch

from toyspt.evaluation import extra_splits
from toyspt.model import ModelConfig
from toyspt.recipes import TABLE, get_recipe
from toyspt.train import TrainConfig, run_recipe
from toyspt.vectorized import run_recipe_seeds

from test_vectorized import assert_bitwise

TC = TrainConfig(epochs=3, pre_epochs=2, batch_size=32)
SEEDS = (0, 5)
SHARING = tuple(n for n, r in TABLE.items() if r.starts_from)


def test_every_sharing_recipe_is_covered():
    assert set(SHARING) == {"spt", "qk_transfer", "all_but_qk_transfer", "scratch_matched"}
    for name in SHARING:  # the prefix is a run of its own, with no label phase or the plain length
        prefix = get_recipe(TABLE[name].starts_from)
        assert prefix.starts_from is None


@pytest.mark.parametrize("evaluate", ["all", "peak"])
@pytest.mark.parametrize("recipe", SHARING)
def test_continued_run_is_bitwise_fresh_run(recipe, evaluate, small_data):
    prefix = TABLE[recipe].starts_from
    fresh = [run_recipe(recipe, small_data, ModelConfig(), TC, s, evaluate=evaluate) for s in SEEDS]
    starts = [run_recipe(prefix, small_data, ModelConfig(), TC, s, evaluate=evaluate) for s in SEEDS]
    one = [run_recipe(recipe, small_data, ModelConfig(), TC, s, evaluate=evaluate, start=st)
           for s, st in zip(SEEDS, starts)]
    assert_bitwise(fresh, one)
    together = run_recipe_seeds(recipe, small_data, ModelConfig(), TC, SEEDS, evaluate=evaluate, starts=starts)
    assert_bitwise(fresh, together)
    # and the prefix computed in lockstep serves as well
    lock_starts = run_recipe_seeds(prefix, small_data, ModelConfig(), TC, SEEDS, evaluate=evaluate)
    assert_bitwise(starts, lock_starts)
    assert_bitwise(fresh, run_recipe_seeds(recipe, small_data, ModelConfig(), TC, SEEDS, evaluate=evaluate,
                                           starts=lock_starts))


@pytest.mark.parametrize("model,tc", [
    (ModelConfig(pos="fire", n_heads=2), TC),  # 0-d parameters: their optimizer state is 0-d too
    (ModelConfig(pos="alibi"), replace(TC, optimizer="sgd", lr=0.05)),  # SGD momentum buffers
])
def test_scratch_matched_continues_optimizer_state(model, tc, small_data):
    fresh = [run_recipe("scratch_matched", small_data, model, tc, s) for s in SEEDS]
    starts = run_recipe_seeds("scratch", small_data, model, tc, SEEDS)
    assert_bitwise(fresh, run_recipe_seeds("scratch_matched", small_data, model, tc, SEEDS, starts=starts))
    assert_bitwise(fresh, [run_recipe("scratch_matched", small_data, model, tc, s, start=st)
                           for s, st in zip(SEEDS, starts)])


def test_continuing_without_the_optimizer_state_would_differ(small_data):
    """The check above can fail: a fresh optimizer after scratch's epochs gives other weights."""
    start = run_recipe("scratch", small_data, ModelConfig(), TC, 0)
    bare = replace(start, states={**start.states, "resume": {"generator": start.states["resume"]["generator"]}})
    fresh = run_recipe("scratch_matched", small_data, ModelConfig(), TC, 0)
    other = run_recipe("scratch_matched", small_data, ModelConfig(), TC, 0, start=bare)
    assert not torch.equal(fresh.states["final"]["blocks.0.attn.W_Q.weight"],
                           other.states["final"]["blocks.0.attn.W_Q.weight"])


@pytest.mark.parametrize("recipe", ["scratch", "spt", "scratch_matched"])
def test_peak_policy_measures_less_and_summarises_the_same(recipe, small_data):
    tc = replace(TC, epochs=6)
    full = run_recipe(recipe, small_data, ModelConfig(), tc, 1)
    peak = run_recipe(recipe, small_data, ModelConfig(), tc, 1, evaluate="peak")
    lock = run_recipe_seeds(recipe, small_data, ModelConfig(), tc, [1], evaluate="peak")[0]
    assert_bitwise([peak], [lock])
    assert peak.summary == full.summary
    for w in full.states:
        for n, v in full.states[w].items():
            assert torch.equal(v, peak.states[w][n])
    ft_full = [h for h in full.history if h["phase"] == "finetune"]
    ft_peak = [h for h in peak.history if h["phase"] == "finetune"]
    last, best = len(ft_full), float("-inf")
    for a, b in zip(ft_full, ft_peak, strict=True):
        want = {"val"} | set(extra_splits("peak", a["epoch"], last, tc.epochs, a["val_acc"], best))
        assert {k[:-4] for k in b if k.endswith("_acc")} == want, a["epoch"]
        assert all(b[f"{s}_acc"] == a[f"{s}_acc"] for s in want)
        assert "test" in want or a["val_acc"] <= best  # test is measured whenever val improves
        best = max(best, a["val_acc"])
    assert sum("test_acc" in h for h in ft_peak) < len(ft_peak) or len(ft_peak) <= 2


def test_extra_splits_rule():
    assert extra_splits("all", 2, 10, 5, 0.1, 0.9) == ("train", "test")
    assert extra_splits("peak", 2, 10, 5, 0.5, 0.4) == ("test",)
    assert extra_splits("peak", 2, 10, 5, 0.4, 0.4) == ()  # a tie is not a new peak (first max counts)
    assert extra_splits("peak", 10, 10, 5, 0.1, 0.9) == ("train", "test")
    assert extra_splits("peak", 5, 10, 5, 0.1, 0.9) == ("train", "test")
    with pytest.raises(ValueError, match="evaluate: choose one of"):
        extra_splits("sometimes", 2, 10, 5, 0.1, 0.9)
    with pytest.raises(ValueError, match="evaluate: choose one of"):
        run_recipe("scratch", None, evaluate="never")


def test_start_refused_with_reason(small_data):
    spt_only = run_recipe("spt_only", small_data, ModelConfig(), TC, 0)
    with pytest.raises(ValueError, match="starts from a spt_only run of seed 1, got a spt_only run of seed 0"):
        run_recipe("spt", small_data, ModelConfig(), TC, 1, start=spt_only)
    with pytest.raises(ValueError, match=r"other settings: \['train.mask_rate'\]"):
        run_recipe("spt", small_data, ModelConfig(), replace(TC, mask_rate=0.3), 0, start=spt_only)
    with pytest.raises(ValueError, match="does not start from another recipe"):
        run_recipe("frozen_attention", small_data, ModelConfig(), TC, 0, start=spt_only)
    with pytest.raises(ValueError, match="starts from a scratch run"):
        run_recipe("scratch_matched", small_data, ModelConfig(), TC, 0, start=spt_only)
    with pytest.raises(ValueError, match="takes no callbacks"):
        run_recipe("spt", small_data, ModelConfig(), TC, 0, start=spt_only, callbacks=[object()])
    scratch_all = run_recipe("scratch", small_data, ModelConfig(), TC, 0)
    with pytest.raises(ValueError, match=r"other settings: \['evaluate'\]"):
        run_recipe("scratch_matched", small_data, ModelConfig(), TC, 0, evaluate="peak", start=scratch_all)
    # the SPT-only run evaluates nothing: any policy of the label phase may start from it
    run_recipe("qk_transfer", small_data, ModelConfig(), TC, 0, evaluate="peak", start=spt_only)
    with pytest.raises(ValueError, match="one run per seed"):
        run_recipe_seeds("spt", small_data, ModelConfig(), TC, [0, 1], starts=[spt_only])
