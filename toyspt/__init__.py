"""toyspt: a small, exact toolkit that explains why self-pretraining helps Transformers on
sequence classification. The layers and where each piece lives: ARCHITECTURE.md."""

__version__ = "0.2.0"
