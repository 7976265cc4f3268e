"""The readability check finds text drawn over text, and only that."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from toyspt.figs.readable import overlaps  # noqa: E402


def test_two_annotations_at_one_point_overlap():
    fig, ax = plt.subplots()
    ax.annotate("first label", (0.5, 0.5))
    ax.annotate("second label", (0.5, 0.5))
    assert overlaps(fig) == [("first label", "second label")]
    plt.close(fig)


def test_a_plain_laid_out_figure_has_none():
    fig, axes = plt.subplots(1, 2, figsize=(8, 3))
    for ax in axes:
        ax.plot([0, 1], [0, 1])
        ax.set(xlabel="epoch", ylabel="accuracy", title="a panel")
    fig.suptitle("a title")
    fig.tight_layout()
    assert overlaps(fig) == []
    plt.close(fig)


def test_a_footnote_on_the_x_label_is_caught_and_invisible_text_is_not():
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.set_xlabel("label epoch")
    fig.canvas.draw()
    box = ax.xaxis.label.get_window_extent()
    x, y = fig.transFigure.inverted().transform(((box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2))
    note = fig.text(x, y, "task regime", ha="center", va="center")
    assert ("label epoch", "task regime") in overlaps(fig)
    note.set_visible(False)
    assert overlaps(fig) == []
    plt.close(fig)


def test_only_what_a_draw_puts_on_the_canvas_counts():
    """Tick labels outside the view, the axis of an Axes drawn without one, an annotation of a
    point outside its Axes, transparent and empty texts are not drawn; titles and texts are."""
    from matplotlib.ticker import FixedFormatter, FixedLocator

    from toyspt.figs.readable import drawn_texts

    fig, (ax, bare) = plt.subplots(1, 2, figsize=(8, 3))
    ax.set_xlim(0, 1)
    ax.xaxis.set_major_locator(FixedLocator([-1, 0, 0.5, 1, 2]))
    ax.xaxis.set_major_formatter(FixedFormatter(["left out", "a", "b", "c", "right out"]))
    ax.set_yticks([])
    ax.annotate("outside", (5, 5))
    ax.text(0.5, 0.5, "transparent", alpha=0)
    ax.text(0.5, 0.2, "  ")
    ax.set_title("kept")
    bare.set(xlabel="hidden label", title="bare title")
    bare.axis("off")
    fig.text(0.1, 0.02, "note")
    assert sorted(t for t, _ in drawn_texts(fig)) == ["a", "b", "bare title", "c", "kept", "note"]
    plt.close(fig)


def test_finding_the_texts_leaves_matplotlib_unpatched():
    """No class of matplotlib is replaced while the figure is drawn (another thread drawing
    its own figure meanwhile would see the replacement)."""
    from matplotlib.artist import Artist
    from matplotlib.text import Text

    from toyspt.figs.readable import drawn_texts

    seen = []

    class Witness(Artist):
        def draw(self, renderer):
            seen.append(Text.draw)

    fig, ax = plt.subplots()
    ax.set_title("a title")
    fig.add_artist(Witness())
    original = Text.draw
    assert "a title" in [t for t, _ in drawn_texts(fig)]
    assert seen and all(d is original for d in seen)
    plt.close(fig)
