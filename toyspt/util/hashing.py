"""Stable content hashes of JSON-like values: what run keys, data fingerprints and figure
entries are named by."""
from __future__ import annotations

import hashlib
import json
from typing import Any


def jsonable(obj):
    """``obj`` with tuples as lists, keys as strings and NaN as ``"nan"`` (stable JSON)."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, float) and obj != obj:
        return "nan"
    return obj


def digest(d: dict[str, Any]) -> str:
    """24 hex digits of the sha256 of ``d`` as canonical JSON."""
    blob = json.dumps(jsonable(d), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


__all__ = ["jsonable", "digest"]
