from dataclasses import replace

import pytest
import torch
from conftest import SMALL_TASK
from helpers.checks import assert_bitwise

from toyspt.data.tasks import Split, TaskConfig, make_task
from toyspt.nn.model import ModelConfig
from toyspt.runs import RunSpec
from toyspt.train.config import RunConfig
from toyspt.train.recipes import RECIPES, TrainConfig
from toyspt.train.run import run_recipe, run_recipe_seeds

execute_seeds = RunSpec.execute_group

TC = TrainConfig(epochs=2, pre_epochs=2, batch_size=32, swap_epochs=1)  # 4 steps per epoch on 128 sequences
SEEDS = (0, 5)


@pytest.fixture(scope="module")
def swap_data():
    return make_task(replace(SMALL_TASK, family="freq_band", seed=4))


def reference(recipe, data, swap, model=ModelConfig(), tc=TC, seeds=SEEDS):
    return [run_recipe(RunConfig(recipe, model, tc), data, s, pretrain_data=swap) for s in seeds]


@pytest.mark.parametrize("recipe", RECIPES)
def test_lockstep_is_bitwise_run_recipe(recipe, small_data, swap_data):
    # 48 rows of 16 tokens per evaluation forward split the 64/128-sequence evaluations unevenly:
    # rows of a matrix product do not depend on the rows beside them, so the scores stay exact
    out = run_recipe_seeds(RunConfig(recipe, ModelConfig(), TC, eval_tokens=48 * SMALL_TASK.T), small_data, SEEDS,
                           pretrain_data=swap_data)
    assert_bitwise(reference(recipe, small_data, swap_data), out)


@pytest.mark.parametrize("model,tc", [
    (ModelConfig(pos="fire", n_heads=2), TC),  # scalar (0-d) parameters in the flat buffer
    (ModelConfig(pos="alibi", n_layers=2), replace(TC, optimizer="sgd", lr=0.05)),  # SGD momentum
    (ModelConfig(pos="rope", d_mlp=0), replace(TC, spt_attention="no_masked_keys", recon="mse")),
])
def test_lockstep_bitwise_other_settings(model, tc, small_data, swap_data):
    out = run_recipe_seeds(RunConfig("spt", model, tc), small_data, SEEDS, pretrain_data=swap_data)
    assert_bitwise(reference("spt", small_data, swap_data, model, tc), out)


def _textbook(data, tc, seed, model_cfg=ModelConfig()):
    """A scratch run the textbook way: one model, torch's optimizer over its parameters,
    zero_grad / backward / step; the oracle for the flat optimizer buffer."""
    from toyspt.nn.model import build_model
    from toyspt.train.recipes import make_optimizer
    from toyspt.train.run import seed_stream

    model = build_model(model_cfg, seed)
    opt = make_optimizer(model.parameters(), tc, tc.lr)
    gen = torch.Generator().manual_seed(seed_stream(seed))
    x, y = data.train.x, data.train.y
    for _ in range(tc.epochs):
        perm = torch.randperm(len(x), generator=gen)
        for i in range(0, len(x), tc.batch_size):
            idx = perm[i:i + tc.batch_size]
            loss = torch.nn.functional.cross_entropy(model.classify(x[idx]), y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    return model.state_dict()


@pytest.mark.parametrize("tc", [TC, replace(TC, optimizer="sgd", lr=0.05)])
def test_flat_optimizer_is_bitwise_the_per_parameter_optimizer(tc, small_data):
    for got in run_recipe_seeds(RunConfig("scratch", ModelConfig(pos="fire"), tc), small_data, SEEDS):
        want = _textbook(small_data, tc, got.seed, ModelConfig(pos="fire"))
        for n, v in want.items():
            assert torch.equal(v, got.states["final"][n]), n


def test_callbacks_beside_other_seeds_see_their_own_run(small_data):
    """Trackers of two seeds trained together record what each records alone."""
    class Log:
        def on_phase_start(self, ctx):
            ctx.record("phase", "start", ctx.step)

        def on_step(self, ctx, loss):
            ctx.record("loss", "value", loss)

        def on_epoch(self, ctx, rec):
            ctx.record("w", "sum", ctx.model.embed.weight.sum().item())

    together = run_recipe_seeds(RunConfig("spt", ModelConfig(), TC), small_data, SEEDS, callbacks=[[Log()], [Log()]])
    alone = [run_recipe(RunConfig("spt", ModelConfig(), TC), small_data, s, callbacks=[Log()]) for s in SEEDS]
    assert_bitwise(alone, together)
    assert len(together[0].records) == 2 + 4 * 4 + 4 and together[0].records != together[1].records


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
    with pytest.raises(ValueError, match="recipe"):
        run_recipe_seeds("pretrain", small_data)
    with pytest.raises(ValueError, match="at least one seed"):
        run_recipe_seeds("scratch", small_data, ())
    with pytest.raises(ValueError, match="pretrain_data"):
        run_recipe_seeds("data_swap", small_data)
    with pytest.raises(ValueError, match="features per token"):
        run_recipe_seeds(RunConfig("scratch", ModelConfig(d_in=3)), small_data)
    with pytest.raises(ValueError, match="eval_tokens"):
        run_recipe_seeds(RunConfig("scratch", eval_tokens=0), small_data)


def test_non_finite_loss_names_the_seed():
    data = make_task(TaskConfig(T=8, n_train=32, n_val=8, n_test=8))
    x = data.train.x.clone()
    x[:] = float("nan")
    bad = replace(data, train=Split(x, data.train.y))
    with pytest.raises(FloatingPointError, match=r"seed 4, phase finetune, epoch 1, step 0"):
        run_recipe_seeds(RunConfig("scratch", train=TrainConfig(epochs=1)), bad, (4, 2))
