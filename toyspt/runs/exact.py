"""The exact encoding: a compact text form of an entry's JSON (what the run cache stores as
``result.json``) that decodes to exactly the same JSON text; the results ledger stores entries in it
(:mod:`toyspt.runs.ledger`).

A run's history is a list of per-epoch dicts that repeat their keys and count epochs; stored
as such it is ~36 KB a run. Here a list of dicts becomes columns, and a column takes the
shortest of these forms that gives back exactly the same values:

* ``{"@range": [start, step, n]}``: integers in arithmetic progression (epochs, steps);
* ``{"@rle": [[value, count], ...]}``: runs of one value (phase names);
* ``{"@frac": den, "v": [k, ...]}``: floats that are exactly ``k / den`` (accuracies on a split
  of ``den`` examples; Python's division is correctly rounded, so ``k / den`` is that float);
* ``{"@f32": [...]}``: floats that are float32 values (losses read with ``.item()``), in their
  shortest float32 decimal form;
* otherwise the plain list (floats in Python's shortest round-trip form).

Every encoding is checked by decoding it and comparing the JSON text with the original's, so
an encoding is exact or is not written (:class:`InexactEncoding`); non-numbers in a column (the
``"nan"`` strings of :func:`toyspt.util.hashing.jsonable`) pass through every form unchanged.
"""
from __future__ import annotations

import json
from typing import Any

import numpy as np

MIN_COLUMN = 8  # shorter lists stay as they are (the tags would cost more than they save)
MAX_DEN = 4096  # largest split size tried for the @frac form


class InexactEncoding(ValueError):
    """An encoding that does not give back its input exactly (a bug: nothing is written)."""


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_float(v) -> bool:
    return isinstance(v, float)


def _range(col: list) -> dict | None:
    if not all(_is_int(v) for v in col):
        return None
    step = col[1] - col[0]
    if any(b - a != step for a, b in zip(col, col[1:])):
        return None
    return {"@range": [col[0], step, len(col)]}


def _rle(col: list) -> dict | None:
    runs: list[list] = []
    for v in col:
        if runs and type(runs[-1][0]) is type(v) and runs[-1][0] == v:
            runs[-1][1] += 1
        else:
            runs.append([v, 1])
    return {"@rle": runs} if len(runs) * 4 <= len(col) else None


def _floats(col: list) -> tuple[np.ndarray, np.ndarray] | None:
    """(mask of float entries, their values) when every entry is a float or a non-number string."""
    if not all(_is_float(v) or isinstance(v, str) for v in col):
        return None
    mask = np.array([_is_float(v) for v in col])
    if not mask.any():
        return None
    return mask, np.array([v for v in col if _is_float(v)], dtype=np.float64)


def _frac(col: list) -> dict | None:
    got = _floats(col)
    if got is None:
        return None
    mask, v = got
    if not (np.isfinite(v).all() and (v >= 0).all() and (v <= 1).all()):
        return None
    dens = np.arange(1, MAX_DEN + 1, dtype=np.float64)
    k = np.rint(v[:, None] * dens[None, :])
    close = np.all(np.abs(k - v[:, None] * dens[None, :]) < 1e-6, axis=0)
    for j in np.flatnonzero(close):
        den = int(dens[j])
        ks = [int(x) for x in k[:, j]]
        if all(a / den == b for a, b in zip(ks, v.tolist())):
            it = iter(ks)
            return {"@frac": den, "v": [next(it) if m else s for m, s in zip(mask, col)]}
    return None


def _f32(col: list) -> dict | None:
    got = _floats(col)
    if got is None:
        return None
    mask, v = got
    if not (np.isfinite(v).all() and (np.abs(v) <= np.finfo(np.float32).max).all()):
        return None
    v32 = v.astype(np.float32)
    if not np.array_equal(v32.astype(np.float64), v):
        return None
    short = iter(float(str(x)) for x in v32)
    return {"@f32": [next(short) if m else s for m, s in zip(mask, col)]}


def _column(col: list) -> Any:
    if len(col) < MIN_COLUMN:
        return col
    for form in (_range, _rle, _frac, _f32):
        out = form(col)
        if out is not None:
            return out
    return [encode(v) for v in col]


def _rows(rows: list[dict]) -> dict:
    """A list of dicts as columns: ``schemas`` (each distinct key order), ``which`` (each row's
    schema), ``cols`` (per key, the values of the rows that have it)."""
    schemas: list[list[str]] = []
    index: dict[tuple, int] = {}
    which, cols = [], {}
    for r in rows:
        keys = tuple(r)
        if keys not in index:
            index[keys] = len(schemas)
            schemas.append(list(keys))
        which.append(index[keys])
        for k, v in r.items():
            cols.setdefault(k, []).append(v)
    return {"@rows": {"schemas": schemas, "which": _column(which),
                      "cols": {k: _column(v) for k, v in cols.items()}}}


def encode(value: Any) -> Any:
    """The compact form of a JSON value (see the module docstring); nested values too."""
    if isinstance(value, dict):
        if any(k.startswith("@") for k in value):
            raise InexactEncoding(f"keys starting with '@' are reserved for the compact form: {sorted(value)[:3]}")
        return {k: encode(v) for k, v in value.items()}
    if isinstance(value, list):
        if len(value) >= MIN_COLUMN and all(isinstance(r, dict) for r in value):
            return _rows(value)
        if len(value) >= MIN_COLUMN and all(not isinstance(v, (dict, list)) for v in value):
            return _column(value)
        return [encode(v) for v in value]
    return value


def _decode_column(c: Any) -> list:
    if isinstance(c, list):
        return [decode(v) for v in c]
    if "@range" in c:
        start, step, n = c["@range"]
        return [start + i * step for i in range(n)]
    if "@rle" in c:
        return [v for v, n in c["@rle"] for _ in range(n)]
    if "@frac" in c:
        den = c["@frac"]
        return [v / den if _is_int(v) else v for v in c["v"]]
    if "@f32" in c:
        return [float(np.float32(v)) if isinstance(v, (int, float)) else v for v in c["@f32"]]
    raise InexactEncoding(f"unknown column form {sorted(c)[:3]}")


def decode(value: Any) -> Any:
    """Inverse of :func:`encode`."""
    if isinstance(value, dict):
        if "@rows" in value:
            r = value["@rows"]
            schemas = r["schemas"]
            which = _decode_column(r["which"])
            cols = {k: iter(_decode_column(c)) for k, c in r["cols"].items()}
            return [{k: next(cols[k]) for k in schemas[w]} for w in which]
        if any(k in value for k in ("@range", "@rle", "@frac", "@f32")):
            return _decode_column(value)
        return {k: decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode(v) for v in value]
    return value


def exact_encode(value: Any) -> Any:
    """:func:`encode`, checked: the decoded value's JSON text equals the original's (key order,
    int vs float, every digit); :class:`InexactEncoding` otherwise."""
    out = encode(value)
    before = json.dumps(value, allow_nan=False)
    after = json.dumps(decode(json.loads(json.dumps(out, allow_nan=False))), allow_nan=False)
    if after != before:
        raise InexactEncoding("the compact form does not give back the entry exactly")
    return out


__all__ = ["encode", "decode", "exact_encode", "InexactEncoding", "MIN_COLUMN", "MAX_DEN"]
