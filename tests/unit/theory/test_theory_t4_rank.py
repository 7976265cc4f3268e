"""T4: the label gradient on M is rank one per example; the recon gradient is not."""
import torch
from toyspt.theory import t4_rank as t4


def test_symbolic_rank_one():
    assert t4.symbolic_rank_one(2)


def test_numeric_rank_checks():
    for fn in (t4.check_rank_one, t4.check_recon_rank, t4.check_positional_kernel):
        r = fn(quick=True)
        assert r.verdict == "pass", (r.check, r.checked)


def test_recon_rank_depends_on_positions():
    r = t4.check_recon_rank(quick=True)
    assert r.detail("batch_rank_without_positions") == 1
    assert r.detail("batch_rank_with_positions") == 6
    assert max(r.detail("ranks_with_positions")) > 1


def test_numerical_rank():
    sv = torch.tensor([[1.0, 1e-3, 1e-17], [2.0, 0.0, 0.0]], dtype=torch.float64)
    assert t4.numerical_rank(sv, 1e-12).tolist() == [2, 1]


def test_toy_rank_one():
    r = t4.check_toy_rank_one(quick=True)
    assert r.verdict == "pass", r.checked
    assert r.detail("default")["sv2_sv1"] > 1e-6  # MLP + LayerNorm: not rank one


def test_autograd_dLdM_matches_the_probe_and_refuses_other_points():
    import pytest
    from toyspt.theory import toy
    batch = toy.toy_batch(8, 4, seed=0)
    model = toy.toy_model(toy.T1_MODEL, seed=0)
    GM = toy.autograd_dLdM(model, batch)
    sv_probe = toy.layer_probe(model, batch, "label", ("circ_w1",)).per_example.dLdM_sv[:, 0]
    # float64 SVD of 32 x 32 matrices agreeing to rounding (10 x n u x ||.|| with n ~ 10^2)
    assert torch.allclose(torch.linalg.svdvals(GM), sv_probe, rtol=0, atol=1e-12 * sv_probe.max())
    assert model.blocks[0].attn.W_K.weight.abs().max() == 0  # the caller's model is untouched
    with pytest.raises(ValueError, match="W_Q = W_K = 0"):
        toy.autograd_dLdM(toy.toy_model(toy.ModelConfig(d_mlp=0, final_norm=False), seed=0), batch)


def test_toy_rank_one_check_catches_a_wrong_attention_input(monkeypatch):
    from toyspt.theory import toy
    real = toy.attention_input

    def wrong_input(model, x):  # a planted error: the attention input rescaled and shifted
        return real(model, x) * 1.5 + 0.1

    monkeypatch.setattr(toy, "attention_input", wrong_input)
    r = t4.check_toy_rank_one(quick=True)
    assert r.verdict == "fail" and r.detail("t1")["formula_gap"] > 1e6 * r.tolerance
    # the autograd dL/dM itself is still rank one: only the independent comparison catches it
    assert r.detail("t1")["sv2_sv1"] < r.tolerance
