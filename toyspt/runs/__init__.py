"""The run system, module by module:

    specs         what determines a cache entry, hashed to a key (Spec, Entry, Table, RunSpec; UCR and
                  LRA-demo specs live beside their data: toyspt.ucr.runs, toyspt.lra.demo)
    store         the store protocol (load, store, remove, check_writable), LayeredStore, and
                  layered(cache, ledger): the store a sweep uses
    cache         finished entries on disk by key, verified on load (RunCache, a store)
    cache_files   the run cache's files: bounded reading, the manifest's MAC, damaged entries set aside
    exact         the exact encoding: an entry's JSON in a compact form that decodes to the same text
    ledger        the results ledger (Ledger, a store; StudyLedger: a study's declaration of its ledger);
                  ledger_file (the format, parsing), ledger_append (appending, merging, repair, migration
                  under one lock)
    record_checks what a record's numbers must satisfy (every record a ledger reads is checked)
    kernels       the settings that decide a run's CPU kernels, as a record names them, and the
                  environment that dispatches the same ones again
    verify        retrain ledger records under the kernels they name, compare bit for bit
                  (toyspt ledger verify)
    executors     where training runs: this process, a process pool, a dask cluster
    planning      which entry answers each spec, what trains (make_plan, Plan)
    pricing       what a run costs on the reference machine (RunSpec.seconds)
    costs         the cost model calibrated on observed seconds, the simulation behind the ETA
    sweeps        many specs through the cache; seed groups train together (sweep, SweepOptions, get_run)
    state_probes  probes of stored weights as cached entries
    arms          recipe:key=value arm strings; arm_specs: arms over seeds and data sources

Nothing in toyspt's data, model, training or measurement layers imports this package; what
the runs say (statistics, gains, the basin, comparison tables) is :mod:`toyspt.analysis`, one
layer up. The names below load on first use.
"""
from toyspt.util.lazy import exports

__all__, __getattr__, __dir__ = exports(globals(), {
    "toyspt.runs.specs": ("Spec", "RunSpec", "spec_from_dict", "with_overrides"),
    "toyspt.runs.cache": ("RunCache", "CacheError", "DEFAULT_CACHE"),
    "toyspt.runs.store": ("Store", "LayeredStore", "layered"),
    "toyspt.runs.ledger": ("Ledger", "StudyLedger"),
    "toyspt.runs.executors": ("make_executor", "executor_scope"),
    "toyspt.runs.sweeps": ("get_run", "load_answer", "sweep", "SweepOptions"),
})
