"""The result record every theory check returns, and the float64 tolerance arithmetic.

A check states a claim, says what it computed, and reports a symbolic verdict (``holds``,
``fails`` or ``n.a.``), one number (a residual that should be ~0, a margin that should be
large, or a measured figure), the tolerance it was held to and *why* that tolerance.

Verdicts: ``pass`` / ``fail`` for claims that are checked; ``measured`` for empirical
figures that are reported, not proved (they never fail the report); ``error`` when the
check itself raised.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

U64 = 2.0 ** -53  # unit roundoff of IEEE float64 (half the machine epsilon), ~1.1e-16

SYMBOLIC = ("holds", "fails", "n.a.")
VERDICTS = ("pass", "fail", "measured", "error")
SENSES = ("le", "ge", "none")


@dataclass(frozen=True)
class Result:
    check: str  # check id, e.g. "T2.3"; the part before the dot is the claim family
    statement: str  # the claim, in one line of mathematics
    checked: str  # what was actually computed
    symbolic: str  # holds | fails | n.a. (sympy verdict, exact arithmetic)
    figure: float | None  # residual (should be small), margin (should be large) or measured value
    figure_kind: str  # what the figure is, e.g. "rel. residual", "exponent", "measured"
    tolerance: float | None  # the bound the figure is held to (None for measured rows)
    sense: str  # "le": pass iff figure <= tolerance; "ge": pass iff figure >= tolerance; "none"
    tolerance_why: str  # why this tolerance (float64 rounding / statistics argument)
    verdict: str  # pass | fail | measured | error
    details: tuple[tuple[str, Any], ...] = field(default=())  # extra named figures (JSON-able)

    def __post_init__(self):
        if self.symbolic not in SYMBOLIC:
            raise ValueError(f"symbolic: must be one of {SYMBOLIC}, got {self.symbolic!r}")
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict: must be one of {VERDICTS}, got {self.verdict!r}")
        if self.sense not in SENSES:
            raise ValueError(f"sense: must be one of {SENSES}, got {self.sense!r}")

    @property
    def claim(self) -> str:
        """The claim family, e.g. ``T2``."""
        return self.check.split(".")[0]

    @property
    def failed(self) -> bool:
        return self.verdict in ("fail", "error")

    def detail(self, key: str) -> Any:
        for k, v in self.details:
            if k == key:
                return v
        raise KeyError(f"result {self.check} has no detail {key!r}; it has {[k for k, _ in self.details]}")

    def to_dict(self) -> dict[str, Any]:
        return dict(check=self.check, claim=self.claim, statement=self.statement,
                    checked=self.checked, symbolic=self.symbolic, figure=_num(self.figure),
                    figure_kind=self.figure_kind, tolerance=_num(self.tolerance), sense=self.sense,
                    tolerance_why=self.tolerance_why, verdict=self.verdict,
                    details={k: _jsonable(v) for k, v in self.details})


def _num(x):
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else str(x)


def _jsonable(v):
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, int):
        return v
    try:
        return _num(float(v))
    except (TypeError, ValueError):
        return str(v)


def decide(symbolic: str, figure: float | None, tolerance: float | None, sense: str) -> str:
    """pass iff the symbolic verdict is not ``fails`` and the figure meets its tolerance."""
    if symbolic == "fails":
        return "fail"
    if sense == "none" or tolerance is None:
        return "pass" if symbolic == "holds" else "fail"
    if figure is None or not math.isfinite(figure):
        return "fail"
    ok = figure <= tolerance if sense == "le" else figure >= tolerance
    return "pass" if ok else "fail"


def checked_result(check: str, statement: str, checked: str, symbolic: str,
                   figure: float | None, figure_kind: str, tolerance: float | None, sense: str,
                   why: str, **details) -> Result:
    """A claim that must hold: the verdict is computed by :func:`decide`."""
    return Result(check, statement, checked, symbolic, None if figure is None else float(figure),
                  figure_kind, tolerance, sense, why, decide(symbolic, figure, tolerance, sense),
                  tuple(details.items()))


def measured_result(check: str, statement: str, checked: str, figure: float | None,
                    figure_kind: str, symbolic: str = "n.a.", **details) -> Result:
    """An empirical figure, reported and never failed."""
    return Result(check, statement, checked, symbolic, None if figure is None else float(figure),
                  figure_kind, None, "none", "measured, not proved: no tolerance", "measured",
                  tuple(details.items()))


def error_result(check: str, exc: BaseException) -> Result:
    return Result(check, "(check raised)", f"{type(exc).__name__}: {exc}", "n.a.", None, "error",
                  None, "none", "the check itself failed to run", "error")


def rounding_tol(n_terms: int, scale: float = 1.0, safety: float = 10.0) -> float:
    """Float64 bound for a quantity built from reductions with ``n_terms`` terms in total.

    Higham's bound for a recursive sum or dot product of n terms is gamma_n = n u / (1 - n u)
    ~ n u relative to the sum of |terms|; chained reductions add their counts. ``safety``
    (10) covers the handful of elementwise ops (exp, log, divide) each costing <= 1 u.
    """
    if n_terms <= 0:
        raise ValueError(f"n_terms must be positive, got {n_terms}")
    return safety * n_terms * U64 * scale


FD_STEP = U64 ** (1.0 / 3.0) * 4  # ~1.9e-5: balances h^2 truncation against u/h rounding


def fd_agreement(auto, fd_h, fd_2h, f_scale, h: float = FD_STEP) -> float:
    """max over examples of |autograd - FD(h)| / tol: <= 1 means they agree to the accuracy
    a central difference can certify (arrays or tensors of equal shape).

    The central difference has truncation error c h^2 (c ~ third derivative / 6) and
    rounding error ~ u |f| / h. With steps h and 2h the truncation errors are c h^2 and
    4 c h^2, so |FD(h) - FD(2h)| ~ 3 c h^2 bounds the truncation at h with a margin of 3;
    the rounding term is taken 10x (several ops per evaluation of f):
    tol = |FD(h) - FD(2h)| + 10 u |f| / h.
    """
    import numpy as np

    a, f1, f2, fs = (np.asarray(v, dtype=np.float64) for v in (auto, fd_h, fd_2h, f_scale))
    tol = np.abs(f1 - f2) + 10.0 * U64 * np.maximum(np.abs(fs), 1.0) / h
    return float(np.max(np.abs(a - f1) / tol))


__all__ = ["Result", "U64", "decide", "checked_result", "measured_result", "error_result",
           "rounding_tol", "fd_agreement", "FD_STEP", "SYMBOLIC", "VERDICTS"]
