"""Checks of the claims of toyspt's theory (label-loss blindness vs masked reconstruction).

``python -m theory`` runs every check and prints a report; see :mod:`theory.report`.
"""
