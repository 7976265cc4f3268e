"""T1: mean pooling sees only column means (and the check can fail)."""

from toyspt.theory import t1_pooling as t1


def test_symbolic_identity():
    assert t1.symbolic_pooling(3)


def test_symbolic_derivation_rejects_planted_errors():
    # last-token pooling and a non-affine per-token map: z then sees more of A than c(A)
    assert not t1.symbolic_pooling(3, weights=(0, 0, 1))
    assert not t1.symbolic_pooling(3, weights=(0.2, 0.3, 0.5))
    assert not t1.symbolic_pooling(3, square=True)


def test_pooling_check_reports_a_planted_symbolic_error(monkeypatch):
    real = t1.symbolic_pooling
    monkeypatch.setattr(t1, "symbolic_pooling", lambda T: real(T, weights=[0] * (T - 1) + [1]))
    r = t1.check_pooling(quick=True)
    assert r.symbolic == "fails" and r.verdict == "fail"


def test_balanced_perturbation_keeps_row_and_column_sums():
    E = t1.balanced_perturbation(4, 6, seed=0)
    assert E.sum(-1).abs().max() < 1e-12 and E.sum(-2).abs().max() < 1e-12
    Ev = t1.balanced_perturbation(4, 6, seed=0, visible=True)
    assert Ev.sum(-1).abs().max() < 1e-12 and Ev.sum(-2).abs().max() > 1e-3


def test_pooling_check_passes_and_negative_control_fails():
    ok = t1.check_pooling(quick=True)
    assert ok.verdict == "pass" and ok.symbolic == "holds"
    bad = t1.check_pooling(quick=True, visible=True)  # column means changed: the loss moves
    assert bad.verdict == "fail" and bad.figure > 1e3 * bad.tolerance


def test_toy_model_t1_setting_and_default():
    r = t1.check_pooling_toy(quick=True)
    assert r.verdict == "pass", r.checked
    m = t1.measure_pooling_default(quick=True)
    assert m.verdict == "measured"
    # the default model has an MLP and a final LayerNorm: T1 does not hold there
    assert m.figure > 1e3 * r.tolerance
