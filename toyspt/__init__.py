"""toyspt: a small, exact toolkit that explains why self-pretraining helps Transformers on
sequence classification. The layers and where each piece lives: ARCHITECTURE.md.

The names a user needs are importable from here (``from toyspt import TaskConfig, run_recipe``);
they load on first use, so ``import toyspt`` (and ``toyspt --version``) stays free of torch."""
import sys
from importlib.util import spec_from_file_location
from pathlib import Path

from toyspt.util.lazy import exports


class _CheckoutTheory:
    """Where theory/ sits beside this package (a checkout, or an editable install of one),
    ``toyspt.theory`` is that theory/: the one of the code that runs, never the folder an
    editable install of another checkout (or of a deleted one) maps the name to. An installed
    wheel has toyspt/theory inside the package and no theory/ beside it: nothing changes."""

    def __init__(self, folder: Path):
        self.folder = folder

    def find_spec(self, name, path=None, target=None):
        if name != "toyspt.theory":
            return None
        return spec_from_file_location(name, self.folder / "__init__.py", submodule_search_locations=[str(self.folder)])


_here = Path(__file__).resolve().parent
if (_here.parent / "theory" / "__init__.py").is_file() and not (_here / "theory").is_dir():
    sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != "_CheckoutTheory"]  # one, even if reloaded
    sys.meta_path.insert(0, _CheckoutTheory(_here.parent / "theory"))

__version__ = "0.2.0"

__all__, __getattr__, __dir__ = exports(globals(), {
    "toyspt.data": ("TaskConfig", "TaskData", "make_task"),
    "toyspt.nn": ("ModelConfig", "build_model", "hooks"),
    "toyspt.train": ("TrainConfig", "RECIPES", "run_recipe", "load_model", "RunResult"),
    "toyspt.probe": ("blindness", "probe", "make_batch", "attention_maps", "proximity_index", "proximity_of",
                     "beta_unif", "basin_predictor"),
    "toyspt.runs": ("RunSpec", "RunCache", "Ledger", "LayeredStore", "sweep", "get_run"),
    "toyspt.ucr": ("load_ucr", "ucr_source", "ucr_spec"),
})
__all__ = ["__version__", *__all__]
