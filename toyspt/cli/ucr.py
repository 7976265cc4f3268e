"""``toyspt ucr``: ``toyspt compare`` on UCR sets (:mod:`toyspt.cli.compare`): ``--dataset
GunPoint,ECG200`` is ``--data ucr:GunPoint,ucr:ECG200``, the blindness columns are on by
default; ``--list`` says where each set would be read from."""
from __future__ import annotations

from toyspt.cli.compare import add_compare_flags, cmd_compare
from toyspt.cli.flags import split_unique


def cmd_ucr(args) -> int:
    from toyspt.ucr.data import PAPER_DATASETS
    from toyspt.ucr.locations import describe_locations, format_locations

    if args.data != "toy":
        raise ValueError("toyspt ucr takes --dataset NAME[,NAME...]; --data is toyspt compare's")
    if args.list:
        names = [n for n in args.dataset.split(",") if n] if args.dataset else list(PAPER_DATASETS)
        print(format_locations(describe_locations(names, args.ucr_root, args.location)))
        return 0
    args.data = ",".join(f"ucr:{n}" for n in split_unique(args.dataset or "GunPoint", "--dataset", "data set"))
    return cmd_compare(args)


def register(subparsers) -> None:
    """Add ``toyspt ucr`` to the main parser (called by toyspt.cli.main)."""
    p = subparsers.add_parser("ucr", help="scratch vs SPT (and ablations) on UCR time-series data",
                              description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default=None,
                   help="comma-separated UCR names as the archive spells them (default GunPoint)")
    p.add_argument("--list", action="store_true", help="say where each data set would be read from")
    add_compare_flags(p, "scratch,spt,scratch_matched,qk_transfer,alibi", blindness=True)
    p.set_defaults(func=cmd_ucr)


__all__ = ["register", "cmd_ucr"]
