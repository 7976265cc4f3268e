"""One list of tiers: the real-data design's; the figure job and every figure name only those."""
from toyspt.figs import FIGURES, TIERS, load
from toyspt.ucr.design import TIERS as DESIGN


def test_the_figure_tiers_are_the_designs():
    assert TIERS == tuple(DESIGN)
    for name in FIGURES:
        own = getattr(load(name), "TIERS", TIERS)
        assert own and set(own) <= set(DESIGN), name
