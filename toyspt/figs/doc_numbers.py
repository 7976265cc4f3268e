"""Numbers the docs quote in their prose, each followed by a marker that names where it comes
from and how it is printed, so no quoted number is typed by hand:

    SPT gains +34.5<!-- meta figures.accuracy.headline.gain +.1f 100 --> points
    (a path in figures/metadata.json, list items by index; a format spec; an optional scale)

    8.5<!-- from figures/studies/lra/progress.json cpu_hours .1f -->
    (a JSON file under the repository's root, a path in it, a format spec)

A format is of a small grammar (:data:`FORMAT`: a sign, a width of at most two digits, a
grouping comma, a precision of at most two digits, a type of ``defgs%``), a scale a plain
number of at most 1e6; anything else is refused in one line before anything is formatted (a
45-byte marker asking for a width of 999999999 once took 30 s and 3 GB).

The quoted text must end with the value so printed. ``toyspt docs`` rewrites each quoted
number from its source (:func:`refresh`), beside the tables of :mod:`toyspt.figs.doc_tables`;
a quoted text that is not a number (format ``s``) is only checked, since where it begins is not
marked. tests/integration/test_docs.py holds every page to :func:`quotes`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from toyspt.util.files import UnsafeFile, read_json_object

META = re.compile(r"<!-- meta ([\w.+-]+) (\S+)(?: ([-\d.e]+))? -->")  # keys may hold + or - (train+val)
FROM = re.compile(r"<!-- from (\S+) (\S+) (\S+) -->")
# a quoted number at the end of a text, not the tail of a word or of a longer number
NUMBER = re.compile(r"(?<![\w.])[+-]?(?:\d[\d,]*(?:\.\d*)?(?:e[+-]?\d+)?|inf|nan)\Z")
FORMAT = re.compile(r"[+-]?\d{0,2}[,_]?(?:\.\d{1,2})?[defgs%]?\Z")  # e.g. +.3f .2g ,d .0f d s
MAX_SCALE = 1e6  # the largest scale a meta marker may give (the docs': 100)
WINDOW = 64  # how far before a marker a stale number is looked for (the longest printed is ~12)
MAX_SOURCE_BYTES = 16 << 20  # a source read whole: figures/metadata.json is ~120 KB


class QuoteError(ValueError):
    """A marker that cannot be read, names a file outside the root or a path its file lacks, or
    follows no number it could rewrite."""


@dataclass(frozen=True)
class Quote:
    """One quoted value: where its marker stands, where it comes from, and the text on both sides."""

    start: int  # where the marker begins in the page (the quoted text ends there)
    source: str  # the file the value is read from (its name as the marker gives it)
    path: str  # the value's path in that file: keys with dots, list items by index
    want: str  # the value, printed as the marker says
    found: str  # the page's text of the same length before the marker


def _value(data, path: str, source: str):
    v = data
    for part in path.split("."):
        try:
            v = v[int(part)] if isinstance(v, list) else v[part]
        except (KeyError, IndexError, ValueError, TypeError):
            raise QuoteError(f"{source} has no value at {path!r} (no {part!r})") from None
    return v


def _read(path: Path, what: str, sources: dict) -> dict:
    """The JSON object at ``path``, read once per call of :func:`quotes`, bounded."""
    if str(path) not in sources:
        try:
            sources[str(path)] = read_json_object(path, what, MAX_SOURCE_BYTES)
        except UnsafeFile as e:
            raise QuoteError(str(e)) from None
    return sources[str(path)]


def _source(name: str, root: Path, sources: dict) -> dict:
    """The JSON object ``name`` of a from marker: a file under ``root``."""
    if Path(name).is_absolute() or not (root / name).resolve().is_relative_to(root.resolve()):
        raise QuoteError(f"a marker quotes {name}, which is not under {root}; only the repository's files are quoted")
    return _read(root / name, "JSON file a page quotes", sources)


def _grammar(text: str, at: int, spec: str, scale: str | None, page: str) -> None:
    """:class:`QuoteError` (one line, naming the page's line) for a format or scale outside the grammar."""
    bad = None
    if FORMAT.match(spec) is None:
        bad = f"format {spec[:40]!r} is not of the grammar [+-][width <= 2 digits][,][.precision <= 2 digits][defgs%]"
    elif scale is not None:
        try:
            ok = abs(float(scale)) <= MAX_SCALE and len(scale) <= 20
        except ValueError:
            ok = False
        bad = None if ok else f"scale {scale[:40]!r} is not a number of at most {MAX_SCALE:g}"
    if bad:
        raise QuoteError(f"{page} line {text.count(chr(10), 0, at) + 1}: a marker's {bad}; nothing formatted")


def _printed(value, spec: str, scale: str | None, source: str, path: str) -> str:
    try:
        return format(value * float(scale) if scale else value, spec)
    except (TypeError, ValueError) as e:
        raise QuoteError(f"{source} {path}: {value!r} cannot be printed as {spec!r}"
                         f"{f' scaled by {scale}' if scale else ''} ({e})") from None


def quotes(text: str, root: Path, figures: Path | None = None, page: str = "page") -> list[Quote]:
    """Every quoted value of ``text``: meta markers read ``figures``/metadata.json (default
    ``root``/figures), from markers a file under ``root``. A marker not of either form is refused."""
    for kind, form in (("meta", META), ("from", FROM)):
        unread = len(re.findall(f"<!-- {kind} ", text)) - len(form.findall(text))
        if unread:
            shape = "PATH FORMAT [SCALE]" if kind == "meta" else "FILE PATH FORMAT"
            raise QuoteError(f"{page}: {unread} {kind} marker(s) not of the form '<!-- {kind} {shape} -->'")
    for m in (*META.finditer(text), *FROM.finditer(text)):  # every marker's format, before any is used
        _grammar(text, m.start(), m.group(2) if m.re is META else m.group(3), m.group(3) if m.re is META else None,
                 page)
    figures = root / "figures" if figures is None else figures
    sources: dict = {}
    found = []
    for m in META.finditer(text):
        path, spec, scale = m.groups()
        src = str(figures / "metadata.json")
        meta = _read(figures / "metadata.json", "metadata file", sources)
        found.append((m.start(), src, path, _printed(_value(meta, path, src), spec, scale, src, path)))
    for m in FROM.finditer(text):
        name, path, spec = m.groups()
        found.append((m.start(), name, path, _printed(_value(_source(name, root, sources), path, name),
                                                      spec, None, name, path)))
    return [Quote(at, src, path, want, text[max(0, at - len(want)):at]) for at, src, path, want in sorted(found)]


def count(text: str) -> int:
    """How many quoted values ``text`` marks (what :func:`quotes` returns one of each for)."""
    return len(META.findall(text)) + len(FROM.findall(text))


def refresh(text: str, root: Path, figures: Path | None = None, page: str = "page") -> str:
    """``text`` with every quoted number rewritten from its source. A quoted text that is not a
    number and differs from its source, or a marker with no number before it, is refused
    (:class:`QuoteError` naming it; nothing is guessed)."""
    out, last = [], 0
    for q in quotes(text, root, figures, page):
        if q.want == q.found:
            continue
        number = NUMBER.fullmatch(q.want) is not None
        before = NUMBER.search(text, max(last, q.start - WINDOW), q.start) if number else None
        if before is None:
            line = text.count("\n", 0, q.start) + 1
            what = "a text, not a number" if not number else "no number"
            raise QuoteError(f"{page} line {line}: {q.source} {q.path} is {q.want!r}, but the page quotes "
                             f"{q.found!r} there ({what} to rewrite); edit it by hand")
        out.append(text[last:before.start()] + q.want)
        last = q.start
    return "".join(out) + text[last:]


__all__ = ["Quote", "QuoteError", "quotes", "count", "refresh", "MAX_SOURCE_BYTES", "FORMAT", "WINDOW"]
