"""Trackers: what training does to the attention, as tidy records (theory.md T5).

Three quantities, each available as a training callback (protocol of
:mod:`toyspt.train.run`; records go through ``ctx.record``) and as a function of stored weights
(``RunResult.states``), so figures can be made from cached runs:

* **Frobenius displacement** ``||W_t - W_ref||_F`` and ``/ ||W_ref||_F`` of every named
  matrix (2-D ``*.weight`` tensors: W_Q, W_K, W_V, W_O per layer, MLP, embedding, heads,
  and the learned PE table's first T rows), with ``ref`` = the start of the current phase
  (``*_phase``) and the global initialisation (``*_init``), plus the top singular values
  of ``W_t - W_0``. A relative displacement from a zero matrix is not recorded.
* **Positional score profile** ``Pi(delta)``: the row-centred attention scores the model
  assigns to the *mean input* (x = 0, the mean after per-channel standardisation), averaged
  along each diagonal ``j - i = delta``. Why this and not the raw ``p_i^T M p_j``: the
  attention input is ``ln1(embed(x) + p)``, so the raw product ignores the LayerNorm's
  scaling, the embedding bias and the Q/K biases. On the mean input every token is
  ``b_E + p_i`` and layer 0's scores are exactly ``ln1(b_E + p_i)^T M ln1(b_E + p_j)`` plus
  bias terms: the pure positional part of what the model computes. Row-centring removes
  what softmax ignores. It also works for ALiBi/FIRE/RoPE (whatever shapes the scores).
* **Attention profile on data** ``A(delta)``: attention weights averaged over a fixed batch
  of validation sequences and along each diagonal, the **proximity index** (attention mass on
  the neighbours ``1 <= |j-i| <= 2``, relative to uniform: 1 uniform, > 1 proximity) and
  ``self_index`` (:mod:`toyspt.probe.locality`; also its 2-D image neighbourhood).

The ``probes`` tracker records :func:`toyspt.probe.engine.blindness` quantities (label and recon
cosines per direction and their ratio, row heterogeneity, column-only share) every k steps on a
fixed probe batch. :func:`make_trackers` builds trackers by name for ``RunSpec.trackers``
and :func:`tracker_price` says what their records cost; :func:`proximity_of` is the proximity
index of stored weights that every figure reads (the per-run columns of ``toyspt compare``:
:mod:`toyspt.probe.columns`).
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import pandas as pd
import torch
from torch import nn

from toyspt.data import directions as dr
from toyspt.data.directions import offsets
from toyspt.data.tasks import TaskData
from toyspt.nn.activation_cache import run_with_cache
from toyspt.probe import engine as pr
from toyspt.probe import instrument, losses
from toyspt.probe.basin import BetaTracker, check_epochs, records_at
from toyspt.probe.groups import group_matrices
from toyspt.probe.locality import neighbourhood_index, proximity_index, self_index
from toyspt.train.recipes import get_recipe

PROXIMITY_WINDOW = 2  # the proximity index counts neighbours with 1 <= |i - j| <= this
TOP_SV = 3  # singular values of W_t - W_0 recorded per matrix
PROFILE_BATCH = 256  # validation sequences for the attention profile
PROBE_BATCH = 128  # training sequences in the probes tracker's fixed batch
PROBE_DIRECTIONS = dr.COMPACT  # directions the probes tracker records


# --------------------------------------------------------------------------------------
# displacement

def matrices(state: Mapping[str, torch.Tensor], learned_pe: bool = False, T: int | None = None
             ) -> dict[str, torch.Tensor]:
    """The named matrices of a state dict (name without ``.weight``): every 2-D weight, and
    ``pe`` (rows ``[:T]`` of the table) when the PE is learned."""
    out = {n[: -len(".weight")]: t for n, t in state.items() if n.endswith(".weight") and t.dim() == 2}
    if learned_pe and "pe.table" in state:
        out["pe"] = state["pe.table"][:T] if T is not None else state["pe.table"]
    return out


def displacement(state: Mapping[str, torch.Tensor], ref: Mapping[str, torch.Tensor], tag: str,
                 learned_pe: bool = False, T: int | None = None, top_sv: int = 0) -> list[dict]:
    """Rows (name, metric, value[, index]): ``disp_<tag>``, ``rel_disp_<tag>`` and, when
    ``top_sv`` > 0, the top singular values ``sv_<tag>`` of ``W - W_ref``."""
    now, before = matrices(state, learned_pe, T), matrices(ref, learned_pe, T)
    rows = []
    for name, W in now.items():
        if name not in before:
            raise KeyError(f"reference state has no matrix {name!r}")
        W, R = W.double(), before[name].double()
        if W.shape != R.shape:
            raise ValueError(f"{name}: shape {tuple(W.shape)} differs from the reference {tuple(R.shape)}")
        d = torch.linalg.matrix_norm(W - R).item()
        rows.append(dict(name=name, metric=f"disp_{tag}", value=d))
        ref_norm = torch.linalg.matrix_norm(R).item()
        if ref_norm > 0:
            rows.append(dict(name=name, metric=f"rel_disp_{tag}", value=d / ref_norm))
        for k, s in enumerate(torch.linalg.svdvals(W - R)[:top_sv].tolist()):
            rows.append(dict(name=name, metric=f"sv_{tag}", value=s, index=k))
    return rows


def relative_displacement(state: Mapping[str, torch.Tensor], ref: Mapping[str, torch.Tensor],
                          which: str = "W_Q") -> float:
    """``||[W_l - R_l]_l||_F / ||[R_l]_l||_F`` over all layers' ``attn.<which>`` matrices
    (one layer: the plain relative displacement); nan when the reference is zero."""
    keys = [k for k in state if k.endswith(f".attn.{which}.weight")]
    if not keys:
        raise KeyError(f"state has no '*.attn.{which}.weight' matrix")
    num = sum(torch.sum((state[k].double() - ref[k].double()) ** 2) for k in keys).sqrt().item()
    den = sum(torch.sum(ref[k].double() ** 2) for k in keys).sqrt().item()
    return num / den if den > 0 else float("nan")


def _is_learned_pe(model: nn.Module) -> bool:
    return isinstance(getattr(getattr(model, "pe", None), "table", None), nn.Parameter)


# --------------------------------------------------------------------------------------
# profiles

def diagonal_means(M_xTxT: torch.Tensor) -> torch.Tensor:
    """Mean along each diagonal ``j - i = delta``, delta = -(T-1)..T-1: (..., 2T-1)."""
    T = M_xTxT.shape[-1]
    return torch.stack([torch.diagonal(M_xTxT, offset=d, dim1=-2, dim2=-1).mean(-1)
                        for d in range(-(T - 1), T)], dim=-1)


def _by_module(model: nn.Module, hook: str, forward: Callable, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """``{attention module: tensor}`` at every ``*<hook>`` point in one pass of ``forward(model, x)``."""
    instrument.score_sites(model)  # a clear error for models without attention hook points
    return run_with_cache(model, model, x, forward=forward, names_filter=hook)[1].by_module(hook)


def _classify(model: nn.Module, x: torch.Tensor):
    return model.classify(x)


def positional_profile(model: nn.Module, T: int, d_in: int | None = None,
                       forward: Callable = _classify) -> dict[str, torch.Tensor]:
    """``{attention module: (H, 2T-1)}``: row-centred scores on the mean input (x = 0),
    averaged along each diagonal (see the module docstring)."""
    d_in = d_in if d_in is not None else model.cfg.d_in
    with instrument.working_model(model, None) as m:
        dtype = next(m.parameters()).dtype
        x = torch.zeros(1, T, d_in, dtype=dtype)
        S = _by_module(m, "hook_attn_scores", forward, x)
    return {k: diagonal_means(s[0] - s[0].mean(-1, keepdim=True)) for k, s in S.items()}


def attention_maps(model: nn.Module, x: torch.Tensor, forward: Callable = _classify
                   ) -> dict[str, torch.Tensor]:
    """``{attention module: (H, T, T)}`` attention weights averaged over the batch ``x`` (values
    in the model's dtype; token ids as they are)."""
    with instrument.working_model(model, None) as m:
        A = _by_module(m, "hook_pattern", forward, x.to(next(m.parameters()).dtype) if x.is_floating_point() else x)
    return {k: a.mean(0) for k, a in A.items()}


def profile_rows(model: nn.Module, x: torch.Tensor, profiles: bool = True, window: int = PROXIMITY_WINDOW,
                 grid: int = 0) -> list[dict]:
    """Rows (name = attention module, metric, value, head[, offset]) for the proximity index
    (neighbours within ``window``) and self index, with ``grid`` = an image's width the 2-D
    ``neighbourhood_index`` (:mod:`toyspt.probe.locality`), and when ``profiles``, ``pos_score``
    and ``attn_weight`` by offset."""
    T = x.shape[1]
    rows = []
    A = attention_maps(model, x)
    P = positional_profile(model, T) if profiles else {}
    for name, a in A.items():
        for h, (pi, si) in enumerate(zip(proximity_index(a, window).tolist(), self_index(a).tolist())):
            rows.append(dict(name=name, metric="proximity_index", value=pi, head=h))
            rows.append(dict(name=name, metric="self_index", value=si, head=h))
        for h, ni in enumerate(neighbourhood_index(a, grid).tolist() if grid else []):
            rows.append(dict(name=name, metric="neighbourhood_index", value=ni, head=h))
        if profiles:
            for metric, prof in (("attn_weight", diagonal_means(a)), ("pos_score", P[name])):
                for h in range(prof.shape[0]):
                    for off, v in zip(offsets(T), prof[h].tolist()):
                        rows.append(dict(name=name, metric=metric, value=v, head=h, offset=off))
    return rows


# --------------------------------------------------------------------------------------
# probes over training

def probe_rows(model: nn.Module, batch, directions: Sequence[str] = PROBE_DIRECTIONS,
               losses: Mapping[str, Callable] | None = None) -> list[dict]:
    """Rows (name = attention module, metric, value, head[, direction]) of a label/recon
    blindness probe: ``cos_label``, ``cos_recon``, ``ratio`` per direction and the
    ``row_heterogeneity`` / ``column_share`` of each loss's score gradient. ``losses``: the
    "label" and "recon" adapters (default: the toy model's, :mod:`toyspt.probe.losses`)."""
    bl = pr.blindness(model, batch, list(directions), losses=losses, per_example=False, use_jvp=False)
    rows = []
    for lab, rec in zip(bl.label.layers, bl.recon.layers):
        name = lab.site.rpartition(".")[0]
        for h in range(lab.G.shape[0]):
            for loss, lp in (("label", lab), ("recon", rec)):
                rows.append(dict(name=name, metric=f"row_heterogeneity_{loss}",
                                 value=lp.row_heterogeneity[h].item(), head=h))
                rows.append(dict(name=name, metric=f"column_share_{loss}",
                                 value=lp.column_share[h].item(), head=h))
            for k, d in enumerate(bl.label.directions):
                rows.append(dict(name=name, metric="cos_label", value=lab.cos[h, k].item(), head=h, direction=d))
                rows.append(dict(name=name, metric="cos_recon", value=rec.cos[h, k].item(), head=h, direction=d))
                rows.append(dict(name=name, metric="ratio", value=bl.ratio[lab.site][h, k].item(),
                                 head=h, direction=d))
    return rows


# --------------------------------------------------------------------------------------
# callbacks

def phase_end(ctx, train, record: dict | None = None) -> bool:
    """Whether the epoch just finished ends its phase, for trackers recording at phase starts and
    ends only (``ends=1``): a stopping rule ended it there (``stopped`` in its history ``record``) or
    it is the cap (SPT: ``pre_epochs``; labels: the recipe's label epochs)."""
    cap = train.pre_epochs if ctx.phase == "pretrain" else get_recipe(ctx.recipe).label_epochs(train)
    return "stopped" in (record or {}) or ctx.epoch == cap


def _ends(ends, train):
    if ends and train is None:
        raise ValueError("ends=1 needs the run's TrainConfig (make_trackers passes it)")
    return train if ends else None


def _emit(ctx, rows: list[dict]) -> None:
    for r in rows:
        r = dict(r)
        ctx.record(r.pop("name"), r.pop("metric"), r.pop("value"), **r)


class DisplacementTracker:
    """Displacement from the phase start and from the global init, at every phase start
    and epoch end (``ends=1``: at phase starts and ends only); ``groups=1`` adds the weight
    groups of :mod:`toyspt.probe.groups` (per layer and head), from the init."""

    def __init__(self, data: TaskData | None = None, top_sv: int = TOP_SV, ends: int = 0, groups: int = 0,
                 train=None):
        self.T = getattr(data.config, "T", None) if data is not None else None  # a learned table's rows
        self.top_sv, self.groups, self.train = top_sv, bool(groups), _ends(ends, train)

    def _rows(self, ctx) -> list[dict]:
        state, lp = ctx.model.state_dict(), _is_learned_pe(ctx.model)
        rows = (displacement(state, ctx.init_state, "init", lp, self.T, self.top_sv)
                + displacement(state, ctx.phase_start_state, "phase", lp, self.T))
        if self.groups:
            H = ctx.model.cfg.n_heads
            rows += displacement(group_matrices(state, H), group_matrices(ctx.init_state, H), "group_init")
        return rows

    @staticmethod
    def price(run: dict, at=None, ends=0, **_) -> tuple[int, float, float]:  # copies and SVDs, no forward
        return (4 if ends else records_at(run["epochs"], at)), 4e-3, 0.0

    def on_phase_start(self, ctx) -> None:
        _emit(ctx, self._rows(ctx))

    def on_epoch(self, ctx, record) -> None:
        if self.train is None or phase_end(ctx, self.train, record):
            _emit(ctx, self._rows(ctx))


class ProfileTracker:
    """Proximity and self index after every epoch (``at``: those only); full positional and attention
    profiles at each phase start and every ``every`` epochs (2 x (2T-1) records per head)."""

    bulk = ("attn_weight", "pos_score")  # per-offset profiles (2T-1 per head): a results ledger leaves them out

    def __init__(self, data: TaskData, every: int = 10, n: int = PROFILE_BATCH, at=None, ends: int = 0, train=None,
                 **locality):  # window (proximity neighbours), grid (an image's width: the 2-D index)
        if every <= 0 or set(locality) - {"window", "grid"}:
            raise ValueError(f"every: must be positive, got {every}; options: window, grid, got {sorted(locality)}")
        self.x, self.every, self.at = data.val.x[:n], every, check_epochs(at)
        self.kw, self.train = dict(dict(window=PROXIMITY_WINDOW, grid=0), **locality), _ends(ends, train)

    @staticmethod
    def price(run: dict, at=None, ends=0, n=PROFILE_BATCH, **_) -> tuple[int, float, float]:  # a float32 forward
        return (4 if ends else records_at(run["epochs"], at)), 2e-3, float(min(int(n), run["n_val"]))

    def on_phase_start(self, ctx) -> None:
        _emit(ctx, profile_rows(ctx.model, self.x, profiles=True, **self.kw))

    def on_epoch(self, ctx, record) -> None:
        full = ctx.epoch % self.every == 0
        if phase_end(ctx, self.train, record) if self.train else full or self.at is None or ctx.epoch in self.at:
            _emit(ctx, profile_rows(ctx.model, self.x, profiles=full, **self.kw))


class ProbeTracker:
    """Blindness probe (label vs recon, float64) at each phase start and every ``every``
    optimizer steps, on a fixed batch of training sequences with a seeded mask."""

    def __init__(self, data: TaskData, every: int = 50, n: int = PROBE_BATCH, mask_rate: float = 0.5,
                 seed: int = 0, directions: Sequence[str] = PROBE_DIRECTIONS, ends: int = 0, train=None):
        if every <= 0:
            raise ValueError(f"every: must be positive, got {every}")
        self.batch = losses.make_batch(data.train.x[:n], data.train.y[:n], mask_rate, seed)
        self.every, self.directions, self.train = every, tuple(directions), _ends(ends, train)
        recon = train.recon if train is not None else "l1"  # the run's SPT loss (ListOps: cross-entropy on tokens)
        self.losses = {"label": losses.label_loss, "recon": losses.recon(recon)}

    @staticmethod
    def price(run: dict, every=50, n=PROBE_BATCH, ends=0, **_) -> tuple[int, float, float]:  # 4 float64 passes
        return 4 if ends else run["steps"] // max(1, int(every)) + 2, 15e-3, 8.0 * min(max(1, int(n)), run["n_train"])

    def on_phase_start(self, ctx) -> None:
        _emit(ctx, probe_rows(ctx.model, self.batch, self.directions, self.losses))

    def on_step(self, ctx, loss: float) -> None:
        if self.train is None and ctx.step % self.every == 0:
            self.on_phase_start(ctx)

    def on_epoch(self, ctx, record) -> None:
        if self.train is not None and phase_end(ctx, self.train, record):
            self.on_phase_start(ctx)


TRACKERS: dict[str, Callable[..., Any]] = {
    "displacement": DisplacementTracker,
    "profile": ProfileTracker,
    "probes": ProbeTracker,
    "beta": BetaTracker,  # toyspt.probe.basin: the model's recon gain on the uniform visible mean, per SPT epoch
}


# the metrics that trackers declare (``bulk``, beside their code) a results ledger's record leaves
# out; a record keeps every other number a tracker produces (toyspt.runs.ledger)
BULK_METRICS = frozenset(m for t in TRACKERS.values() for m in getattr(t, "bulk", ()))


def _parse(name: str) -> tuple[str, dict[str, Any]]:
    base, _, rest = name.partition(":")
    kw = {}
    for item in filter(None, rest.split(",")):
        k, eq, v = item.partition("=")
        if not eq:
            raise ValueError(f"tracker {name!r}: expected key=value, got {item!r}")
        if "/" in v:  # a list of integers, e.g. at=1/2/5
            if not all(e.lstrip("-").isdigit() for e in v.split("/")):
                raise ValueError(f"tracker {name!r}: expected integers separated by '/', got {v!r}")
            kw[k] = tuple(int(e) for e in v.split("/"))
        else:
            kw[k] = int(v) if v.lstrip("-").isdigit() else float(v)
    return base, kw


def tracker_price(name: str, **run: int) -> tuple[int, float, float]:
    """How the cost model (:mod:`toyspt.runs.costs`) prices tracker ``name`` in a run of shape
    ``run`` (n_train, n_val, steps, epochs, spt_epochs): (records, fixed seconds per record --
    copies, hooks, SVDs --, float32 forward sequences per record), from the tracker's own ``price``;
    a name no tracker answers to is priced as a profile (it is refused where the run trains)."""
    try:
        base, kw = _parse(name)
        return TRACKERS[base].price(run, **kw)
    except (KeyError, ValueError, TypeError):
        return records_at(run["epochs"]), 5e-3, float(min(PROFILE_BATCH, run["n_val"]))


def make_trackers(names: Sequence[str], data: TaskData, train=None) -> list:
    """Callbacks from names in :data:`TRACKERS`, optionally with integer/float options:
    ``"displacement"``, ``"profile:every=5"``, ``"probes:every=25,n=64"``, ``"beta"``, ``"beta:at=1/2/5"``
    (profile and beta: after the epochs ``at`` only); ``ends=1`` (displacement, profile, probes):
    at each phase's start and end only; ``"profile:window=1,grid=16"``: proximity within +-1 and the
    2-D neighbourhood of a 16-wide image; ``"displacement:groups=1"``: weight groups too.
    ``train`` (the run's TrainConfig) gives the beta tracker the run's SPT mask rate; a
    ``mask_rate`` option that contradicts it is refused."""
    out = []
    for name in names:
        base, kw = _parse(name)
        if base not in TRACKERS:
            raise ValueError(f"unknown tracker {base!r}; choose from {sorted(TRACKERS)}")
        if base == "beta" and train is not None:
            if kw.get("mask_rate", train.mask_rate) != train.mask_rate:
                raise ValueError(f"tracker {name!r}: mask_rate differs from the run's {train.mask_rate}")
            kw["mask_rate"] = train.mask_rate
        if kw.get("ends") or (base == "probes" and train is not None):
            kw["train"] = train  # phase ends; the probes tracker's SPT loss
        try:
            out.append(TRACKERS[base](data, **kw))
        except TypeError as e:
            raise ValueError(f"tracker {name!r}: {e}") from None
    return out


def records_frame(records: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Tidy DataFrame of tracker records (``"nan"`` strings from the JSON cache -> NaN)."""
    f = pd.DataFrame(list(records))
    if "value" in f:
        f["value"] = pd.to_numeric(f["value"], errors="coerce")
    return f


# --------------------------------------------------------------------------------------
# from stored runs

def proximity_of(result, which: str, x: torch.Tensor) -> float:
    """Proximity index (:func:`proximity_index`, layer 0, mean over heads) of a run's stored
    weights ``which`` ("init", "pretrained", "final") on inputs ``x`` (B, T, d_in): > 1
    proximity, < 1 anti-local."""
    from toyspt.train.run import load_model

    return proximity_index(next(iter(attention_maps(load_model(result, which), x).values()))).mean().item()


__all__ = ["matrices", "displacement", "relative_displacement", "diagonal_means", "offsets", "positional_profile",
           "attention_maps", "proximity_index", "self_index", "profile_rows", "probe_rows", "DisplacementTracker",
           "ProfileTracker", "ProbeTracker", "TRACKERS", "BULK_METRICS", "make_trackers", "records_frame",
           "tracker_price", "proximity_of", "PROBE_BATCH"]
