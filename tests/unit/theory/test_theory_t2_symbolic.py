"""T2's symbolic statements: row identity, the blind dimension, kappa of symbolic directions."""
import pytest
from toyspt.theory import t2_symbolic as t2s


def test_symbolic_row_identity_and_uniform_form():
    assert t2s.symbolic_row_identity(3) == (True, True)


@pytest.mark.parametrize("T", [2, 3, 5])
def test_blind_dimension(T):
    assert t2s.symbolic_blind_dim(T) == T * T - (T - 1)


@pytest.mark.parametrize("kind,zero", [("circ_w1", True), ("toep_w1", False), ("column_s0", False)])
def test_symbolic_kappa_zero_only_for_circulant(kind, zero):
    assert t2s.symbolic_kappa_zero(kind, 4) is zero
