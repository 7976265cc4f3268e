"""``toyspt data``: checks of the data kinds the toolkit makes (:mod:`toyspt.kinds`).

    toyspt data check pathfinder [--gallery PNG] [--json OUT] [--n-train N] [--n-test N]

``check pathfinder`` checks every ``--data pathfinder:NAME`` preset (and the LRA setting at 6
dashes): images per second, classifiers that cannot trace a contour stay at chance, the geometry
the generator promises (:mod:`toyspt.kinds.pathfinder_checks`); ``--gallery`` writes examples of
both labels, ``--json`` every number (figures/kinds/pathfinder.png, figures/kinds/pathfinder_checks.json).
"""
from __future__ import annotations

from toyspt.cli.flags import EXIT_OK, out_file, positive_int

CHECKS = ("pathfinder",)  # the kinds with checks of their own


def check(args) -> int:
    from toyspt.kinds.pathfinder_checks import check_presets

    check_presets(args.gallery, args.json, args.n_train, args.n_test)
    return EXIT_OK


def register(sub) -> None:
    p = sub.add_parser("data", help="check the data kinds the toolkit makes", description=__doc__.splitlines()[0])
    s = p.add_subparsers(dest="data_cmd", required=True)
    c = s.add_parser("check", help="check that a generated kind is the task it claims to be")
    c.add_argument("kind", choices=CHECKS)
    c.add_argument("--gallery", type=out_file, default=None, help="write the gallery PNG here")
    c.add_argument("--json", type=out_file, default=None, help="write the checks' numbers here")
    c.add_argument("--n-train", type=positive_int, default=4000, help="training images of each shortcut check")
    c.add_argument("--n-test", type=positive_int, default=2000, help="test images of each shortcut check")
    c.set_defaults(func=check)


__all__ = ["register", "check", "CHECKS"]
