"""Training: the recipe table (:mod:`.recipes`), what a label phase measures
(:mod:`.evaluation`), what one run trains (:mod:`.config`), the training loop (:mod:`.loop`), a
run on K seeds (:mod:`.run`), the opt-in compiled step (:mod:`.compiled`)."""
from toyspt.util.lazy import exports

__all__, __getattr__, __dir__ = exports(globals(), {
    "toyspt.train.recipes": ("RECIPES", "TrainConfig", "get_recipe"),
    "toyspt.train.config": ("RunConfig",),
    "toyspt.train.run": ("RunResult", "load_model", "run_recipe", "run_recipe_seeds"),
})
