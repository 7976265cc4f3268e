"""Tables the docs quote, rendered from the figures' CSVs, so no number in them is typed by
hand. A page holds a block

    <!-- table ucr_paired -->
    | set | arm | ... |
    <!-- /table -->

and ``toyspt docs`` rewrites its body from the CSV the table names (``--check``: exit 1 when a
page's block is not what the committed CSV renders; tests/integration/test_docs.py holds every
page to it). :data:`TABLES` lists the tables: the default tier's paired differences
(``ucr_paired.csv``), the study's gains with their contrasts and equivalence tests
(``real_gain.csv``, and on seeds 20-39 alone), the seed-block tests (``real_gain_seed_block.csv``),
the archive scan (``archive_scan.csv``), where the Transformers stand beside two standard
classifiers (``archive_scan_standing.csv``) and the LRA study's claims (``lra_claims.csv``).
"""
from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Callable

import pandas as pd

from toyspt.analysis.gains import EQUIVALENCE_MARGIN
from toyspt.analysis.seed_blocks import BLOCK_COLUMNS
from toyspt.figs.archive_scan import REFERENCE_MARKS, STANDING_COLUMNS
from toyspt.figs.check import read_csv
from toyspt.studies import lra_design as lra
from toyspt.ucr.data import PAPER_DATASETS
from toyspt.ucr.design import PRIMARY, STUDY_METRICS
from toyspt.ucr.reference import PROTOCOLS, REFERENCE_CLASSIFIERS

# a block's opening and closing comments, each a line of its own (quoted in prose, they are text)
OPENING = re.compile(r"<!-- table (\S+) -->")
CLOSING = "<!-- /table -->"
MARKER = re.compile(r"( {0,3})(<!-- /?table\b.*)")  # a line markdown reads as one (indented 4+: a code block)
MAX_PAGE_BYTES = 1 << 20  # a page read whole: the largest page (docs/ucr.md) is ~46 KB
# what a CSV cell may not carry into a markdown table: a column break, HTML (a marker), control characters
ESCAPES = {"\\": "\\\\", "|": "\\|", "<": "&lt;", ">": "&gt;", "&": "&amp;",
           **{chr(c): f"\\x{c:02x}" for c in (*range(32), 127)}, "\u2028": "\\u2028", "\u2029": "\\u2029"}
CELL = re.compile("|".join(map(re.escape, ESCAPES)))
METRIC_HEADS = {"mean_test_last20": "**mean test, last 20%** (primary)",
                "test_at_min_val_loss": "test at min. val. loss", "final_test_acc": "final test",
                "peak_held_out": "peak held-out (optimistic)"}


class TableError(ValueError):
    """A block that names no table, is not closed, or whose CSV lacks what the table shows."""


def _num(x, spec: str = "+.3f") -> str:
    """``x`` formatted, '∞' for infinities, '' for a missing value."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return ""
    if isinstance(x, float) and math.isinf(x):
        return "+∞" if x > 0 else "−∞"
    return format(x, spec)


def _interval(mid, low, high) -> str:
    """``mid [low, high]``; ``[undefined]`` where the interval is (no spread among the differences)."""
    if _num(mid) == "":
        return ""
    return f"{_num(mid)} [undefined]" if "" in (_num(low), _num(high)) else f"{_num(mid)} [{_num(low)}, {_num(high)}]"


def _p(p) -> str:
    return _num(p, ".3g")


def _counts(r) -> str:
    return f"({int(r.wins)}/{int(r.ties)}/{int(r.losses)})"


def _rows(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` in the paper's set order, then as it came (a stable sort)."""
    rank = {d: i for i, d in enumerate(PAPER_DATASETS)}
    order = frame.dataset.map(lambda d: rank.get(d, len(rank)))
    return frame.assign(_o=order).sort_values("_o", kind="stable").drop(columns="_o")


def cell(text: str) -> str:
    """``text`` inert in a markdown table: a ``|`` does not break the row, ``<`` opens no HTML
    (nor a table marker), a line end or control character is written as its escape."""
    return CELL.sub(lambda m: ESCAPES[m.group(0)], text)


def _markdown(head: list[str], body: list[list[str]]) -> str:
    lines = ["| " + " | ".join(map(cell, head)) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(cell(str(c)) for c in row) + " |" for row in body]
    return "\n".join(lines) + "\n"


def _need(frame: pd.DataFrame, name: str, columns: list[str]) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise TableError(f"table {name}: its CSV has no column(s) {missing}")


def paired(frame: pd.DataFrame) -> str:
    """Set x arm rows, one column per metric: mean paired difference to scratch [95% t interval],
    unadjusted signed-rank p, (wins/ties/losses); blank where an arm has no such metric."""
    _need(frame, "ucr_paired", ["dataset", "arm", "metric", "mean_diff", "ci_low", "ci_high", "p_wilcoxon",
                                "wins", "ties", "losses"])
    def cell(by: pd.DataFrame, metric: str) -> str:
        if metric not in by.index:
            return ""
        r = by.loc[metric]
        return f"{_interval(r.mean_diff, r.ci_low, r.ci_high)} p={_p(r.p_wilcoxon)} {_counts(r)}"

    body = [[d, a, *(cell(g.set_index("metric"), m) for m in STUDY_METRICS)]
            for (d, a), g in _rows(frame).groupby(["dataset", "arm"], sort=False)]
    return _markdown(["set", "arm", *(f"diff. to scratch: {METRIC_HEADS[m]}" if i == 0 else METRIC_HEADS[m]
                                      for i, m in enumerate(STUDY_METRICS))], body)


def gain(frame: pd.DataFrame) -> str:
    """The study's rows on the primary metric: per set and arm the seeds, the mean gain over
    scratch [t interval], the Hodges-Lehmann estimate [the interval inverting the signed-rank
    test], Holm's p within the row's family, wins/ties/losses, the equivalence (TOST) p of
    arm - scratch and of spt - arm at the stated margin, and the share of SPT's gain [Fieller]."""
    _need(frame, "real_gain", ["dataset", "arm", "metric", "family", "n_seeds", "mean_diff", "ci_low", "ci_high",
                               "hl", "hl_low", "hl_high", "p_holm", "wins", "ties", "losses", "tost_p",
                               "spt_minus_arm", "spt_minus_arm_low", "spt_minus_arm_high", "spt_minus_arm_tost_p",
                               "share", "share_low", "share_high"])
    rows = _rows(frame[frame.metric == PRIMARY])
    body = [[r.dataset, r.arm + (" ¹" if r.family == "confirmatory" else ""), str(int(r.n_seeds)),
             _interval(r.mean_diff, r.ci_low, r.ci_high), _interval(r.hl, r.hl_low, r.hl_high),
             _p(r.p_holm), _counts(r), _p(r.tost_p),
             _interval(r.spt_minus_arm, r.spt_minus_arm_low, r.spt_minus_arm_high), _p(r.spt_minus_arm_tost_p),
             _interval(r.share, r.share_low, r.share_high)] for r in rows.itertuples()]
    m = f"±{EQUIVALENCE_MARGIN:g}"
    return _markdown(["set", "arm", "seeds", "arm − scratch, mean [95% t]", "Hodges–Lehmann [95%]", "Holm p",
                      "W/T/L", f"TOST p (arm − scratch within {m})", "spt − arm [95% t]",
                      f"TOST p (spt − arm within {m})", "share of SPT's gain [Fieller 95%]"], body)


def archive(frame: pd.DataFrame) -> str:
    """One row per archive set: its related-set unit, seeds, SPT's gain [t interval], Holm p,
    the Q/K-only share [Fieller], and the mean accuracies of scratch, spt and qk_transfer."""
    _need(frame, "archive_scan", ["dataset", "unit", "n_seeds", "gain", "ci_low", "ci_high", "p_holm", "qk_share",
                                  "qk_share_low", "qk_share_high", "scratch_mean", "spt_mean", "qk_mean"])
    body = [[r.dataset, r.unit, str(int(r.n_seeds)), _interval(r.gain, r.ci_low, r.ci_high), _p(r.p_holm),
             _interval(r.qk_share, r.qk_share_low, r.qk_share_high), _num(r.scratch_mean, ".3f"),
             _num(r.spt_mean, ".3f"), _num(r.qk_mean, ".3f")] for r in frame.itertuples()]
    return _markdown(["set", "unit", "seeds", "SPT − scratch [95% t]", "Holm p", "Q/K-only share [Fieller 95%]",
                      "scratch", "spt", "qk_transfer"], body)


def seed_block(frame: pd.DataFrame) -> str:
    """Per named block of seeds and set: the block's mean gain against the other seeds', the
    permutation p of the block named in advance (``exact``: over every block of its size, else a
    seeded sample) beside Welch's, and the most extreme consecutive block with the scan's p, raw
    and Holm-adjusted over the sets (the p of a block picked out after looking)."""
    _need(frame, "real_gain_seed_block", BLOCK_COLUMNS)
    body = [[r.dataset, f"{r.block_name} ({r.seeds})", f"{_num(r.block_mean)} vs {_num(r.other_mean)}",
             _num(r.difference), f"{_p(r.perm_p)} ({int(r.blocks):,} blocks{'' if r.exact else ', sampled'})",
             _p(r.welch_p), f"{r.scan_seeds}: {_num(r.scan_difference)}" if pd.notna(r.scan_seeds) else "",
             _p(r.scan_p), _p(r.scan_p_holm)] for r in frame.itertuples()]
    return _markdown(["set", "block (seeds)", "SPT − scratch: block vs other seeds", "difference",
                      "permutation p", "Welch p", "most extreme consecutive block", "scan p", "scan p (Holm)"], body)


def standing(frame: pd.DataFrame) -> str:
    """Per set (archive sets, then the paper's): the Transformers' mean primary metric beside
    1-NN DTW's and ROCKET's test accuracy, fitted on the Transformers' training split (``train``)
    and on the whole archive training split (``train+val``, the archive's protocol)."""
    _need(frame, "archive_scan_standing", STANDING_COLUMNS)
    pairs = [(b, p) for b in REFERENCE_CLASSIFIERS for p in PROTOCOLS]
    body = [[r["dataset"] + (" (paper)" if r["group"] == "paper" else ""), str(int(r["n_seeds"])),
             _num(r["scratch"], ".3f"), _num(r["spt"], ".3f"), *(_num(r[f"{b}_{p}"], ".3f") for b, p in pairs)]
            for r in frame.to_dict("records")]
    return _markdown(["set", "seeds", "scratch", "spt", *(f"{REFERENCE_MARKS[b][2]} ({p})" for b, p in pairs)], body)


def _paper(value, sign) -> str:
    """The paper's arm - scratch as the claims table says it (its claim's sign where it gives no number)."""
    if _num(value) != "" and value != 0:
        return _num(value, "+.2f")
    return "unchanged" if sign == 0 else "no number (its general claim: a gain)"


def claims(frame: pd.DataFrame) -> str:
    """An LRA study's confirmatory rows (``lra_claims.csv``, ``lra_claims2.csv``): per claim the
    paper's arm - scratch, the seeds, the mean paired difference [95% t], the Hodges-Lehmann estimate
    [95%], the signed-rank test's Holm p, the TOST p within the task's margin, the share of scratch's
    errors the arm removes beside the paper's, and the verdict before and after its gates."""
    _need(frame, "lra_claims", ["task", "arm", "metric", "family", "n_seeds", "mean_diff", "ci_low", "ci_high", "hl",
                                "hl_low", "hl_high", "p_holm", "holm_m", "tost_p", "margin", "paper_value", "claim",
                                "wins", "ties", "losses", "arm_mean", "base_mean", "error_share", "error_share_low",
                                "error_share_high", "paper_error_share", "ungated", "verdict"])
    rows = frame[(frame.family == "confirmatory") & (frame.metric == lra.PRIMARY)]
    m = sorted({int(k) for k in rows.holm_m})
    body = [[f"{lra.CLAIMS.get(r.arm, r.arm)}: {r.task}", _paper(r.paper_value, r.claim), str(int(r.n_seeds)),
             f"{_num(r.base_mean, '.3f')} → {_num(r.arm_mean, '.3f')}", _interval(r.mean_diff, r.ci_low, r.ci_high),
             _interval(r.hl, r.hl_low, r.hl_high), _p(r.p_holm), _counts(r), f"{_p(r.tost_p)} (±{r.margin:g})",
             f"{_interval(r.error_share, r.error_share_low, r.error_share_high)} "
             f"({_num(r.paper_error_share, '+.2f') or '—'})",
             r.ungated, r.verdict]
            for r in rows.itertuples()]
    return _markdown(["claim (peak validation accuracy)", "paper (arm − scratch)", "seeds", "here: scratch → arm",
                      "arm − scratch, mean [95% t]", "Hodges–Lehmann [95%]",
                      f"Holm p (signed-rank, of {' or '.join(map(str, m)) or 'its family'})", "W/T/L",
                      "TOST p (margin)", "share of scratch's errors removed [95% t] (paper)", "the rule alone",
                      "verdict after its gates"], body)


# name -> (the CSV under the figures folder, its renderer)
TABLES: dict[str, tuple[str, Callable[[pd.DataFrame], str]]] = {
    "ucr_paired": ("ucr_paired.csv", paired),
    "real_gain": ("real_gain.csv", gain),
    "real_gain_seeds_20_39": ("real_gain_seeds_20_39.csv", gain),
    "real_gain_seed_block": ("real_gain_seed_block.csv", seed_block),
    "archive_scan": ("archive_scan.csv", archive),
    "archive_scan_standing": ("archive_scan_standing.csv", standing),
    "lra_claims": ("lra_claims.csv", claims),
    "lra_claims2": ("lra_claims2.csv", claims),
}


def render(name: str, figures: Path) -> str:
    """The body of table ``name`` from its CSV under ``figures``."""
    if name not in TABLES:
        raise TableError(f"no table named {name!r}; tables are {', '.join(TABLES)}")
    csv, fn = TABLES[name]
    if not (figures / csv).exists():
        raise TableError(f"table {name}: {figures / csv} does not exist (draw its figure first)")
    return fn(read_csv(figures / csv))


def blocks(text: str, page: str = "page") -> list[tuple[int, int, str]]:
    """The table blocks of ``text`` as (start, end, name): its body is ``text[start:end]``,
    between the opening line and the closing one. One pass over the lines; :class:`TableError`
    naming the page and line for a marker that would be read otherwise than markdown reads it
    (indented by 1-3 spaces, not of the two forms), a block not closed or closing none."""
    out: list[tuple[int, int, str]] = []
    opened: tuple[int, int, str] | None = None  # (line, body start, name)
    pos, number = 0, 0
    while pos < len(text):
        end = text.find("\n", pos)
        end = len(text) if end < 0 else end + 1
        line, number = text[pos:end].rstrip("\n"), number + 1
        m = MARKER.fullmatch(line)
        if m is not None:
            where = f"{page} line {number}"
            if m.group(1):
                raise TableError(f"{where}: a table marker indented by {len(m.group(1))} space(s); "
                                 "put it at the start of its line")
            opening = OPENING.fullmatch(m.group(2))
            if opening is None and m.group(2) != CLOSING:
                raise TableError(f"{where}: {m.group(2)[:60]!r} is not a table marker ('<!-- table NAME -->' "
                                 f"or '{CLOSING}', alone on a line)")
            if opening is not None and opened is not None:
                raise TableError(f"{page} line {opened[0]}: table block {opened[2]} without its '{CLOSING}' "
                                 f"before the next opens (line {number})")
            if opening is None and opened is None:
                raise TableError(f"{where}: '{CLOSING}' closes no table block")
            if opening is not None:
                opened = (number, end, opening.group(1))
            else:
                out.append((opened[1], pos, opened[2]))
                opened = None
        pos = end
    if opened is not None:
        raise TableError(f"{page} line {opened[0]}: table block {opened[2]} without its '{CLOSING}'")
    return out


def refresh(text: str, figures: Path, page: str = "page") -> str:
    """``text`` with every table block's body rendered anew (a leading byte-order mark kept);
    :class:`TableError` naming the page for a block that is not closed or names no table."""
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    text = text[len(bom):]
    parts, at = [bom], 0
    for start, end, name in blocks(text, page):
        try:
            parts += [text[at:start], render(name, figures)]
        except TableError as e:
            raise TableError(f"{page}: {e}") from None
        at = end
    return "".join(parts) + text[at:]


__all__ = ["TABLES", "TableError", "MAX_PAGE_BYTES", "blocks", "cell", "render", "refresh",
           "paired", "gain", "seed_block", "archive", "standing",
           "claims"]
