"""What the probes of :mod:`toyspt.probe.engine` return: frozen records and their tidy tables.

Per score site (layer) and head, see :class:`LayerProbe`:

* ``G``: gradient of the batch loss w.r.t. a score perturbation shared by all examples,
  (H, T, T). For a loss that averages over examples this is the mean of the per-example
  gradients.
* directional derivatives ``<G_h, D_r>`` along normalised directions (autograd), the same
  by forward mode, cosines, row heterogeneity, and the share of ``||G||^2`` in the
  column-only and blind subspaces (:mod:`toyspt.data.directions`). Score gradients are
  row-centred (softmax is shift invariant), so the blind share equals the squared row
  heterogeneity; both are reported because they answer different questions.
* ``qk`` (:class:`QKGrads`): the W_Q / W_K weight gradients of the batch loss and ``dLdM``,
  (H, d, d), the derivative w.r.t. ``M_h`` in ``S_h = X M_h X^T`` (theory.md T4),
  ``sum_b X_b^T dL/dS_bh X_b``; exact whatever the Q/K biases are, and when they are zero
  ``dL/dW_Q^h = W_K^h dLdM_h^T / sqrt(d_head)`` (tested). Rotary layers have no such M:
  their ``qk`` is None.
* ``per_example`` (:class:`PerExampleProbe`): the same quantities for the loss of each
  example alone (a batch of one).

The lean probe (``probe(..., lean=True)``) fills the per-head statistics only: its ``G``,
``qk``, ``per_example`` and ``deriv_jvp`` are None. Nothing here computes gradients: this
module only holds and tabulates them.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch


@dataclass(frozen=True)
class QKGrads:
    """Weight-side gradients of the batch loss at one non-rotary score site."""

    grad_W_Q: torch.Tensor  # (d, d) dL/dW_Q of the attention module
    grad_W_K: torch.Tensor  # (d, d) dL/dW_K
    dLdM: torch.Tensor  # (H, d, d) sum_b X_b^T dL/dS_bh X_b
    dLdM_sv: torch.Tensor  # (H, d) singular values of dLdM, descending


@dataclass(frozen=True)
class PerExampleProbe:
    """One score site seen example by example: each example's own loss (a batch of one)."""

    G: torch.Tensor  # (B, H, T, T) dl_b/dS_b
    deriv: torch.Tensor  # (B, H, R) <G_bh, D_r>
    row_heterogeneity: torch.Tensor  # (B, H)
    grad_W_Q: torch.Tensor | None  # (B, d, d); None at rotary sites
    grad_W_K: torch.Tensor | None  # (B, d, d); None at rotary sites
    dLdM_sv: torch.Tensor | None  # (B, H, d) singular values of X_b^T dl_b/dS_bh X_b; None at rotary sites


@dataclass(frozen=True)
class LayerProbe:
    """Probe quantities of one score site; H heads, K directions, B examples, d = d_model."""

    site: str  # score hook name
    G: torch.Tensor | None  # (H, T, T) dL/dS, perturbation shared by the batch; None when lean
    grad_norm: torch.Tensor  # (H,) ||G_h||_F
    row_heterogeneity: torch.Tensor  # (H,) ||G - 1 mean_rows(G)|| / ||G||
    column_share: torch.Tensor  # (H,) share of ||G||^2 in {1 c^T}
    blind_share: torch.Tensor  # (H,) share of ||G||^2 in the blind subspace
    deriv: torch.Tensor  # (H, R) <G_h, D_r> by autograd (D_r row-centred, unit norm)
    cos: torch.Tensor  # (H, R) <G_h, D_r> / ||G_h||
    deriv_jvp: torch.Tensor | None  # (H, R) the same by forward mode; None unless use_jvp
    qk: QKGrads | None  # weight gradients and dL/dM; None at rotary sites
    per_example: PerExampleProbe | None  # None unless per_example

    @property
    def cos_rms_per_example(self) -> torch.Tensor | None:
        """(H, R) ``rms_b <G_bh, D_r> / rms_b ||G_bh||``: the cosine seen example by example."""
        pe = self.per_example
        if pe is None:
            return None
        num_HxR = pe.deriv.pow(2).mean(0).sqrt()
        den_H = torch.linalg.matrix_norm(pe.G).pow(2).mean(0).sqrt()
        return num_HxR / den_H[:, None]


@dataclass(frozen=True)
class PerExampleGrads:
    """Gradients of each example's own loss (a batch of one), from one vmap(grad) call."""

    scores: dict[str, torch.Tensor]  # score hook -> (B, H, T, T) dl_b/dS_b
    weights: dict[str, torch.Tensor]  # "<attention>.W_Q.weight" / W_K -> (B, d, d)
    inputs: dict[str, torch.Tensor]  # score hook -> (B, T, d) attention input X_b


def _layer_rows(loss: str, lp: LayerProbe, directions: tuple[str, ...]) -> list[dict]:
    """Tidy rows (loss, layer, head, direction, metric, value) of one site, heads in order."""
    rows = []

    def add(head, direction, metric, value):
        rows.append(dict(loss=loss, layer=lp.site, head=head, direction=direction, metric=metric,
                         value=float(value)))

    H = lp.deriv.shape[0]
    cos_rms = lp.cos_rms_per_example
    pe, qk = lp.per_example, lp.qk
    for h in range(H):
        add(h, None, "row_heterogeneity", lp.row_heterogeneity[h])
        add(h, None, "column_share", lp.column_share[h])
        add(h, None, "blind_share", lp.blind_share[h])
        add(h, None, "grad_S_norm", lp.grad_norm[h])
        if pe is not None:
            add(h, None, "row_heterogeneity_per_example_max", pe.row_heterogeneity[:, h].max())
        if qk is not None:
            dh = qk.grad_W_Q.shape[0] // H
            rows_h = slice(h * dh, (h + 1) * dh)  # head h's rows of W_Q and W_K
            add(h, None, "grad_W_Q_norm", qk.grad_W_Q[rows_h].norm())
            add(h, None, "grad_W_K_norm", qk.grad_W_K[rows_h].norm())
            sv = qk.dLdM_sv[h]
            add(h, None, "dLdM_sv1", sv[0])
            add(h, None, "dLdM_sv2_over_sv1", sv[1] / sv[0])
            # numerical rank, the usual threshold sv1 * size * machine epsilon
            tol = sv[0] * sv.numel() * torch.finfo(sv.dtype).eps
            add(h, None, "dLdM_rank", int((sv > tol).sum()))
        if pe is not None and pe.dLdM_sv is not None:
            sv_B = pe.dLdM_sv[:, h]
            add(h, None, "dLdM_sv2_over_sv1_per_example_max", (sv_B[:, 1] / sv_B[:, 0]).max())
        for k, name in enumerate(directions):
            add(h, name, "deriv", lp.deriv[h, k])
            add(h, name, "cos", lp.cos[h, k])
            if lp.deriv_jvp is not None:
                add(h, name, "deriv_jvp", lp.deriv_jvp[h, k])
            if cos_rms is not None:
                add(h, name, "cos_rms_per_example", cos_rms[h, k])
    return rows


@dataclass(frozen=True)
class ProbeResult:
    """All score sites of one probe: ``result[site]`` or ``result.layers``."""

    loss: str  # loss name
    value: float  # loss of the batch at the probed weights
    directions: tuple[str, ...]  # names of the K directions
    D: torch.Tensor  # (K, T, T) the normalised directions used
    layers: tuple[LayerProbe, ...]  # one per score site, in module order

    def __getitem__(self, site: str) -> LayerProbe:
        for lp in self.layers:
            if lp.site == site:
                return lp
        raise KeyError(f"no score site {site!r}; sites are {[lp.site for lp in self.layers]}")

    def to_frame(self) -> pd.DataFrame:
        """Tidy rows (loss, layer, head, direction, metric, value); per-example tensors are
        summarised (max row heterogeneity, rms cosine, max sv2/sv1 of dL/dM)."""
        return pd.DataFrame([row for lp in self.layers
                             for row in _layer_rows(self.loss, lp, self.directions)])


@dataclass(frozen=True)
class Blindness:
    """Two probes on the same batch and the blindness ratio per site, head and direction.

    ``ratio = |cos_label| / |cos_recon|`` with ``cos = <G, D_hat> / ||G||_F``: each loss's
    derivative along the unit direction, relative to that loss's own steepest rate, so the
    scale of the losses (cross-entropy vs L1) cancels. 0 means the label loss is blind to
    the direction while reconstruction is not; ~1 equally sighted; nan when recon is blind
    too. ``ratio_per_example`` uses the rms cosines (directions seen example by example).
    """

    label: ProbeResult  # the label-loss probe
    recon: ProbeResult  # the reconstruction-loss probe, same batch and directions

    @property
    def ratio(self) -> dict[str, torch.Tensor]:
        """``{site: (H, R)}`` |cos_label| / |cos_recon|."""
        return {a.site: a.cos.abs() / b.cos.abs() for a, b in zip(self.label.layers, self.recon.layers)}

    @property
    def ratio_per_example(self) -> dict[str, torch.Tensor] | None:
        """``{site: (H, R)}`` the ratio of rms cosines; None without per-example gradients."""
        if self.label.layers[0].per_example is None or self.recon.layers[0].per_example is None:
            return None
        return {a.site: a.cos_rms_per_example / b.cos_rms_per_example
                for a, b in zip(self.label.layers, self.recon.layers)}

    def table(self) -> pd.DataFrame:
        """One row per (layer, head, direction): cosines, derivatives and ratios."""
        rows = []
        rpe = self.ratio_per_example
        for a, b in zip(self.label.layers, self.recon.layers):
            r_HxR = self.ratio[a.site]
            for h in range(a.deriv.shape[0]):
                for k, name in enumerate(self.label.directions):
                    row = dict(layer=a.site, head=h, direction=name, cos_label=float(a.cos[h, k]),
                               cos_recon=float(b.cos[h, k]), ratio=float(r_HxR[h, k]),
                               deriv_label=float(a.deriv[h, k]), deriv_recon=float(b.deriv[h, k]))
                    if rpe is not None:
                        row["ratio_per_example"] = float(rpe[a.site][h, k])
                    rows.append(row)
        return pd.DataFrame(rows)

    def to_frame(self) -> pd.DataFrame:
        """Tidy: both probes' frames plus ``ratio`` rows (loss = "label/recon")."""
        t = self.table()
        extra = t.melt(id_vars=["layer", "head", "direction"],
                       value_vars=[c for c in ("ratio", "ratio_per_example") if c in t],
                       var_name="metric", value_name="value").assign(loss="label/recon")
        return pd.concat([self.label.to_frame(), self.recon.to_frame(), extra], ignore_index=True)


__all__ = ["QKGrads", "PerExampleProbe", "LayerProbe", "PerExampleGrads", "ProbeResult", "Blindness"]
