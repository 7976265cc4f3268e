"""T3 - masked reconstruction is not blind, and the sign of what it sees.

General head (checked on the analysed one-head model, T3.1/T3.2): at uniform attention
(S = 0, A = 1 1^T / T) a change S -> S + tD moves A by dA_mj = D~_mj / T with
D~ = row_centre(D), so

    dL_rec[D] = (2/|M|) sum_{m in M} (1/T) sum_j D~_mj <J_m^T (yhat_m - x_m), v_j>,

where v_j is the value of token j (after W_O) and J_m the Jacobian of yhat_m with respect to
the head output of row m. Every row of D enters separately, so circulant directions are
seen; the gradient has a blind component of order one.

Scalar AR(1) model (T3.3-T3.5): the closed form of E dL_rec[D] for AR(1) data, Bernoulli
masks and a scalar gain beta, and its sign flip at beta* = Q/P along the neighbour direction,
are derived in :mod:`theory.scalar_model`; the checks here compare it with independent
computations (sympy brute force, an autograd expectation over all masks, Monte Carlo).
"""
from __future__ import annotations

import math

import sympy as sp
import torch

from toyspt.data import directions as dr
from toyspt.probe import engine as probes
from toyspt.probe import losses

from . import geometry as geo
from . import onehead as oh
from . import toy
from .result import FD_STEP, Result, checked_result, fd_agreement, measured_result, rounding_tol
from .scalar_model import (
    LAWS,
    Tsym,
    ar1,
    autograd_expected_drec,
    beta,
    brute_expected_drec,
    expected_drec,
    expected_loss_uniform,
    flip_point,
    mask_moments,
    mc_drec,
    mc_flip_point,
    mc_samples,
    neighbour_PQ,
    neighbours,
    optimal_gain,
    p1s,
    p2s,
    q,
    rho,
    scalar_drec_formula,
    scalar_losses,
)

# ---------------------------------------------------------------------------------------
# the closed form against independent computations

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

Z_MC = 4.0  # |MC - closed form| <= 4 standard errors (two-sided normal p = 6e-5)
Z_SIGN = 3.0  # an MC sign counts when |mean| > 3 SE (one-sided p = 1e-3)
FLIP_DELTA = 0.25  # the sign flip is tested at beta* (1 -/+ FLIP_DELTA)


def check_monte_carlo(quick: bool = False) -> Result:
    """T3.5: the closed form against Monte Carlo (toyspt.data.tasks.sample_mask, 1/|M| loss,
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
        f"(T={T}, 32 sequences, toyspt.probe.engine)", out["recon_circ_w1"], "recon |cos| circ_w1", **out)


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
        d_mse = probes.probe(model, batch, losses.recon("mse"), D, per_example=False,
                             use_jvp=False)[toy.HOOK_S].deriv[0, 0].item()
        d_l1 = probes.probe(model, batch, losses.recon("l1"), D, per_example=False,
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
           "scalar_losses", "scalar_drec_formula", "mc_samples", "mc_drec", "mc_flip_point",
           "general_formula", "ar1", "neighbours", "mask_moments", "Tsym", "rho", "q", "beta",
           "p1s", "p2s",
           "check_general_formula", "check_not_blind", "check_closed_form",
           "check_neighbour_sign", "check_monte_carlo", "measure_toy_sighted",
           "measure_toy_gain_sign", "neighbour_direction", "CHECKS", "LAWS"]
