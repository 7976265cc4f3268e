"""toyspt: a small, exact toolkit that explains why self-pretraining helps Transformers on
sequence classification. Modules: tasks, positional, attention, model, train, runs, arms,
compare, directions, probes, tracking, vectorized, engines, plots, figs, lra, ucr, cli."""

__version__ = "0.1.0"
