"""T3: the reconstruction derivative, the AR(1) closed form, its sign and its flips."""
import math

import pytest
import sympy as sp
import torch
from toyspt.theory import t3_recon as t3


def test_mask_moments():
    assert t3.mask_moments("iid", 5, 0.25) == (0.75, 0.75 ** 2)
    p1, p2 = t3.mask_moments("sample_mask", 2, sp.Rational(1, 2))
    # T = 2: |M| = 1 w.p. 1/2 + 1/4, then the other position is unmasked; |M| = 2 w.p. 1/4
    assert p1 == sp.Rational(3, 4) and p2 == 0
    with pytest.raises(ValueError, match="mask law"):
        t3.mask_moments("bernoulli", 4)


def test_closed_form_equals_brute_force_T2_T3():
    r = t3.check_closed_form(quick=True)
    assert r.verdict == "pass" and r.symbolic == "holds"


def test_closed_form_check_catches_a_wrong_formula(monkeypatch):
    real = t3.expected_drec
    # drop the masked-self exclusion: a plausible but wrong derivation
    monkeypatch.setattr(t3, "expected_drec",
                        lambda D, rv, bv, p1, p2: real(D, rv, bv, p1, p2) + bv * p1 * rv / 10)
    r = t3.check_closed_form(quick=True)
    assert r.verdict == "fail" and r.symbolic == "fails"


def test_closed_form_numeric_part_catches_a_wrong_mask_moment(monkeypatch):
    real = t3.expected_drec
    # a planted error: p2 replaced by p1 (two unmasked keys treated as one event)
    monkeypatch.setattr(t3, "expected_drec", lambda D, rv, bv, p1, p2: real(D, rv, bv, p1, p1))
    # along a row-constant direction both sides are 0 whatever the formula: no evidence
    ones = [[1] * 4 for _ in range(4)]
    assert t3.expected_drec(ones, sp.Rational(7, 10), sp.Integer(1), sp.Rational(3, 5), sp.Rational(3, 5)) == 0
    r = t3.check_closed_form(quick=True)
    assert r.verdict == "fail"
    assert r.figure > 1e6 * r.tolerance  # the numeric part alone rejects it


def test_autograd_expectation_matches_brute_force():
    T, rv, qv = 3, 0.7, 0.4
    D = torch.tensor(t3.neighbours(T), dtype=torch.float64)
    auto, scale = t3.autograd_expected_drec(D, rv, qv, (1.3,))
    subs = {t3.rho: sp.Rational(7, 10), t3.q: sp.Rational(2, 5), t3.beta: sp.Rational(13, 10)}
    for i, law in enumerate(t3.LAWS):
        exact = float(t3.brute_expected_drec(T, law, sp.Matrix(t3.neighbours(T))).subs(subs))
        # float64: 10 x n u relative to the sum of |terms| (n = 2^T + 2T^2 + 2T = 32)
        assert abs(auto[i, 0].item() - exact) <= 10 * 32 * 2 ** -53 * scale[i, 0].item()
    with pytest.raises(ValueError, match="mask law"):
        t3.autograd_expected_drec(D, rv, qv, (1.0,), laws=("bernoulli",))


def test_neighbour_closed_form_and_flip_conditions():
    T, rv, q = 9, 0.7, 0.4
    p1, p2 = t3.mask_moments("iid", T, q)
    P, Q = t3.neighbour_PQ(T, rv, p1, p2)
    for b in (-2.0, 0.5, 3.0):
        assert t3.expected_drec(t3.neighbours(T), rv, b, p1, p2) == pytest.approx(P * b * b - Q * b)
    fp = t3.flip_point(T, rv, "iid", q)
    assert fp["Q"] > 0
    local = 0.5 * fp["beta_star"] if fp["P"] > 0 else 1.0
    assert t3.expected_drec(t3.neighbours(T), rv, local, p1, p2) < 0
    assert t3.expected_drec(t3.neighbours(T), rv, -0.5, p1, p2) > 0  # negative gain: anti-local
    # anti-correlated data: the sign flips too
    assert t3.expected_drec(t3.neighbours(T), -rv, 1.0, p1, p2) > 0


def test_neighbour_sign_check():
    r = t3.check_neighbour_sign(quick=True)
    assert r.verdict == "pass" and r.figure < 0


def test_general_formula_and_not_blind():
    r = t3.check_general_formula(quick=True)
    assert r.verdict == "pass", r.checked
    nb = t3.check_not_blind(quick=True)
    assert nb.verdict == "pass" and nb.figure > 0.1


def test_monte_carlo_matches_closed_form_small():
    T, rv, q, b = 6, 0.8, 0.5, -1.0
    D = torch.tensor(t3.neighbours(T), dtype=torch.float64)
    p1, p2 = (float(v) for v in t3.mask_moments("sample_mask", T, q))
    exact = t3.expected_drec(t3.neighbours(T), rv, b, p1, p2)
    mean, se, gap = t3.mc_drec(D, rv, q, b, N=20_000, seed=1)
    assert abs(mean - exact) < 4 * se
    assert gap < 1e-13
    assert exact > 0 and mean > 2 * se  # beta < 0: proximity raises the loss


def test_mc_flip_point_is_the_root_of_the_expected_derivative():
    T, rv, q = 6, 0.8, 0.5
    D = torch.tensor(t3.neighbours(T), dtype=torch.float64)
    fp = t3.flip_point(T, rv, "sample_mask", q)
    est, se, gap = t3.mc_flip_point(D, rv, q, N=40_000, seed=5)
    assert abs(est - fp["beta_star"]) < t3.Z_MC * se and se < 0.1 * fp["beta_star"]
    assert gap < 1e-13


def test_monte_carlo_check_catches_a_wrong_flip_point(monkeypatch):
    from toyspt.theory import scalar_model
    real = scalar_model.neighbour_PQ

    def wrong(T, rv=t3.rho, p1=t3.p1s, p2=t3.p2s):  # a planted error: P 25% too large
        P, Q = real(T, rv, p1, p2)
        return 1.25 * P, Q

    monkeypatch.setattr(scalar_model, "neighbour_PQ", wrong)  # flip_point's beta* = Q/P
    r = t3.check_monte_carlo(quick=True)
    assert r.verdict == "fail"
    assert r.detail("beta_star_z") > t3.Z_MC  # the MC beta* disagrees with the planted one


def test_scalar_formula_matches_autograd():
    g = torch.Generator().manual_seed(0)
    x = t3.ar1(50, 7, 0.6, g)
    from toyspt.data.tasks import sample_mask
    mask = sample_mask(50, 7, 0.5, g)
    D = torch.randn(7, 7, dtype=torch.float64, generator=g)
    S = torch.zeros(7, 7, dtype=torch.float64, requires_grad=True)
    t3.scalar_losses(S, x, mask, 1.3).sum().backward()
    f, scale = t3.scalar_drec_formula(D, x, mask, 1.3)
    assert torch.allclose((S.grad * D).sum(), f.sum(), rtol=1e-12, atol=1e-14)
    assert (scale >= f.abs()).all()


def test_sturm_helper_can_say_no():
    rho = t3.rho
    assert t3._sturm_positive(2 - rho)
    assert not t3._sturm_positive(rho - sp.Rational(1, 2))  # root inside [0, 1]
    assert not t3._sturm_positive(-1 - rho)


def test_expected_loss_and_optimal_gain_against_monte_carlo():
    from toyspt.data.tasks import sample_mask
    T, rv, q = 6, 0.8, 0.5
    p1, p2 = (float(v) for v in t3.mask_moments("sample_mask", T, q))
    g = torch.Generator().manual_seed(3)
    x = t3.ar1(100_000, T, rv, g)
    mask = sample_mask(100_000, T, q, g)
    S0 = torch.zeros(T, T, dtype=torch.float64)
    for b in (0.5, 2.0):
        L = t3.scalar_losses(S0, x, mask, b)
        exact = t3.expected_loss_uniform(T, rv, b, p1, p2)
        assert abs(L.mean().item() - exact) < 4 * L.std().item() / math.sqrt(len(L))
    bo = t3.optimal_gain(T, rv, p1, p2)
    eps = 1e-3
    lo, mid, hi = (t3.expected_loss_uniform(T, rv, bo + d, p1, p2) for d in (-eps, 0.0, eps))
    assert mid < lo and mid < hi
