"""LRA-like kinds of data, made here at CPU sizes (:mod:`toyspt.data.source`): runs, the cache,
sweeps and ``toyspt compare --data KIND:NAME`` reach them as they reach the toy task and UCR.

* :mod:`.pathfinder`: the PathFinder generator (contours, markers, distractors);
  :mod:`.pathfinder_checks`: its geometry and shortcut checks and a gallery
  (``toyspt data check pathfinder``);
* :mod:`.listops`: the ListOps generator and vocabulary (also the LRA code's TSV files);
* :mod:`.tasks`: the ``pathfinder``, ``digits`` and ``listops`` kinds of data;
  :mod:`.fashion`: ``fashion_mnist`` read from the user's IDX files.

Pixels are normalised by the rule the LRA bridge shares (:mod:`toyspt.data.pixels`); nothing here
imports a model or the bridge. Importing this package registers every kind (a ledger's records of
these kinds are read back through that registry).
"""
from toyspt.kinds import fashion as _fashion  # noqa: F401  (registers "fashion_mnist")
from toyspt.kinds import tasks as _tasks  # noqa: F401  (registers "pathfinder", "digits", "listops")
from toyspt.util.lazy import exports

__all__, __getattr__, __dir__ = exports(globals(), {
    "toyspt.kinds.tasks": ("PathfinderSource", "DigitsSource", "ListOpsSource", "PATHFINDER", "LISTOPS", "DIGITS"),
    "toyspt.kinds.fashion": ("FashionSource",),
})
