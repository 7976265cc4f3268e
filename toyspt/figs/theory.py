"""Figure 6: the theory, numerically. T2: the label loss sees a banded Toeplitz proximity
direction only through the sequence ends, so its normalised derivative decays with T
(log-log, fitted slope); near uniform attention the blind part of the gradient grows like
sigma^2. T3: the closed form of E dL_rec along the neighbour direction vs beta, against
Monte Carlo. T4: singular-value spectra of the per-example dL/dM, label vs reconstruction."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from toyspt.data.tasks import TaskConfig, make_task
from toyspt.nn.model import ModelConfig, build_model
from toyspt.probe.engine import probe
from toyspt.probe.losses import make_batch
from toyspt.runs.specs import FORMAT_VERSION, Spec, Table, single_thread
from toyspt.util.plots import color

NAME = "theory"
TITLE = "The blindness theory, checked numerically"
COLUMNS = ["panel", "series", "x", "value", "err"]


@dataclass(frozen=True)
class TheoryFigSpec(Spec):
    """The figure's numbers as a cached entry: the T2/T3 checks and the T4 spectra take
    seconds to compute and depend only on these fields, so a warm rerun reads them. Computed
    on one thread (the same bits whichever process computes it)."""

    kind: ClassVar[str] = "theory_fig"
    result_type: ClassVar[type] = Table

    quick: bool  # the checks' quick grids
    task: TaskConfig = field(default_factory=TaskConfig)  # T4's batch comes from this task
    seed: int = 0  # T4's model initialisation

    def to_dict(self) -> dict[str, Any]:
        return dict(kind=self.kind, format=FORMAT_VERSION, quick=self.quick, task=asdict(self.task), seed=self.seed)

    def label(self) -> str:
        return f"theory figure numbers {self.key()} ({'quick' if self.quick else 'full'})"

    def seconds(self) -> float:
        return 5.0 if self.quick else 12.0  # measured on one idle core (docs/performance.md)

    def execute(self, progress: bool = False, start=None) -> Table:
        if start is not None:
            raise ValueError(f"{self.label()}: has no parent run to continue")
        return Table(*single_thread(_compute, self))


def specs(ctx):
    return {"numbers": TheoryFigSpec(quick=ctx.quick, task=ctx.base.data, seed=ctx.seeds[0])}


def _t4_rows(spec: TheoryFigSpec):
    data = make_task(spec.task)
    batch = make_batch(data.train.x[:16], data.train.y[:16], 0.5, seed=0)
    rows = []
    for setting, kw in (("T1 setting, qk=0", dict(qk_init_scale=0.0, d_mlp=0, final_norm=False)),
                        ("default model, qk=0", dict(qk_init_scale=0.0))):
        model = build_model(ModelConfig(**kw), spec.seed)
        for loss in ("label", "recon"):
            lp = probe(model, batch, loss, ["circ_w1"], use_jvp=False).layers[0]
            sv = lp.per_example.dLdM_sv[:, 0]  # (B, d)
            sv = sv / sv[:, :1].clamp_min(1e-300)
            for k in range(sv.shape[1]):
                col = sv[:, k]
                rows.append(dict(panel="T4", series=f"{setting} | {loss}", x=k + 1, value=float(col.median()),
                                 err=float(col.max())))
    return rows


def _compute(spec: TheoryFigSpec) -> tuple[list[dict], dict]:
    """(CSV rows, the numbers the titles and metadata need)."""
    from toyspt.theory import t2_blindness as t2
    from toyspt.theory import t3_recon as t3

    rows = []
    r27 = t2.check_toeplitz_decay(quick=spec.quick)
    Ts, rms, pred = (np.asarray(r27.detail(k), float) for k in ("T", "rms_cos", "predicted_rms_cos"))
    rows += [dict(panel="T2_decay", series="measured rms |cos|", x=T, value=v) for T, v in zip(Ts, rms)]
    rows += [dict(panel="T2_decay", series="predicted", x=T, value=v) for T, v in zip(Ts, pred)]
    r28 = t2.check_sigma_growth(quick=spec.quick)
    sig, bf = (np.asarray(r28.detail(k), float) for k in ("sigmas", "blind_fraction_mean"))
    rows += [dict(panel="T2_sigma", series="random head: blind fraction", x=s, value=v) for s, v in zip(sig, bf)]
    rows += [dict(panel="T2_sigma", series="toy model (T1 setting): blind fraction", x=float(s), value=v)
             for s, v in r28.detail("toy_blind_fraction").items()]
    r35 = t3.check_monte_carlo(quick=spec.quick)
    flip = r35.detail("flip")
    P, Q, bstar = flip["P"], flip["Q"], flip["beta_star"]
    betas = np.linspace(-2.0, 2.2 * bstar, 200)
    rows += [dict(panel="T3", series="closed form", x=b, value=b * (P * b - Q)) for b in betas]
    rows += [dict(panel="T3", series="Monte Carlo", x=r["beta"], value=r["mc_mean"], err=r["mc_se"])
             for r in r35.detail("rows")]
    rows += _t4_rows(spec)
    plain = [{k: float(v) if k in ("x", "value", "err") else v for k, v in r.items()} for r in rows]
    details = dict(t2_exponent=float(r27.detail("exponent")), t2_ci95=[float(v) for v in r27.detail("ci95")],
                   t2_sigma_exponent=float(r28.detail("exponent")),
                   flip={k: float(flip[k]) for k in ("P", "Q", "beta_star", "T", "rho", "q")},
                   verdicts={r.check: r.verdict for r in (r27, r28, r35)})
    return plain, details


def draw(ctx, runs):
    d = runs["numbers"].details
    frame = pd.DataFrame(runs["numbers"].rows, columns=COLUMNS)
    part = {p: g for p, g in frame.groupby("panel", sort=False)}
    dec = part["T2_decay"]
    Ts = dec[dec.series == "measured rms |cos|"].x.to_numpy()
    rms = dec[dec.series == "measured rms |cos|"].value.to_numpy()
    pred = dec[dec.series == "predicted"].value.to_numpy()
    sg = part["T2_sigma"]
    sig = sg[sg.series == "random head: blind fraction"].x.to_numpy()
    bf = sg[sg.series == "random head: blind fraction"].value.to_numpy()
    toy_rows = sg[sg.series == "toy model (T1 setting): blind fraction"]
    flip = d["flip"]
    bstar = flip["beta_star"]
    closed = part["T3"][part["T3"].series == "closed form"]
    mc_rows = part["T3"][part["T3"].series == "Monte Carlo"]

    fig, axes = plt.subplots(1, 4, figsize=(17, 3.8), layout="constrained")
    ax = axes[0]
    ax.loglog(Ts, rms, "o", color=color("scratch"), label="measured (rms over instances)")
    ax.loglog(Ts, pred, "--", color="0.3", label="predicted")
    lo, hi = d["t2_ci95"]
    ax.set_title(f"T2: Toeplitz |i−j|=1 direction, label |cos|\nfitted slope {d['t2_exponent']:.3f} "
                 f"(95% CI {lo:.2f}..{hi:.2f}); asymptote −1.5")
    ax.set_xlabel("sequence length T")
    ax.legend(fontsize=7)
    ax = axes[1]
    ax.loglog(sig, bf, "o-", color=color("scratch"), label="random head")
    ax.loglog(toy_rows.x.tolist(), toy_rows.value.tolist(), "s--", color=color("spt"), label="toy model, qk_init_scale")
    ax.set_title(f"T2: blind part of the label gradient near uniform\nslope {d['t2_sigma_exponent']:.4f} (theory: 2)")
    ax.set_xlabel("init scale σ of W_Q, W_K")
    ax.set_ylabel("||blind(G)||² / ||G||²")
    ax.legend(fontsize=7)
    ax = axes[2]
    ax.plot(closed.x.to_numpy(), closed.value.to_numpy(), color="0.3", label="closed form")
    ax.errorbar(mc_rows.x.tolist(), mc_rows.value.tolist(), yerr=(2 * mc_rows.err).tolist(),
                fmt="o", color=color("spt"), label="Monte Carlo ± 2 SE")
    ax.axhline(0, color="0.6", lw=0.8)
    ax.axvline(bstar, color="0.6", ls=":", lw=0.8)
    ax.set_title(f"T3: E dL_rec along neighbours (AR(1), T={flip['T']:g}, ρ={flip['rho']:g}, q={flip['q']:g})\n"
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
    ctx.meta[NAME] = dict(t2_exponent=d["t2_exponent"], t2_ci95=d["t2_ci95"],
                          t2_sigma_exponent=d["t2_sigma_exponent"], t3_beta_star=bstar, verdicts=d["verdicts"])
    return fig, frame
