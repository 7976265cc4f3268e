"""What a study is, declared once: the shape the real-data study (:class:`toyspt.ucr.design.Study`)
and the LRA study (:class:`toyspt.studies.lra_design.Study`) share, which the figure job
(``paper_figs.py --tier``) and ``toyspt study`` rely on (:mod:`toyspt.studies.registry` names them).

A study is a class: what every one of its instances shares is declared on the class (its name, its
ledger, the tiers that run it, its figures, where it was pre-registered); an instance is the study
at one tier (:meth:`Study.for_tier`: full, or its quick smoke version), whose :meth:`Study.specs`
are its runs in the order they train.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Protocol, Sequence, runtime_checkable

from toyspt.runs.ledger import StudyLedger


@runtime_checkable
class Study(Protocol):
    """The protocol every study implements (a class; nothing to inherit)."""

    name: ClassVar[str]  # its name in the registry and in ``toyspt study ... NAME``
    ledger: ClassVar[StudyLedger]  # its results ledger: the data kinds it records, its file
    tiers: ClassVar[tuple[str, ...]]  # the figure job's tiers that run it (``paper_figs.py --tier``)
    lockstep: ClassVar[bool]  # whether its runs may train in lockstep groups (one config over seeds)
    figures: ClassVar[tuple[str, ...]]  # the figures drawn from its runs (names of toyspt.figs.FIGURES)
    preregistration: ClassVar[str]  # where its design was fixed before its runs trained: page and section

    @classmethod
    def for_tier(cls, name: str, quick: bool = False, seeds: Sequence[int] = (0, 1),
                 numerics: str = "eager") -> "Study":
        """The study at tier ``name`` (quick: its smoke version at ``seeds``)."""

    @classmethod
    def refuse(cls, quick: bool, seeds, numerics: str, contrast: bool | None) -> None:
        """A ValueError naming the first flag of the figure job the study would not honour."""

    def specs(self) -> dict:
        """label -> spec of its runs, in the order they train (a prefix holds whole paired seeds)."""

    @staticmethod
    def phase(spec, facts) -> int | None:
        """The phase of one of its entries (the sweep trains phase by phase); None: not its data."""

    def progress(self, ledger) -> dict[str, Any]:
        """How much of it ``ledger`` (its opened :class:`toyspt.runs.ledger.Ledger`) records: JSON values."""

    @staticmethod
    def describe(progress: dict[str, Any]) -> str:
        """What :meth:`progress` returned, in one sentence (``toyspt study progress NAME`` prints it)."""

    @classmethod
    def pilot(cls, out: Path | None, quick: bool = False, progress: bool = False, **options):
        """Train (or read from the cache) the runs that fixed its design, writing them to ``out``;
        returns their table, or None for a study without a pilot. ``options``: the pilot's own (the
        CLI's ``--cache``, ``--ledger``, ``--workers``, ``--recorded``, given only when set), each
        refused with a message where the pilot does not honour it."""


MEMBERS = ("name", "ledger", "tiers", "lockstep", "figures", "preregistration", "for_tier", "refuse", "specs",
           "phase", "progress", "describe", "pilot")  # what the protocol asks of a study class


def missing(study: type) -> list[str]:
    """The members of the protocol the class ``study`` lacks (empty: it implements it)."""
    return [m for m in MEMBERS if not hasattr(study, m)]


__all__ = ["Study", "MEMBERS", "missing"]
