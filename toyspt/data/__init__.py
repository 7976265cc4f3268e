"""Data: the toy task families and SPT masking (:mod:`.tasks`), what a run's data is
(:mod:`.source`: the data-source protocol and the registry of kinds), raw pixels normalised as the
LRA code does (:mod:`.pixels`, shared by :mod:`toyspt.kinds` and the bridge), score-space
directions (:mod:`.directions`)."""
from toyspt.data import tasks as _tasks  # noqa: F401  (registers the toy kind of data: toyspt.data.source)
from toyspt.util.lazy import exports

__all__, __getattr__, __dir__ = exports(globals(), {
    "toyspt.data.source": ("DataSource",),
    "toyspt.data.tasks": ("TaskConfig", "TaskData", "make_task", "mask_inputs", "recon_loss", "sample_mask"),
})
