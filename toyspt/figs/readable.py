"""Is a figure readable? Every visible piece of text (titles, axis labels, tick labels,
annotations, legend entries, figure texts) is laid out by drawing the figure once, and any two
whose boxes overlap are reported: a label drawn over another cannot be read. The figure job
records them per figure (``overlapping_labels`` in ``metadata.json``) and the tests require
none.
"""
from __future__ import annotations

from itertools import combinations

from matplotlib.figure import Figure
from matplotlib.text import Text

SLACK_PX = 1.0  # boxes overlapping by at most this (anti-aliasing, touching glyphs) do not count


def drawn_texts(fig: Figure) -> list[tuple[str, object]]:
    """(string, window box) of every non-empty text ``fig`` draws, in drawing order: what a
    render actually puts on the canvas (tick labels outside the view, hidden or transparent
    texts are not drawn, so they do not count)."""
    out = []
    draw = Text.draw

    def spy(self, renderer):
        draw(self, renderer)
        if self.get_visible() and self.get_text().strip() and self.get_alpha() != 0:
            box = Text.get_window_extent(self, renderer)
            if box.width > 0 and box.height > 0:
                out.append((self.get_text(), box))

    Text.draw = spy
    try:
        fig.canvas.draw()
    finally:
        Text.draw = draw
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
