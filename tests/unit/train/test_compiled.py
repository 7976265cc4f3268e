"""The compiled numerics path (toyspt.train.compiled): the same losses and gradients as the
eager path within float32 reordering error, deterministic, the same alone and beside other
seeds, keyed apart from eager runs, and eager with one line where inductor cannot compile."""
import os
import subprocess
import sys
from dataclasses import replace

import pytest
import torch
from helpers.checks import assert_bitwise

from toyspt.nn.model import ModelConfig, build_model
from toyspt.runs import RunSpec
from toyspt.runs.specs import digest
from toyspt.train.compiled import available, check_numerics
from toyspt.train.config import RunConfig
from toyspt.train.loop import Lockstep, Objective, RunContext
from toyspt.train.recipes import TrainConfig, make_optimizer
from toyspt.train.run import label_objective, recon_objective, run_recipe, run_recipe_seeds, template

TC = TrainConfig(epochs=2, pre_epochs=1, batch_size=32)  # 128 sequences: 4 full batches per epoch
U = 2.0 ** -24  # float32 unit roundoff
# Inductor reorders and fuses float32 arithmetic. A sum of n terms taken in another order
# differs by at most 2 * gamma_n * sum|x_i| (gamma_n = n u / (1 - n u), both orders' errors),
# and fusing elementwise chains removes roundings rather than adding any. The longest
# reduction of the default model is the MLP's (d_mlp = 128 terms); the loss passes through
# D = 10 reductions in sequence (embedding, Q/K/V, scores, softmax, values, W_O, two MLP
# products, pooling, classifier), its gradient through 2 D. So, relative to the magnitudes:
N_MAX, D = 128, 10
LOSS_RTOL = 2 * D * N_MAX * U  # ~1.5e-4
GRAD_RTOL = 2 * (2 * D) * N_MAX * U  # ~3.1e-4, in norm over all parameters

needs_inductor = pytest.mark.skipif(not available(), reason="inductor cannot compile here")


def _one_step(data, objective, batch, numerics):
    """Loss and gradient of one step from seed 0's init, through the loop's two paths."""
    model = build_model(ModelConfig(), 0)
    lock = Lockstep([RunContext(model, "test", 0)], template=template(ModelConfig()) if numerics else None)
    grads = {}
    lock.start_phase("p", lambda ps: _Capture(ps, grads))
    if numerics:
        (loss,) = lock.compiled_step(objective, [batch])
    else:
        (loss,) = lock.step([lambda: objective.value(model, *batch, *objective.static)])
    return loss, grads["flat"]


class _Capture(torch.optim.SGD):
    """An optimizer that records the flat gradient instead of stepping."""

    def __init__(self, params, out):
        super().__init__(params, lr=0.0)
        self.out = out

    def step(self, closure=None):
        self.out["flat"] = torch.cat([p.grad.reshape(-1) for g in self.param_groups for p in g["params"]])


@needs_inductor
@pytest.mark.parametrize("which", ["label", "recon"])
def test_compiled_step_matches_eager_within_reordering_error(which, small_data):
    x, y = small_data.train.x[:32], small_data.train.y[:32]
    mask = torch.rand(32, x.shape[1], generator=torch.Generator().manual_seed(0)) < 0.5
    objective, batch = ((Objective(None, label_objective), (x, y)) if which == "label" else
                        (Objective(None, recon_objective, ("all", "l1")), (x, mask)))
    le, ge = _one_step(small_data, objective, batch, numerics=False)
    lc, gc = _one_step(small_data, objective, batch, numerics=True)
    assert abs(lc - le) <= LOSS_RTOL * abs(le)
    assert (gc - ge).norm() <= GRAD_RTOL * ge.norm()
    assert gc.shape == ge.shape  # the same parameters reached (head_rec/head_cls left out alike)


@needs_inductor
def test_compiled_runs_are_deterministic_and_the_same_beside_other_seeds(small_data):
    alone = [run_recipe(RunConfig("scratch", ModelConfig(), TC, numerics="compiled"), small_data, s) for s in (0, 5)]
    together = run_recipe_seeds(RunConfig("scratch", ModelConfig(), TC, numerics="compiled"), small_data, (0, 5))
    assert_bitwise(alone, together)
    assert together[0].config["numerics"] == "compiled"
    eager = run_recipe(RunConfig("scratch", ModelConfig(), TC), small_data, 0)
    assert "numerics" not in eager.config  # eager results are what they were
    # a continued compiled run is the compiled run afresh; an eager start is refused
    matched = run_recipe(RunConfig("scratch_matched", ModelConfig(), TC, numerics="compiled"), small_data, 0)
    assert_bitwise([matched], [run_recipe(RunConfig("scratch_matched", ModelConfig(), TC, numerics="compiled"),
                                          small_data, 0, start=alone[0])])
    with pytest.raises(ValueError, match="numerics"):
        run_recipe(RunConfig("scratch_matched", ModelConfig(), TC, numerics="compiled"), small_data, 0, start=eager)


def test_fused_optimizer_is_elementwise_close_to_the_default():
    """The compiled path's fused AdamW computes the same update formula in one kernel:
    after 3 steps each weight differs by a few ulps of its own size (or of lr) at most."""
    g = torch.Generator().manual_seed(0)
    w0 = torch.randn(1000, generator=g)
    grads = [torch.randn(1000, generator=g) for _ in range(3)]
    out = []
    for fused in (False, True):
        w = torch.nn.Parameter(w0.clone())
        opt = make_optimizer([w], TrainConfig(), 1e-3, fused=fused)
        for gr in grads:
            w.grad = gr.clone()
            opt.step()
        out.append(w.detach())
    ulp = 8 * U * (out[0].abs() + 1e-3)  # 3 steps x a few roundings each
    assert ((out[1] - out[0]).abs() <= ulp).all()


def test_eager_keys_are_unchanged_and_compiled_keys_differ():
    # keys of these specs before the numerics field existed (revision 12e9d9a, format 2): the
    # eager layout is unchanged; format 3 (validation loss per label epoch) changes the keys
    for spec, key2 in ((RunSpec("spt"), "4c3b2062be112297bca9fbc7"),
                       (RunSpec("scratch", seed=3, evaluate="peak"), "adfda6ece6404fe94b785392")):
        assert digest(type(spec).identity_of(dict(spec.to_dict(), format=2))) == key2
        assert spec.key() != key2
    assert RunSpec("spt", numerics="eager").key() == RunSpec("spt").key()
    compiled = RunSpec("spt", numerics="compiled")
    assert compiled.key() != RunSpec("spt").key()
    assert compiled.parent().numerics == "compiled" and compiled.group() != RunSpec("spt").group()
    with pytest.raises(ValueError, match="numerics"):
        RunSpec("spt", numerics="fast")
    with pytest.raises(ValueError, match="numerics"):
        check_numerics("jit")


def test_no_compiler_falls_back_to_eager_in_one_line(tmp_path):
    """CXX pointing nowhere: inductor finds no compiler; the run trains eagerly (the eager
    key's result) with one line saying so, never a traceback."""
    args = ["compare", "--arms", "scratch", "--seeds", "0", "--workers", "1", "--compile",
            "--task.n_train", "64", "--task.n_val", "32", "--task.n_test", "32", "--task.T", "16",
            "--train.epochs", "1", "--cache", str(tmp_path / "cache")]
    env = dict(os.environ, CXX="/nonexistent/c++", TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"))
    p = subprocess.run([sys.executable, "-m", "toyspt.cli", *args], capture_output=True, text=True, env=env,
                       timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    said = [line for line in p.stderr.splitlines() if "torch.compile is not available" in line]
    assert len(said) == 1 and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert "eager" in said[0]
    from toyspt.data.tasks import TaskConfig
    from toyspt.runs import RunCache

    eager = RunSpec("scratch", 0, data=TaskConfig(n_train=64, n_val=32, n_test=32, T=16),
                    train=replace(TrainConfig(), epochs=1), evaluate="peak")
    assert RunCache(tmp_path / "cache").has(eager)
