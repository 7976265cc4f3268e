"""Phase sharing and evaluation policies: a run continued from its prefix run's stored end
state is bitwise the run trained afresh, alone and beside other seeds; the ``peak`` policy measures
less and summarises exactly as ``all``."""
from dataclasses import replace

import pytest
import torch
from helpers.checks import assert_bitwise

from toyspt.nn.model import ModelConfig
from toyspt.runs.sweeps import SweepOptions
from toyspt.train.config import RunConfig
from toyspt.train.evaluation import extra_splits
from toyspt.train.recipes import TABLE, TrainConfig, get_recipe
from toyspt.train.run import run_recipe, run_recipe_seeds

TC = TrainConfig(epochs=3, pre_epochs=2, batch_size=32)
SEEDS = (0, 5)
SHARING = tuple(n for n, r in TABLE.items() if r.starts_from)


def test_every_sharing_recipe_is_covered():
    assert set(SHARING) == {"spt", "qk_transfer", "all_but_qk_transfer", "vo_transfer", "embed_transfer",
                            "mlp_transfer", "norm_transfer", "spt_norms", "spt_permuted", "scratch_matched"}
    for name in SHARING:  # the prefix is a run of its own, with no label phase or the plain length
        prefix = get_recipe(TABLE[name].starts_from)
        assert prefix.starts_from is None


@pytest.mark.parametrize("evaluate", ["all", "peak"])
@pytest.mark.parametrize("recipe", SHARING)
def test_continued_run_is_bitwise_fresh_run(recipe, evaluate, small_data):
    prefix = TABLE[recipe].starts_from
    fresh = [run_recipe(RunConfig(recipe, ModelConfig(), TC, evaluate=evaluate), small_data, s) for s in SEEDS]
    starts = [run_recipe(RunConfig(prefix, ModelConfig(), TC, evaluate=evaluate), small_data, s) for s in SEEDS]
    one = [run_recipe(RunConfig(recipe, ModelConfig(), TC, evaluate=evaluate), small_data, s, start=st)
           for s, st in zip(SEEDS, starts)]
    assert_bitwise(fresh, one)
    together = run_recipe_seeds(RunConfig(recipe, ModelConfig(), TC, evaluate=evaluate), small_data, SEEDS,
                                starts=starts)
    assert_bitwise(fresh, together)
    # and the prefix computed in lockstep serves as well
    lock_starts = run_recipe_seeds(RunConfig(prefix, ModelConfig(), TC, evaluate=evaluate), small_data, SEEDS)
    assert_bitwise(starts, lock_starts)
    assert_bitwise(fresh, run_recipe_seeds(RunConfig(recipe, ModelConfig(), TC, evaluate=evaluate), small_data, SEEDS,
                                           starts=lock_starts))


@pytest.mark.parametrize("model,tc", [
    (ModelConfig(pos="fire", n_heads=2), TC),  # 0-d parameters: their optimizer state is 0-d too
    (ModelConfig(pos="alibi"), replace(TC, optimizer="sgd", lr=0.05)),  # SGD momentum buffers
])
def test_scratch_matched_continues_optimizer_state(model, tc, small_data):
    fresh = [run_recipe(RunConfig("scratch_matched", model, tc), small_data, s) for s in SEEDS]
    starts = run_recipe_seeds(RunConfig("scratch", model, tc), small_data, SEEDS)
    assert_bitwise(fresh, run_recipe_seeds(RunConfig("scratch_matched", model, tc), small_data, SEEDS, starts=starts))
    assert_bitwise(fresh, [run_recipe(RunConfig("scratch_matched", model, tc), small_data, s, start=st)
                           for s, st in zip(SEEDS, starts)])


def test_continuing_without_the_optimizer_state_would_differ(small_data):
    """The check above can fail: a fresh optimizer after scratch's epochs gives other weights."""
    start = run_recipe(RunConfig("scratch", ModelConfig(), TC), small_data, 0)
    bare = replace(start, states={**start.states, "resume": {"generator": start.states["resume"]["generator"]}})
    fresh = run_recipe(RunConfig("scratch_matched", ModelConfig(), TC), small_data, 0)
    other = run_recipe(RunConfig("scratch_matched", ModelConfig(), TC), small_data, 0, start=bare)
    assert not torch.equal(fresh.states["final"]["blocks.0.attn.W_Q.weight"],
                           other.states["final"]["blocks.0.attn.W_Q.weight"])


@pytest.mark.parametrize("recipe", ["scratch", "spt", "scratch_matched"])
def test_peak_policy_measures_less_and_summarises_the_same(recipe, small_data):
    tc = replace(TC, epochs=6)
    full = run_recipe(RunConfig(recipe, ModelConfig(), tc), small_data, 1)
    peak = run_recipe(RunConfig(recipe, ModelConfig(), tc, evaluate="peak"), small_data, 1)
    lock = run_recipe_seeds(RunConfig(recipe, ModelConfig(), tc, evaluate="peak"), small_data, [1])[0]
    assert_bitwise([peak], [lock])
    assert peak.summary == full.summary
    for w in full.states:
        for n, v in full.states[w].items():
            assert torch.equal(v, peak.states[w][n])
    ft_full = [h for h in full.history if h["phase"] == "finetune"]
    ft_peak = [h for h in peak.history if h["phase"] == "finetune"]
    last, best, low = len(ft_full), float("-inf"), float("inf")
    for a, b in zip(ft_full, ft_peak, strict=True):
        want = {"val"} | set(extra_splits("peak", a["epoch"], last, tc.epochs, a["val_acc"], best, a["val_loss"], low))
        assert {k[:-4] for k in b if k.endswith("_acc")} == want, a["epoch"]
        assert all(b[f"{s}_acc"] == a[f"{s}_acc"] for s in want) and b["val_loss"] == a["val_loss"]
        # test is measured whenever validation accuracy improves or validation loss falls
        assert "test" in want or (a["val_acc"] <= best and a["val_loss"] >= low)
        best, low = max(best, a["val_acc"]), min(low, a["val_loss"])
    assert sum("test_acc" in h for h in ft_peak) < len(ft_peak) or len(ft_peak) <= 2


def test_extra_splits_rule():
    assert extra_splits("all", 2, 10, 5, 0.1, 0.9) == ("train", "test")
    assert extra_splits("peak", 2, 10, 5, 0.5, 0.4) == ("test",)
    assert extra_splits("peak", 2, 10, 5, 0.4, 0.4) == ()  # a tie is not a new peak (first max counts)
    assert extra_splits("peak", 10, 10, 5, 0.1, 0.9) == ("train", "test")
    assert extra_splits("peak", 5, 10, 5, 0.1, 0.9) == ("train", "test")
    assert extra_splits("peak", 2, 10, 5, 0.4, 0.4, 0.3, 0.5) == ("test",)  # a new lowest validation loss
    assert extra_splits("peak", 2, 10, 5, 0.4, 0.4, 0.5, 0.5) == ()  # a tie is not (first min counts)
    assert extra_splits("peak", 9, 10, 5, 0.1, 0.9, 1.0, 0.5) == ("test",)  # last fifth of 10 epochs: 9, 10
    assert extra_splits("peak", 8, 10, 5, 0.1, 0.9, 1.0, 0.5) == ()
    assert extra_splits("peak", 4, 10, 5, 0.1, 0.9, 1.0, 0.5) == ()  # last fifth of the plain 5: epoch 5 only
    assert extra_splits("peak", 48, 100, 60, 0.1, 0.9, 1.0, 0.5) == ()  # plain 60: epochs 49-60
    assert extra_splits("peak", 49, 100, 60, 0.1, 0.9, 1.0, 0.5) == ("test",)
    with pytest.raises(ValueError, match="evaluate: choose one of"):
        extra_splits("sometimes", 2, 10, 5, 0.1, 0.9)
    with pytest.raises(ValueError, match="evaluate: choose one of"):
        run_recipe(RunConfig("scratch", evaluate="never"), None)


def test_start_refused_with_reason(small_data):
    spt_only = run_recipe(RunConfig("spt_only", ModelConfig(), TC), small_data, 0)
    with pytest.raises(ValueError, match="starts from a spt_only run of seed 1, got a spt_only run of seed 0"):
        run_recipe(RunConfig("spt", ModelConfig(), TC), small_data, 1, start=spt_only)
    with pytest.raises(ValueError, match=r"other settings: \['train.mask_rate'\]"):
        run_recipe(RunConfig("spt", ModelConfig(), replace(TC, mask_rate=0.3)), small_data, 0, start=spt_only)
    with pytest.raises(ValueError, match="does not start from another recipe"):
        run_recipe(RunConfig("frozen_attention", ModelConfig(), TC), small_data, 0, start=spt_only)
    with pytest.raises(ValueError, match="starts from a scratch run"):
        run_recipe(RunConfig("scratch_matched", ModelConfig(), TC), small_data, 0, start=spt_only)
    with pytest.raises(ValueError, match="takes no callbacks"):
        run_recipe(RunConfig("spt", ModelConfig(), TC), small_data, 0, start=spt_only, callbacks=[object()])
    scratch_all = run_recipe(RunConfig("scratch", ModelConfig(), TC), small_data, 0)
    with pytest.raises(ValueError, match=r"other settings: \['evaluate'\]"):
        run_recipe(RunConfig("scratch_matched", ModelConfig(), TC, evaluate="peak"), small_data, 0, start=scratch_all)
    # the SPT-only run evaluates nothing: any policy of the label phase may start from it
    run_recipe(RunConfig("qk_transfer", ModelConfig(), TC, evaluate="peak"), small_data, 0, start=spt_only)
    with pytest.raises(ValueError, match="one run per seed"):
        run_recipe_seeds(RunConfig("spt", ModelConfig(), TC), small_data, [0, 1], starts=[spt_only])


# --- through the run cache and the sweep ---------------------------------------------------

from conftest import SMALL_TASK  # noqa: E402

from toyspt.runs import RunCache, RunSpec, get_run, sweep  # noqa: E402
from toyspt.runs.planning import make_plan  # noqa: E402
from toyspt.train import run as train_mod  # noqa: E402


def small(recipe, seed=0, **kw):
    return RunSpec(recipe, seed, data=SMALL_TASK, train=TC, **kw)


@pytest.fixture
def spt_phases(monkeypatch):
    """Counts SPT phases trained (per seed)."""
    count = []
    real = train_mod.pretrain

    def counted(lock, *a, **k):
        count.extend(c.seed for c in lock.ctxs)
        return real(lock, *a, **k)
    monkeypatch.setattr(train_mod, "pretrain", counted)
    return count


@pytest.mark.parametrize("lockstep", [False, True])
def test_sweep_trains_each_spt_phase_once(lockstep, tmp_path, spt_phases):
    specs = [small(r, s, evaluate=e) for r in ("spt", "qk_transfer", "all_but_qk_transfer")
             for s in (0, 1) for e in ("all", "peak")] + [small("scratch_matched", s, evaluate="peak") for s in (0, 1)]
    cache = RunCache(tmp_path)
    p = make_plan(specs, cache)
    answer, done, todo = p.answer, p.done, p.todo
    # peak specs asked beside their "all" twins are answered by them; parents come first
    assert [(s.recipe, s.evaluate) for s in todo if s.seed == 0] == [
        ("spt_only", "all"), ("spt", "all"), ("qk_transfer", "all"), ("all_but_qk_transfer", "all"),
        ("scratch", "peak"), ("scratch_matched", "peak")]
    got = sweep(specs, cache, options=SweepOptions(progress=False, lockstep=lockstep))
    assert sorted(spt_phases) == [0, 1]  # one SPT phase per seed for all six SPT recipes x policies
    del spt_phases[:]
    assert_bitwise([answer[s.key()].execute() for s in specs], got)  # afresh: bitwise the same
    assert len(spt_phases) == len([s for s in specs if s.recipe != "scratch_matched"])
    assert not done
    assert cache.has(small("spt_only", 1)) and cache.has(small("scratch", 1, evaluate="peak"))


def test_sweep_with_workers_sends_children_after_parents(tmp_path):
    specs = [small("qk_transfer", s) for s in (0, 1, 2)] + [small("scratch", 3)]
    got = sweep(specs, RunCache(tmp_path), options=SweepOptions(workers=2, progress=False, lockstep=True))
    assert_bitwise([s.execute() for s in specs], got)


def test_peak_spec_is_answered_by_the_all_run(tmp_path, spt_phases):
    cache = RunCache(tmp_path)
    full = sweep([small("spt", 0)], cache, options=SweepOptions(progress=False))
    assert spt_phases == [0]
    peak = sweep([small("spt", 0, evaluate="peak")], cache, options=SweepOptions(progress=False))
    assert spt_phases == [0] and peak[0].history == full[0].history  # nothing trained
    assert get_run(small("spt", 0, evaluate="peak"), cache).history == full[0].history
    # asked together, only the run evaluated with "all" trains
    both = sweep([small("qk_transfer", 1, evaluate="peak"), small("qk_transfer", 1)], RunCache(tmp_path / "b"),
                 options=SweepOptions(progress=False))
    assert both[0] is both[1]


def test_recompute_recomputes_the_parent(tmp_path, spt_phases):
    cache = RunCache(tmp_path)
    get_run(small("qk_transfer", 0), cache)
    assert spt_phases == [0] and cache.has(small("spt_only", 0))
    get_run(small("qk_transfer", 0), cache)
    assert spt_phases == [0]
    sweep([small("qk_transfer", 0)], cache, recompute=True, options=SweepOptions(progress=False))
    assert spt_phases == [0, 0]


def test_tracked_runs_never_continue_another_run():
    assert small("spt", 0, trackers=("displacement",)).parent() is None
    assert small("spt", 0).parent() == small("spt_only", 0)
    assert small("scratch_matched", 0, evaluate="peak").parent() == small("scratch", 0, evaluate="peak")
    assert small("qk_transfer", 0, evaluate="peak").parent() == small("spt_only", 0)  # SPT-only evaluates nothing
    assert small("frozen_attention", 0).parent() is None
    with pytest.raises(ValueError, match="evaluate: choose one of"):
        small("spt", 0, evaluate="often")
