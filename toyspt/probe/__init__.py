"""Measurement: the probe engine (:mod:`.engine`: dL/dS along score directions, blindness),
how a probe attaches (:mod:`.instrument`), probe losses (:mod:`.losses`), records
(:mod:`.results`), trackers and stored-weight measures (:mod:`.tracking`), the basin gain (:mod:`.basin`)."""
from toyspt.probe.basin import basin_predictor, beta_unif
from toyspt.probe.engine import blindness, probe
from toyspt.probe.losses import make_batch
from toyspt.probe.tracking import attention_maps, positional_profile, proximity_index, proximity_of, self_index

__all__ = ["basin_predictor", "beta_unif", "blindness", "probe", "make_batch", "attention_maps",
           "positional_profile", "proximity_index", "proximity_of", "self_index"]
