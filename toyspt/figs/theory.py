"""Figure 6: the theory, numerically. T2: the label loss sees a banded Toeplitz proximity
direction only through the sequence ends, so its normalised derivative decays with T
(log-log, fitted slope); near uniform attention the blind part of the gradient grows like
sigma^2. T3: the closed form of E dL_rec along the neighbour direction vs beta, against
Monte Carlo. T4: singular-value spectra of the per-example dL/dM, label vs reconstruction."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..model import ModelConfig, build_model
from ..plots import color, save_figure
from ..probes import make_batch, probe
from ..tasks import make_task

NAME = "theory"
TITLE = "The blindness theory, checked numerically"
COLUMNS = ["panel", "series", "x", "value", "err"]


def specs(ctx):
    return []  # no training


def _t4_rows(ctx):
    data = make_task(ctx.base.task)
    batch = make_batch(data.train.x[:16], data.train.y[:16], 0.5, seed=0)
    rows = []
    for setting, kw in (("T1 setting, qk=0", dict(qk_init_scale=0.0, d_mlp=0, final_norm=False)),
                        ("default model, qk=0", dict(qk_init_scale=0.0))):
        model = build_model(ModelConfig(**kw), ctx.seeds[0])
        for loss in ("label", "recon"):
            lp = probe(model, batch, loss, ["circ_w1"], use_jvp=False).layers[0]
            sv = lp.dLdM_sv_per_example[:, 0]  # (B, d)
            sv = sv / sv[:, :1].clamp_min(1e-300)
            for k in range(sv.shape[1]):
                col = sv[:, k]
                rows.append(dict(panel="T4", series=f"{setting} | {loss}", x=k + 1, value=float(col.median()),
                                 err=float(col.max())))
    return rows


def draw(ctx, runs) -> pd.DataFrame:
    from theory import t2_blindness as t2
    from theory import t3_recon as t3

    rows = []
    r27 = t2.check_toeplitz_decay(quick=ctx.quick)
    Ts, rms, pred = (np.asarray(r27.detail(k), float) for k in ("T", "rms_cos", "predicted_rms_cos"))
    rows += [dict(panel="T2_decay", series="measured rms |cos|", x=T, value=v) for T, v in zip(Ts, rms)]
    rows += [dict(panel="T2_decay", series="predicted", x=T, value=v) for T, v in zip(Ts, pred)]
    r28 = t2.check_sigma_growth(quick=ctx.quick)
    sig, bf = (np.asarray(r28.detail(k), float) for k in ("sigmas", "blind_fraction_mean"))
    rows += [dict(panel="T2_sigma", series="random head: blind fraction", x=s, value=v) for s, v in zip(sig, bf)]
    rows += [dict(panel="T2_sigma", series="toy model (T1 setting): blind fraction", x=float(s), value=v)
             for s, v in r28.detail("toy_blind_fraction").items()]
    r35 = t3.check_monte_carlo(quick=ctx.quick)
    flip = r35.detail("flip")
    P, Q, bstar = flip["P"], flip["Q"], flip["beta_star"]
    betas = np.linspace(-2.0, 2.2 * bstar, 200)
    rows += [dict(panel="T3", series="closed form", x=b, value=b * (P * b - Q)) for b in betas]
    rows += [dict(panel="T3", series="Monte Carlo", x=r["beta"], value=r["mc_mean"], err=r["mc_se"])
             for r in r35.detail("rows")]
    rows += _t4_rows(ctx)
    frame = pd.DataFrame(rows, columns=COLUMNS)

    fig, axes = plt.subplots(1, 4, figsize=(17, 3.8), layout="constrained")
    ax = axes[0]
    ax.loglog(Ts, rms, "o", color=color("scratch"), label="measured (rms over instances)")
    ax.loglog(Ts, pred, "--", color="0.3", label="predicted")
    lo, hi = r27.detail("ci95")
    ax.set_title(f"T2: Toeplitz |i−j|=1 direction, label |cos|\nfitted slope {r27.detail('exponent'):.3f} "
                 f"(95% CI {lo:.2f}..{hi:.2f}); asymptote −1.5")
    ax.set_xlabel("sequence length T")
    ax.legend(fontsize=7)
    ax = axes[1]
    ax.loglog(sig, bf, "o-", color=color("scratch"), label="random head")
    toy = r28.detail("toy_blind_fraction")
    ax.loglog([float(s) for s in toy], list(toy.values()), "s--", color=color("spt"), label="toy model, qk_init_scale")
    ax.set_title(f"T2: blind part of the label gradient near uniform\nslope {r28.detail('exponent'):.4f} (theory: 2)")
    ax.set_xlabel("init scale σ of W_Q, W_K")
    ax.set_ylabel("||blind(G)||² / ||G||²")
    ax.legend(fontsize=7)
    ax = axes[2]
    ax.plot(betas, betas * (P * betas - Q), color="0.3", label="closed form")
    mc = r35.detail("rows")
    ax.errorbar([r["beta"] for r in mc], [r["mc_mean"] for r in mc], yerr=[2 * r["mc_se"] for r in mc],
                fmt="o", color=color("spt"), label="Monte Carlo ± 2 SE")
    ax.axhline(0, color="0.6", lw=0.8)
    ax.axvline(bstar, color="0.6", ls=":", lw=0.8)
    ax.set_title(f"T3: E dL_rec along neighbours (AR(1), T={flip['T']}, ρ={flip['rho']}, q={flip['q']})\n"
                 f"< 0: proximity lowers the loss; sign flips at β*={bstar:.2f}")
    ax.set_xlabel("value/readout gain β")
    ax.legend(fontsize=7)
    ax = axes[3]
    t4 = frame[frame.panel == "T4"]
    for series, g in t4.groupby("series", sort=False):
        ax.semilogy(g.x, g.value.clip(lower=1e-18), "o-", ms=3, label=series)
    ax.set_title("T4: singular values of per-example dL/dM\n(normalised by the largest; median over examples)")
    ax.set_xlabel("index")
    ax.set_ylim(1e-18, 2)
    ax.legend(fontsize=6)
    fig.suptitle(TITLE)
    save_figure(fig, ctx.out, NAME, ctx.quick)
    ctx.meta[NAME] = dict(t2_exponent=r27.detail("exponent"), t2_ci95=list(r27.detail("ci95")),
                          t2_sigma_exponent=r28.detail("exponent"), t3_beta_star=bstar,
                          verdicts={r.check: r.verdict for r in (r27, r28, r35)})
    return frame
