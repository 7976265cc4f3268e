"""Real data: UCR time-series sets read from a local archive or a package (:mod:`.locations`,
:mod:`.read`, :mod:`.data`, :mod:`.archive`: the scan's admission rule and related sets), their
kind of data (:mod:`.kind`), runs (:mod:`.runs`), the study's design by tier (:mod:`.design`),
the baselines (:mod:`.baselines`), the init probes of a set (:mod:`.init_probes`). What the
runs say is :mod:`toyspt.analysis`, on any data."""
from toyspt.ucr import kind as _kind  # noqa: F401  (registers the "ucr" kind of data: toyspt.data.source)
from toyspt.util.lazy import exports

__all__, __getattr__, __dir__ = exports(globals(), {
    "toyspt.ucr.data": ("PAPER_DATASETS", "UCRConfig", "UCRData", "UCRSource", "load_ucr", "ucr_source"),
    "toyspt.ucr.runs": ("ucr_spec", "ucr_train_config"),
})
