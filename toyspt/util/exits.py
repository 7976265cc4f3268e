"""The exit codes of every entry point, and Ctrl-C at any moment of one: one line
(``interrupted``) and 130, the seconds spent importing torch, scipy and matplotlib at start-up
included (a KeyboardInterrupt there once ended in a traceback). Imports nothing heavy, so the
entry points can load it first."""
from __future__ import annotations

import sys
from typing import Callable

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def interruptible(fn: Callable[[], int]) -> int:
    """``fn()``'s exit code, or :data:`EXIT_INTERRUPTED` after one line on stderr when Ctrl-C
    (KeyboardInterrupt) ends it."""
    try:
        return fn()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


__all__ = ["EXIT_OK", "EXIT_FAILED", "EXIT_USAGE", "EXIT_INTERRUPTED", "interruptible"]
