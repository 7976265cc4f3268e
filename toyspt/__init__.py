"""toyspt: a small, exact toolkit that explains why self-pretraining helps Transformers on
sequence classification. The layers and where each piece lives: ARCHITECTURE.md.

The names a user needs are importable from here (``from toyspt import TaskConfig, run_recipe``);
they load on first use, so ``import toyspt`` (and ``toyspt --version``) stays free of torch."""
from __future__ import annotations

import importlib

__version__ = "0.2.0"

# public name -> the subpackage that defines it
_EXPORTS = {
    "toyspt.data": ("TaskConfig", "TaskData", "make_task"),
    "toyspt.nn": ("ModelConfig", "build_model", "hooks"),
    "toyspt.train": ("TrainConfig", "RECIPES", "run_recipe", "load_model", "RunResult"),
    "toyspt.probe": ("blindness", "probe", "make_batch", "attention_maps", "proximity_index", "proximity_of",
                     "beta_unif", "basin_predictor"),
    "toyspt.runs": ("RunSpec", "RunCache", "sweep", "get_run"),
    "toyspt.ucr": ("load_ucr", "ucr_source", "ucr_spec"),
}
_WHERE = {name: mod for mod, names in _EXPORTS.items() for name in names}
__all__ = ["__version__", *_WHERE]


def __getattr__(name: str):
    if name in _WHERE:
        value = getattr(importlib.import_module(_WHERE[name]), name)
        globals()[name] = value  # once loaded, an ordinary attribute
        return value
    raise AttributeError(f"module 'toyspt' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
