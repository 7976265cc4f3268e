"""One plotting style for every figure, and atomic figure/CSV writing."""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from toyspt.util.atomic import atomic_write  # noqa: E402

# one colour per arm, stable across figures
ARM_COLORS = dict(zip(
    ["scratch", "spt", "scratch_matched", "qk_transfer", "all_but_qk_transfer", "frozen_attention",
     "data_swap", "alibi", "alibi_steep", "rope", "fire", "learned_pe", "depth2", "spt_depth2",
     "spt_no_self", "spt_no_masked_keys"],
    sns.color_palette("tab10", 10) + sns.color_palette("Dark2", 6)))


def style() -> None:
    """The house style: seaborn whitegrid, paper context, no LaTeX."""
    sns.set_theme(style="whitegrid", context="paper", font_scale=1.0)
    plt.rcParams.update({"text.usetex": False, "figure.dpi": 110, "savefig.bbox": "tight",
                         "axes.titlesize": 10, "axes.labelsize": 9, "legend.fontsize": 8})


def color(arm: str):
    return ARM_COLORS.get(arm, "0.4")


@contextmanager
def seeded_jitter(seed: int = 0):
    """seaborn draws strip-plot jitter from numpy's global generator: seed it for the block
    (the same figure, byte for byte, on every redraw) and restore its state afterwards."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


def mark_quick(fig, quick: bool) -> None:
    """Stamp quick-mode figures so they are never mistaken for the full ones."""
    if quick:
        fig.text(0.5, 0.5, "QUICK MODE — not the paper figure", ha="center", va="center",
                 rotation=20, fontsize=22, color="red", alpha=0.25, transform=fig.transFigure)


def save_figure(fig, out: Path, name: str, quick: bool = False) -> list[Path]:
    """Write ``name.png`` and ``name.pdf`` atomically; returns the paths."""
    mark_quick(fig, quick)
    paths = []
    for ext in ("png", "pdf"):
        p = out / f"{name}.{ext}"
        atomic_write(p, lambda tmp, ext=ext: fig.savefig(tmp, format=ext, dpi=150))
        paths.append(p)
    plt.close(fig)
    return paths


def save_csv(frame: pd.DataFrame, out: Path, name: str) -> Path:
    """Write the plotted numbers beside the figure."""
    p = out / f"{name}.csv"
    atomic_write(p, lambda tmp: frame.to_csv(tmp, index=False))
    return p
