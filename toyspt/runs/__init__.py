"""The run system, module by module:

    specs         what determines a run, hashed to a key (Spec, RunSpec; UCR and LRA-demo specs
                  live beside their data: toyspt.ucr.runs, toyspt.lra.demo)
    cache         finished runs on disk by key, verified on load (RunCache)
    records       a finished entry's exact stored form; ledger: the results ledger of them
    executors     where training runs: this process, a process pool, a dask cluster
    planning      which entry answers each spec, what trains; costs: the ETA's cost model
    sweeps        many specs through the cache; seed groups train together (sweep, get_run)
    state_probes  probes of stored weights as cached entries
    arms          recipe:key=value arm strings
    tables        the one per-run row (run_row), per-seed summaries and mean ± std tables (compare)

Nothing in toyspt's data, model, training or measurement layers imports this package; what
the runs say (statistics, gains, the basin) is :mod:`toyspt.analysis`, one layer up.
"""
from toyspt.runs.cache import DEFAULT_CACHE, CacheError, RunCache
from toyspt.runs.executors import executor_scope, make_executor
from toyspt.runs.specs import RunSpec, Spec, spec_from_dict, with_overrides
from toyspt.runs.sweeps import get_run, load_answer, sweep

__all__ = ["Spec", "RunSpec", "spec_from_dict", "with_overrides", "RunCache", "CacheError", "DEFAULT_CACHE",
           "make_executor", "executor_scope", "get_run", "load_answer", "sweep"]
