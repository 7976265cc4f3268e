"""Real data: UCR time-series sets read from a local archive or a package (:mod:`.sources`,
:mod:`.read`, :mod:`.data`, :mod:`.archive`), their runs (:mod:`.runs`), the study"s plan by tier
(:mod:`.plan`), what the runs say (:mod:`.analysis`), the basin on real data (:mod:`.study`)."""
from toyspt.util.lazy import exports

__all__, __getattr__, __dir__ = exports(globals(), {
    "toyspt.ucr.data": ("PAPER_DATASETS", "UCRConfig", "UCRData", "UCRSource", "load_ucr", "ucr_source"),
    "toyspt.ucr.runs": ("ucr_spec", "ucr_train_config"),
})
