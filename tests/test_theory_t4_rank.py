"""T4: the label gradient on M is rank one per example; the recon gradient is not."""
import torch

from theory import t4_rank as t4


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
