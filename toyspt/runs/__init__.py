"""The run system, in layers (each imports only those before it):

    specs      what determines a run, hashed to a key (Spec, RunSpec; UCR and LRA-demo specs
               live beside their data: toyspt.ucr.runs, toyspt.lra.demo)
    cache      finished runs on disk by key, verified on load (RunCache)
    executors  where training runs: this process, a process pool, a dask cluster
    sweep      many specs through the cache; seed groups train together (sweep, get_run)
    tables     per-seed summaries and mean ± std tables (compare)

Nothing in toyspt's data, model, training or measurement layers imports this package.
"""
from toyspt.runs.cache import DEFAULT_CACHE, CacheError, RunCache
from toyspt.runs.executors import executor_scope, make_executor
from toyspt.runs.specs import RunSpec, Spec, spec_from_dict, with_overrides
from toyspt.runs.sweeps import get_run, load_answer, sweep

__all__ = ["Spec", "RunSpec", "spec_from_dict", "with_overrides", "RunCache", "CacheError", "DEFAULT_CACHE",
           "make_executor", "executor_scope", "get_run", "load_answer", "sweep"]
