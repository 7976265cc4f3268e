from dataclasses import replace

import pytest
import torch

from checks import assert_bitwise

from toyspt.nn.model import ModelConfig
from toyspt.runs import RunSpec
from toyspt.data.tasks import Split, TaskConfig, make_task
from toyspt.train.loop import RECIPES, TrainConfig, run_recipe
from toyspt.train.lockstep import run_recipe_seeds

execute_seeds = RunSpec.execute_group

from conftest import SMALL_TASK

TC = TrainConfig(epochs=2, pre_epochs=2, batch_size=32, swap_epochs=1)  # 4 steps per epoch on 128 sequences
SEEDS = (0, 5)
FIVE = ("scratch", "spt", "qk_transfer", "frozen_attention", "data_swap")


@pytest.fixture(scope="module")
def swap_data():
    return make_task(replace(SMALL_TASK, family="freq_band", seed=4))


def reference(recipe, data, swap, model=ModelConfig(), tc=TC, seeds=SEEDS):
    return [run_recipe(recipe, data, model, tc, s, pretrain_data=swap) for s in seeds]


@pytest.mark.parametrize("recipe", RECIPES)
def test_lockstep_is_bitwise_run_recipe(recipe, small_data, swap_data):
    # eval_chunk 48 splits the 64/128-sequence evaluations unevenly: rows of a matrix
    # product do not depend on the rows beside them, so the accuracies stay exact
    out = run_recipe_seeds(recipe, small_data, ModelConfig(), TC, SEEDS, pretrain_data=swap_data,
                           eval_chunk=48)
    assert_bitwise(reference(recipe, small_data, swap_data), out)


@pytest.mark.parametrize("model,tc", [
    (ModelConfig(pos="fire", n_heads=2), TC),  # scalar (0-d) parameters in the flat buffer
    (ModelConfig(pos="alibi", n_layers=2), replace(TC, optimizer="sgd", lr=0.05)),  # SGD momentum
    (ModelConfig(pos="rope", d_mlp=0), replace(TC, spt_attention="no_masked_keys", recon="mse")),
])
def test_lockstep_bitwise_other_settings(model, tc, small_data, swap_data):
    out = run_recipe_seeds("spt", small_data, model, tc, SEEDS, pretrain_data=swap_data)
    assert_bitwise(reference("spt", small_data, swap_data, model, tc), out)


# vmap: float32 tolerance ---------------------------------------------------------------------
# Batched products sum in another order than single ones and vmap applies biases and norm
# affines as separate ops, so the two float32 runs round differently, and the differences
# are carried forward by training (AdamW turns tiny gradients into full-size steps: W_K's
# bias has an exactly-zero gradient, so it walks on rounding noise in either run). The test
# therefore measures both runs against the same arithmetic in float64 (same init, data
# order and masks): vmap must be as close to exact arithmetic as run_recipe itself is, to
# within RATIO (both errors are random rounding of the same size; measured ratio <= 2.1 over
# 5 recipes x 2 seeds, so 4 leaves room for the spread of a maximum) plus one float32 ulp
# at the tensor's scale (tensors that never change are exact up to representation).
RATIO = 4.0
# Per-epoch losses: ~20 float32 ops deep (each <= 6e-8 relative) and weights equal to
# ~1e-7 relative give differences ~1e-6 relative at most; measured ~1e-7.
LOSS_RTOL = 1e-5


def _double(data):
    return replace(data, **{s: Split(getattr(data, s).x.double(), getattr(data, s).y)
                            for s in ("train", "val", "test")})


@pytest.mark.parametrize("recipe", FIVE)
def test_vmap_is_as_accurate_as_run_recipe(recipe, small_data, swap_data, monkeypatch):
    ref = reference(recipe, small_data, swap_data)
    out = run_recipe_seeds(recipe, small_data, ModelConfig(), TC, SEEDS, pretrain_data=swap_data,
                           engine="vmap")
    import toyspt.train.loop as train

    build = train.build_model
    monkeypatch.setattr(train, "build_model", lambda cfg, seed: build(cfg, seed).double())
    exact = reference(recipe, _double(small_data), _double(swap_data))
    for a, b, e in zip(ref, out, exact, strict=True):
        assert len(a.history) == len(b.history) and list(a.states) == list(b.states)
        for ha, hb in zip(a.history, b.history):
            assert {k: v for k, v in ha.items() if "loss" not in k} == \
                   {k: v for k, v in hb.items() if "loss" not in k}  # steps and accuracies exact:
            # a prediction flips only on a logit margin below ~1e-6, vanishingly rare here
            for k in ha:
                if "loss" in k:
                    assert hb[k] == pytest.approx(ha[k], rel=LOSS_RTOL), k
        for which in a.states:
            for n, w64 in e.states[which].items():
                err_seq = (a.states[which][n].double() - w64).abs().max().item()
                err_vmap = (b.states[which][n].double() - w64).abs().max().item()
                ulp = 2.0 ** -23 * w64.abs().max().item()
                assert err_vmap <= RATIO * err_seq + ulp, (which, n, err_vmap, err_seq)


# RunSpec.execute_group (the sweep's job) ------------------------------------------------------------

def test_execute_seeds_equals_execute():
    base = RunSpec("spt", 0, SMALL_TASK, train=replace(TC, epochs=1, pre_epochs=1))
    specs = [replace(base, seed=s) for s in (3, 1)]
    out = execute_seeds(specs)
    assert [r.seed for r in out] == [3, 1]
    assert_bitwise([s.execute() for s in specs], out)


def test_execute_seeds_refuses_what_it_cannot_group():
    base = RunSpec("scratch", 0, SMALL_TASK, train=TC)
    with pytest.raises(ValueError, match="only by seed"):
        execute_seeds([base, replace(base, recipe="spt", seed=1)])
    with pytest.raises(ValueError, match="trackers"):
        execute_seeds([replace(base, trackers=("displacement",))])


def test_bad_arguments(small_data):
    with pytest.raises(ValueError, match="engine"):
        run_recipe_seeds("scratch", small_data, engine="jit")
    with pytest.raises(ValueError, match="recipe"):
        run_recipe_seeds("pretrain", small_data)
    with pytest.raises(ValueError, match="at least one seed"):
        run_recipe_seeds("scratch", small_data, seeds=())
    with pytest.raises(ValueError, match="pretrain_data"):
        run_recipe_seeds("data_swap", small_data)
    with pytest.raises(ValueError, match="features per token"):
        run_recipe_seeds("scratch", small_data, ModelConfig(d_in=3))
    with pytest.raises(ValueError, match="eval_chunk"):
        run_recipe_seeds("scratch", small_data, eval_chunk=0)


@pytest.mark.parametrize("engine", ["lockstep", "vmap"])
def test_non_finite_loss_names_the_seed(engine):
    data = make_task(TaskConfig(T=8, n_train=32, n_val=8, n_test=8))
    x = data.train.x.clone()
    x[:] = float("nan")
    bad = replace(data, train=Split(x, data.train.y))
    with pytest.raises(FloatingPointError, match=r"seed 4, phase finetune, epoch 1, step 0"):
        run_recipe_seeds("scratch", bad, seeds=(4, 2), train_cfg=TrainConfig(epochs=1), engine=engine)
