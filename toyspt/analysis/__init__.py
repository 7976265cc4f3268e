"""What runs say, on any data: the layer between the run system (:mod:`toyspt.runs`) and the
studies and figures that read it. Nothing here knows which data a run trained on; the study
designs (:mod:`toyspt.ucr.design`, the figures) say which metric is primary and which sets are related.

    paired      paired differences: the typed result of one test (PairedTest), t and signed-rank, TOST
    multiplicity Holm's adjustment over a family
    shares      an arm's share of SPT's gain (Fieller)
    pooling     a random-effects pooled gain over sets (DerSimonian-Laird, Hartung-Knapp), I^2
    stats       a predictor against an outcome: base rates (exact McNemar), within-set association
    rank_tests  the Wilcoxon signed-rank test every verdict uses, its interval and power
    rows        one row per label run (toyspt.analysis.tables.run_row with the label phase's
                columns) and the frame a figure builds from its runs
    gains       every arm against scratch, paired by seed, with intervals; shares of SPT's gain
    basin       the basin rule (proximity index > 1), basin rows of tracked SPT-only runs,
                predictor tests, the basin against SPT's own accuracy
    basin_grid  the toy's basin phase diagram: a grid of task settings as SPT-only runs
    tables      the one per-run row (run_row), per-seed summaries and mean ± std tables (toyspt compare)
"""
from toyspt.util.lazy import exports

__all__, __getattr__, __dir__ = exports(globals(), {
    "toyspt.analysis.paired": ("PairedTest", "Paired", "tost"),  # not paired(): the module's name
    "toyspt.analysis.multiplicity": ("holm",),
    "toyspt.analysis.shares": ("share_of_gain",),
    "toyspt.analysis.pooling": ("random_effects",),
    "toyspt.analysis.stats": ("hits_vs_base_rate", "within_set_association"),
    "toyspt.analysis.rows": ("label_row", "label_frame"),
    "toyspt.analysis.gains": ("gain_table", "gain_and_share"),
    "toyspt.analysis.basin": ("basin_of", "basin_row", "predictor_test"),
    "toyspt.analysis.tables": ("run_row", "comparison", "write_tables"),
})
