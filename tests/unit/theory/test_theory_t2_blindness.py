"""T2: blindness of the label loss at identical-row scores; decay with T; growth with sigma."""
import numpy as np
import pytest
import torch
from toyspt.theory import geometry as geo
from toyspt.theory import onehead as oh
from toyspt.theory import t2_blindness as t2

from toyspt.data import directions as dr


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


def test_blind_cos_bound_holds_and_is_not_vacuous():
    T, B = 10, 16
    cfg, p, X, y = t2._instances(T, B, seed=4)
    S = t2.identical_row_scores(B, T, seed=5)
    G = oh.score_grad(lambda s: oh.label_losses(p, X, y, s), S)
    A, Gam = t2.label_pattern_grad(p, X, y, S)
    # the softmax backward identity the bound is built on: G = A o (Gamma - rowsum(A o Gamma))
    assert torch.allclose(G, A * (Gam - (A * Gam).sum(-1, keepdim=True)), rtol=0, atol=1e-15)
    bound = geo.blind_cos_bound(G, A * Gam.abs(), t2._n_upstream(T, cfg.d, cfg.n_classes))
    D = dr.direction("circ_w2", T)
    assert (geo.cosine(G, D).abs() <= bound["per_example"]).all()
    assert bound["per_example"].max() < 1e-12 and bound["batch"] < 1e-11
    # a planted error of relative size 1e-11 along the blind direction exceeds the bound
    Gp = G + 1e-11 * torch.linalg.matrix_norm(G)[:, None, None] * dr.normalise(D)
    assert (geo.cosine(Gp, D).abs() > bound["per_example"]).all()


def test_toy_blind_check_catches_a_planted_gradient_error(monkeypatch):
    import dataclasses

    from toyspt.theory import toy
    real = toy.layer_probe

    def planted(model, batch, loss="label", directions=("circ_w1",)):
        lp = real(model, batch, loss, directions)
        G = lp.per_example.G
        D = dr.normalise(dr.direction("circ_w1", G.shape[-1]))
        bad = G + 1e-11 * torch.linalg.matrix_norm(G)[..., None, None] * D
        return dataclasses.replace(lp, per_example=dataclasses.replace(lp.per_example, G=bad))

    monkeypatch.setattr(toy, "layer_probe", planted)
    r = t2.check_toy_blind(quick=True)
    assert r.verdict == "fail" and r.figure > 1.0


def test_toy_blind_negative_control():
    r = t2.check_toy_blind(quick=True, kinds=("toep_w1",))
    assert r.verdict == "fail" and r.figure > 1e6


def test_power_fit_recovers_exponent():
    x = np.array([8, 16, 32, 64.0])
    slope, se = t2.power_fit(x, 3 * x ** -1.5, 0.01 * 3 * x ** -1.5)
    assert slope == pytest.approx(-1.5, abs=1e-9) and se > 0


def test_circulant_bound_module(capsys):
    from toyspt.theory import circulant_bound as cb
    assert cb.main(["--seeds", "0", "--n", "16"]) == 0
    assert "every cosine within its bound: True" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cb.main(["--n", "0"])
