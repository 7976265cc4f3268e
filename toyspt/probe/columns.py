"""Per-run columns of ``toyspt compare`` (any data), measured on a run's stored final weights:
:data:`PROBE_COLUMNS` (displacement of W_Q/W_K from the init, proximity and self index on the
data's probe inputs) and, on request, the label/recon blindness columns of :func:`blindness_columns`.
Each column is ``fn(spec, result) -> float`` (or a dict of several columns)."""
from __future__ import annotations

from typing import Any, Callable

from toyspt.probe.tracking import attention_maps, proximity_index, relative_displacement, self_index

BLINDNESS_BATCH = 256  # training examples the blindness column probes (every one of a small UCR set)


def blindness_columns(spec, result) -> dict[str, float]:
    """Label vs recon blindness of the final weights (float64) along the width-1 circulant
    proximity direction, on the first :data:`BLINDNESS_BATCH` training examples with a seeded
    mask: ``blind_ratio_circ_w1`` = |cos_label| / |cos_recon| (0: the label loss is blind to
    it, ~1: both see it) and ``column_share_label`` (share of the label gradient in
    column-only directions)."""
    from toyspt.data.directions import PROXIMITY_W1
    from toyspt.probe.engine import blindness
    from toyspt.probe.losses import make_batch
    from toyspt.train.run import load_model

    d = spec.data.load()
    batch = make_batch(d.train.x[:BLINDNESS_BATCH], d.train.y[:BLINDNESS_BATCH], spec.train.mask_rate, seed=0)
    bl = blindness(load_model(result, "final"), batch, [PROXIMITY_W1[0]], per_example=False, use_jvp=False)
    site = bl.label.layers[0].site
    return dict(blind_ratio_circ_w1=bl.ratio[site][:, 0].mean().item(),
                column_share_label=bl.label.layers[0].column_share.mean().item())


def _index(fn):
    """A per-run column: ``fn`` (an index of attention maps) of the final weights on the data's probe inputs."""
    from toyspt.train.run import load_model

    def column(spec, res) -> float:
        A = attention_maps(load_model(res, "final"), spec.data.probe_inputs())
        return fn(next(iter(A.values()))).mean().item()
    return column


# per-run columns of ``toyspt compare`` (toyspt.analysis.tables), any data: name -> fn(spec, result) -> float
PROBE_COLUMNS: dict[str, Callable[[Any, Any], float]] = {
    "rel_disp_WQ": lambda spec, res: relative_displacement(res.states["final"], res.states["init"], "W_Q"),
    "rel_disp_WK": lambda spec, res: relative_displacement(res.states["final"], res.states["init"], "W_K"),
    "proximity_index": _index(proximity_index),
    "self_index": _index(self_index),
}


__all__ = ["PROBE_COLUMNS", "blindness_columns", "BLINDNESS_BATCH"]
