"""What one run trains, whatever its seed and data: :class:`RunConfig`, the one value the train
functions take (:func:`toyspt.train.run.run_recipe`, ``run_recipe_seeds``, the phases), so none
restates the recipe, model, optimisation, evaluation policy and numerics one argument at a time.
A :class:`toyspt.runs.specs.RunSpec` is a RunConfig plus a seed, data and trackers."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from toyspt.nn.model import ModelConfig
from toyspt.train.compiled import check_numerics
from toyspt.train.evaluation import EVAL_TOKENS, check_policy, eval_rows
from toyspt.train.recipes import Recipe, TrainConfig, get_recipe
from toyspt.util.validation import config_dict


@dataclass(frozen=True)
class RunConfig:
    """A recipe with its model, training, evaluation policy and numerics; checked when made."""

    recipe: str  # one of toyspt.train.recipes.RECIPES
    model: ModelConfig = field(default_factory=ModelConfig)  # architecture
    train: TrainConfig = field(default_factory=TrainConfig)  # optimisation and SPT settings
    evaluate: str = "all"  # what the label phase measures: all | peak (toyspt.train.evaluation)
    numerics: str = "eager"  # eager (bitwise) | compiled (toyspt.train.compiled)
    eval_tokens: int = EVAL_TOKENS  # tokens per evaluation forward (memory, never the numbers)

    def __post_init__(self):
        for name, cls in (("model", ModelConfig), ("train", TrainConfig)):
            if not isinstance(getattr(self, name), cls):
                raise TypeError(f"{name}: a {cls.__name__}, got {type(getattr(self, name)).__name__}")
        check_policy(self.evaluate)
        check_numerics(self.numerics)
        eval_rows(1, self.eval_tokens)  # refuses a non-positive budget before any training
        self.rec.check_model(self.model)
        if (self.train.recon == "levels") != (self.model.rec_levels > 0):
            raise ValueError(f"recon {self.train.recon!r} with model.rec_levels={self.model.rec_levels}: the "
                             "'levels' loss needs rec_levels >= 2 grey levels, and rec_levels needs that loss")

    @classmethod
    def of(cls, run: "RunConfig | str") -> "RunConfig":
        """``run`` itself, or a recipe name with every default."""
        return run if isinstance(run, RunConfig) else cls(run)

    @property
    def rec(self) -> Recipe:
        """The recipe's row of the table."""
        return get_recipe(self.recipe)

    def stored(self, numerics: str) -> dict[str, Any]:
        """The run's ``config`` as its result keeps it, ``numerics`` being the path that ran (named
        only off eager: eager runs keep the config they had before there was a choice)."""
        out: dict[str, Any] = dict(model=config_dict(self.model), train=config_dict(self.train),
                                   evaluate=self.evaluate)
        if numerics == "compiled":
            out["numerics"] = numerics
        return out


__all__ = ["RunConfig"]
