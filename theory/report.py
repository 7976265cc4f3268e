"""Run the checks of T1-T5 and print them as one table (and optionally JSON, or Markdown
for docs/theory-report.md).

Every check has a fixed id (``T2.4``); ``--only`` selects claim families (``T2``) or ids.
A check that raises becomes an ``error`` row; the report fails (exit code 1) when any
checked claim fails or errors. Measured rows never fail it.
"""
from __future__ import annotations

import inspect
import json
import os
import platform
import textwrap
import time
from pathlib import Path
from typing import Callable, Iterable, Sequence

import torch

from toyspt.util.atomic import write_text

from . import t1_pooling, t2_blindness, t3_recon, t4_rank, t5_training
from .result import Result, error_result

TITLES = {
    "T1": "mean pooling sees only column means",
    "T2": "local blindness of the label loss at uniform attention",
    "T3": "masked reconstruction is not blind (and the sign of what it sees)",
    "T4": "the label gradient on W_Q W_K^T is rank one per example",
    "T5": "what training does (measured, not proved)",
}

_MODULES = {"T1": t1_pooling, "T2": t2_blindness, "T3": t3_recon, "T4": t4_rank, "T5": t5_training}
# check id -> function; ids follow each module's CHECKS order (T1.1, T1.2, ...)
REGISTRY: dict[str, Callable[..., Result]] = {
    f"{fam}.{k}": fn for fam, mod in _MODULES.items() for k, fn in enumerate(mod.CHECKS, start=1)}


def select(only: str | Sequence[str] | None) -> list[str]:
    """Check ids for a comma-separated list of families and/or ids (None: all)."""
    if only is None:
        return list(REGISTRY)
    tokens = [t.strip().upper() for t in (only.split(",") if isinstance(only, str) else only)]
    tokens = [t for t in tokens if t]
    if not tokens:
        raise ValueError("--only: give claim families (T1..T5) or check ids (e.g. T2.4)")
    out = []
    for t in tokens:
        hit = [cid for cid in REGISTRY if cid == t or cid.split(".")[0] == t]
        if not hit:
            raise ValueError(f"--only: unknown claim or check {t!r}; known: "
                             f"{', '.join(_MODULES)} and {', '.join(REGISTRY)}")
        out += [h for h in hit if h not in out]
    return out


def run_checks(only: str | Sequence[str] | None = None, quick: bool = False,
               cache: str | None = None, progress: Callable[[str, Result, float], None] | None = None
               ) -> list[Result]:
    """Run the selected checks in order. ``cache``: run-cache directory for T5 (None: train
    without caching). ``progress(id, result, seconds)`` is called after each check."""
    results = []
    for cid in select(only):
        fn = REGISTRY[cid]
        kw = {"quick": quick}
        if "cache" in inspect.signature(fn).parameters:
            kw["cache"] = cache
        t0 = time.perf_counter()
        try:
            res = fn(**kw)
            if res.check != cid:
                raise RuntimeError(f"check registered as {cid} reported id {res.check}")
        except Exception as e:  # a crashing check is a failed check, and the report goes on
            res = error_result(cid, e)
        results.append(res)
        if progress is not None:
            progress(cid, res, time.perf_counter() - t0)
    return results


def _fmt(x: float | None) -> str:
    if x is None:
        return "-"
    if x != x or x in (float("inf"), float("-inf")):
        return str(x)
    if x == int(x) and abs(x) < 1e6:
        return str(int(x))
    if x != 0 and (abs(x) < 1e-3 or abs(x) >= 1e4):
        return f"{x:.1e}"
    return f"{x:.3f}"


COLUMNS = (("check", 6), ("claim", 40), ("what was checked", 58), ("symbolic", 8),
           ("figure", 9), ("tol.", 9), ("verdict", 8))


def format_table(results: Iterable[Result], why: bool = False) -> str:
    """The report: one block per claim family, one (wrapped) row per check."""
    lines = []
    header = " ".join(name.ljust(w) for name, w in COLUMNS).rstrip()
    rule = "-" * len(header)
    current = None
    for r in results:
        if r.claim != current:
            current = r.claim
            lines += ["", f"{current}  {TITLES.get(current, '')}", rule, header, rule]
        checked = f"{r.checked} [figure: {r.figure_kind}]"
        if why and r.tolerance is not None:
            checked += f" [tol.: {r.tolerance_why}]"
        tol = "-" if r.tolerance is None else ("<= " if r.sense == "le" else ">= ") + _fmt(r.tolerance)
        cells = [[r.check], textwrap.wrap(r.statement, COLUMNS[1][1]),
                 textwrap.wrap(checked, COLUMNS[2][1]), [r.symbolic], [_fmt(r.figure)], [tol],
                 [r.verdict.upper() if r.failed else r.verdict]]
        for k in range(max(len(c) for c in cells)):
            row = [(c[k] if k < len(c) else "").ljust(w) for c, (_, w) in zip(cells, COLUMNS)]
            lines.append(" ".join(row).rstrip())
    lines += ["", summary_line(results)]
    return "\n".join(lines)


def summary(results: Sequence[Result]) -> dict[str, int]:
    out = {v: 0 for v in ("pass", "fail", "measured", "error")}
    for r in results:
        out[r.verdict] += 1
    return out


def summary_line(results: Sequence[Result]) -> str:
    s = summary(list(results))
    ok = "all checked claims hold" if s["fail"] + s["error"] == 0 else "SOME CHECKED CLAIMS FAIL"
    return (f"{len(list(results))} checks: {s['pass']} pass, {s['fail']} fail, {s['error']} error, "
            f"{s['measured']} measured -- {ok}")


def exit_code(results: Sequence[Result]) -> int:
    """0 when every checked claim holds, 1 otherwise."""
    return 1 if any(r.failed for r in results) else 0


def _meta(**meta) -> dict:
    return dict(torch=torch.__version__, python=platform.python_version(),
                created=time.strftime("%Y-%m-%dT%H:%M:%S"), **meta)


def write_json(results: Sequence[Result], path: str | os.PathLike, **meta) -> Path:
    """Write {meta, summary, results} to ``path`` atomically (temp file + os.replace)."""
    doc = dict(meta=_meta(**meta), summary=summary(results), results=[r.to_dict() for r in results])
    return write_text(path, json.dumps(doc, indent=2, allow_nan=False) + "\n")


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def format_markdown(results: Sequence[Result], command: str, why: bool = True) -> str:
    """The report as a Markdown page: the command that generated it on top, one table per
    claim family, the tolerance's reason under each check when ``why``."""
    m = _meta()
    lines = ["# Theory report (generated)", "",
             f"Generated by `{command}` on {m['created']} (torch {m['torch']}, Python {m['python']}); "
             "do not edit by hand, rerun the command.", "", f"**{summary_line(results)}**"]
    header = "| check | claim | what was checked | symbolic | figure | tolerance | verdict |"
    current = None
    for r in results:
        if r.claim != current:
            current = r.claim
            lines += ["", f"## {current}: {TITLES.get(current, '')}", "", header, "|---" * 7 + "|"]
        tol = "-" if r.tolerance is None else ("≤ " if r.sense == "le" else "≥ ") + _fmt(r.tolerance)
        checked = f"{r.checked} (figure: {r.figure_kind})"
        if why and r.tolerance is not None:
            checked += f"; tolerance: {r.tolerance_why}"
        verdict = f"**{r.verdict.upper()}**" if r.failed else r.verdict
        lines.append("| " + " | ".join(_cell(c) for c in (r.check, r.statement, checked, r.symbolic,
                                                           _fmt(r.figure), tol, verdict)) + " |")
    return "\n".join(lines) + "\n"


def write_markdown(results: Sequence[Result], path: str | os.PathLike, command: str) -> Path:
    """Write :func:`format_markdown` to ``path`` atomically."""
    return write_text(path, format_markdown(results, command))


__all__ = ["TITLES", "REGISTRY", "select", "run_checks", "format_table", "summary",
           "summary_line", "exit_code", "write_json", "format_markdown", "write_markdown"]
