"""Data: the toy task families and SPT masking (:mod:`.tasks`), what a run's data is
(:mod:`.source`), score-space directions (:mod:`.directions`)."""
from toyspt.data.source import DataSource
from toyspt.data.tasks import TaskConfig, TaskData, make_task, mask_inputs, recon_loss, sample_mask

__all__ = ["DataSource", "TaskConfig", "TaskData", "make_task", "mask_inputs", "recon_loss", "sample_mask"]
