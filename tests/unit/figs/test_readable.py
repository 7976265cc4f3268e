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
