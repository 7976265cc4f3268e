"""The studies of the house, by name (:data:`STUDIES`), and the figure job's tiers, each run by
one study (:data:`BY_TIER`). ``paper_figs.py --tier`` and ``toyspt figs`` read the tiers from here
(:data:`toyspt.figs.STUDIES`), ``toyspt study progress|pilot NAME`` the names. A new study is one
class implementing :class:`toyspt.studies.protocol.Study` and its line in :data:`STUDIES`."""
from __future__ import annotations

from toyspt.studies.lra_design import Study as LRAStudy
from toyspt.studies.protocol import missing
from toyspt.ucr.design import Study as UCRStudy

STUDIES = {"ucr": UCRStudy, "lra": LRAStudy}  # name -> study class, the default tiers' study first
for _name, _study in STUDIES.items():
    if _study.name != _name or missing(_study):
        raise TypeError(f"study {_name!r}: named {_study.name!r}, lacks {missing(_study)}")
BY_TIER = {t: s for s in STUDIES.values() for t in s.tiers}  # tier -> the study a figure job of it runs
if len(BY_TIER) != sum(len(s.tiers) for s in STUDIES.values()):
    raise TypeError("two studies claim one tier")


def study(name: str):
    """The study class named ``name``; a ValueError naming the choices otherwise."""
    if name not in STUDIES:
        raise ValueError(f"study: choose one of {', '.join(STUDIES)}, got {name!r}")
    return STUDIES[name]


__all__ = ["STUDIES", "BY_TIER", "study"]
