"""Checks of the claims of toyspt's theory (label-loss blindness vs masked reconstruction).

``python -m theory`` runs every check and prints a report; :func:`run_checks` does the same
from Python and returns :class:`Result` records. One module per claim family:
``t1_pooling``, ``t2_blindness`` (with ``t2_symbolic``), ``t3_recon``, ``t4_rank``, ``t5_training``.
"""
from toyspt.util.lazy import exports

# loaded on first use, so ``python -m theory`` imports torch and sympy inside its main (where Ctrl-C is one line);
# by this package's own name: ``theory`` run from a checkout, ``toyspt.theory`` installed
__all__, __getattr__, __dir__ = exports(globals(), {
    f"{__name__}.report": ("REGISTRY", "run_checks", "format_table", "exit_code", "write_json"),
    f"{__name__}.result": ("Result",),
})
