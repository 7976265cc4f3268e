"""The result record and the tolerance arithmetic of theory checks."""
import json
import math

import numpy as np
import pytest
from toyspt.theory.result import (
    U64,
    Result,
    checked_result,
    decide,
    error_result,
    fd_agreement,
    measured_result,
    rounding_tol,
)


def test_decide_le_ge_and_symbolic():
    assert decide("holds", 1e-16, 1e-13, "le") == "pass"
    assert decide("holds", 1e-12, 1e-13, "le") == "fail"
    assert decide("n.a.", 0.5, 1e-3, "ge") == "pass"
    assert decide("n.a.", 1e-9, 1e-3, "ge") == "fail"
    # a symbolic failure fails whatever the number says
    assert decide("fails", 0.0, 1.0, "le") == "fail"
    # non-finite or missing figures never pass
    assert decide("holds", float("nan"), 1.0, "le") == "fail"
    assert decide("holds", math.inf, 1.0, "le") == "fail"
    assert decide("holds", None, 1.0, "le") == "fail"
    assert decide("holds", None, None, "none") == "pass"


def test_result_validates_fields():
    with pytest.raises(ValueError, match="symbolic"):
        Result("T9.1", "s", "c", "maybe", 0.0, "k", 0.0, "le", "w", "pass")
    with pytest.raises(ValueError, match="verdict"):
        Result("T9.1", "s", "c", "holds", 0.0, "k", 0.0, "le", "w", "ok")
    with pytest.raises(ValueError, match="sense"):
        Result("T9.1", "s", "c", "holds", 0.0, "k", 0.0, "lt", "w", "pass")


def test_records_are_frozen_and_json_able():
    r = checked_result("T9.2", "stmt", "what", "holds", np.float64(2e-16), "resid", 1e-13, "le",
                       "why", arr=[np.float64(1.0), math.inf], nested={"a": np.int64(3)})
    assert r.claim == "T9" and r.verdict == "pass" and not r.failed
    with pytest.raises(Exception):
        r.figure = 1.0  # frozen
    d = json.loads(json.dumps(r.to_dict(), allow_nan=False))
    assert d["details"]["arr"] == [1.0, "inf"] and d["details"]["nested"]["a"] == 3
    assert r.detail("arr")[0] == 1.0
    with pytest.raises(KeyError, match="no detail"):
        r.detail("missing")
    m = measured_result("T9.3", "s", "c", 0.5, "measured")
    assert m.verdict == "measured" and not m.failed and m.tolerance is None
    e = error_result("T9.4", RuntimeError("boom"))
    assert e.failed and "boom" in e.checked


def test_rounding_tol_scales_with_terms():
    assert rounding_tol(10) == pytest.approx(100 * U64)
    assert rounding_tol(10, scale=3.0) == pytest.approx(300 * U64)
    with pytest.raises(ValueError):
        rounding_tol(0)


def test_fd_agreement_detects_a_wrong_derivative():
    # f(x) = x^3 at x = 1: f' = 3; FD with h and 2h
    h = 1e-5
    fd = lambda hh: ((1 + hh) ** 3 - (1 - hh) ** 3) / (2 * hh)  # noqa: E731
    assert fd_agreement([3.0], [fd(h)], [fd(2 * h)], [1.0], h) <= 1.0
    assert fd_agreement([3.0 * (1 + 1e-6)], [fd(h)], [fd(2 * h)], [1.0], h) > 1.0
