"""The LRA tasks made here as kinds of data (:mod:`toyspt.data.source`), so runs, the cache,
sweeps and ``toyspt compare --data KIND:NAME`` reach them like the toy and UCR:

* ``pathfinder:NAME`` — :mod:`toyspt.kinds.pathfinder` images (a preset of :data:`PATHFINDER`);
* ``digits:SIDE`` — scikit-learn's handwritten digits (1,797 images, 8x8, shipped inside its
  wheel), upsampled to SIDE x SIDE by bilinear interpolation when SIDE > 8 (8, 16 or 32);
* ``listops:NAME`` — the ListOps generator (:mod:`toyspt.kinds.listops`) at CPU lengths (a
  preset of :data:`LISTOPS`); Fashion-MNIST is :mod:`toyspt.kinds.fashion`.

Pixels become sequences row by row, one value per position, normalised the one way the
trainer and the bridge share (:func:`toyspt.data.pixels.normalize_pixels`, the PathFinder rule
``(x/255 - 0.5)/0.5`` on 0..255 values). ListOps tokens become one-hot vectors over the fixed
vocabulary ``<mask> <pad> <unk> <eos>`` + the 15 symbols (this order, not the LRA code's
frequency order), ``<eos>`` appended, ``<pad>``-padded to ``max_len + 1``; the toy model's linear
embedding of a one-hot vector plus mask channel is an ``nn.Embedding`` with a ``<mask>`` row
(``tests/unit/kinds/test_lra_tasks.py`` checks the function against :mod:`toyspt.lra.model`).
"""
from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, replace

import numpy as np
import torch
import torch.nn.functional as F

from toyspt.data.pixels import normalize_pixels
from toyspt.data.source import register
from toyspt.data.tasks import Split, TaskData
from toyspt.kinds import listops as lo
from toyspt.kinds.pathfinder import VERSION as PATHFINDER_VERSION
from toyspt.kinds.pathfinder import PathfinderConfig, draw
from toyspt.util.hashing import digest
from toyspt.util.validation import MAX_COUNT, Instance, Int, validate, validated

# in every run key of these kinds: bump when a config comes to mean other data (the generator's own VERSION included)
DATA_VERSION = f"lra-tasks-1/pathfinder-{PATHFINDER_VERSION}"
VOCAB = lo.Vocab(list(lo.SPECIALS + lo.SYMBOLS))  # fixed order: the specials, then listops.SYMBOLS
N_TOKENS = len(VOCAB.itos)


def _splits(x: torch.Tensor, y: torch.Tensor, n_train: int, n_val: int) -> tuple[Split, Split, Split]:
    return (Split(x[:n_train], y[:n_train]), Split(x[n_train:n_train + n_val], y[n_train:n_train + n_val]),
            Split(x[n_train + n_val:], y[n_train + n_val:]))


def _data(cfg, x: torch.Tensor, y: torch.Tensor, n_train: int, n_val: int) -> TaskData:
    d = x.shape[-1]
    return TaskData(cfg, *_splits(x, y, n_train, n_val), mean=torch.zeros(d), std=torch.ones(d))


def pixels_as_sequences(images_0_255: np.ndarray) -> torch.Tensor:
    """(N, H, W) raw 0..255 images -> (N, H*W, 1) float32, row by row, (x/255 - 0.5)/0.5."""
    return normalize_pixels(images_0_255, "pathfinder")


class _Source:
    """What the three sources share: the key names the whole config; the model reads ``width``
    values per position and needs ``length`` positions of positional table."""

    def fingerprint(self) -> str:
        return digest(dict(asdict(self), version=DATA_VERSION))

    def key_fields(self, swap) -> dict:
        if swap is not None and type(swap) is not type(self):
            raise ValueError(f"a {self.kind} run pretrains on {self.kind} data, got a {swap.kind} source")
        return dict(kind=self.kind, data=asdict(self), swap_data=asdict(swap) if swap is not None else None,
                    version=DATA_VERSION)

    def load(self) -> TaskData:
        return _cached(self)

    def probe_inputs(self) -> torch.Tensor:
        return self.load().val.x[:256]

    def fit(self, model):
        """``model`` with this data's width and class count; refused when the sequences are longer
        than its positional table."""
        if model.max_len < self.length:
            raise ValueError(f"{self.name}: sequences of {self.length} positions exceed model.max_len="
                             f"{model.max_len}; raise --model.max_len")
        return replace(model, d_in=self.width, n_classes=self.n_classes)


@dataclass(frozen=True)
class PathfinderSource(_Source):
    pathfinder: PathfinderConfig = validated(rule=Instance(PathfinderConfig), factory=PathfinderConfig)  # the images
    n_train: int = validated(4000, Int(gt=0, le=MAX_COUNT))  # training images
    n_val: int = validated(500, Int(gt=0, le=MAX_COUNT))  # validation images (peak validation accuracy)
    n_test: int = validated(1000, Int(gt=0, le=MAX_COUNT))  # held-out test images
    seed: int = validated(0, Int(ge=0, le=2**63 - 1))  # the data's seed (all three splits are one draw)

    kind = "pathfinder"
    width, n_classes = 1, 2

    def __post_init__(self):
        validate(self)

    @property
    def name(self) -> str:
        c = self.pathfinder
        return f"pathfinder {c.size}px K={c.contour_length}"

    @property
    def length(self) -> int:
        return self.pathfinder.size ** 2

    def make(self) -> TaskData:
        d = draw(self.pathfinder, self.n_train + self.n_val + self.n_test, self.seed)
        x = pixels_as_sequences(np.rint(d.images * 255.0))
        return _data(self, x, torch.from_numpy(d.labels), self.n_train, self.n_val)


@dataclass(frozen=True)
class DigitsSource(_Source):
    side: int = validated(8, Int(ge=8, le=64))  # image side after bilinear upsampling (8 = the original 8x8)
    n_val: int = validated(200, Int(gt=0, le=1000))  # validation images
    n_test: int = validated(400, Int(gt=0, le=1000))  # test images (the rest, 1197 by default, train)
    split_seed: int = validated(0, Int(ge=0, le=2**63 - 1))  # seeds the permutation that splits the 1,797 images

    kind = "digits"
    width, n_classes = 1, 10

    def __post_init__(self):
        validate(self)
        if self.n_val + self.n_test >= 1797:
            raise ValueError(f"n_val + n_test = {self.n_val + self.n_test} leaves no training image of 1,797")

    @property
    def name(self) -> str:
        return f"digits {self.side}x{self.side}"

    @property
    def length(self) -> int:
        return self.side ** 2

    def make(self) -> TaskData:
        from sklearn.datasets import load_digits

        raw = load_digits()
        x = torch.tensor(raw.images, dtype=torch.float64) * (255.0 / 16.0)  # 17 grey levels 0..16 -> 0..255
        if self.side != 8:
            x = F.interpolate(x[:, None], size=(self.side, self.side), mode="bilinear", align_corners=False)[:, 0]
        perm = np.random.default_rng(self.split_seed).permutation(len(x))
        n_train = len(x) - self.n_val - self.n_test
        xs = pixels_as_sequences(x.clamp(0, 255).numpy()[perm])
        return _data(self, xs, torch.as_tensor(raw.target[perm], dtype=torch.long), n_train, self.n_val)


@dataclass(frozen=True)
class ListOpsSource(_Source):
    # the trees: depth 6, up to 10 arguments, 64..256 tokens (mean ~137; ~11% of draws accepted)
    listops: lo.ListOpsConfig = validated(lo.ListOpsConfig(max_depth=6, max_args=10, min_len=64, max_len=256),
                                          Instance(lo.ListOpsConfig))
    n_train: int = validated(4000, Int(gt=0, le=MAX_COUNT))  # training sequences
    n_val: int = validated(500, Int(gt=0, le=MAX_COUNT))  # validation sequences
    n_test: int = validated(1000, Int(gt=0, le=MAX_COUNT))  # test sequences
    seed: int = validated(0, Int(ge=0, le=2**63 - 1))  # the generator's seed (all three splits are one draw)

    kind = "listops"
    width, n_classes = N_TOKENS, 10

    def __post_init__(self):
        validate(self)

    @property
    def name(self) -> str:
        c = self.listops
        return f"listops {c.min_len}-{c.max_len} depth {c.max_depth}"

    @property
    def length(self) -> int:
        return self.listops.max_len + 1

    def make(self) -> TaskData:
        n = self.n_train + self.n_val + self.n_test
        trees = lo.generate(self.listops, n, self.seed)
        b = lo.encode_batch([lo.tokens(t) for t in trees], [lo.evaluate(t) for t in trees], VOCAB,
                            l_max=self.length)
        ids = F.pad(b.ids, (0, self.length - b.ids.shape[1]), value=lo.PAD_ID)
        return _data(self, F.one_hot(ids, N_TOKENS).float(), b.y, self.n_train, self.n_val)


@functools.lru_cache(maxsize=8)
def _cached(src) -> TaskData:
    return src.make()


# ------------------------------------------------------------------ presets and registration

def _pf(**kw) -> PathfinderConfig:
    return PathfinderConfig(**kw)


# --data pathfinder:NAME -> the data source (the pilot fixed "pilot"'s difficulty: docs/lra.md, docs/reports/lra.md)
PATHFINDER = {
    "pilot": PathfinderSource(),
    "lra32": PathfinderSource(PathfinderConfig.lra32()),
}
LISTOPS = {"cpu": ListOpsSource(), "short": ListOpsSource(lo.ListOpsConfig(max_depth=6, max_args=10, min_len=32,
                                                                            max_len=128))}
DIGITS = {str(s): DigitsSource(side=s) for s in (8, 16, 32)}


def _preset(table: dict, kind: str):
    def from_args(args, names: list[str], configs: dict):
        if not names:
            raise ValueError(f"--data: name the {kind} preset, {kind}:NAME with NAME one of {sorted(table)}")
        bad = [n for n in names if n not in table]
        if bad:
            raise ValueError(f"--data: unknown {kind} preset {bad[0]!r}; known: {sorted(table)}")
        return [table[n] for n in names], None
    return from_args


def _rebuild(cls, nested: dict):
    def build(d):
        if d is None:
            return None
        kw = {}
        for k, v in d.items():
            if k in nested:
                kw[k] = nested[k](**{kk: tuple(vv) if isinstance(vv, list) else vv for kk, vv in v.items()})
            else:
                kw[k] = tuple(v) if isinstance(v, list) else v
        return cls(**kw)
    def from_fields(fields: dict):
        if fields.get("version") != DATA_VERSION:
            raise ValueError(f"a run of {fields.get('version')!r} data; this toyspt makes {DATA_VERSION!r} data")
        return build(fields["data"]), build(fields.get("swap_data"))
    return from_fields


def _describe(src) -> str:
    d = src.load()
    return (f"{src.name}: train {len(d.train)} / val {len(d.val)} / test {len(d.test)}, length {src.length}, "
            f"{src.width} value(s) per position, classes {src.n_classes}")


PIXEL_TRAIN = dict(mask_rate=0.5, recon="l1")  # the LRA SPT code's pixel setting
TOKEN_TRAIN = dict(mask_rate=0.1, recon="ce")  # the LRA SPT code's ListOps setting
MODEL = dict(d_model=32, n_heads=1, d_mlp=64, max_len=1025)

register("pathfinder", _rebuild(PathfinderSource, {"pathfinder": PathfinderConfig}),
         from_args=_preset(PATHFINDER, "pathfinder"), model_defaults=MODEL, train_defaults=PIXEL_TRAIN,
         describe=_describe, usage=f"pathfinder:NAME (NAME: {', '.join(PATHFINDER)})")
register("digits", _rebuild(DigitsSource, {}), from_args=_preset(DIGITS, "digits"), model_defaults=MODEL,
         train_defaults=PIXEL_TRAIN, describe=_describe, usage="digits:SIDE (8, 16 or 32)")
register("listops", _rebuild(ListOpsSource, {"listops": lo.ListOpsConfig}), from_args=_preset(LISTOPS, "listops"),
         model_defaults=MODEL, train_defaults=TOKEN_TRAIN, describe=_describe,
         usage=f"listops:NAME (NAME: {', '.join(LISTOPS)})")

__all__ = ["PathfinderSource", "DigitsSource", "ListOpsSource", "PATHFINDER", "LISTOPS", "DIGITS", "VOCAB",
           "N_TOKENS", "pixels_as_sequences", "PIXEL_TRAIN", "TOKEN_TRAIN"]
