"""Gradient-structure tests of the probes: exact zeros where theory.md says so (like a
causality test), non-zeros where it says not, and each derivative checked against an
independent computation (forward mode, finite differences, a Python loop, the chain rule)."""
import math

import pytest
import torch
from torch import nn

from toyspt.nn.attention import Attention, active_hook_count
from toyspt.nn.model import ModelConfig, build_model
from toyspt.probe import engine as probes
from toyspt.probe import losses

SITE = "blocks.0.attn.hook_attn_scores"
T1 = dict(d_model=16, d_mlp=0, final_norm=False)  # theory.md T1: affine per token, mean pool
SMALL = dict(d_model=16, d_mlp=32)
# rounding level of float64 score gradients relative to their norm: G is a sum over B*T
# terms of size ~||G||, each carrying ~1e-16 relative error; 1e-12 leaves a wide margin
# while a true non-zero (the effects we test are >= 1e-6 relative) stays far above it
ZERO = 1e-12


@pytest.fixture(scope="module")
def batch(small_data):
    return losses.make_batch(small_data.train.x[:24], small_data.train.y[:24], seed=1)


def test_label_gradient_is_row_identical_at_uniform_attention(batch):
    model = build_model(ModelConfig(**T1, qk_init_scale=0.0), seed=0)
    lab = probes.probe(model, batch, "label")
    lp = lab[SITE]
    assert lp.row_heterogeneity.max() < ZERO
    assert lp.per_example.row_heterogeneity.max() < ZERO
    assert lp.blind_share.max() < ZERO**2
    # T4: each example's dL/dM is rank one (sv2/sv1 at rounding level)
    sv = lp.per_example.dLdM_sv
    assert (sv[..., 1] / sv[..., 0]).max() < ZERO
    # T2: zero derivative along every circulant direction, non-zero along Toeplitz ones
    k = {n: i for i, n in enumerate(lab.directions)}
    for n in ("circ_w1", "circ_w2", "circ_w4"):
        assert lp.cos[0, k[n]].abs() < ZERO, n
    for n in ("toep_w1", "toep_w2", "toep_w4"):
        assert lp.cos[0, k[n]].abs() > 1e-6, n


def test_recon_is_not_blind_and_ratio_vanishes_on_circulants(batch):
    model = build_model(ModelConfig(**T1, qk_init_scale=0.0), seed=0)
    bl = probes.blindness(model, batch, ["circ_w1", "circ_w2", "toep_w2"])
    rec = bl.recon[SITE]
    assert rec.row_heterogeneity.min() > 1e-3
    assert (rec.cos[0, :2].abs() > 1e-3).all()
    assert (bl.ratio[SITE][0, :2] < ZERO).all()
    assert (bl.ratio_per_example[SITE][0, :2] < ZERO).all()
    t = bl.table()
    assert list(t.direction) == ["circ_w1", "circ_w2", "toep_w2"]
    assert set(bl.to_frame().loss) == {"label", "recon", "label/recon"}


def test_default_model_is_not_row_identical(batch):
    # MLP + final LayerNorm break T1: the label gradient's rows differ (measured, not zero)
    model = build_model(ModelConfig(**SMALL, qk_init_scale=0.0), seed=0)
    lp = probes.probe(model, batch, "label", per_example=False, use_jvp=False)[SITE]
    assert lp.row_heterogeneity.min() > 1e-3


@pytest.mark.parametrize("loss", ["label", "recon"])
def test_directional_derivative_matches_jvp_and_finite_differences(batch, loss):
    model = build_model(ModelConfig(**SMALL, n_heads=2), seed=1)
    res = probes.probe(model, batch, loss, ["toep_w1", "prev", "random_s2"], per_example=False)
    lp = res[SITE]
    scale = torch.linalg.matrix_norm(lp.G).max().item()  # |deriv| <= ||G|| for unit D
    # forward and reverse mode differ only by rounding
    assert torch.allclose(lp.deriv_jvp, lp.deriv, rtol=0, atol=1e-12 * scale)
    for h in range(2):
        for k in range(3):
            fd = probes.directional_fd(model, batch, loss, SITE, h, res.D[k])
            # central differences, eps=1e-4 in float64: truncation ~eps^2 * L''' ~ 1e-8
            # relative, rounding ~1e-16 * L / eps ~ 1e-12
            assert abs(fd - lp.deriv[h, k].item()) < 1e-6 * scale, (h, k)


@pytest.mark.parametrize("loss", ["label", "recon"])
def test_per_example_gradients_equal_a_python_loop(batch, loss):
    model = build_model(ModelConfig(**SMALL), seed=2)
    small = {k: v[:6] for k, v in batch.items()}
    res = probes.probe(model, small, loss, ["prev"], use_jvp=False)[SITE]
    for b in range(6):
        one = {k: v[b:b + 1] for k, v in small.items()}
        ref = probes.probe(model, one, loss, ["prev"], per_example=False, use_jvp=False)[SITE]
        assert torch.allclose(res.per_example.G[b], ref.G, rtol=1e-10, atol=1e-14)
        assert torch.allclose(res.per_example.grad_W_Q[b], ref.qk.grad_W_Q, rtol=1e-10, atol=1e-14)
        assert torch.allclose(res.per_example.grad_W_K[b], ref.qk.grad_W_K, rtol=1e-10, atol=1e-14)
    pe = probes.per_example_grads(model, small, loss)
    assert torch.equal(pe.scores[SITE], res.per_example.G)
    assert torch.equal(pe.weights["blocks.0.attn.W_Q.weight"], res.per_example.grad_W_Q)
    if loss == "label":  # cross-entropy is a mean over examples
        assert torch.allclose(res.per_example.G.mean(0), res.G, rtol=1e-10, atol=1e-14)


def test_dLdM_agrees_with_the_weight_gradients_by_the_chain_rule(batch):
    # zero Q/K biases (the init): S_h = X W_Q^h^T W_K^h X^T / sqrt(dh), so
    # dL/dW_Q^h = W_K^h dL/dM_h^T / sqrt(dh) and dL/dW_K^h = W_Q^h dL/dM_h / sqrt(dh)
    model = build_model(ModelConfig(**SMALL, n_heads=2), seed=3)
    lp = probes.probe(model, batch, "recon", ["prev"], per_example=False, use_jvp=False)[SITE]
    attn = model.blocks[0].attn
    dh = attn.d_head
    for h in range(2):
        sl = slice(h * dh, (h + 1) * dh)
        WQ, WK = attn.W_Q.weight[sl].double().detach(), attn.W_K.weight[sl].double().detach()
        assert torch.allclose(lp.qk.grad_W_Q[sl], WK @ lp.qk.dLdM[h].T / math.sqrt(dh), rtol=1e-9, atol=1e-14)
        assert torch.allclose(lp.qk.grad_W_K[sl], WQ @ lp.qk.dLdM[h] / math.sqrt(dh), rtol=1e-9, atol=1e-14)


def test_probe_leaves_no_hooks_and_does_not_mutate_the_model(batch):
    model = build_model(ModelConfig(**SMALL), seed=0).train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    probes.blindness(model, batch, ["prev"])
    assert active_hook_count(model) == 0
    assert model.training and next(model.parameters()).dtype == torch.float32
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_no_hooks_remain_after_an_exception(batch):
    model = build_model(ModelConfig(**SMALL), seed=0).train()

    def broken(m, b):
        m.classify(b["x"])  # the score hooks fire, then the loss fails
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        probes.probe(model, batch, broken, dtype=None)  # in place: hooks on this very model
    assert active_hook_count(model) == 0
    assert not model.blocks[0].attn._forward_pre_hooks
    assert model.training


def test_bad_gradients_and_models_raise_clear_errors(batch):
    model = build_model(ModelConfig(**SMALL), seed=0)
    with pytest.raises(ValueError, match="no attention score hook points"):
        probes.probe(nn.Sequential(nn.Linear(2, 2)), batch)
    with pytest.raises(RuntimeError, match="not reached"):
        probes.probe(model, batch, lambda m, b: m.head_cls.weight.sum())
    with pytest.raises(RuntimeError, match="is None"):
        probes.probe(model, batch, lambda m, b: m.classify(b["x"]).detach().sum() + m.head_cls.weight.sum())
    with pytest.raises(FloatingPointError):
        probes.probe(model, batch, lambda m, b: m.classify(b["x"]).sum() * float("inf"))
    with pytest.raises(ValueError, match="unknown loss"):
        probes.probe(model, batch, "contrastive")
    with pytest.raises(KeyError, match="no 'y'"):
        probes.probe(model, {"x": batch["x"]}, "label")


class _Other(nn.Module):
    """A model that is not the toy model: two Attention layers, its own readout."""

    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(2, 8)
        self.enc = nn.ModuleList([Attention(8, 2), Attention(8, 2)])
        self.out = nn.Linear(8, 2)

    def forward(self, x):
        h = self.inp(x)
        for a in self.enc:
            h = h + a(h)
        return self.out(h.mean(1))


def test_probes_are_generic_over_models_with_attention_and_pluggable_losses(batch):
    torch.manual_seed(0)
    other = _Other()
    ce = lambda m, b: nn.functional.cross_entropy(m(b["x"]), b["y"])  # noqa: E731
    sq = lambda m, b: m(b["x"]).pow(2).mean()  # noqa: E731
    bl = probes.blindness(other, batch, ["prev", "toep_w1"], losses={"label": ce, "recon": sq})
    assert [lp.site for lp in bl.label.layers] == ["enc.0.hook_attn_scores", "enc.1.hook_attn_scores"]
    T = batch["x"].shape[1]
    for lp in bl.label.layers:
        assert lp.G.shape == (2, T, T) and lp.per_example.G.shape == (len(batch["x"]), 2, T, T)
        assert lp.qk.dLdM.shape == (2, 8, 8) and lp.deriv.shape == (2, 2)
        assert torch.allclose(lp.deriv_jvp, lp.deriv, rtol=1e-9, atol=1e-16)
    fd = probes.directional_fd(other, batch, ce, "enc.1.hook_attn_scores", 1, bl.label.D[0])
    assert abs(fd - bl.label.layers[1].deriv[1, 0].item()) < 1e-6 * bl.label.layers[1].G.norm().item()


def test_rope_layers_have_no_dLdM(batch):
    model = build_model(ModelConfig(**SMALL, pos="rope"), seed=0)
    lp = probes.probe(model, batch, "label", ["prev"], per_example=False, use_jvp=False)[SITE]
    assert lp.qk is None
    assert lp.G.shape[-1] == batch["x"].shape[1]


def test_frame_is_tidy(batch):
    model = build_model(ModelConfig(**SMALL), seed=0)
    f = probes.probe(model, batch, "label", ["prev", "next"]).to_frame()
    assert list(f.columns) == ["loss", "layer", "head", "direction", "metric", "value"]
    assert {"row_heterogeneity", "blind_share", "column_share", "cos", "deriv", "deriv_jvp",
            "cos_rms_per_example", "dLdM_sv1"} <= set(f.metric)
    assert f.query("metric == 'cos'").direction.tolist() == ["prev", "next"]


def test_probe_cli_prints_the_blindness_table(capsys, tmp_path):
    from toyspt.cli.main import main

    rc = main(["probe", "--at", "init", "--n", "16", "--directions", "circ_w1,prev",
               "--task.T", "12", "--task.n_train", "32", "--task.n_val", "8", "--task.n_test", "8",
               "--model.d_model", "16", "--model.d_mlp", "0", "--model.final_norm", "false",
               "--model.qk_init_scale", "0", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0 and "circ_w1" in out and "prev" in out and "row_heterogeneity" in out
    import pandas as pd

    t = pd.read_csv(tmp_path / "blindness.csv")
    assert list(t.direction) == ["circ_w1", "prev"]
    assert abs(t.cos_label[0]) < ZERO and abs(t.cos_recon[0]) > 1e-4
    assert main(["probe", "--at", "pretrained", "--recipe", "scratch", "--n", "4"]) == 2


def test_per_example_with_masked_keys_excluded_matches_single_examples(batch):
    model = build_model(ModelConfig(**SMALL), seed=0)
    small = {k: v[:4] for k, v in batch.items()}
    loss = losses.recon("l1", "no_masked_keys")
    pe = probes.per_example_grads(model, small, loss)
    for b in range(4):
        one = {k: v[b:b + 1] for k, v in small.items()}
        ref = probes.probe(model, one, loss, ["prev"], per_example=False, use_jvp=False)[SITE]
        assert torch.allclose(pe.scores[SITE][b], ref.G, rtol=1e-10, atol=1e-14)


def test_per_example_falls_back_to_a_loop_when_vmap_cannot_batch(batch):
    # a loss with data-dependent Python control flow cannot run under vmap
    model = build_model(ModelConfig(**SMALL), seed=0)
    small = {k: v[:4] for k, v in batch.items()}

    def branchy(m, b):
        loss = losses.label_loss(m, b)
        return loss * 2 if loss.item() > 0 else loss

    with pytest.warns(RuntimeWarning, match="falling back"):
        pe = probes.per_example_grads(model, small, branchy)
    for b in range(4):
        one = {k: v[b:b + 1] for k, v in small.items()}
        ref = probes.probe(model, one, branchy, ["prev"], per_example=False, use_jvp=False)[SITE]
        assert torch.allclose(pe.scores[SITE][b], ref.G, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("loss", ["label", "recon"])
def test_lean_probe_gives_the_full_probes_statistics_and_keeps_no_gradient(batch, loss):
    """probe(lean=True) on the toy model (two layers): the per-head statistics of the full
    probe, without G, weight gradients or per-example parts, and the caller's flags intact."""
    model = build_model(ModelConfig(**SMALL, n_layers=2), seed=3)
    flags = [p.requires_grad for p in model.parameters()]
    dirs = ["circ_w1", "toep_w1", "prev", "random_s0"]
    full = probes.probe(model, batch, loss, dirs, per_example=False, use_jvp=False)
    lean = probes.probe(model, batch, loss, dirs, lean=True)
    assert lean.directions == full.directions and lean.value == pytest.approx(full.value, rel=ZERO)
    assert [lp.site for lp in lean.layers] == [lp.site for lp in full.layers] and len(lean.layers) == 2
    for a, b in zip(full.layers, lean.layers):
        assert b.G is None and b.qk is None and b.per_example is None and b.deriv_jvp is None
        # both in float64; sums over the batch and T^2 entries round differently (ZERO margin)
        for f in ("grad_norm", "row_heterogeneity", "column_share", "blind_share", "deriv", "cos"):
            x, y = getattr(a, f), getattr(b, f)
            scale = a.grad_norm.max() if f == "deriv" else 1.0
            assert (x - y).abs().max() <= ZERO * scale, f
    assert [p.requires_grad for p in model.parameters()] == flags and active_hook_count(model) == 0
