"""Regenerate every mechanistic figure of toyspt from real, cached runs.

    python paper_figs.py                 # full figures into figures/ (5 seeds)
    python paper_figs.py --quick         # small smoke version into figures-quick/ (stamped QUICK)
    python paper_figs.py --only accuracy,ablations --workers 2

The same as ``toyspt figs``; see :mod:`toyspt.cli.figs` (``--help`` lists every flag).
"""
import importlib

from toyspt.util.exits import interruptible  # light: Ctrl-C while torch loads is one line too


def main(argv: list[str] | None = None) -> int:
    """``toyspt figs``'s main, its module loaded inside :func:`interruptible`."""
    return interruptible(lambda: importlib.import_module("toyspt.cli.figs").main(argv))


if __name__ == "__main__":
    raise SystemExit(main())
