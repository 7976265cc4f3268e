"""Training: the recipe table (:mod:`.recipes`), what a label phase measures
(:mod:`.evaluation`), the training loop (:mod:`.loop`), a recipe on K seeds (:mod:`.run`), the
opt-in compiled step (:mod:`.compiled`)."""
from toyspt.train.recipes import RECIPES, TrainConfig, get_recipe
from toyspt.train.run import RunResult, load_model, run_recipe, run_recipe_seeds

__all__ = ["RECIPES", "TrainConfig", "get_recipe", "RunResult", "load_model", "run_recipe", "run_recipe_seeds"]
