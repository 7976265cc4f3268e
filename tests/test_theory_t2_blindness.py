"""T2: blindness of the label loss at identical-row scores; decay with T; growth with sigma."""
import numpy as np
import pytest
import torch

from theory import geometry as geo
from theory import t2_blindness as t2
from toyspt import directions as dr


def test_symbolic_row_identity_and_uniform_form():
    assert t2.symbolic_row_identity(3) == (True, True)


@pytest.mark.parametrize("T", [2, 3, 5])
def test_blind_dimension(T):
    assert t2.symbolic_blind_dim(T) == T * T - (T - 1)


def test_kappa_matrix_matches_kappa():
    T = 5
    D = torch.randn(T, T, dtype=torch.float64)
    K = torch.tensor(geo.kappa_matrix(T), dtype=torch.float64)
    assert torch.allclose(K @ D.flatten() / T, dr.kappa(D), atol=1e-12)


@pytest.mark.parametrize("kind,holds", [("circ_w1", True), ("circ_w2", True), ("toep_w1", False),
                                        ("prev", False), ("random_s0", False), ("column_s0", False)])
def test_blind_direction_claim_can_fail(kind, holds):
    r = t2.check_blind_direction(quick=True, kind=kind)
    assert (r.verdict == "pass") == holds
    assert (r.symbolic == "holds") == holds
    if not holds:  # the numeric figure alone also rejects the claim, by far
        assert r.figure > 1e6 * r.tolerance


def test_row_identity_and_fd_checks_pass():
    for fn in (t2.check_row_identity, t2.check_gradient_fd, t2.check_blind_dim):
        r = fn(quick=True)
        assert r.verdict == "pass", (r.check, r.figure, r.tolerance)


def test_toeplitz_prediction_closed_form():
    for T in (8, 16, 33):
        _, _, pred = t2.toeplitz_terms(T, 2, seed=0)
        assert pred == pytest.approx(2 * (T - 2) / (T ** 2 * (T - 1) * (3 * T - 11 + 10 / T)), rel=1e-12)


def test_toeplitz_decay_and_sigma_growth():
    r = t2.check_toeplitz_decay(quick=True)
    assert r.verdict == "pass", r.checked
    assert -1.8 < r.detail("exponent") < -1.3
    s = t2.check_sigma_growth(quick=True)
    assert s.verdict == "pass", s.checked
    toy = s.detail("toy_blind_fraction")
    assert toy["0.01"] < toy["0.1"] < toy["1.0"]  # grows with the toy model's init scale


def test_toy_model_checks():
    r = t2.check_toy_blind(quick=True)
    assert r.verdict == "pass" and r.detail("fd_ratio") <= 1.0
    m = t2.measure_toy_default(quick=True)
    assert m.verdict == "measured" and m.figure > 1e-3  # MLP + LayerNorm: rows differ


def test_power_fit_recovers_exponent():
    x = np.array([8, 16, 32, 64.0])
    slope, se = t2.power_fit(x, 3 * x ** -1.5, 0.01 * 3 * x ** -1.5)
    assert slope == pytest.approx(-1.5, abs=1e-9) and se > 0
