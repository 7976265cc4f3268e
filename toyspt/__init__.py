"""toyspt: a small, exact toolkit that explains why self-pretraining helps Transformers on
sequence classification. The layers and where each piece lives: ARCHITECTURE.md.

The names a user needs are importable from here (``from toyspt import TaskConfig, run_recipe``);
they load on first use, so ``import toyspt`` (and ``toyspt --version``) stays free of torch."""
from toyspt.util.lazy import exports

__version__ = "0.2.0"

__all__, __getattr__, __dir__ = exports(globals(), {
    "toyspt.data": ("TaskConfig", "TaskData", "make_task"),
    "toyspt.nn": ("ModelConfig", "build_model", "hooks"),
    "toyspt.train": ("TrainConfig", "RECIPES", "run_recipe", "load_model", "RunResult"),
    "toyspt.probe": ("blindness", "probe", "make_batch", "attention_maps", "proximity_index", "proximity_of",
                     "beta_unif", "basin_predictor"),
    "toyspt.runs": ("RunSpec", "RunCache", "sweep", "get_run"),
    "toyspt.ucr": ("load_ucr", "ucr_source", "ucr_spec"),
})
__all__ = ["__version__", *__all__]
