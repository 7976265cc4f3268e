"""T1 - mean pooling sees only column means.

If everything between the head output O = A V and the logits is affine per token and the
tokens are mean-pooled, the pooled vector is z = c(A)^T V W_O + (terms without A) with
c(A) = A^T 1 / T, so the label loss depends on the T x T matrix A only through c.

Checks: a sympy derivation with symbolic A, V, W_O, bias and residual (T = 2..5): z is
built token by token, the last row of A is eliminated through the column sums, and no entry
of A may survive; on random float64 instances of the analysed head, a perturbation
A -> A + E with zero row *and* column sums (c and the row sums of A unchanged) leaves the
loss unchanged to rounding; the same on the real toy
model in the T1 setting (perturbation added at ``hook_pattern``); on the default toy model
(MLP + final LayerNorm) the change is reported as a measured figure.
"""
from __future__ import annotations

import sympy as sp
import torch

from . import onehead as oh
from . import toy
from .result import U64, Result, checked_result, measured_result, rounding_tol

STATEMENT = "z = (1/T) 1^T (A V W_O) = c(A)^T V W_O,  c(A) = A^T 1 / T: L depends on A only via c"


def symbolic_pooling(T: int, d: int = 2, weights=None, square: bool = False) -> bool:
    """Derives T1 for symbolic A (T x T), X, V (T x d), W_O (d x d) and bias b: z is built
    token by token (O = A V, Y_i = O_i W_O + b + X_i, z = sum_i w_i Y_i with w_i = 1/T),
    then the last row of A is eliminated through the column sums, A_(T-1)j = T c_j -
    sum_(i<T-1) A_ij. Holds iff the result contains no entry of A (z depends on A only
    through c) and equals the independently written c^T V W_O + b + mean_i X_i.

    ``weights`` (pooling weights other than 1/T) and ``square`` (Y_i squared entrywise, not
    affine) are planted errors for the tests: the derivation must then fail."""
    A = sp.Matrix(T, T, lambda i, j: sp.Symbol(f"a{i}_{j}"))
    X = sp.Matrix(T, d, lambda i, k: sp.Symbol(f"x{i}_{k}"))
    V = sp.Matrix(T, d, lambda i, k: sp.Symbol(f"v{i}_{k}"))
    W = sp.Matrix(d, d, lambda k, m: sp.Symbol(f"w{k}_{m}"))
    b = sp.Matrix(1, d, lambda _, k: sp.Symbol(f"b{k}"))
    c = sp.Matrix(T, 1, lambda j, _: sp.Symbol(f"c{j}"))
    w = [sp.Rational(1, T)] * T if weights is None else [sp.nsimplify(v) for v in weights]
    if len(w) != T:
        raise ValueError(f"weights: need {T} pooling weights, got {len(w)}")
    z = sp.zeros(1, d)
    for i in range(T):  # token by token: nothing here mentions c
        O_i = sp.Matrix(1, d, lambda _, k: sum(A[i, j] * V[j, k] for j in range(T)))
        Y_i = O_i * W + b + X[i, :]
        if square:
            Y_i = Y_i.applyfunc(lambda e: e ** 2)
        z += w[i] * Y_i
    last = {A[T - 1, j]: T * c[j] - sum(A[i, j] for i in range(T - 1)) for j in range(T)}
    z_c = z.subs(last).applyfunc(sp.expand)
    if z_c.free_symbols & set(A):
        return False  # some entry of A survives: z sees more of A than its column means
    predicted = c.T * V * W + b + sp.ones(1, T) * X / T
    return all(sp.expand(e) == 0 for e in (z_c - predicted))


def balanced_perturbation(B: int, T: int, seed: int, visible: bool = False) -> torch.Tensor:
    """E (B, T, T) with zero row sums and zero column sums (P R P, P the centring matrix);
    with ``visible`` only the row sums are zero, so the column means of A change."""
    g = torch.Generator().manual_seed(seed)
    R = torch.randn(B, T, T, generator=g, dtype=oh.DTYPE)
    P = torch.eye(T, dtype=oh.DTYPE) - 1.0 / T
    return R @ P if visible else P @ R @ P


def check_pooling(quick: bool = False, visible: bool = False) -> Result:
    """T1.1: symbolic identity + loss invariance under column-mean-preserving changes of A.

    ``visible=True`` perturbs the column means instead (the claim then must fail: a
    negative control showing the check can fail)."""
    Ts = range(2, 5) if quick else range(2, 6)
    sym = "holds" if all(symbolic_pooling(T) for T in Ts) else "fails"
    cfg = oh.OneHeadConfig(T=12, d=6)
    p = oh.init_params(cfg)
    X, y = oh.sample_tokens(cfg, 64, seed=1)
    g = torch.Generator().manual_seed(2)
    A = torch.softmax(torch.randn(64, cfg.T, cfg.T, generator=g, dtype=oh.DTYPE), dim=-1)
    E = balanced_perturbation(64, cfg.T, seed=3, visible=visible)
    E = 0.5 * E * (A.amin() / E.abs().amax())  # keeps A + E entrywise positive
    ce = torch.nn.functional.cross_entropy
    with torch.no_grad():
        z0 = oh.label_logits(p, X, A)
        L0 = ce(z0, y, reduction="none")
        L1 = ce(oh.label_logits(p, X, A + E), y, reduction="none")
    scale = 1.0 + z0.abs().amax().item()
    resid = ((L1 - L0).abs() / scale).amax().item()
    # the loss is a chain of reductions: X W_V (d terms), A V (T), (.) W_O (d), mean over
    # tokens (T), (.) W_c (d), log-sum-exp (n_classes): n = 3d + 2T + C terms in total,
    # and two evaluations are differenced.
    tol = rounding_tol(2 * (3 * cfg.d + 2 * cfg.T + cfg.n_classes))
    return checked_result(
        "T1.1", STATEMENT,
        f"sympy T={Ts.start}..{Ts.stop - 1}: z built token by token, A's last row eliminated "
        f"via c leaves no entry of A and gives c^T V W_O + b + mean X; |L(A+E)-L(A)|/(1+max|z|) "
        f"over 64 random instances, E with zero row+column sums"
        f"{' (NEGATIVE CONTROL: column sums changed)' if visible else ''}",
        sym, resid, "max rel. change", tol, "le",
        f"float64: 10 x n u with n = 2(3d+2T+C) = {2 * (3 * cfg.d + 2 * cfg.T + cfg.n_classes)} "
        "reduction terms (Higham gamma_n per sum, two losses differenced)",
        perturbation_size=E.abs().amax().item(), unit_roundoff=U64)


def check_pooling_toy(quick: bool = False) -> Result:
    """T1.2: the real toy model in the T1 setting: logits unchanged by a balanced change of
    the attention pattern (added at hook_pattern)."""
    T = 12 if quick else 24
    model = toy.toy_model(toy.T1_MODEL, seed=0)
    x = toy.toy_batch(T, 32, seed=0)["x"]
    E = balanced_perturbation(32, T, seed=4)
    E = 0.5 * E / (T * E.abs().amax())  # uniform A = 1/T: A + E stays positive
    with torch.no_grad():
        z0 = model.classify(x)
    z1 = toy.logits_with_pattern(model, x, E)
    resid = ((z1 - z0).abs().amax() / (1.0 + z0.abs().amax())).item()
    d = model.cfg.d_model
    # embed (d_in+1 terms), A V (T), W_V, W_O, mean pooling (T), head (d): n = 3d + 2T + 3,
    # two evaluations differenced.
    n = 2 * (3 * d + 2 * T + model.cfg.d_in + 1)
    return checked_result(
        "T1.2", "toy model, T1 setting (d_mlp=0, final_norm=False): logits depend on A only via c(A)",
        f"max |logits(A+E)-logits(A)|/(1+max|logits|), 32 task sequences, T={T}, E at hook_pattern "
        "with zero row+column sums", "n.a.", resid, "max rel. change", rounding_tol(n), "le",
        f"float64: 10 x n u, n = 2(3 d_model + 2T + d_in + 1) = {n} reduction terms")


def measure_pooling_default(quick: bool = False) -> Result:
    """T1.3: the default toy model (MLP + final LayerNorm) is not in the T1 setting: measure
    how much the same balanced pattern change moves its logits."""
    T = 12 if quick else 24
    model = toy.toy_model(toy.DEFAULT_UNIFORM, seed=0)
    x = toy.toy_batch(T, 32, seed=0)["x"]
    E = balanced_perturbation(32, T, seed=4)
    E = 0.5 * E / (T * E.abs().amax())
    with torch.no_grad():
        z0 = model.classify(x)
    z1 = toy.logits_with_pattern(model, x, E)
    Ev = balanced_perturbation(32, T, seed=4, visible=True)
    Ev = 0.5 * Ev / (T * Ev.abs().amax())
    zv = toy.logits_with_pattern(model, x, Ev)
    resid = ((z1 - z0).abs().amax() / (1.0 + z0.abs().amax())).item()
    vis = ((zv - z0).abs().amax() / (1.0 + z0.abs().amax())).item()
    return measured_result(
        "T1.3", "default toy model (MLP + final LayerNorm): T1 is not expected to hold",
        f"same balanced change of A as T1.2 (T={T}); for scale, a column-changing E moves the "
        f"logits by {vis:.2e}", resid, "measured rel. change",
        column_changing_change=vis)


CHECKS = [check_pooling, check_pooling_toy, measure_pooling_default]

__all__ = ["check_pooling", "check_pooling_toy", "measure_pooling_default", "symbolic_pooling",
           "balanced_perturbation", "CHECKS"]
