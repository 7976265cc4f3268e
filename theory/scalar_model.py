"""The scalar AR(1) reconstruction model of T3: its closed form, and the independent
computations the checks compare it with (brute-force sympy expectation, autograd
expectation over all masks, Monte Carlo).

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
``sample_mask`` (toyspt.data.tasks.sample_mask): Bernoulli(q), an empty mask replaced by one
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

from toyspt.data import directions as dr
from toyspt.data.tasks import sample_mask

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
        sq = (T - 1) * p1 + p2 * sum(C[k][j] for k in range(T) for j in range(T)
                                     if k != j and m not in (k, j))
        cross = p1 * sum(C[k][m] for k in range(T) if k != m)
        tot += (bv / T) ** 2 * sq - 2 * (bv / T) * cross + 1
    return tot / T


def optimal_gain(T: int, rv, p1, p2):
    """The gain minimising :func:`expected_loss_uniform` (a quadratic in beta)."""
    C = [[rv ** abs(i - j) for j in range(T)] for i in range(T)]
    num = sum(p1 * C[k][m] for m in range(T) for k in range(T) if k != m)
    den = sum((T - 1) * p1 + p2 * sum(C[k][j] for k in range(T) for j in range(T)
                                      if k != j and m not in (k, j)) for m in range(T))
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


# ---------------------------------------------------------------------------------------
# numerics: samples of the scalar model

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
    toyspt.data.tasks.sample_mask masks (same seed, same samples), and the max gap between jvp
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


__all__ = ["rho", "q", "beta", "p1s", "p2s", "Tsym", "LAWS", "mask_moments", "expected_drec",
           "neighbour_PQ", "neighbours", "expected_loss_uniform", "optimal_gain", "flip_point",
           "brute_expected_drec", "autograd_expected_drec", "ar1", "scalar_losses",
           "scalar_drec_formula", "mc_samples", "mc_drec", "mc_flip_point"]
