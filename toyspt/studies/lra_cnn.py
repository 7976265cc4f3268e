"""The learnability reference of the image tasks: a small convolutional network trained on the
very images the Transformers see, so that "at chance" can be said of a model rather than of a
task. If this network leaves chance where a Transformer does not, the data can be learned and the
Transformer did not learn it.

:class:`CNNReferenceSpec` is one such network on one image source and seed, a cache entry (a
:class:`~toyspt.runs.specs.Table`: one row per epoch with validation and test accuracy) that the
results ledger records through its ``data`` field. It trains through the one training loop
(:class:`toyspt.train.loop.Lockstep`, one model) with AdamW, and stops by the label phase's rule
(:func:`toyspt.train.run.stalled`: ``patience`` epochs without a higher validation accuracy, at
most ``epochs``). Pixels arrive as the Transformers' sequences (N, H*W, 1), row by row, and are
laid back out as (N, 1, H, W).
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from toyspt.nn.model import seeded
from toyspt.runs.specs import FORMAT_VERSION, Spec, Table, single_thread
from toyspt.train.evaluation import scores
from toyspt.train.loop import Lockstep, RunContext
from toyspt.train.run import seed_stream, stalled
from toyspt.util.validation import MAX_COUNT, Float, Int, validate, validated

# bump when the network or its training comes to mean something else (2: counts against the majority;
# 3: batch norm and global max pooling)
VERSION = 3


@dataclass(frozen=True)
class CNNConfig:
    channels: int = validated(16, Int(gt=0, le=256))  # channels of the first stage (doubled after each pooling)
    epochs: int = validated(60, Int(gt=0, le=MAX_COUNT))  # the cap on epochs
    patience: int = validated(10, Int(gt=0, le=MAX_COUNT))  # stop after this many epochs without a higher val acc
    batch_size: int = validated(64, Int(gt=0, le=MAX_COUNT))  # minibatch size
    lr: float = validated(1e-3, Float(gt=0, le=1.0))  # AdamW learning rate
    weight_decay: float = validated(0.01, Float(ge=0, le=1.0))  # AdamW decoupled weight decay

    def __post_init__(self):
        validate(self)


REFERENCE = CNNConfig(epochs=100, patience=20)  # the studies' reference: a long patience for a late lift-off
QUICK_REFERENCE = CNNConfig(channels=4, epochs=2, patience=1)  # its smoke version


class SmallCNN(nn.Module):
    """Three stages of two 3x3 convolutions (c, 2c, 4c channels; batch norm, ReLU), 2x2 max pooling
    between stages, global max pooling and a linear classifier. Batch norm and the global max let
    it lift off PathFinder within a few epochs at 20,000 images, where the same network without
    them (global average, no norm) stayed at chance for 11 epochs."""

    def __init__(self, channels: int, n_classes: int):
        super().__init__()
        layers, c_in = [], 1
        for i, c in enumerate((channels, 2 * channels, 4 * channels)):
            if i:
                layers.append(nn.MaxPool2d(2))
            for cin in (c_in, c):
                layers += [nn.Conv2d(cin, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU()]
            c_in = c
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(c_in, n_classes)

    def forward(self, x_Bx1xHxW: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x_Bx1xHxW).amax(dim=(2, 3)))


def as_images(x_BxTx1: torch.Tensor) -> torch.Tensor:
    """Row-by-row pixel sequences (B, H*W, 1) as images (B, 1, H, W); a non-square length refused."""
    side = int(round(x_BxTx1.shape[1] ** 0.5))
    if x_BxTx1.dim() != 3 or x_BxTx1.shape[-1] != 1 or side * side != x_BxTx1.shape[1]:
        raise ValueError(f"the CNN reference reads square single-channel images, got sequences {tuple(x_BxTx1.shape)}")
    return x_BxTx1.reshape(len(x_BxTx1), 1, side, side)


def train_cnn(cfg: CNNConfig, data, seed: int) -> list[dict[str, Any]]:
    """One network from ``seed`` trained on ``data`` (a loaded TaskData of images); one row per epoch
    (epoch, train_loss, val_acc, val_loss, test_acc, only_model, only_majority, and ``stopped`` on the
    last: patience | cap)."""
    xs = {k: as_images(getattr(data, k).x) for k in ("train", "val", "test")}
    n_classes = int(max(int(getattr(data, k).y.max()) for k in xs)) + 1
    with seeded(seed):
        model = SmallCNN(cfg.channels, max(2, n_classes))
    lock = Lockstep([RunContext(model, "cnn_reference", seed)])
    lock.start_phase("finetune", lambda ps: torch.optim.AdamW(ps, lr=cfg.lr, weight_decay=cfg.weight_decay))
    gen = torch.Generator().manual_seed(seed_stream(seed))
    y = data.train.y
    majority = int(torch.bincount(y).argmax())  # the majority-class rule, fitted on the training labels

    def loss(k, m, rows, g):
        return F.cross_entropy(m(xs["train"][rows]), y[rows])

    rows: list[dict[str, Any]] = []
    for epoch in range(1, cfg.epochs + 1):
        losses = lock.epoch(len(y), cfg.batch_size, [gen], loss)[0]
        model.eval()
        val_acc, val_loss = scores(lambda s: model(xs["val"][s]), data.val.y, 1024)
        rows.append(dict(epoch=epoch, train_loss=sum(losses) / len(losses), val_acc=val_acc, val_loss=val_loss,
                         **against_majority(model, xs["test"], data.test.y, majority)))
        if stalled([dict(r, phase="finetune") for r in rows], cfg.patience):
            rows[-1]["stopped"] = "patience"
            break
    else:
        rows[-1]["stopped"] = "cap"
    lock.release()
    return rows


@torch.no_grad()
def against_majority(model: nn.Module, x: torch.Tensor, y: torch.Tensor, majority: int) -> dict[str, Any]:
    """Test accuracy and the discordant counts against always answering ``majority`` on the same
    examples (what an exact McNemar test reads): ``only_model`` right where the rule is wrong,
    ``only_majority`` the reverse."""
    pred = torch.cat([model(x[i:i + 1024]).argmax(-1) for i in range(0, len(x), 1024)])
    right, rule = pred == y, y == majority
    return dict(test_acc=float(right.double().mean()), only_model=int((right & ~rule).sum()),
                only_majority=int((~right & rule).sum()))


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Peak validation accuracy, test accuracy and the counts against the majority rule at its (first)
    epoch, and where and why it stopped."""
    best = max(rows, key=lambda r: r["val_acc"])
    return dict(peak_val_acc=best["val_acc"], test_at_peak=best["test_acc"], peak_epoch=best["epoch"],
                only_model=best["only_model"], only_majority=best["only_majority"],
                final_test_acc=rows[-1]["test_acc"], stop_epoch=rows[-1]["epoch"],
                stopped_early=float(rows[-1]["stopped"] == "patience"))


@dataclass(frozen=True)
class CNNReferenceSpec(Spec):
    """The small CNN on one image source (a data kind with square single-channel images) and seed."""

    kind: ClassVar[str] = "cnn_reference"
    result_type: ClassVar[type] = Table

    data: Any  # the image source (PathfinderSource, DigitsSource, ...); the ledger covers it through it
    seed: int = 0  # the network's init and the data order
    cnn: CNNConfig = CNNConfig()  # the network and its training

    def __post_init__(self):
        if not hasattr(self.data, "key_fields") or getattr(self.data, "width", None) != 1:
            raise ValueError(f"data: an image source with one value per position, got {type(self.data).__name__}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed: a non-negative integer, got {self.seed!r}")

    def to_dict(self) -> dict[str, Any]:
        return dict(kind=self.kind, format=FORMAT_VERSION, cnn_version=VERSION, seed=self.seed, cnn=asdict(self.cnn),
                    data_kind=self.data.kind, **{k: v for k, v in self.data.key_fields(None).items() if k != "kind"})

    def seconds(self) -> float:
        """The cap's epochs at about 0.3 ms per training image-epoch per 16x16 image (scaled by pixels)."""
        return self.cnn.epochs * self.data.load().train.x.shape[0] * 3e-4 * self.data.length / 256

    def label(self) -> str:
        return f"CNN reference {self.key()} ({self.data.name}, seed {self.seed})"

    def execute(self, progress: bool = False, start=None) -> Table:
        if start is not None:
            raise ValueError(f"{self.label()}: has no parent run to continue")
        t = time.perf_counter()
        rows = single_thread(train_cnn, self.cnn, self.data.load(), self.seed)
        return Table(rows, dict(summary(rows), cnn_version=VERSION), seconds=time.perf_counter() - t)


__all__ = ["REFERENCE", "QUICK_REFERENCE",
           "CNNConfig", "CNNReferenceSpec", "SmallCNN", "as_images", "train_cnn", "against_majority", "summary",
           "VERSION"]
