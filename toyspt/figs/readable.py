"""Is a figure readable? Every visible piece of text (titles, axis labels, tick labels,
annotations, legend entries, figure texts) is laid out by drawing the figure once, and any two
whose boxes overlap are reported: a label drawn over another cannot be read. The figure job
records them per figure (``overlapping_labels`` in ``metadata.json``) and the tests require
none.
"""
from __future__ import annotations

from itertools import combinations
from operator import methodcaller

from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.figure import Figure, FigureBase
from matplotlib.text import Annotation, Text

SLACK_PX = 1.0  # boxes overlapping by at most this (anti-aliasing, touching glyphs) do not count


def _children(artist) -> list:
    """The children ``artist.draw`` draws, in its order (matplotlib 3.x): a figure's and an
    Axes' sorted by zorder without animated ones (an Axes without axis: no Axis), an Axis' the
    ticks it draws (``_update_ticks``, as its ``draw``: none outside the view), then its label
    and offset text."""
    if isinstance(artist, Axis):
        return [*artist._update_ticks(), artist.label, artist.offsetText]
    kids = artist.get_children()
    if isinstance(artist, (FigureBase, Axes)):
        if isinstance(artist, Axes) and not artist.axison:
            kids = [c for c in kids if not isinstance(c, Axis)]
        kids = sorted((c for c in kids if not c.get_animated()), key=methodcaller("get_zorder"))
    return kids


def _walk(artist, renderer, out: list) -> None:
    """Append (string, window box) of every text under ``artist`` that a draw puts on the canvas."""
    if not artist.get_visible():
        return
    if isinstance(artist, Text):
        if isinstance(artist, Annotation) and not artist._check_xy(renderer):  # clipped away, as in its draw
            return
        if artist.get_text().strip() and artist.get_alpha() != 0:
            box = Text.get_window_extent(artist, renderer)  # the text's own box (an annotation's: no arrow)
            if box.width > 0 and box.height > 0:
                out.append((artist.get_text(), box))
        return
    for child in _children(artist):
        _walk(child, renderer, out)


def drawn_texts(fig: Figure) -> list[tuple[str, object]]:
    """(string, window box) of every non-empty text ``fig`` draws, in drawing order: the figure
    is laid out by one draw without rendering (none when it is not stale: laid out already),
    then its artists are walked as a draw walks them (tick labels outside the view, hidden or
    transparent texts are not drawn, so they do not count)."""
    if fig.stale:
        fig.draw_without_rendering()
    out: list = []
    _walk(fig, fig.canvas.get_renderer(), out)
    fig.stale = False  # the walk set each Axis' ticks as the draw had set them: still laid out
    return out


def overlaps(fig: Figure, slack: float = SLACK_PX) -> list[tuple[str, str]]:
    """Pairs of drawn texts of ``fig`` whose boxes overlap by more than ``slack`` pixels in
    both directions (each pair once, as the two strings, in drawing order)."""
    boxes = drawn_texts(fig)
    out = []
    for (a, p), (b, q) in combinations(boxes, 2):
        dx = min(p.x1, q.x1) - max(p.x0, q.x0)
        dy = min(p.y1, q.y1) - max(p.y0, q.y0)
        if dx > slack and dy > slack:
            out.append((a, b))
    return out


__all__ = ["drawn_texts", "overlaps", "SLACK_PX"]
