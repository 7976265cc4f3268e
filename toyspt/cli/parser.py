"""The argument parser of every ``toyspt`` front door: argparse, with values that start with a
dash read as values where they can only be one, and a missing value said plainly.

argparse reads ``--budget -1h`` as the flag ``--budget`` followed by an unknown flag ``-1h``
and answers "expected one argument", which names neither the value nor what is wrong with it.
Here a word of a dash and a digit (``-1h``, ``-5``, ``-.5``) is a value (no toyspt flag looks
like one), so the flag's own check says what is wrong with it ("a budget must be ...", "must
be >= 1"); a value that still reads as a flag gets a message saying how to pass it.
"""
from __future__ import annotations

import argparse
import re

# a word argparse must read as a value, never as a flag: a dash, then a digit or a point and a digit
DASHED_VALUE = re.compile(r"^-\.?[0-9]")


class Parser(argparse.ArgumentParser):
    """:class:`argparse.ArgumentParser` reading ``-1h`` as a value; its subparsers are Parsers too."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = DASHED_VALUE  # argparse's hook for "looks like a negative number"

    def error(self, message: str):
        if message.endswith("expected one argument"):
            message += " (none given; a value starting with '-' reads as a flag: write --flag=VALUE)"
        super().error(message)


__all__ = ["Parser", "DASHED_VALUE"]
