"""Real data: UCR time-series sets read from a local archive or a package (:mod:`.sources`,
:mod:`.read`, :mod:`.data`), their runs (:mod:`.runs`), the basin study (:mod:`.study`) and
the powered study of SPT's gain (:mod:`.gain`)."""
from toyspt.ucr.data import PAPER_DATASETS, UCRConfig, UCRData, UCRSource, load_ucr, ucr_source
from toyspt.ucr.runs import ucr_spec, ucr_train_config

__all__ = ["PAPER_DATASETS", "UCRConfig", "UCRData", "UCRSource", "load_ucr", "ucr_source", "ucr_spec",
           "ucr_train_config"]
