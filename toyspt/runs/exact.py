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

Decoding is bounded (:class:`Budget`): a form that expands (``@range``, ``@rle``, the rows of
``@rows``) says how many values it makes, and that claim is checked against the budget before
anything is made, so a line of a few bytes that claims 10^12 values is refused at once
(:class:`Oversized`), never expanded. A record's budget is :data:`EXPANSION` values a byte of
its line, at most :data:`MAX_VALUES`: the committed study's records make at most 0.41 values a
byte and 10,541 values (a 500-epoch run), so both caps stand 20x above what a run writes.
"""
from __future__ import annotations

import json
from typing import Any

import numpy as np

MIN_COLUMN = 8  # shorter lists stay as they are (the tags would cost more than they save)
MAX_DEN = 4096  # largest split size tried for the @frac form
EXPANSION = 8  # values a decoded record may hold per byte of its line (the study's records: at most 0.41)
MAX_VALUES = 250_000  # values one decoded record may hold (the study's largest: 10,541; ~25 MB of objects)


class InexactEncoding(ValueError):
    """An encoding that does not give back its input exactly (a bug: nothing is written)."""


class Oversized(ValueError):
    """A compact form that claims more values than its budget allows; nothing was expanded."""


class Budget:
    """Values a decoding may still make; :meth:`take` refuses a claim beyond them before it is made."""

    def __init__(self, values: int):
        self.left = values

    @classmethod
    def of_line(cls, line_bytes: int) -> "Budget":
        """The budget of a record whose line is ``line_bytes`` long (see the module docstring)."""
        return cls(min(MAX_VALUES, EXPANSION * max(1, line_bytes)))

    def take(self, n: Any, form: str) -> int:
        if not _is_int(n) or n < 0:
            raise Oversized(f"a {form} form claims {str(n)[:40]!r} values, not a count")
        if n > self.left:
            raise Oversized(f"a {form} form claims {n} values, more than the {self.left} its line's size allows "
                            f"(at most {EXPANSION} a byte, {MAX_VALUES} a record)")
        self.left -= n
        return n


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


def _decode_column(c: Any, budget: Budget | None) -> list:
    if isinstance(c, list):
        return [decode(v, budget) for v in c]
    if not isinstance(c, dict):
        raise InexactEncoding(f"a column of {type(c).__name__}, not a list or a compact form")
    if "@range" in c:
        start, step, n = c["@range"]
        if not (_is_int(start) and _is_int(step)):
            raise InexactEncoding("a @range form of non-integers")
        if budget is not None:
            budget.take(n, "@range")
        return [start + i * step for i in range(n)]
    if "@rle" in c:
        runs = c["@rle"]
        if not all(isinstance(r, list) and len(r) == 2 and _is_int(r[1]) and r[1] >= 0 for r in runs):
            raise InexactEncoding("a @rle form whose runs are not [value, count]")
        if budget is not None:
            budget.take(sum(n for _, n in runs), "@rle")
        return [v for v, n in runs for _ in range(n)]
    if "@frac" in c:
        den = c["@frac"]
        return [v / den if _is_int(v) else v for v in c["v"]]
    if "@f32" in c:
        return [float(np.float32(v)) if isinstance(v, (int, float)) else v for v in c["@f32"]]
    raise InexactEncoding(f"unknown column form {sorted(c)[:3]}")


def decode(value: Any, budget: Budget | None = None) -> Any:
    """Inverse of :func:`encode`; with a ``budget``, bounded (:class:`Oversized` before a form
    expands beyond it)."""
    if isinstance(value, dict):
        if "@rows" in value:
            r = value["@rows"]
            schemas = r["schemas"]
            which = _decode_column(r["which"], budget)
            if budget is not None:
                budget.take(sum(len(schemas[w]) for w in which), "@rows")
            cols = {k: iter(_decode_column(c, budget)) for k, c in r["cols"].items()}
            return [{k: next(cols[k]) for k in schemas[w]} for w in which]
        if any(k in value for k in ("@range", "@rle", "@frac", "@f32")):
            return _decode_column(value, budget)
        return {k: decode(v, budget) for k, v in value.items()}
    if isinstance(value, list):
        return [decode(v, budget) for v in value]
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


__all__ = ["encode", "decode", "exact_encode", "InexactEncoding", "Oversized", "Budget", "MIN_COLUMN", "MAX_DEN",
           "EXPANSION", "MAX_VALUES"]
