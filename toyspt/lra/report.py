"""The per-layer, per-head probe report of an LRA model, built on :mod:`toyspt.probe.engine` and
:mod:`toyspt.probe.tracking`.

For every attention layer and head:

* **label vs recon derivatives** along score directions (default
  :data:`toyspt.data.directions.COMPACT`): :func:`toyspt.probe.engine.probe` with the bridge's
  loss adapters (``inputs.LOSSES``), lean by default (per-head statistics reduced as backward
  goes), run on one example at a time (no padding, and explicit (H, T, T) scores of one
  example at a time, so T = 2000 fits in memory). Aggregated like ``probes``' per-example view:
  ``cos_rms = rms_b <G_b, D> / rms_b ||G_b||`` per loss, ``ratio = cos_rms_label /
  cos_rms_recon`` (0: the label loss is blind to the direction, reconstruction is not);
* **row heterogeneity** of each loss's score gradient (0 = identical rows) and its blind share;
* **attention by offset** ``A(delta)`` on the probe data, with the proximity and self index
  of :mod:`toyspt.probe.tracking`;
* **positional score profile**: row-centred scores by offset on the data, and on the mean
  input (mean token embedding + positional table: the positional part of the scores);
* with a reference model: **Frobenius displacement** of every matrix
  (:func:`toyspt.probe.tracking.displacement`) and per head of W_Q, W_K, W_V (row blocks), W_O
  (column block) and M_h = W_Q^h W_K^h^T / sqrt(d_head).

A model without a classifier (an SPT checkpoint) or without a per-token decoder (a
classifier) gets the missing head constructed on its frozen features
(:mod:`toyspt.lra.heads`: fitted classifiers and token decoders; for pixel classifiers
without mask channel a zero mask column and the least-squares readout) so both losses
exist; the report's notes say so.
"""
from __future__ import annotations

import copy
import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from toyspt.data import directions as dr
from toyspt.lra.heads import clean_inputs, fit_missing_heads
from toyspt.lra.inputs import LOSSES, documents, select
from toyspt.lra.model import LRATransformer
from toyspt.nn.activation_cache import run_with_cache
from toyspt.probe import engine as pr
from toyspt.probe import tracking as tr
from toyspt.util.validation import Float, Int, Text, Tuple, validate, validated

DTYPES = {"float64": torch.float64, "float32": torch.float32}


@dataclass(frozen=True)
class ReportConfig:
    # score directions probed (toyspt.data.directions names)
    directions: tuple[str, ...] = validated(dr.COMPACT, Tuple(Text(), unique=True))
    max_offset: int = validated(16, Int(ge=1))  # profiles keep offsets |j - i| <= max_offset
    # neighbours counted by the proximity index
    proximity_window: int = validated(tr.PROXIMITY_WINDOW, Int(ge=1))
    dtype: str = validated("float64", Text(tuple(DTYPES)))  # probe precision: float64 | float32
    fit_steps: int = validated(200, Int(gt=0))  # LBFGS iterations when fitting a missing head
    fit_l2: float = validated(1e-3, Float(ge=0))  # ridge penalty (on the weights) of a fitted head
    # ratios in the table
    summary_directions: tuple[str, ...] = validated(("circ_w1", "toep_w1", "prev"), Tuple(Text(), unique=True))
    # lean: per-head statistics reduced as backward goes (probe(..., lean=True)) | probes: the full probe
    engine: str = validated("lean", Text(("lean", "probes")))

    def __post_init__(self):
        validate(self)
        missing = [d for d in self.summary_directions if d not in self.directions]
        if missing:
            raise ValueError(f"summary_directions {missing} are not among the probed directions")


# ---------------------------------------------------------------------------- probes

def _layer(site: str) -> int:
    return int(site.split(".")[1])


def probe_rows(model: LRATransformer, batch: dict, cfg: ReportConfig = ReportConfig()) -> list[dict]:
    """Per-example rows (example, loss, layer, head, direction, metric, value) of label and
    recon score-gradient probes, one example at a time; see the module docstring."""
    rows = []
    for b in range(len(batch["lengths"])):
        ex = select(batch, slice(b, b + 1))
        if not bool(ex["mask"].any()):
            continue  # nothing masked: the reconstruction loss is undefined for this example
        losses = [loss for loss, head in (("label", model.head_cls), ("recon", model.head_rec))
                  if head is not None]
        for loss in losses:
            res = pr.probe(model, ex, loss, list(cfg.directions), losses=LOSSES, dtype=None, per_example=False,
                           use_jvp=False, lean=cfg.engine == "lean")
            for lp in res.layers:
                layer = _layer(lp.site)
                for h in range(lp.deriv.shape[0]):
                    base = dict(example=b, loss=loss, layer=layer, head=h)
                    rows.append(dict(base, direction=None, metric="grad_norm", value=float(lp.grad_norm[h])))
                    rows.append(dict(base, direction=None, metric="row_heterogeneity",
                                     value=float(lp.row_heterogeneity[h])))
                    rows.append(dict(base, direction=None, metric="blind_share",
                                     value=float(lp.blind_share[h])))
                    for k, name in enumerate(res.directions):
                        rows.append(dict(base, direction=name, metric="deriv", value=float(lp.deriv[h, k])))
    return rows


def aggregate_probes(rows: list[dict]) -> pd.DataFrame:
    """Per (layer, head, direction): rms cosines of each loss and their ratio, plus the mean
    row heterogeneity / blind share of each loss (layer, head, metric, value[, direction])."""
    f = pd.DataFrame(rows)
    if f.empty:
        raise ValueError("no example could be probed (every SPT mask was empty)")
    out = []
    gn = f[f.metric == "grad_norm"].groupby(["loss", "layer", "head"]).value
    gnorm_rms = gn.apply(lambda v: math.sqrt(float(np.mean(np.square(v)))))
    der = f[f.metric == "deriv"].groupby(["loss", "layer", "head", "direction"]).value
    der_rms = der.apply(lambda v: math.sqrt(float(np.mean(np.square(v)))))
    cos = der_rms / gnorm_rms.reindex(der_rms.index.droplevel("direction")).values
    if "label" not in cos.index.get_level_values("loss"):
        raise ValueError("aggregate_probes needs label-loss rows")
    has_rec = "recon" in cos.index.get_level_values("loss")
    for (layer, head, direction), lab in cos["label"].items():
        rec = cos["recon"][(layer, head, direction)] if has_rec else float("nan")
        for metric, v in (("cos_rms_label", lab), ("cos_rms_recon", rec),
                          ("ratio", lab / rec if rec > 0 else float("nan"))):
            out.append(dict(layer=layer, head=head, direction=direction, metric=metric, value=v))
    for metric in ("row_heterogeneity", "blind_share"):
        g = f[f.metric == metric].groupby(["loss", "layer", "head"]).value.mean()
        for (loss, layer, head), v in g.items():
            out.append(dict(layer=layer, head=head, direction=None, metric=f"{metric}_{loss}", value=v))
    return pd.DataFrame(out)


# -------------------------------------------------------------------------- profiles

def _central(M_HxTxT: torch.Tensor, K: int) -> tuple[list[int], torch.Tensor]:
    """Means along the diagonals j - i = -K..K (clipped to the sequence): the centre of
    :func:`toyspt.probe.tracking.diagonal_means`, without computing all 2T - 1 diagonals."""
    k = min(K, M_HxTxT.shape[-1] - 1)
    offs = list(range(-k, k + 1))
    return offs, torch.stack([torch.diagonal(M_HxTxT, offset=o, dim1=-2, dim2=-1).mean(-1)
                              for o in offs], dim=-1)


def _profile(t_HxTxT: torch.Tensor, name: str, example, cfg: ReportConfig) -> list[dict]:
    """Rows of one hooked (H, T, T) pattern or score tensor, reduced one head at a time as the
    forward pass produces it (nothing of size T^2 is kept)."""
    rows: list[dict] = []
    layer = _layer(name)
    pattern = name.endswith("hook_pattern")
    if pattern:
        for h, (pi, si) in enumerate(zip(tr.proximity_index(t_HxTxT, cfg.proximity_window).tolist(),
                                         tr.self_index(t_HxTxT).tolist())):
            rows.append(dict(example=example, layer=layer, head=h, metric="proximity_index", value=pi))
            rows.append(dict(example=example, layer=layer, head=h, metric="self_index", value=si))
    metric = ("attn_weight" if pattern else "score_centred") if example is not None else "pos_score"
    for h in range(t_HxTxT.shape[0]):
        M = t_HxTxT[h] if pattern else t_HxTxT[h] - t_HxTxT[h].mean(-1, keepdim=True)
        offs, prof = _central(M[None], cfg.max_offset)
        rows += [dict(example=example, layer=layer, head=h, metric=metric, offset=o, value=v)
                 for o, v in zip(offs, prof[0].tolist())]
    return rows


def _profiled(model: LRATransformer, hook: "str | tuple[str, ...]", e_1xTxD: torch.Tensor, example,
              cfg: ReportConfig) -> list[dict]:
    """The rows of every ``hook`` tensor of one pass over the embeddings ``e_1xTxD``, in the order
    they fire, each reduced as the pass produces it (:func:`toyspt.nn.activation_cache.run_with_cache`)."""
    cache = run_with_cache(model, e_1xTxD, forward=model.encode_embedded, names_filter=hook,
                           reduce=lambda t, name: _profile(t[0], name, example, cfg))[1]
    return [r for rows in cache.values() for r in rows]


def profile_rows(model: LRATransformer, batch: dict, cfg: ReportConfig = ReportConfig()) -> list[dict]:
    """Attention by offset, proximity/self index, row-centred scores by offset (per example
    on the data), and the positional profile on the mean input (rows with example=None).
    Each layer's (H, T, T) tensors are reduced inside the forward hooks and dropped."""
    rows: list[dict] = []
    dtype = next(model.parameters()).dtype
    emb_sum, emb_n = 0.0, 0
    for b in range(len(batch["lengths"])):
        ex = documents(select(batch, slice(b, b + 1)))  # a pair: profiles of its first document
        x = ex["inputs"].to(dtype) if ex["inputs"].is_floating_point() else ex["inputs"]
        with torch.no_grad():
            e = model.embed_inputs(clean_inputs(model, x))
        rows += _profiled(model, ("hook_pattern", "hook_attn_scores"), e, b, cfg)
        emb_sum, emb_n = emb_sum + e[0].sum(0), emb_n + e.shape[1]
    # positional part: every position gets the mean embedding of the probe data
    T = int(batch["lengths"].max())
    mean_e = (emb_sum / emb_n).to(dtype)
    rows += _profiled(model, "hook_attn_scores", mean_e.expand(1, T, -1), None, cfg)
    return rows


# ---------------------------------------------------------------------- displacement

def displacement_rows(model: LRATransformer, ref: LRATransformer) -> tuple[list[dict], list[str]]:
    """Frobenius displacement of every shared matrix and per head; (rows, skipped names)."""
    now, before = model.state_dict(), ref.state_dict()
    mats_now, mats_ref = tr.matrices(now), tr.matrices(before)
    shared = {n for n in mats_now if n in mats_ref and mats_now[n].shape == mats_ref[n].shape}
    skipped = sorted(set(mats_now) ^ set(mats_ref) | {n for n in mats_now if n in mats_ref} - shared)
    rows = [dict(r, section="matrix") for r in tr.displacement(
        {n + ".weight": t for n, t in mats_now.items() if n in shared},
        {n + ".weight": t for n, t in mats_ref.items() if n in shared}, "ref")]
    if model.cfg.n_heads != ref.cfg.n_heads or model.cfg.d_model != ref.cfg.d_model:
        return rows, skipped + ["per-head (different head layout)"]
    H, dh = model.cfg.n_heads, model.cfg.d_model // model.cfg.n_heads
    for layer, (a, r) in enumerate(zip(model.attentions, ref.attentions)):
        for h in range(H):
            sl = slice(h * dh, (h + 1) * dh)
            pairs = {"W_Q": (a.W_Q.weight[sl], r.W_Q.weight[sl]), "W_K": (a.W_K.weight[sl], r.W_K.weight[sl]),
                     "W_V": (a.W_V.weight[sl], r.W_V.weight[sl]), "W_O": (a.W_O.weight[:, sl], r.W_O.weight[:, sl]),
                     "M": (a.qk_matrix(h), r.qk_matrix(h))}
            for what, (w, w0) in pairs.items():
                w, w0 = w.detach().double(), w0.detach().double()
                dist = float(torch.linalg.matrix_norm(w - w0))
                n0 = float(torch.linalg.matrix_norm(w0))
                base = dict(section="head", name=f"blocks.{layer}.attn.{what}", layer=layer, head=h)
                rows.append(dict(base, metric="disp_ref", value=dist))
                rows.append(dict(base, metric="rel_disp_ref", value=dist / n0 if n0 > 0 else float("nan")))
    return rows, skipped


# ---------------------------------------------------------------------------- report

@dataclass
class LRAReport:
    probes: pd.DataFrame  # per-example probe rows
    summary_probes: pd.DataFrame  # aggregated (layer, head[, direction], metric, value)
    profiles: pd.DataFrame  # profile rows
    displacement: pd.DataFrame | None  # with a reference model
    notes: list[str] = field(default_factory=list)
    meta: dict = field(default_factory=dict)

    def table(self) -> pd.DataFrame:
        """One row per (layer, head): ratios on the summary directions, row heterogeneity of
        both losses, proximity/self index, and (with a reference) relative displacements."""
        s = self.summary_probes
        dirs = self.meta.get("summary_directions", [])
        t = s[s.metric.isin(["row_heterogeneity_label", "row_heterogeneity_recon"])].pivot_table(
            index=["layer", "head"], columns="metric", values="value")
        t.columns = [c.replace("row_heterogeneity", "rowhet") for c in t.columns]
        sel = s[s.metric.isin(["ratio", "cos_rms_label"]) & s.direction.isin(dirs)].copy()
        sel["col"] = sel.metric.str.replace("cos_rms_", "cos_") + "_" + sel.direction
        r = sel.pivot_table(index=["layer", "head"], columns="col", values="value", dropna=False)
        r.columns = list(r.columns)
        p = self.profiles
        idx = p[p.metric.isin(["proximity_index", "self_index"])].pivot_table(
            index=["layer", "head"], columns="metric", values="value", aggfunc="mean")
        out = r.join(t, how="outer").join(idx, how="outer")
        if self.displacement is not None and not self.displacement.empty:
            d = self.displacement
            d = d[(d.section == "head") & (d.metric == "rel_disp_ref")].copy()
            d["what"] = "rel_" + d.name.str.rsplit(".", n=1).str[-1]
            out = out.join(d.pivot_table(index=["layer", "head"], columns="what", values="value"))
        return out.reset_index()

    def records(self) -> pd.DataFrame:
        """Every number of the report in one tidy frame (section column)."""
        parts = [self.summary_probes.assign(section="probe_summary"),
                 self.probes.assign(section="probe"), self.profiles.assign(section="profile")]
        if self.displacement is not None:
            parts.append(self.displacement.rename(columns={"section": "part"}).assign(section="displacement"))
        return pd.concat(parts, ignore_index=True)

    def write(self, out: str | os.PathLike, figure: bool = True) -> list[Path]:
        """table.csv, records.csv, report.json and (optionally) report.png in ``out``."""
        from toyspt.util.atomic import write_text
        from toyspt.util.plots import save_csv
        out = Path(out)
        paths = [save_csv(self.table(), out, "table"), save_csv(self.records(), out, "records")]
        doc = dict(meta=self.meta, notes=self.notes,
                   table=json.loads(self.table().to_json(orient="records")))
        p = out / "report.json"
        write_text(p, json.dumps(doc, indent=1, default=str))
        paths.append(p)
        if figure:
            from toyspt.lra.figure import report_figure
            paths.append(report_figure(self, out))
        return paths


def lra_report(model: LRATransformer, batch: dict, *, fit_batch: dict | None = None,
               ref: LRATransformer | None = None, cfg: ReportConfig = ReportConfig(),
               notes: list[str] | tuple = (), meta: dict | None = None,
               n_classes: int | None = None) -> LRAReport:
    """Probe ``model`` on ``batch`` (see the module docstring); ``fit_batch`` (default: the
    probe batch) fits missing heads; ``ref`` adds the displacement section."""
    dtype = DTYPES[cfg.dtype]
    work = copy.deepcopy(model).to(dtype).eval()
    if n_classes is None and model.head_cls is None and "y" in batch:
        seen = [int(b["y"].max()) + 1 for b in (batch, fit_batch) if b is not None and "y" in b]
        n_classes = max(seen)
    work, fitted = fit_missing_heads(work, fit_batch or batch, cfg, n_classes)
    rows = probe_rows(work, batch, cfg)
    disp = None
    all_notes = list(notes) + fitted
    if ref is not None:
        d_rows, skipped = displacement_rows(model, ref)
        disp = pd.DataFrame(d_rows)
        if skipped:
            all_notes.append(f"displacement: not compared (absent in one model or shapes differ): {skipped}")
    meta = dict(meta or {}, report_config=asdict(cfg), n_examples=int(len(batch["lengths"])),
                lengths=batch["lengths"].tolist(), model_config=asdict(model.cfg),
                summary_directions=list(cfg.summary_directions), torch=torch.__version__)
    return LRAReport(pd.DataFrame(rows), aggregate_probes(rows), pd.DataFrame(profile_rows(work, batch, cfg)),
                     disp, all_notes, meta)


__all__ = ["ReportConfig", "fit_missing_heads", "clean_inputs", "probe_rows",
           "aggregate_probes", "profile_rows", "displacement_rows", "LRAReport", "lra_report"]
