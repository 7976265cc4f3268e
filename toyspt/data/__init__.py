"""The data layer, module by module:

    source      what a run's data is: the data-source protocol (DataSource: kind, name, load,
                fingerprint, key_fields, fit, probe_inputs) and the registry of data kinds
                (register, kind_of, kinds); a kind registers from the layer that owns it
    tasks       the toy task: its families (a registry {name: draw}), splits, SPT masking and the
                reconstruction losses; TaskConfig is the "toy" data source, registered when this
                package is imported
    pixels      raw pixels normalised as the LRA code does (shared by toyspt.kinds and the bridge)
    directions  score-space directions, their named lists, the blind and column-only subspaces

Nothing here imports a layer above it; real data (toyspt.ucr, toyspt.kinds) brings its own kinds.
The names below load on first use.
"""
from toyspt.data import tasks as _tasks  # noqa: F401  (registers the toy kind of data: toyspt.data.source)
from toyspt.util.lazy import exports

__all__, __getattr__, __dir__ = exports(globals(), {
    "toyspt.data.source": ("DataSource",),
    "toyspt.data.tasks": ("TaskConfig", "TaskData", "make_task", "mask_inputs", "recon_loss", "sample_mask"),
})
