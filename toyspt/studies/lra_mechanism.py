"""The mechanism on the LRA tasks, computed from a trained model: per layer
and head, how local its attention is, how far each weight group moved from the init, and how
blind the label loss is, relative to the SPT loss, along proximity directions of the scores.

:func:`mechanism_rows` takes a model, its init weights and a batch of the task's data (the
toolkit's format, (B, T, d_in)) and returns tidy rows in the format of the trackers'
records (``name, metric, value, head[, direction]``), computed by the same functions
(:mod:`toyspt.probe.tracking`): a run tracked with :func:`mechanism_trackers` records exactly
these at each phase's start and end, so :func:`mechanism_table` turns either (the rows, or a
tracked run's records from the ledger) into the wide table of ``figures/lra_claims_probes.csv``
(task, arm, state, layer, head, then the columns below). The model is either the toolkit's
(:class:`toyspt.nn.model.ToyTransformer`, its own heads and the run's SPT loss) or loaded from
an LRA checkpoint (:class:`toyspt.lra.model.LRATransformer`, the bridge's losses; a head the
file lacks is constructed, :mod:`toyspt.lra.heads`). Both see the same mask, drawn from
``seed`` as the trackers draw it, and every position (padding included, as the toy pools).

Columns: ``proximity_index`` (attention mass on the neighbours ``|j-i| <= window``, default
1, relative to uniform), ``self_index``, on images ``neighbourhood_index`` (the 2-D
4-neighbourhood: +-1 within a row, +-image width; :mod:`toyspt.probe.locality`);
``disp_group_init_<g>`` and ``rel_disp_group_init_<g>`` (Frobenius displacement from the
init, :mod:`toyspt.probe.groups`: ``Q K V O mlp norm`` per layer, ``Q_h K_h V_h O_h`` per
head, ``embed final_norm`` for the model); ``ratio_<d>``, ``cos_label_<d>``, ``cos_recon_<d>``
per probed direction ``d`` (:func:`toyspt.probe.engine.blindness` of the batch, float64) and
``row_heterogeneity_label|recon``. Init and trained model are two calls (``state``).
"""
from __future__ import annotations

import copy
import re
from dataclasses import dataclass

import pandas as pd
import torch

from toyspt.data.pixels import pixel_levels
from toyspt.data.tasks import sample_mask
from toyspt.lra.heads import clean_inputs, fit_missing_heads
from toyspt.lra.inputs import LOSSES
from toyspt.lra.model import LRATransformer
from toyspt.nn.model import ToyTransformer
from toyspt.probe import losses as toy_losses
from toyspt.probe import tracking as tr
from toyspt.probe.groups import group_matrices
from toyspt.probe.locality import neighbourhood_index, proximity_index, self_index
from toyspt.util.validation import Int, Text, Tuple, validate, validated

MECHANISM_SEEDS = (0, 1, 2)  # the tracked twins per task and arm (their own labels, mechanism/...)
TAG = "group_init"  # the displacement tag of weight groups (DisplacementTracker with groups=1)


@dataclass(frozen=True)
class MechanismConfig:
    n_attention: int = validated(tr.PROFILE_BATCH, Int(gt=0))  # validation sequences for the attention maps
    n_probe: int = validated(tr.PROBE_BATCH, Int(gt=0))  # training sequences of the label/recon probe
    window: int = validated(1, Int(ge=1))  # proximity index: neighbours 1 <= |j - i| <= window
    seed: int = validated(0, Int(ge=0))  # seed of the probe's SPT mask (the probes tracker's default)
    # score directions of the probe (toyspt.data.directions names)
    directions: tuple[str, ...] = validated(tr.PROBE_DIRECTIONS, Tuple(Text(), unique=True))

    def __post_init__(self):
        validate(self)


@dataclass(frozen=True)
class TaskView:
    """What the mechanism needs to know of a task's data."""
    name: str  # the task's name in the study (pathfinder | image | listops)
    token: bool  # token inputs (one-hot ListOps) or pixel values
    side: int  # image width (0: not an image)
    mask_rate: float  # the SPT mask rate of the run
    recon: str  # the SPT loss of the run: l1 (pixels) | ce (tokens)
    n_classes: int  # the task's classes (a classifier fitted on an SPT checkpoint has this many outputs)


def task_view(task) -> TaskView:
    """The :class:`TaskView` of a study task (:class:`toyspt.studies.lra_design.Task`)."""
    return _view(task.name, task.data, task.train)


def spec_view(name: str, spec) -> TaskView:
    """The :class:`TaskView` of a run spec of task ``name`` (the second study's runs)."""
    return _view(name, spec.data, spec.train)


def _view(name: str, data, train) -> TaskView:
    side = data.pathfinder.size if data.kind == "pathfinder" else getattr(data, "side", 0)
    return TaskView(name, data.kind == "listops", side, train.mask_rate, train.recon, data.n_classes)


def _layer(name: str) -> int | None:
    m = re.match(r"blocks\.(\d+)\.", name)
    return int(m.group(1)) if m else None


def _lra_batch(x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor, view: TaskView) -> dict:
    """The bridge's batch of the same examples and mask: ids or pixel values, full lengths."""
    B, T = x.shape[:2]
    batch = dict(inputs=x.argmax(-1) if view.token else x, lengths=torch.full((B,), T, dtype=torch.long),
                 mask=mask, y=y)
    if not view.token:
        batch["levels"] = pixel_levels(x, "digits")  # the toolkit's one normalisation rule: (x/255 - 0.5)/0.5
    return batch


def _encode(model: LRATransformer, inputs: torch.Tensor) -> torch.Tensor:
    return model.encode(clean_inputs(model, inputs))


def mechanism_rows(model: ToyTransformer | LRATransformer, init: dict, x_attn: torch.Tensor, x: torch.Tensor,
                   y: torch.Tensor, view: TaskView, cfg: MechanismConfig = MechanismConfig()) -> list[dict]:
    """Tidy rows (name, metric, value, head[, direction]) of the mechanism of ``model`` (see the
    module docstring): attention on ``x_attn`` (validation inputs), displacement of the weight
    groups from the state dict ``init`` (same representation as ``model``), the probe on ``x, y``
    (training inputs and labels) with the task's SPT mask rate and loss. Float64 throughout."""
    work = copy.deepcopy(model).double().eval()
    x_attn, x = x_attn[:cfg.n_attention].double(), x[:cfg.n_probe].double()
    y = y[:cfg.n_probe]
    mask = sample_mask(len(x), x.shape[1], view.mask_rate, torch.Generator().manual_seed(cfg.seed))
    if isinstance(work, LRATransformer):
        attn_in = x_attn.argmax(-1) if view.token else x_attn
        A = tr.attention_maps(work, attn_in, forward=_encode)
        batch = _lra_batch(x, y, mask, view)
        probed, notes = fit_missing_heads(work, batch, n_classes=view.n_classes)
        losses = LOSSES
    elif isinstance(work, ToyTransformer):
        A = tr.attention_maps(work, x_attn)
        batch = dict(x=x, y=y, mask=mask)  # toyspt.probe.losses.make_batch's layout, the same mask
        probed, losses = work, {"label": toy_losses.label_loss, "recon": toy_losses.recon(view.recon)}
    else:
        raise TypeError(f"mechanism_rows: a ToyTransformer or LRATransformer, got {type(model).__name__}")
    rows = []
    for name, a in A.items():
        for metric, v in (("proximity_index", proximity_index(a, cfg.window)), ("self_index", self_index(a))) + (
                (("neighbourhood_index", neighbourhood_index(a, view.side)),) if view.side else ()):
            rows += [dict(name=name, metric=metric, value=float(u), head=h) for h, u in enumerate(v.tolist())]
    H = work.attentions[0].n_heads
    rows += tr.displacement(group_matrices(work.state_dict(), H), group_matrices(init, H), TAG)
    rows += tr.probe_rows(probed, batch, cfg.directions, losses)
    return rows


def mechanism_trackers(view: TaskView, cfg: MechanismConfig = MechanismConfig()) -> tuple[str, ...]:
    """The tracker names that record :func:`mechanism_rows` of a run at each phase's start and end."""
    grid = f",grid={view.side}" if view.side else ""
    return ("displacement:ends=1,groups=1,top_sv=0",
            f"profile:ends=1,window={cfg.window},n={cfg.n_attention}{grid}",
            f"probes:ends=1,n={cfg.n_probe},seed={cfg.seed},mask_rate={view.mask_rate}")


MEASURES = ("proximity_index", "self_index", "neighbourhood_index", "row_heterogeneity_label",
            "row_heterogeneity_recon")


def _column(r: dict) -> tuple[str, int | None, int | None]:
    """(column, layer, head) of one row: layer-level groups have no head, model-level ones neither."""
    if TAG in r["metric"]:
        m = re.match(r"^(?:blocks\.(\d+)\.)?([A-Za-z_]+)(?:\.h(\d+))?$", r["name"])
        layer, group, head = m.groups()
        return (f"{r['metric']}_{group}" + ("_h" if head else ""), None if layer is None else int(layer),
                None if head is None else int(head))
    col = f"{r['metric']}_{r['direction']}" if r["metric"] in ("ratio", "cos_label", "cos_recon") else r["metric"]
    return col, _layer(r["name"]), int(r["head"])


def mechanism_table(rows, **labels) -> pd.DataFrame:
    """One row per (layer, head) from mechanism rows or a tracked run's records of one model
    (:func:`at_state` picks a phase's start or end), ``labels`` (task, arm, state, seed) as
    leading columns; layer-level groups repeat on each head of the layer, model-level ones on
    every row."""
    wanted = set(MEASURES) | {"ratio", "cos_label", "cos_recon", f"disp_{TAG}", f"rel_disp_{TAG}"}
    cells, by_layer, by_model = {}, {}, {}
    for r in tr.records_frame(rows).to_dict("records"):
        if r["metric"] not in wanted:
            continue
        col, layer, head = _column(r)
        if layer is None:
            by_model[col] = r["value"]
        elif head is None:
            by_layer.setdefault(layer, {})[col] = r["value"]
        else:
            cells.setdefault((layer, head), {})[col] = r["value"]
    if not cells:
        raise ValueError("mechanism_table: no per-head rows (no attention or probe records)")
    out = pd.DataFrame([dict(labels, layer=layer, head=head, **vals, **by_layer.get(layer, {}), **by_model)
                        for (layer, head), vals in sorted(cells.items())])
    lead = [*labels, "layer", "head"]
    return out[lead + sorted(c for c in out.columns if c not in lead)]  # columns in one order, whatever the rows


STATES = ("init", "pretrained", "final")  # the models the first study's figure picks out of a tracked run
# and the second's: also the model its label phase starts from (``label_start``: SPT's for spt, the init with
# SPT's W_Q, W_K for qk_transfer, SPT's but W_Q, W_K for all_but_qk_transfer), what a transfer carries
STATES2 = ("init", "pretrained", "label_start", "final")
_PHASE = {"init": (0, "start"), "pretrained": (0, "end"), "label_start": (-1, "start"), "final": (-1, "end")}


def at_state(records, state: str) -> list[dict]:
    """A tracked run's records of one model: ``init`` (the first phase's start), ``pretrained``
    (the first phase's end, where the run has a later one: SPT's model), ``label_start`` (the last
    phase's start, where the run has an earlier one) or ``final`` (the last phase's end); ``[]``
    for ``pretrained`` and ``label_start`` of a one-phase run."""
    if state not in _PHASE:
        raise ValueError(f"state: one of {', '.join(_PHASE)}, got {state!r}")
    f = tr.records_frame(records)
    phases = list(dict.fromkeys(f.phase))
    if state in ("pretrained", "label_start") and len(phases) < 2:
        return []
    which, end = _PHASE[state]
    g = f[f.phase == phases[which]]
    if end == "end" and g.step.nunique() < 2:  # the phase's start alone: its end was never recorded
        raise ValueError(f"state {state}: the run's {phases[which]} phase has records at its start only "
                         f"(step {int(g.step.min())}), none at its end")
    sel = g[g.step == (g.step.max() if end == "end" else g.step.min())]
    return sel.to_dict("records")


def constant_recon_loss(train_x: torch.Tensor, val_x: torch.Tensor, recon: str, levels: int = 256) -> float:
    """The SPT loss on ``val_x`` of the best prediction that ignores the context, fitted on
    ``train_x`` (both (B, T, d)), in expectation over a mask that picks positions at random:
    ``l1``, the train values' median at every masked position; ``mse``, their mean; ``ce``, the
    train tokens' frequencies; ``levels``, the train values' frequencies over ``levels`` grey levels.
    An SPT model whose validation loss is not below it has learned nothing that reading the
    neighbours could add (float64)."""
    tr_x, va_x = train_x.double(), val_x.double()
    if recon == "levels":
        from toyspt.data.tasks import grey_levels

        tr, va = grey_levels(tr_x, levels).reshape(-1), grey_levels(va_x, levels).reshape(-1)
        freq = torch.bincount(tr, minlength=levels).double() / len(tr)
        if bool((freq[va] == 0).any()):
            return float("inf")  # a validation level never seen in training
        return float(-freq[va].log().mean())
    if recon == "ce":
        freq = tr_x.reshape(-1, tr_x.shape[-1]).sum(0) / (tr_x.shape[0] * tr_x.shape[1])
        ids = va_x.argmax(-1).reshape(-1)
        if bool((freq[ids] == 0).any()):
            return float("inf")  # a validation token never seen in training
        return float(-freq[ids].log().mean())
    if recon == "l1":
        return float((va_x - tr_x.reshape(-1, tr_x.shape[-1]).median(0).values).abs().mean())
    if recon == "mse":
        return float((va_x - tr_x.reshape(-1, tr_x.shape[-1]).mean(0)).pow(2).mean())
    raise ValueError(f"recon: one of l1, mse, ce, levels, got {recon!r}")


__all__ = ["constant_recon_loss", "MechanismConfig", "TaskView", "task_view", "spec_view", "mechanism_rows",
           "mechanism_trackers", "mechanism_table", "at_state", "MECHANISM_SEEDS", "MEASURES", "STATES", "STATES2"]
