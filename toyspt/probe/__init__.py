"""Measurement: the probe engine (:mod:`.engine`: dL/dS along score directions, blindness),
how a probe attaches (:mod:`.instrument`), probe losses (:mod:`.losses`), records
(:mod:`.results`), trackers and stored-weight measures (:mod:`.tracking`), the per-run columns of
``toyspt compare`` (:mod:`.columns`), the basin gain (:mod:`.basin`)."""
from toyspt.util.lazy import exports

__all__, __getattr__, __dir__ = exports(globals(), {
    "toyspt.probe.basin": ("basin_predictor", "beta_unif"),
    "toyspt.probe.engine": ("blindness", "probe"),
    "toyspt.probe.losses": ("make_batch",),
    "toyspt.probe.tracking": ("attention_maps", "positional_profile", "proximity_index", "proximity_of", "self_index"),
})
