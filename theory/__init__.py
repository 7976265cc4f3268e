"""Checks of the claims of toyspt's theory (label-loss blindness vs masked reconstruction).

``python -m theory`` runs every check and prints a report; :func:`run_checks` does the same
from Python and returns :class:`Result` records. One module per claim family:
``t1_pooling``, ``t2_blindness`` (with ``t2_symbolic``), ``t3_recon``, ``t4_rank``, ``t5_training``.
"""
from .report import REGISTRY, exit_code, format_table, run_checks, write_json
from .result import Result

__all__ = ["REGISTRY", "Result", "run_checks", "format_table", "exit_code", "write_json"]
