"""T4 - at uniform attention the label gradient on M = W_Q W_K^T / sqrt(d_h) is rank one.

With S = X M X^T, dL/dM = X^T G X. At uniform attention G = 1 g^T (T2), so for one example
dL/dM = (X^T 1)(X^T g)^T: a rank-one matrix whose left factor is the token sum (content
sum plus the sum of the positional encodings). Over a batch of B examples the rank is at
most B and every left singular vector lies in the span of the B token sums.

A proximity-biased positional score needs much more: with sinusoidal positions P (T x d),
P P^T is a Toeplitz kernel peaked at i = j, and when P has full column rank the only M with
P M P^T = P P^T is M = I (rank d). The sinusoidal table at T = d = 32 is numerically rank
deficient (its low-frequency channels are nearly constant), so what is checked is the
weaker, exact statement: any rank-one M gives a rank-one P M P^T, which by Eckart-Young
misses a measured share of ||P P^T||_F. The reconstruction gradient dL_rec/dM has full rank.
"""
from __future__ import annotations

import math

import sympy as sp
import torch

from toyspt.nn.positional import sinusoidal_table

from . import onehead as oh
from . import toy
from .result import U64, Result, checked_result, rounding_tol

STATEMENT = "uniform A: dL/dM = X^T G X = (X^T 1)(X^T g)^T, rank one per example"


def symbolic_rank_one(T: int, d: int = 2) -> bool:
    """dL/dM at M = 0 (differentiated through exp) equals (X^T 1)(X^T g)^T exactly, with
    g_j = (gamma_j - mean gamma) / T^2, for symbolic X (T x d), M (d x d) and gamma."""
    X = sp.Matrix(T, d, lambda i, a: sp.Symbol(f"x{i}_{a}"))
    M = sp.Matrix(d, d, lambda a, b: sp.Symbol(f"m{a}_{b}"))
    gam = sp.symbols(f"gamma0:{T}")
    S = X * M * X.T
    E = S.applyfunc(sp.exp)
    L = sum(gam[j] * sum(E[i, j] / sum(E[i, k] for k in range(T)) for i in range(T)) / T
            for j in range(T))
    zero = {m: 0 for m in M}
    grad = sp.Matrix(d, d, lambda a, b: sp.diff(L, M[a, b]).subs(zero))
    g = sp.Matrix(T, 1, lambda j, _: (gam[j] - sum(gam) / T) / T ** 2)
    outer = (X.T * sp.ones(T, 1)) * (X.T * g).T
    return all(sp.simplify(e) == 0 for e in (grad - outer))


def _dLdM_per_example(loss_of_S, X: torch.Tensor) -> torch.Tensor:
    """Per-example dL_b/dM_b at M = 0 by autograd through S_b = X_b M_b X_b^T."""
    B, T, d = X.shape
    M = torch.zeros(B, d, d, dtype=X.dtype, requires_grad=True)
    (g,) = torch.autograd.grad(loss_of_S(X @ M @ X.transpose(-1, -2)).sum(), M)
    return g


def _rank_one_figures(GM: torch.Tensor, X: torch.Tensor, G: torch.Tensor
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(sigma2/sigma1, sin angle(u1, X^T 1), scale) per example. ``scale`` is the sum of
    absolute terms |X|^T |G| |X| relative to sigma1: the factor the rounding of X^T G X is
    relative to."""
    U, sv, _ = torch.linalg.svd(GM)
    s = X.sum(1)  # token sums (B, d)
    s = s / s.norm(dim=-1, keepdim=True)
    u1 = U[..., 0]
    sin = (s - (s * u1).sum(-1, keepdim=True) * u1).norm(dim=-1)
    absterm = torch.linalg.matrix_norm(X.abs().transpose(-1, -2) @ G.abs() @ X.abs())
    return sv[:, 1] / sv[:, 0], sin, absterm / sv[:, 0]


def check_rank_one(quick: bool = False) -> Result:
    """T4.1: symbolic factorisation; per-example and per-batch ranks of dL/dM on random
    heads at uniform attention."""
    Ts = range(2, 4) if quick else range(2, 5)
    sym = "holds" if all(symbolic_rank_one(T) for T in Ts) else "fails"
    cfg = oh.OneHeadConfig(T=10, d=6)
    p = oh.init_params(cfg)
    X, y = oh.sample_tokens(cfg, 32, seed=40)
    lossS = lambda S: oh.label_losses(p, X, y, S)  # noqa: E731
    GM = _dLdM_per_example(lossS, X)
    G = oh.score_grad(lossS, torch.zeros(32, cfg.T, cfg.T, dtype=oh.DTYPE))
    ratio, sin, scale = _rank_one_figures(GM, X, G)
    # batch of 3 < d: rank <= 3 and left singular vectors in span of the 3 token sums
    Gb = GM[:3].sum(0)
    U, sv, _ = torch.linalg.svd(Gb)
    Q, _ = torch.linalg.qr(X[:3].sum(1).T)  # (d, 3) basis of the token sums
    out = (U[:, :3] - Q @ (Q.T @ U[:, :3])).norm().item()
    n = cfg.T * cfg.T + 3 * cfg.d + 2 * cfg.T + cfg.n_classes
    tol = rounding_tol(n, scale.max().item())
    fig = max(ratio.max().item(), sin.max().item(), (sv[3] / sv[0]).item(), out)
    return checked_result(
        "T4.1", STATEMENT,
        f"sympy T={Ts.start}..{Ts.stop - 1}, d=2 (through exp, at M = 0); 32 random heads T=10 "
        f"d=6: max(sigma2/sigma1, sin angle(u1, X^T 1)); batch of 3: sigma4/sigma1, left "
        "vectors outside span of token sums", sym, fig, "max residual", tol, "le",
        f"float64: 10 x n u x scale, n = T^2 + 3d + 2T + C = {n}, scale = "
        f"|| |X|^T |G| |X| || / sigma1 <= {scale.max().item():.1f} (cancellation in X^T G X)",
        per_example_sv2_sv1=ratio.max().item(), left_factor_sin=sin.max().item(),
        batch_sv4_sv1=(sv[3] / sv[0]).item(), batch_outside_span=out)


def numerical_rank(sv: torch.Tensor, tol: float) -> torch.Tensor:
    """Number of singular values above tol * sigma_1 (per leading index)."""
    return (sv > tol * sv[..., :1]).sum(-1)


def _recon_ranks(pos: bool, B: int = 32):
    """Numerical and predicted per-example ranks of dL_rec/dM on random heads, and the same
    for the batch sum; see :func:`check_recon_rank`."""
    cfg = oh.OneHeadConfig(T=10, d=6, d_out=3, pos=pos)
    p = oh.init_params(cfg)
    X, _ = oh.sample_tokens(cfg, B, seed=41)
    mask = oh.sample_mask(B, cfg.T, 0.3, seed=42)  # |M| from 1 to ~6: both regimes
    pe = oh.positions(cfg)
    Xt = oh.masked_tokens(p, X, mask, pe)  # what the scores are computed from
    lossS = lambda S: oh.recon_losses(p, X, mask, S, pe)  # noqa: E731
    GM = _dLdM_per_example(lossS, Xt)
    G = oh.score_grad(lossS, torch.zeros(B, cfg.T, cfg.T, dtype=oh.DTYPE))
    sv = torch.linalg.svdvals(GM)
    n = cfg.T * cfg.T + 3 * cfg.d + 2 * cfg.T
    scale = (torch.linalg.matrix_norm(Xt.abs().transpose(-1, -2) @ G.abs() @ Xt.abs()) / sv[:, 0]).max()
    tol = rounding_tol(n, scale.item())  # relative to the sum of |terms| of X~^T G X~
    rank = numerical_rank(sv, tol)
    # rank of the masked queries' tokens (well conditioned: exact up to rounding)
    rq = torch.stack([torch.linalg.matrix_rank(Xt[b][mask[b]], rtol=tol) for b in range(B)])
    pred = torch.clamp(rq, max=cfg.d_out)
    rank_b = int(numerical_rank(torch.linalg.svdvals(GM.sum(0)), tol))
    pred_b = int(torch.linalg.matrix_rank(Xt[mask], rtol=tol))
    keep = (sv.gather(1, (pred - 1)[:, None]) / sv[:, :1]).min().item()
    drop = max([(sv[b, pred[b]] / sv[b, 0]).item() for b in range(B) if pred[b] < cfg.d], default=0.0)
    return dict(rank=rank, pred=pred, rank_b=rank_b, pred_b=pred_b, keep=keep, drop=drop, tol=tol,
                n=n, mask_sizes=mask.sum(-1))


def check_recon_rank(quick: bool = False) -> Result:
    """T4.2: the reconstruction gradient on M is not rank one when the masked queries
    differ. dL_rec/dA_mj = (2/|M|) <r_m, v_j W> on masked rows only, so per example
    dL_rec/dM = (2/(T|M|)) X~_M^T r_M V~^T P X~ and its rank is min(rank X~_M, d_out)
    generically (X~_M: the masked rows' tokens, r_M their residuals, d_out the readout
    width). With positions the masked tokens differ and the rank grows with |M|; without
    positions they are all the mask embedding and the rank is one - for every example, and
    for the batch sum too."""
    with_pos, no_pos = _recon_ranks(True), _recon_ranks(False)
    mism = sum(int((r["rank"] != r["pred"]).sum()) + int(r["rank_b"] != r["pred_b"])
               for r in (with_pos, no_pos))
    return checked_result(
        "T4.2", "rank dL_rec/dM = min(rank X~_M, d_out) per example; 1 without positions",
        f"32 random heads (T=10, d=6, d_out=3, 30% masks) with / without sinusoidal positions: "
        f"examples whose numerical rank differs from the prediction, + batch-rank mismatches; "
        f"ranks with positions {sorted(set(with_pos['rank'].tolist()))}, batch "
        f"{with_pos['rank_b']}; without: {sorted(set(no_pos['rank'].tolist()))}, batch "
        f"{no_pos['rank_b']}", "n.a.", mism, "mismatches", 0.0, "le",
        f"rank threshold 10 x n u x scale = {max(with_pos['tol'], no_pos['tol']):.1e} of sigma_1 (n = "
        f"T^2 + 3d + 2T = {with_pos['n']}, scale = || |X~|^T |G| |X~| || / sigma_1); kept singular values >= "
        f"{min(with_pos['keep'], no_pos['keep']):.1e}, "
        f"dropped <= {max(with_pos['drop'], no_pos['drop']):.1e} of sigma_1",
        ranks_with_positions=with_pos["rank"].tolist(), predicted_with_positions=with_pos["pred"].tolist(),
        batch_rank_with_positions=with_pos["rank_b"], batch_rank_without_positions=no_pos["rank_b"],
        mask_sizes=with_pos["mask_sizes"].tolist())


def check_toy_rank_one(quick: bool = False) -> Result:
    """T4.3: the toy model (T1 setting, uniform attention): per-example dL/dM, computed by
    autograd through the model's own W_Q (:func:`toy.autograd_dLdM`, independent of the
    probe), equals the rank-one (H^T 1)(H^T g)^T built from the probe's G and the attention
    input H; the probe's singular values of dL/dM agree with the autograd ones. The default
    model (MLP + LayerNorm) is reported as measured in the details."""
    T = 12 if quick else 32
    batch = toy.toy_batch(T, 16, seed=0)
    out = {}
    for name, cfg in (("t1", toy.T1_MODEL), ("default", toy.DEFAULT_UNIFORM)):
        model = toy.toy_model(cfg, seed=0)
        lp = toy.layer_probe(model, batch, "label", ("circ_w1",))
        G = lp.per_example.G[:, 0]
        H = toy.attention_input(model, batch["x"])
        GM = toy.autograd_dLdM(model, batch)  # independent of G and H
        g = G.mean(dim=1)  # the common row of G (T2)
        R1 = (H.sum(1)[:, :, None] * (H.transpose(-1, -2) @ g[..., None]).transpose(-1, -2))
        gap = (torch.linalg.matrix_norm(GM - R1) / torch.linalg.matrix_norm(GM)).max().item()
        ratio, sin, scale = _rank_one_figures(GM, H, G)
        sv = torch.linalg.svdvals(GM)
        sv_probe = lp.per_example.dLdM_sv[:, 0]
        agree = ((sv - sv_probe).abs().amax() / sv[:, 0].amax()).item()
        out[name] = dict(formula_gap=gap, sv2_sv1=ratio.max().item(), sin=sin.max().item(),
                         scale=scale.max().item(), probe_gap=agree)
    d = toy.T1_MODEL.d_model
    n = T * T + 3 * d + 2 * T + toy.T1_MODEL.n_classes
    tol = rounding_tol(n, out["t1"]["scale"])
    # measured: ranks of the reconstruction gradient on M in the same model
    lpr = toy.layer_probe(toy.toy_model(toy.T1_MODEL, seed=0), batch, "recon_mse", ("circ_w1",))
    svr = lpr.per_example.dLdM_sv[:, 0]
    out["recon_rank_per_example"] = numerical_rank(svr, 1e-10).tolist()
    out["recon_mask_sizes"] = batch["mask"].sum(-1).tolist()
    out["recon_batch_rank"] = int(numerical_rank(lpr.qk.dLdM_sv[0], 1e-10))
    t1 = out["t1"]
    fig = max(t1["formula_gap"], t1["sv2_sv1"], t1["sin"], t1["probe_gap"])
    return checked_result(
        "T4.3", "toy model, T1 setting: per-example dL/dM = (H^T 1)(H^T g)^T",
        f"16 task sequences, T={T}: dL/dM by autograd through the model's W_Q (W_K = "
        f"sqrt(d_h) I, W_Q = 0) vs the rank-one formula from the probe's G and H: max(||auto - "
        f"formula||/||auto||, sigma2/sigma1, sin angle(u1, H^T 1), |probe sv - auto sv|) = "
        f"max({t1['formula_gap']:.1e}, {t1['sv2_sv1']:.1e}, {t1['sin']:.1e}, "
        f"{t1['probe_gap']:.1e}); measured: default model sigma2/sigma1 up to "
        f"{out['default']['sv2_sv1']:.3f}; recon dL/dM ranks per example "
        f"{min(out['recon_rank_per_example'])}..{max(out['recon_rank_per_example'])} (batch "
        f"{out['recon_batch_rank']} of {d})",
        "n.a.", fig, "max residual", tol, "le",
        f"float64: 10 x n u x scale, n = T^2 + 3 d_model + 2T + C = {n}, scale "
        f"|| |H|^T |G| |H| || / sigma1 = {t1['scale']:.1f} (cancellation in H^T G H, which "
        "both the autograd and the formula compute)", **out)


def check_positional_kernel(quick: bool = False) -> Result:
    """T4.4: sinusoidal P P^T is Toeplitz and peaked at i = j (so M = I is a proximity
    bias); measured: how little of it a rank-one M can produce."""
    T, d = 32, 32
    P = sinusoidal_table(T, d, torch.float64)
    K = P @ P.T
    toe = (K[1:, 1:] - K[:-1, :-1]).abs().amax().item() / K.abs().amax().item()
    peaked = bool((K.argmax(dim=1) == torch.arange(T)).all())
    sv = torch.linalg.svdvals(K)
    rank1_err = (sv[1:].pow(2).sum().sqrt() / sv.pow(2).sum().sqrt()).item()
    svP = torch.linalg.svdvals(P)
    tol = rounding_tol(d, 1.0)
    rankK = int((sv > 1e-10 * sv[0]).sum())
    fig = toe if peaked else math.inf
    return checked_result(
        "T4.4", "P P^T (sinusoidal P, M = I) is Toeplitz, peaked at i = j; no rank-one M gives it",
        f"T=d=32: max |K_(i+1,j+1) - K_ij| / max|K|; row maxima on the diagonal: {peaked}; "
        f"measured: any rank-one M misses >= {rank1_err:.2f} of ||P P^T||_F (Eckart-Young); "
        f"K has {rankK} singular values above 1e-10 sigma_1", "n.a.", fig, "Toeplitz residual",
        tol, "le", f"float64: sin/cos of the table and the d-term inner products: 10 x d u = {tol:.1e}",
        rank_one_relative_error=rank1_err, kernel_rank_1e10=rankK,
        cond_P=(svP[0] / svP[-1]).item(), unit_roundoff=U64)


CHECKS = [check_rank_one, check_recon_rank, check_toy_rank_one, check_positional_kernel]

__all__ = ["symbolic_rank_one", "check_rank_one", "check_recon_rank", "numerical_rank", "check_toy_rank_one",
           "check_positional_kernel", "CHECKS"]
