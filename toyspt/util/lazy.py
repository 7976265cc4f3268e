"""Package exports that load on first use (PEP 562): a package's ``__init__`` names what a user
imports from it without importing the modules that define them, so importing one module of a
package never drags in the rest (nor torch, for ``toyspt --version``)."""
from __future__ import annotations

import importlib
from typing import Callable


def exports(package: dict, where: dict[str, tuple[str, ...]]) -> tuple[list[str], Callable, Callable]:
    """(``__all__``, ``__getattr__``, ``__dir__``) for the package whose globals are ``package``;
    ``where``: module -> the public names it defines. A name is imported on first access and kept."""
    owner = {name: mod for mod, names in where.items() for name in names}

    def getattr_(name: str):
        if name in owner:
            value = getattr(importlib.import_module(owner[name]), name)
            package[name] = value
            return value
        raise AttributeError(f"module {package['__name__']!r} has no attribute {name!r}")

    def dir_():
        return sorted(set(package) | set(owner))

    return list(owner), getattr_, dir_


__all__ = ["exports"]
