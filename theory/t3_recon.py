"""T3 - masked reconstruction is not blind, and the sign of what it sees.

General head (checked on the analysed one-head model, T3.1/T3.2): at uniform attention
(S = 0, A = 1 1^T / T) a change S -> S + tD moves A by dA_mj = D~_mj / T with
D~ = row_centre(D), so

    dL_rec[D] = (2/|M|) sum_{m in M} (1/T) sum_j D~_mj <J_m^T (yhat_m - x_m), v_j>,

where v_j is the value of token j (after W_O) and J_m the Jacobian of yhat_m with respect to
the head output of row m. Every row of D enters separately, so circulant directions are
seen; the gradient has a blind component of order one.

Scalar AR(1) model (T3.3-T3.6), exactly what is analysed:

* x = (x_0..x_{T-1}) zero mean, E x_i x_j = C_ij = rho^|i-j| (e.g. a Gaussian AR(1));
* a mask m in {0,1}^T independent of x; the masked token's *value* is 0:
  x~_i = (1 - m_i) x_i (no mask embedding, no residual);
* the scores S are the variables and the derivative is taken at S = 0, so how queries and
  keys are formed (the masked token's indicator included) does not enter;
* yhat_i = beta sum_j A_ij x~_j, one scalar value/readout gain beta (value, output and
  readout maps multiplied together);
* L_rec = (1/|M|) sum_{m in M} (yhat_m - x_m)^2 (squared error; the toy runs use L1).

Two mask laws: ``iid`` Bernoulli(q) with 1/|M| replaced by its "expected count" 1/(qT); and
``sample_mask`` (toyspt.tasks.sample_mask): Bernoulli(q), an empty mask replaced by one
uniformly chosen position, normalised by 1/|M|. Both give (derivation in the README)

    E dL_rec[D] = (2 beta / T^2) sum_m sum_j D_mj (h_m(j) - mean_j' h_m(j')),
    h_m(m) = 0,  h_m(j) = (beta/T) (p1 + p2 (S_j - 1 - C_mj)) - p1 C_mj   (j != m),

with S_j = sum_k C_kj, p1 = E[(1-m_j) m_m / |M|] T (j != m) and
p2 = E[(1-m_j)(1-m_k) m_m / |M|] T (j, k, m distinct): ``iid`` p1 = 1 - q, p2 = (1-q)^2;
``sample_mask`` p1 = sum_n w_n (T-n)/(T-1), p2 = sum_n w_n (T-n)(T-n-1)/((T-1)(T-2)),
w_n the law of |M|.

Along the neighbour direction N_ij = 1[|i - j| = 1] it is a quadratic in beta,
E dL_rec[N] = beta (P beta - Q), with (S^ = sum_ij C_ij, S_0 = sum_k C_0k)

    Q = (2 p1 / T^2) [2 (T-1) rho - (2/T)(S^ - S_0 - (T-1))],
    P = (2/T^3) [2(T-1)(p1 - p2(1+rho)) + 2 p2 (S^ - S_0)
                 - (2(T-1)/T)((T-1)(p1-p2) + p2 (S^ + 1)) + (4 p2 / T)(S^ - S_0)],
    S^ = T (1+rho)/(1-rho) - 2 rho (1 - rho^T)/(1-rho)^2,  S_0 = (1 - rho^T)/(1 - rho).

Q has the sign of rho (each row contributes r_m (rho - (1/T) sum_{j != m} rho^|m-j|), with
r_m the row sum of N). More proximity lowers the expected loss iff beta (P beta - Q) < 0:
for rho > 0 the roots are 0 and beta* = Q / P, so the sign flips (an "anti-local" gradient)
when beta < 0 while beta > beta* (P < 0, long sequences, beta* ~ -T p1/p2), or when
beta < 0 or beta > beta* > 0 (P > 0: short sequences or rho near 1).
"""
from __future__ import annotations

import itertools
import math
import warnings

import sympy as sp
import torch
from torch.func import jvp

from toyspt import directions as dr
from toyspt import probes
from toyspt.tasks import sample_mask

from . import geometry as geo
from . import onehead as oh
from . import toy
from .result import (FD_STEP, Result, checked_result, fd_agreement, measured_result,
                     rounding_tol)

rho, q, beta = sp.symbols("rho q beta", real=True)
p1s, p2s = sp.symbols("p1 p2", positive=True)
Tsym = sp.Symbol("T", integer=True, positive=True)
LAWS = ("iid", "sample_mask")


# ---------------------------------------------------------------------------------------
# the closed form

def mask_moments(law: str, T: int, qv=q):
    """(p1, p2) of a mask law (sympy expressions in q, or numbers when qv is a number)."""
    if law == "iid":
        return 1 - qv, (1 - qv) ** 2
    if law != "sample_mask":
        raise ValueError(f"mask law: choose one of {LAWS}, got {law!r}")
    w = {n: sp.binomial(T, n) * qv ** n * (1 - qv) ** (T - n) for n in range(1, T + 1)}
    w[1] = w[1] + (1 - qv) ** T  # an empty mask becomes one uniformly chosen position
    p1 = sum(w[n] * sp.Rational(T - n, T - 1) for n in w)
    p2 = 0 if T < 3 else sum(w[n] * sp.Rational((T - n) * (T - n - 1), (T - 1) * (T - 2)) for n in w)
    return p1, p2


def expected_drec(D, rv, bv, p1, p2):
    """E dL_rec[D] by the explicit sum (any T); D is a T x T nested sequence or matrix and
    rv, bv, p1, p2 are numbers or sympy expressions."""
    D = D.tolist() if hasattr(D, "tolist") else D  # sympy/numpy/torch -> nested lists
    T = len(D)
    C = [[rv ** abs(i - j) for j in range(T)] for i in range(T)]
    Scol = [sum(C[k][j] for k in range(T)) for j in range(T)]
    total = 0
    for m in range(T):
        h = [0 if j == m else (bv / T) * (p1 + p2 * (Scol[j] - 1 - C[m][j])) - p1 * C[m][j]
             for j in range(T)]
        hbar = sum(h) / T
        total += sum(D[m][j] * (h[j] - hbar) for j in range(T))
    return 2 * bv * total / T ** 2


def neighbour_PQ(T, rv=rho, p1=p1s, p2=p2s):
    """(P, Q) of E dL_rec[N] = beta (P beta - Q) in closed form; T may be a sympy Symbol."""
    Sh = T * (1 + rv) / (1 - rv) - 2 * rv * (1 - rv ** T) / (1 - rv) ** 2
    S0 = (1 - rv ** T) / (1 - rv)
    Q = 2 * p1 / T ** 2 * (2 * (T - 1) * rv - 2 * (Sh - S0 - (T - 1)) / T)
    P = 2 / T ** 3 * (2 * (T - 1) * (p1 - p2 * (1 + rv)) + 2 * p2 * (Sh - S0)
                      - 2 * (T - 1) / T * ((T - 1) * (p1 - p2) + p2 * (Sh + 1))
                      + 4 * p2 / T * (Sh - S0))
    return P, Q


def neighbours(T: int) -> list[list[int]]:
    return [[1 if abs(i - j) == 1 else 0 for j in range(T)] for i in range(T)]


def expected_loss_uniform(T: int, rv, bv, p1, p2):
    """E L_rec at uniform attention (S = 0): (1/T) sum_m [(b/T)^2 (sum_{k != m} p1 +
    sum_{k != l; k, l != m} p2 C_kl) - 2 (b/T) sum_{k != m} p1 C_km + 1]."""
    C = [[rv ** abs(i - j) for j in range(T)] for i in range(T)]
    tot = 0
    for m in range(T):
        sq = (T - 1) * p1 + p2 * sum(C[k][l] for k in range(T) for l in range(T)
                                     if k != l and m not in (k, l))
        cross = p1 * sum(C[k][m] for k in range(T) if k != m)
        tot += (bv / T) ** 2 * sq - 2 * (bv / T) * cross + 1
    return tot / T


def optimal_gain(T: int, rv, p1, p2):
    """The gain minimising :func:`expected_loss_uniform` (a quadratic in beta)."""
    C = [[rv ** abs(i - j) for j in range(T)] for i in range(T)]
    num = sum(p1 * C[k][m] for m in range(T) for k in range(T) if k != m)
    den = sum((T - 1) * p1 + p2 * sum(C[k][l] for k in range(T) for l in range(T)
                                      if k != l and m not in (k, l)) for m in range(T))
    return T * num / den


def flip_point(T: int, rv: float, law: str, qv: float) -> dict:
    """P, Q, beta* = Q/P, which betas give an anti-local expected gradient, and for scale
    the MSE-optimal gain at uniform attention."""
    p1, p2 = (float(v) for v in mask_moments(law, T, qv))
    P, Q = (float(v) for v in neighbour_PQ(T, rv, p1, p2))
    bstar = Q / P if P != 0 else math.inf
    if P > 0:
        anti = f"beta < 0 or beta > {bstar:.4g}"
    elif P < 0:
        anti = f"{bstar:.4g} < beta < 0"
    else:
        anti = "beta < 0"
    return dict(T=T, rho=rv, q=qv, law=law, P=P, Q=Q, beta_star=bstar, anti_local_when=anti,
                beta_opt=optimal_gain(T, rv, p1, p2))


# ---------------------------------------------------------------------------------------
# independent symbolic derivation (brute force over masks, exact expectation over x)

def brute_expected_drec(T: int, law: str, D: sp.Matrix | None = None) -> sp.Expr:
    """E dL_rec[D] by sympy: the softmax derivative of tD at t = 0 is differentiated, every
    mask of the law is enumerated with its probability and normalisation, and E over x
    replaces x_i x_j by rho^|i-j|. Independent of :func:`expected_drec`."""
    if D is None:
        D = sp.Matrix(T, T, lambda i, j: sp.Symbol(f"d{i}_{j}"))
    t = sp.Symbol("t")
    x = sp.symbols(f"x0:{T}")
    dA = [[sp.diff(sp.exp(t * D[m, j]) / sum(sp.exp(t * D[m, k]) for k in range(T)), t).subs(t, 0)
           for j in range(T)] for m in range(T)]
    total = 0
    for mask in itertools.product((0, 1), repeat=T):
        n = sum(mask)
        if n == 0:
            continue  # contributes nothing (iid: no masked term; sample_mask: redistributed)
        prob = q ** n * (1 - q) ** (T - n)
        if law == "iid":
            norm = 1 / (q * T)
        else:
            norm = sp.Rational(1, n)
            if n == 1:
                prob = prob + (1 - q) ** T / T
        xt = [(1 - mask[j]) * x[j] for j in range(T)]
        dL = 0
        for m in range(T):
            if mask[m]:
                yhat = beta * sum(xt) / T
                dL += 2 * (yhat - x[m]) * beta * sum(dA[m][j] * xt[j] for j in range(T))
        poly = sp.Poly(sp.expand(norm * dL), *x)
        Ex = 0
        for powers, coeff in poly.terms():
            if sum(powers) == 0:  # the zero polynomial (no masked row sees an unmasked key)
                continue
            idx = [i for i, pw in enumerate(powers) for _ in range(pw)]
            Ex += coeff * rho ** abs(idx[0] - idx[1])
        total += prob * Ex
    return sp.expand(total)


def _mask_weights(T: int, qv: float, law: str) -> tuple[torch.Tensor, torch.Tensor]:
    """All non-empty masks (K, T) and their weights under ``law``: the Bernoulli(q)
    probability, times |M| / (qT) for ``iid`` (scalar_losses divides by |M|), plus
    (1-q)^T / T on single-position masks for ``sample_mask`` (the empty mask's share)."""
    if law not in LAWS:
        raise ValueError(f"mask law: choose one of {LAWS}, got {law!r}")
    masks = torch.tensor(list(itertools.product((0, 1), repeat=T))[1:], dtype=torch.bool)
    n = masks.sum(-1).to(torch.float64)
    w = qv ** n * (1 - qv) ** (T - n)
    if law == "iid":
        return masks, w * n / (qv * T)
    return masks, w + (n == 1).to(torch.float64) * (1 - qv) ** T / T


def autograd_expected_drec(D: torch.Tensor, rv: float, qv: float, betas, laws=LAWS
                           ) -> tuple[torch.Tensor, torch.Tensor]:
    """E dL_rec[D] in float64 without the closed form, for each (law, beta): every non-empty
    mask is enumerated with its weight (:func:`_mask_weights`), dL_rec[D] is taken by autograd
    of :func:`scalar_losses` at S = 0, and since it is a quadratic form in x with no linear or
    constant part, E over x = tr(H C) / 2 with H its Hessian in x (torch.func) and
    C_ij = rho^|i-j|. Returns (values, sums of |H_ij C_ij| / 2: the scale of their rounding),
    each of shape (len(laws), len(betas))."""
    from torch.func import grad, hessian

    T = D.shape[0]
    mw = [_mask_weights(T, qv, law) for law in laws]
    masks = mw[0][0]
    W = torch.stack([w for _, w in mw])  # (laws, K)
    S0 = torch.zeros(T, T, dtype=torch.float64)

    def weighted(S, x, w, bv):  # sum over masks of w_k L_k(S)
        return (w * scalar_losses(S, x.expand(len(masks), T), masks, bv)).sum()

    def drec(x):  # (laws, betas): sum over masks of w_k dL_k[D](x), quadratic forms in x
        return torch.stack([torch.stack([(grad(weighted)(S0, x, w, bv) * D).sum() for bv in betas])
                            for w in W])

    with warnings.catch_warnings():  # torch's forward-AD decompositions load via torch.jit
        warnings.filterwarnings("ignore", message=".*torch.jit.script.*deprecated",
                                category=DeprecationWarning)
        H = hessian(drec)(torch.zeros(T, dtype=torch.float64))  # (laws, betas, T, T)
    idx = torch.arange(T, dtype=torch.float64)
    C = rv ** (idx[:, None] - idx[None, :]).abs()
    return (H * C).sum((-1, -2)) / 2, (H * C).abs().sum((-1, -2)) / 2


CF_DIRECTIONS = ("neighbours", "random_s0")  # not row-constant: E dL_rec along them is not 0


def check_closed_form(quick: bool = False) -> Result:
    """T3.3: the explicit-sum closed form equals the brute-force symbolic expectation for a
    generic symbolic D, both mask laws; numerically it equals an autograd expectation
    (:func:`autograd_expected_drec`) along directions that are not row-constant."""
    Ts = range(2, 4) if quick else range(2, 5)
    ok = True
    for T in Ts:
        D = sp.Matrix(T, T, lambda i, j: sp.Symbol(f"d{i}_{j}"))
        for law in LAWS:
            p1, p2 = mask_moments(law, T)
            ok &= sp.expand(brute_expected_drec(T, law, D) - expected_drec(D, rho, beta, p1, p2)) == 0
    # numeric: closed form vs autograd expectation, non-row-constant directions
    Tn = range(3, 6) if quick else range(3, 8)
    rv, qv = 0.7, 0.4
    betas = (1.3, -0.6)
    worst, worst_n, rows = 0.0, 1, []
    for T in Tn:
        # 2^T - 1 masks summed, T^2 Hessian entries traced, and per mask the T-term sums of
        # yhat and of the softmax backward and the T^2-term <G, D>
        n_terms = 2 ** T + 2 * T * T + 2 * T
        for name in CF_DIRECTIONS:
            D = (torch.tensor(neighbours(T), dtype=torch.float64) if name == "neighbours"
                 else dr.direction(name, T))
            auto, scale = autograd_expected_drec(D, rv, qv, betas)
            for i, law in enumerate(LAWS):
                p1, p2 = (float(v) for v in mask_moments(law, T, qv))
                for k, bv in enumerate(betas):
                    closed = float(expected_drec(D, rv, bv, p1, p2))
                    rel = abs(closed - auto[i, k].item()) / scale[i, k].item()
                    if rel / rounding_tol(n_terms) > worst / rounding_tol(worst_n):
                        worst, worst_n = rel, n_terms
                    rows.append(dict(T=T, direction=name, law=law, beta=bv, closed=closed,
                                     autograd=auto[i, k].item(), rel_gap=rel))
    tol = rounding_tol(worst_n)
    return checked_result(
        "T3.3", "E dL_rec[D] = (2b/T^2) sum_mj D_mj (h_m(j) - mean h_m),  "
        "h_m(j) = (b/T)(p1 + p2(S_j - 1 - C_mj)) - p1 C_mj",
        f"sympy: closed form - brute force (all 2^T masks, exact E over x), generic symbolic D, "
        f"laws iid and sample_mask, T={Ts.start}..{Ts.stop - 1}; float64: closed form vs "
        f"autograd (all masks, E over x = tr(Hess C)/2) along {', '.join(CF_DIRECTIONS)}, "
        f"T={Tn.start}..{Tn.stop - 1}, rho={rv}, q={qv}, beta in {betas}, both laws",
        "holds" if ok else "fails", worst, "max |closed - autograd| / scale", tol, "le",
        f"float64: 10 x n u relative to sum |H_ij C_ij| / 2, n = 2^T + 2T^2 + 2T = {worst_n} "
        "(the case with the largest gap relative to its own bound)", rows=rows)


def _sturm_positive(expr: sp.Expr) -> bool:
    """Whether a rational function of rho is positive on [0, 1]: exact (Sturm) root counts
    of numerator and denominator on [0, 1] are zero and the value at 1/2 is positive."""
    num, den = sp.cancel(sp.together(expr)).as_numer_denom()
    for part in (num, den):
        if sp.Poly(part, rho).count_roots(0, 1) != 0:
            return False
    return bool(expr.subs(rho, sp.Rational(1, 2)) > 0)


def check_neighbour_sign(quick: bool = False) -> Result:
    """T3.4: general-T closed form of E dL_rec[N] (checked against the explicit sum), Q > 0
    for 0 < rho < 1 (Sturm), and the sign at a reference point."""
    Ts = range(2, 9) if quick else range(2, 13)
    ok = True
    for T in Ts:
        e = sp.expand(expected_drec(neighbours(T), rho, beta, p1s, p2s))
        P, Q = neighbour_PQ(sp.Integer(T))
        ok &= sp.cancel(e - (P * beta ** 2 - Q * beta)) == 0
        ok &= _sturm_positive(sp.cancel(Q / (p1s * rho)))  # Q / (p1 rho) > 0 on [0, 1]
    # asymptotics: with rho^T -> 0, T Q -> 4 p1 rho and T^2 P -> -4 p2 rho
    P, Q = neighbour_PQ(Tsym)
    y = sp.Symbol("y")  # stands for rho^T
    lim_Q = sp.limit(sp.simplify((Tsym * Q).subs(rho ** Tsym, y).subs(y, 0)), Tsym, sp.oo)
    lim_P = sp.limit(sp.simplify((Tsym ** 2 * P).subs(rho ** Tsym, y).subs(y, 0)), Tsym, sp.oo)
    ok &= sp.simplify(lim_Q - 4 * p1s * rho) == 0 and sp.simplify(lim_P + 4 * p2s * rho) == 0
    # the reference point: toy-like length, 50% masks, positive gain
    ref = dict(T=32, rho=sp.Rational(4, 5), q=sp.Rational(1, 2), beta=1)
    p1, p2 = mask_moments("sample_mask", 32, ref["q"])
    Pr, Qr = neighbour_PQ(sp.Integer(32), ref["rho"], p1, p2)
    val = float(Pr - Qr)
    flips = [flip_point(T, r, "iid", 0.5) for T in (8, 32) for r in (0.5, 0.9, 0.99)]
    return checked_result(
        "T3.4", "E dL_rec[N] = beta (P beta - Q) < 0 (proximity lowers the loss) for rho > 0, "
        "0 < beta < |beta*|",
        f"sympy: closed form in T = explicit sum (T={Ts.start}..{Ts.stop - 1}); Q/(p1 rho) > 0 on "
        f"[0,1] (Sturm); T Q -> 4 p1 rho, T^2 P -> -4 p2 rho; value at T=32, rho=0.8, q=0.5, "
        f"beta=1 (sample_mask law)", "holds" if ok else "fails", val, "E dL_rec[N] at ref.",
        0.0, "le", "a sign claim, evaluated in exact rational arithmetic: must be < 0",
        flip_table=flips)


# ---------------------------------------------------------------------------------------
# numerics: scalar model

def ar1(N: int, T: int, rv: float, gen: torch.Generator) -> torch.Tensor:
    """N stationary Gaussian AR(1) sequences of length T with unit variance, float64."""
    x = torch.empty(N, T, dtype=torch.float64)
    x[:, 0] = torch.randn(N, generator=gen, dtype=torch.float64)
    eps = torch.randn(N, T, generator=gen, dtype=torch.float64) * math.sqrt(1 - rv ** 2)
    for t in range(1, T):
        x[:, t] = rv * x[:, t - 1] + eps[:, t]
    return x


def scalar_losses(S: torch.Tensor, x: torch.Tensor, mask: torch.Tensor, bv: float) -> torch.Tensor:
    """Per-sequence (1/|M|) sum_{m in M} (beta (A x~)_m - x_m)^2, A = softmax(S) (T x T)."""
    m = mask.to(x.dtype)
    yhat = bv * (x * (1 - m)) @ torch.softmax(S, dim=-1).T
    return (((yhat - x) ** 2) * m).sum(-1) / m.sum(-1)


def scalar_drec_formula(D: torch.Tensor, x: torch.Tensor, mask: torch.Tensor, bv: float
                        ) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-sequence dL_rec[D] at S = 0 by the general formula (not an expectation), and the
    sum of the absolute values of its terms (the scale its rounding error is relative to)."""
    T = x.shape[-1]
    m = mask.to(x.dtype)
    xt = x * (1 - m)
    r = bv * xt.mean(-1, keepdim=True) - x  # yhat_m - x_m at uniform attention
    Dc = dr.row_centre(D)
    dy = bv / T * xt @ Dc.T  # (B, T): (beta/T) sum_j D~_mj x~_j
    dy_abs = abs(bv) / T * xt.abs() @ Dc.abs().T
    r_abs = abs(bv) * xt.abs().mean(-1, keepdim=True) + x.abs()
    n = m.sum(-1)
    return 2 * (r * dy * m).sum(-1) / n, 2 * (r_abs * dy_abs * m).sum(-1) / n


def mc_samples(D: torch.Tensor, rv: float, qv: float, bv: float, N: int, seed: int,
               chunk: int = 50_000) -> tuple[torch.Tensor, float]:
    """N per-sequence dL_rec[D] at S = 0 by forward-mode autograd (jvp) on AR(1) data and
    toyspt.tasks.sample_mask masks (same seed, same samples), and the max gap between jvp
    and the per-sample formula relative to the formula's sum of absolute terms."""
    T = D.shape[0]
    gen = torch.Generator().manual_seed(seed)
    vals, gap = [], 0.0
    S0 = torch.zeros(T, T, dtype=torch.float64)
    for start in range(0, N, chunk):
        n = min(chunk, N - start)
        x = ar1(n, T, rv, gen)
        mask = sample_mask(n, T, qv, gen)
        with warnings.catch_warnings():  # torch's forward-AD decompositions load via torch.jit
            warnings.filterwarnings("ignore", message=".*torch.jit.script.*deprecated",
                                    category=DeprecationWarning)
            _, d = jvp(lambda S: scalar_losses(S, x, mask, bv), (S0,), (D,))
        f, scale = scalar_drec_formula(D, x, mask, bv)
        gap = max(gap, ((d - f).abs() / scale.clamp_min(1e-300)).max().item())
        vals.append(d)
    return torch.cat(vals), gap


def mc_drec(D: torch.Tensor, rv: float, qv: float, bv: float, N: int, seed: int,
            chunk: int = 50_000) -> tuple[float, float, float]:
    """Monte Carlo (mean, standard error) of dL_rec[D] (:func:`mc_samples`), and the max
    jvp/formula gap."""
    v, gap = mc_samples(D, rv, qv, bv, N, seed, chunk)
    return v.mean().item(), v.std().item() / math.sqrt(N), gap


def mc_flip_point(D: torch.Tensor, rv: float, qv: float, N: int, seed: int
                  ) -> tuple[float, float, float]:
    """Monte Carlo beta* with its standard error. Per sequence dL_rec[D] = a beta^2 - b beta
    exactly (yhat is linear in beta), so two jvps on the same samples (beta = 1, 2) give
    a = (d_2 - 2 d_1)/2 and b = (d_2 - 4 d_1)/2; beta* = mean(b) / mean(a), with the
    delta-method SE sqrt(var(b - beta* a) / N) / |mean(a)|. Also returns the jvp gap."""
    d1, g1 = mc_samples(D, rv, qv, 1.0, N, seed)
    d2, g2 = mc_samples(D, rv, qv, 2.0, N, seed)
    a, b = (d2 - 2 * d1) / 2, (d2 - 4 * d1) / 2
    est = (b.mean() / a.mean()).item()
    se = ((b - est * a).std() / math.sqrt(N) / a.mean().abs()).item()
    return est, se, max(g1, g2)


Z_MC = 4.0  # |MC - closed form| <= 4 standard errors (two-sided normal p = 6e-5)
Z_SIGN = 3.0  # an MC sign counts when |mean| > 3 SE (one-sided p = 1e-3)
FLIP_DELTA = 0.25  # the sign flip is tested at beta* (1 -/+ FLIP_DELTA)


def check_monte_carlo(quick: bool = False) -> Result:
    """T3.5: the closed form against Monte Carlo (toyspt.tasks.sample_mask, 1/|M| loss,
    jvp derivative) for positive, negative and large gains; beta* = Q/P against a Monte
    Carlo estimate; the MC sign flips between beta* (1 - delta) and beta* (1 + delta)."""
    T, rv, qv, law = 8, 0.8, 0.5, "sample_mask"
    N = 40_000 if quick else 400_000
    D = torch.tensor(neighbours(T), dtype=torch.float64)
    p1, p2 = (float(v) for v in mask_moments(law, T, qv))
    fp = flip_point(T, rv, law, qv)
    bstar = fp["beta_star"]
    if not fp["P"] > 0:
        raise ValueError(f"T3.5 needs P > 0 (a finite positive beta*), got P = {fp['P']}")
    betas = [1.0, -1.0, 2.0 * bstar, (1 - FLIP_DELTA) * bstar, (1 + FLIP_DELTA) * bstar]
    rows, worst_z, worst_gap, signs_ok = [], 0.0, 0.0, True
    for k, bv in enumerate(betas):
        exact = float(expected_drec(neighbours(T), rv, bv, p1, p2))
        mean, se, gap = mc_drec(D, rv, qv, bv, N, seed=100 + k)
        z = abs(mean - exact) / se
        worst_z, worst_gap = max(worst_z, z), max(worst_gap, gap)
        signs_ok &= (mean < 0) == (exact < 0) and abs(mean) > Z_SIGN * se
        rows.append(dict(beta=bv, closed_form=exact, mc_mean=mean, mc_se=se, z=z))
    # the sign must flip across beta* (closed form: negative below, positive above)
    below, above = rows[3], rows[4]
    flips = below["mc_mean"] < 0 < above["mc_mean"] and below["closed_form"] < 0 < above["closed_form"]
    b_mc, b_se, gap = mc_flip_point(D, rv, qv, N, seed=200)
    worst_gap = max(worst_gap, gap)
    z_star = abs(b_mc - bstar) / b_se
    # the per-sample formula must match jvp to rounding: chained sums over j, over the
    # tokens for yhat and over m, each of T terms, relative to the sum of |terms|
    tol_gap = rounding_tol(3 * T)
    fig = max(worst_z, z_star) if (worst_gap <= tol_gap and signs_ok and flips) else math.inf
    setting = (f"T={T}, E x_i x_j = rho^|i-j| with rho={rv}, mask law {law} (each position "
               f"masked i.i.d. Bernoulli(q={qv}), an empty mask replaced by one uniformly chosen "
               "position), masked values zeroed, yhat = beta A x~, loss (1/|M|) sum_masked "
               "(yhat_m - x_m)^2, S = 0, N_ij = 1[|i-j| = 1]")
    return checked_result(
        "T3.5", "closed form = E over AR(1) data and sample_mask masks; sign flips at beta* = Q/P",
        f"{setting}: beta* = Q/P = {bstar:.4g} (closed form), MC {b_mc:.4g} +- {b_se:.2g} (z = "
        f"{z_star:.2f}); MC sign at beta*(1 -/+ {FLIP_DELTA}) = {below['beta']:.3g} / "
        f"{above['beta']:.3g}: {below['mc_mean']:+.3g} +- {below['mc_se']:.2g} / "
        f"{above['mc_mean']:+.3g} +- {above['mc_se']:.2g} (closed {below['closed_form']:+.3g} / "
        f"{above['closed_form']:+.3g}), flips: {flips}; {N} sequences per beta in "
        f"{[round(b, 3) for b in betas]}: max |MC - closed|/SE; every MC sign beyond "
        f"{Z_SIGN:g} SE and as predicted: {signs_ok}; jvp vs per-sample formula gap "
        f"{worst_gap:.1e} (tol {tol_gap:.0e})", "n.a.", fig, "max z (values and beta*)",
        Z_MC, "le", f"statistical: {Z_MC:g} standard errors (p = 6e-5 two-sided) for the values "
        f"and for beta* (delta-method SE of a ratio of means); signs count beyond {Z_SIGN:g} "
        "SE; the jvp/formula gap is held to 10 x 3T u (float64)",
        rows=rows, flip=fp, beta_star_mc=b_mc, beta_star_mc_se=b_se, beta_star_z=z_star,
        sign_flips=flips, jvp_formula_gap=worst_gap)


# ---------------------------------------------------------------------------------------
# numerics: the general head

def _recon_instances(T: int, B: int, seed: int):
    cfg = oh.OneHeadConfig(T=T, d=6, d_out=2, seed=seed)
    p = oh.init_params(cfg)
    X, _ = oh.sample_tokens(cfg, B, seed=seed + 1)
    mask = oh.sample_mask(B, T, 0.5, seed=seed + 2)
    return cfg, p, X, mask


def general_formula(p: dict, X: torch.Tensor, mask: torch.Tensor, D: torch.Tensor) -> torch.Tensor:
    """Per-example (2/|M|) sum_{m in M} (1/T) sum_j D~_mj <r_m, v_j W_r> at S = 0, with
    v_j = x~_j W_V W_O and r_m = yhat_m - x_m."""
    T = X.shape[1]
    Xt = oh.masked_tokens(p, X, mask)
    A = torch.full((T, T), 1.0 / T, dtype=X.dtype)
    r = oh.recon_preds(p, Xt, A) - X[..., : p["W_r"].shape[1]]  # (B, T, d_out)
    vW = Xt @ p["W_V"] @ p["W_O"] @ p["W_r"]  # (B, T, d_out)
    inner = r @ vW.transpose(-1, -2)  # (B, m, j)
    m = mask.to(X.dtype)
    return 2 * ((dr.row_centre(D) * inner).sum(-1) / T * m).sum(-1) / m.sum(-1)


def check_general_formula(quick: bool = False) -> Result:
    """T3.1: the general derivative formula equals autograd (and FD) on random heads."""
    T, B = 10, 64
    cfg, p, X, mask = _recon_instances(T, B, seed=20)
    fn = lambda s: oh.recon_losses(p, X, mask, s)  # noqa: E731
    S = torch.zeros(B, T, T, dtype=oh.DTYPE)
    G = oh.score_grad(fn, S)
    worst = 0.0
    for name in ("circ_w1", "toep_w1", "random_s3"):
        D = dr.direction(name, T)
        auto = (G * D).flatten(1).sum(-1)
        form = general_formula(p, X, mask, D)
        worst = max(worst, ((auto - form).abs() / (1 + auto.abs())).max().item())
    D = dr.direction("random_s3", T)
    h = FD_STEP
    ratio = fd_agreement((G * D).flatten(1).sum(-1), oh.directional_fd(fn, S, D, h),
                         oh.directional_fd(fn, S, D, 2 * h), fn(S).detach(), h)
    n = 2 * T * T + 4 * cfg.d + 2 * T
    fig = worst if ratio <= 1.0 else math.inf
    return checked_result(
        "T3.1", "dL_rec[D] = (2/|M|) sum_m (1/T) sum_j D~_mj <J_m^T (yhat_m - x_m), v_j> at S = 0",
        f"autograd vs formula along circ_w1, toep_w1, random ({B} random heads, T={T}, 50% masks); "
        f"autograd vs FD: {ratio:.2f} x fd_tol (must be <= 1)", "n.a.", fig, "max rel. gap",
        rounding_tol(n), "le", f"float64: 10 x n u, n = 2T^2 + 4d + 2T = {n} terms",
        fd_ratio=ratio)


def check_not_blind(quick: bool = False) -> Result:
    """T3.2: the reconstruction gradient has an O(1) blind component and sees circulant
    directions, where the label gradient of the same heads has none (T2)."""
    T, B = 10, 64
    cfg, p, X, mask = _recon_instances(T, B, seed=30)
    G = oh.score_grad(lambda s: oh.recon_losses(p, X, mask, s), torch.zeros(B, T, T, dtype=oh.DTYPE))
    bf = geo.blind_fraction(G)
    cos = geo.cosine(G, dr.direction("circ_w1", T)).abs()
    floor = rounding_tol(2 * T * T + 3 * cfg.d + 2 * T)  # what "zero" means in T2
    return checked_result(
        "T3.2", "L_rec is not blind: ||blind(G_rec)|| / ||G_rec|| = O(1), circulant directions seen",
        f"min over {B} random heads of the blind fraction of G_rec at S = 0 (T={T}); rms "
        f"|cos(G_rec, circ_w1)| = {cos.pow(2).mean().sqrt():.3f}", "n.a.", bf.min().item(),
        "min blind fraction", 1e6 * floor, "ge",
        "must exceed the float64 zero level of T2 (10 x n u) by 6 orders of magnitude",
        rms_circulant_cos=cos.pow(2).mean().sqrt().item(), mean_blind_fraction=bf.mean().item())


# ---------------------------------------------------------------------------------------
# the real toy model (measured)

def neighbour_direction(T: int) -> torch.Tensor:
    """N_ij = 1[|i - j| = 1] (previous + next token)."""
    return dr.shift(T, -1) + dr.shift(T, 1)


def measure_toy_sighted(quick: bool = False) -> Result:
    """T3.6: on the toy model in the T1 setting at S = 0, per-example normalised derivatives
    of the label and reconstruction (MSE) losses along proximity directions."""
    T = 12 if quick else 32
    model = toy.toy_model(toy.T1_MODEL, seed=0)
    batch = toy.toy_batch(T, 32, seed=0)
    dirs = ("circ_w1", "toep_w1")
    lab = toy.layer_probe(model, batch, "label", dirs).cos_rms_per_example[0]
    rec = toy.layer_probe(model, batch, "recon_mse", dirs).cos_rms_per_example[0]
    out = {f"{loss}_{d}": float(v[k]) for loss, v in (("label", lab), ("recon", rec))
           for k, d in enumerate(dirs)}
    return measured_result(
        "T3.6", "toy model (T1 setting, S = 0): recon sees proximity directions the label loss "
        "does not", f"rms per-example |cos(G, D)| label / recon: circ_w1 {out['label_circ_w1']:.1e} / "
        f"{out['recon_circ_w1']:.3f}, toep_w1 {out['label_toep_w1']:.1e} / {out['recon_toep_w1']:.3f} "
        f"(T={T}, 32 sequences, toyspt.probes)", out["recon_circ_w1"], "recon |cos| circ_w1", **out)


def measure_toy_gain_sign(quick: bool = False) -> Result:
    """T3.7: does the toy model at its default init follow T3's sign rule? Per seed: the
    effective gain beta_eff and the batch derivative of L_rec (MSE and L1) along N."""
    T = 32
    seeds = range(4) if quick else range(12)
    batch = toy.toy_batch(T, 16 if quick else 64, seed=0)
    D = {"neighbours": neighbour_direction(T)}
    rows, agree_mse, agree_l1 = [], 0, 0
    for sd in seeds:
        model = toy.toy_model(toy.ModelConfig(), seed=sd)
        g = toy.effective_gain(model, batch)
        d_mse = probes.probe(model, batch, probes.recon("mse"), D, per_example=False,
                             use_jvp=False)[toy.HOOK_S].deriv[0, 0].item()
        d_l1 = probes.probe(model, batch, probes.recon("l1"), D, per_example=False,
                            use_jvp=False)[toy.HOOK_S].deriv[0, 0].item()
        agree_mse += (d_mse < 0) == (g > 0)
        agree_l1 += (d_l1 < 0) == (g > 0)
        rows.append(dict(seed=sd, beta_eff=g, drec_mse_N=d_mse, drec_l1_N=d_l1))
    n = len(rows)
    # the scalar model ignores everything but the gain; it should speak where |beta_eff| is
    # largest: agreement in the half of the seeds with the largest |beta_eff|
    top = sorted(rows, key=lambda r: -abs(r["beta_eff"]))[: max(1, n // 2)]
    top_l1 = sum((r["drec_l1_N"] < 0) == (r["beta_eff"] > 0) for r in top)
    return measured_result(
        "T3.7", "toy model at init: sign(dL_rec[N]) = -sign(beta_eff) (T3's rule, 0 < |beta| small)",
        f"default model, {n} init seeds, T={T}: the rule holds in {agree_mse}/{n} seeds for MSE, "
        f"{agree_l1}/{n} for L1 (the SPT loss), {top_l1}/{len(top)} (L1) in the half with the "
        f"largest |beta_eff|; beta_eff < 0 in {sum(r['beta_eff'] < 0 for r in rows)}/{n}",
        agree_mse / n, "share of seeds (MSE)", rows=rows, agree_l1=agree_l1 / n,
        agree_l1_top_half=top_l1 / len(top))


CHECKS = [check_general_formula, check_not_blind, check_closed_form, check_neighbour_sign,
          check_monte_carlo, measure_toy_sighted, measure_toy_gain_sign]

__all__ = ["mask_moments", "expected_drec", "neighbour_PQ", "flip_point", "expected_loss_uniform",
           "optimal_gain", "brute_expected_drec", "autograd_expected_drec",
           "scalar_losses", "scalar_drec_formula", "mc_drec", "general_formula", "ar1",
           "check_general_formula", "check_not_blind", "check_closed_form",
           "check_neighbour_sign", "check_monte_carlo", "measure_toy_sighted",
           "measure_toy_gain_sign", "neighbour_direction", "CHECKS", "LAWS"]
