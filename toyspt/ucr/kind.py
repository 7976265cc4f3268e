"""The UCR sets as a kind of data (:mod:`toyspt.data.source`): ``--data ucr:NAME[,ucr:NAME...]``
names sets as the archive spells them; ``--ucr-root``, ``--location``, ``--val-fraction`` and
``--split-seed`` say where and how they are read, ``--swap-dataset`` the set a ``data_swap``
arm pretrains on; their runs default to one value per step (``d_in`` 1) and
:data:`toyspt.ucr.runs.UCR_TRAIN_DEFAULTS`. Registering it here is all the command line needs."""
from __future__ import annotations

from toyspt.data.source import register
from toyspt.runs.arms import ascii_float, ascii_int
from toyspt.ucr.data import ENV_ROOT, LOCATIONS, UCRConfig, UCRSource, load_ucr
from toyspt.ucr.runs import UCR_MODEL_DEFAULTS, UCR_TRAIN_DEFAULTS


def add_flags(p) -> None:
    """Where and how UCR sets are read."""
    p.add_argument("--ucr-root", default=None,
                   help=f"UCR archive folder holding <Name>/<Name>_TRAIN.tsv (default ${ENV_ROOT}, "
                        "else a packaged copy)")
    p.add_argument("--location", default="auto", choices=LOCATIONS, help="where to read UCR sets from")
    p.add_argument("--val-fraction", type=ascii_float, default=UCRConfig.val_fraction,
                   help="UCR: share of each class of train held out for validation")
    p.add_argument("--split-seed", type=ascii_int, default=UCRConfig.split_seed,
                   help="UCR: seed of the stratified validation split")
    p.add_argument("--swap-dataset", default=None, help="UCR data_swap arm: the UCR set SPT runs on")


def given(args) -> list[str]:
    """The UCR flags set that only UCR data can use."""
    return [f"--{f.replace('_', '-')}" for f in ("ucr_root", "swap_dataset") if getattr(args, f, None)]


def from_args(args, names: list[str], configs: dict) -> tuple[list[UCRSource], UCRSource | None]:
    """The sets ``names`` (and the swap set), read as the flags say; series longer than the
    model's table are refused on each file's first row."""
    if not names:
        raise ValueError("--data: name the UCR sets, ucr:NAME[,ucr:NAME...]")

    def source(name: str) -> UCRSource:
        cfg = UCRConfig(name=name, root=args.ucr_root, location=args.location, val_fraction=args.val_fraction,
                        split_seed=args.split_seed)
        return UCRSource.of(load_ucr(cfg, max_length=configs["model"].max_len))
    return [source(n) for n in names], source(args.swap_dataset) if args.swap_dataset else None


def describe(src: UCRSource) -> str:
    ld = src.load()
    return (f"{src.name}: {ld.read_from}; train {len(ld.train)} / val {len(ld.val)} / test {len(ld.test)}, "
            f"length {ld.length}, classes {ld.n_classes} (labels {list(ld.label_map)})")


def config_from_fields(d: dict) -> UCRConfig:
    """A config from its stored fields; ``source`` is ``location``'s name in entries and ledger
    records written before the rename (never both)."""
    if "source" in d:
        if "location" in d:
            raise ValueError(f"a UCR config names both 'source' and 'location' (one field, two names): {d!r}")
        d = {("location" if k == "source" else k): v for k, v in d.items()}
    return UCRConfig(**d)


def source_from_fields(d: dict) -> tuple[UCRSource, UCRSource | None]:
    """(data, swap) of a UCR run from its key fields."""
    data = UCRSource(config_from_fields(d["data"]), d["fingerprint"])
    swap = UCRSource(config_from_fields(d["swap_data"]), d["swap_fingerprint"]) if d.get("swap_data") else None
    return data, swap


UCR = register("ucr", source_from_fields, from_args=from_args, add_flags=add_flags, given=given,
               model_defaults=UCR_MODEL_DEFAULTS, train_defaults=UCR_TRAIN_DEFAULTS, describe=describe,
               usage="ucr:NAME[,ucr:NAME...] (UCR sets as the archive spells them)")

__all__ = ["UCR", "add_flags", "given", "from_args", "describe", "config_from_fields", "source_from_fields"]
