"""The regime note of a toy figure: placed below everything after one layout pass, which the
readability check then reuses (a toy figure is laid out once before it is saved)."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.artist import Artist  # noqa: E402

from toyspt.figs import FigContext  # noqa: E402
from toyspt.figs.readable import drawn_texts, overlaps  # noqa: E402


class Counter(Artist):
    """Counts the draws of the figure it is in."""

    def __init__(self):
        super().__init__()
        self.n = 0

    def draw(self, renderer):
        self.n += 1


def test_the_note_sits_below_everything_and_the_figure_is_laid_out_once(tmp_path):
    fig, axes = plt.subplots(1, 2, figsize=(6, 3), layout="constrained")
    for ax in axes:
        ax.plot([0, 1], [0, 1])
        ax.set(xlabel="epoch", ylabel="accuracy", title="a panel")
    counter = Counter()
    fig.add_artist(counter)
    FigContext(out=tmp_path, quick=True).stamp_regime(fig)
    texts = drawn_texts(fig)
    assert counter.n == 1  # the note's pass, reused by the check
    note = next(box for t, box in texts if t.startswith("task regime: proximity"))
    assert all(note.y1 <= box.y0 for t, box in texts if not t.startswith("task regime"))
    assert overlaps(fig) == [] and counter.n == 1
    axes[0].set_title("changed after the note")  # a change after the pass: the check lays it out again
    assert "changed after the note" in [t for t, _ in drawn_texts(fig)] and counter.n == 2
    plt.close(fig)
