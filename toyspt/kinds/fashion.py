"""Fashion-MNIST as a kind of data (``--data fashion_mnist:DIR``), read from IDX files the user
points to (the four ``train-``/``t10k-`` ``images-idx3-ubyte``/``labels-idx1-ubyte`` files,
gzipped or not): no loader here downloads anything. Without files the kind is refused in one
line naming where it looked: ``DIR``, else ``$TOYSPT_FASHION_MNIST``, else the folders of
:data:`SYSTEM_DIRS` (where a system package may have put them; Debian ships the files in its
``dataset-fashion-mnist`` package, which is not installed on the machine this was written on,
so its folder is a guess that is only used when it exists).

Reading is bounded: each file is a regular file, its IDX header (magic, counts, 28x28) is
checked before its data, and no file may hold (or inflate to) more bytes than its header says.
Images are averaged over ``pool`` x ``pool`` blocks (28 -> 14 for ``pool`` 2) and become
sequences row by row, normalised as every pixel task here
(:func:`toyspt.kinds.tasks.pixels_as_sequences`). Splits: ``n_train`` + ``n_val`` images drawn
from the training file by a seeded permutation, ``n_test`` from the test file (its first ones).
"""
from __future__ import annotations

import gzip
import hashlib
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from toyspt.data.source import register
from toyspt.data.tasks import Split, TaskData
from toyspt.kinds.tasks import MODEL, PIXEL_TRAIN, pixels_as_sequences
from toyspt.util.files import open_regular
from toyspt.util.validation import Int, Text, validate, validated

ENV = "TOYSPT_FASHION_MNIST"
SYSTEM_DIRS = ("/usr/share/dataset-fashion-mnist", "/usr/share/fashion-mnist")
FILES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
         "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}
MAX_IMAGES = 100_000  # the set has 60,000 + 10,000


class FashionNotFound(ValueError):
    pass


def find_root(root: str | None) -> Path:
    """The folder holding the four files (see the module docstring), or FashionNotFound."""
    tried = [root] if root else [os.environ[ENV]] if os.environ.get(ENV) else list(SYSTEM_DIRS)
    for d in tried:
        if all(_file(Path(d), n) is not None for pair in FILES.values() for n in pair):
            return Path(d)
    raise FashionNotFound(f"Fashion-MNIST: no train-/t10k- images-idx3-ubyte and labels-idx1-ubyte files (.gz or "
                          f"not) in {', '.join(map(str, tried))}; name their folder (--data fashion_mnist:DIR or "
                          f"${ENV})")


def _file(d: Path, name: str) -> Path | None:
    """The file ``name`` (or ``name.gz``) in ``d``; a link, folder, FIFO or device of that name is
    refused in one line (a link may lead anywhere, a FIFO would block a read)."""
    for p in (d / name, d / f"{name}.gz"):
        if p.is_symlink() or (os.path.lexists(p) and not p.is_file()):
            kind = "a symbolic link" if p.is_symlink() else "not a regular file (a folder, FIFO or device)"
            raise ValueError(f"Fashion-MNIST: {p} is {kind}; name a folder holding the files themselves")
        if p.is_file():
            return p
    return None


def _read(path: Path, magic: int, dims: int) -> np.ndarray:
    """An IDX file of uint8 data: header checked against the file's size before its data is read
    (so at most the bytes it declares, 78.4 MB at MAX_IMAGES, are allocated, and only when the file
    holds them), at most those bytes read."""
    if path.is_symlink():
        raise ValueError(f"Fashion-MNIST: {path} is a symbolic link; name the file itself")
    raw, nbytes = open_regular(str(path), "Fashion-MNIST file", max_bytes=64 * 2**20)
    try:
        return _parse(path, raw, nbytes, magic, dims)
    except (OSError, EOFError) as e:  # a damaged gzip stream
        raise ValueError(f"{path}: unreadable ({e})") from None
    finally:
        raw.close()


def _stored(path: Path, raw, nbytes: int) -> int:
    """The bytes the file holds once read: its size, or a gzip stream's ISIZE trailer (its
    uncompressed size modulo 2^32), read before anything is inflated."""
    if path.suffix != ".gz":
        return nbytes
    if nbytes < 18:  # a gzip header and trailer at least
        raise ValueError(f"{path}: {nbytes} bytes, too short for a gzip stream")
    raw.seek(nbytes - 4)
    isize = int.from_bytes(raw.read(4), "little")
    raw.seek(0)
    return isize


def _parse(path: Path, raw, nbytes: int, magic: int, dims: int) -> np.ndarray:
    stored = _stored(path, raw, nbytes)
    with (gzip.GzipFile(fileobj=raw) if path.suffix == ".gz" else raw) as f:
        head = f.read(4 + 4 * dims)
        if len(head) < 4 + 4 * dims or int.from_bytes(head[:4], "big") != magic:
            raise ValueError(f"{path}: not an IDX file of {dims}-d uint8 data (magic {head[:4].hex()!r})")
        shape = tuple(int.from_bytes(head[4 + 4 * i:8 + 4 * i], "big") for i in range(dims))
        if not 0 < shape[0] <= MAX_IMAGES or shape[1:] not in ((), (28, 28)):
            raise ValueError(f"{path}: shape {shape}, expected up to {MAX_IMAGES} items of 28x28 (images) or labels")
        size = int(np.prod(shape))
        if stored != (4 + 4 * dims + size) % (2**32 if path.suffix == ".gz" else 2**64):
            raise ValueError(f"{path}: its header declares {size} data bytes ({shape}), but the file holds "
                             f"{stored - 4 - 4 * dims}")
        data = f.read(size + 1)
    if len(data) != size:
        raise ValueError(f"{path}: {len(data)} data bytes where its header declares {size}")
    return np.frombuffer(data, dtype=np.uint8).reshape(shape)


def read_split(root: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    """(images (N, 28, 28) uint8, labels (N,) uint8) of ``split`` ("train" or "test")."""
    images_name, labels_name = FILES[split]
    x = _read(_file(root, images_name), 0x803, 3)
    y = _read(_file(root, labels_name), 0x801, 1)
    if len(x) != len(y) or y.max() > 9:
        raise ValueError(f"{root}: {split} has {len(x)} images and {len(y)} labels (classes 0..9 expected)")
    return x, y


@dataclass(frozen=True)
class FashionSource:
    root: str = validated("", Text())  # the folder of the four IDX files (not keyed: the content is)
    content: str = validated("", Text())  # sha256 of the four files' data (the run key names the values)
    pool: int = validated(2, Int(ge=1, le=7))  # average pool x pool blocks: 28 -> 28/pool pixels a side
    n_train: int = validated(4000, Int(gt=0, le=59_000))  # training images (from the training file)
    n_val: int = validated(500, Int(gt=0, le=10_000))  # validation images (from the training file)
    n_test: int = validated(1000, Int(gt=0, le=10_000))  # test images (the test file's first ones)
    split_seed: int = validated(0, Int(ge=0, le=2**63 - 1))  # seeds the permutation of the training file

    kind = "fashion_mnist"
    width, n_classes = 1, 10

    def __post_init__(self):
        validate(self)
        if 28 % self.pool:
            raise ValueError(f"pool: {self.pool} does not divide 28")

    @classmethod
    def at(cls, root: str | None = None, **kw) -> "FashionSource":
        """The source of the files at ``root`` (found as :func:`find_root` says), fingerprinted."""
        r = find_root(root)
        return cls(str(r), _content(r), **kw)

    @property
    def name(self) -> str:
        side = 28 // self.pool
        return f"fashion_mnist {side}x{side}"

    @property
    def length(self) -> int:
        return (28 // self.pool) ** 2

    def fingerprint(self) -> str:
        return self.content

    def key_fields(self, swap) -> dict:
        if swap is not None:
            raise ValueError("a fashion_mnist run pretrains on its own images")
        return dict(kind=self.kind, data=asdict(self), swap_data=None)  # the key drops data.root

    def load(self) -> TaskData:
        root = Path(self.root)
        if _content(root) != self.content:
            raise ValueError(f"Fashion-MNIST at {root} has changed since the run was specified")
        (xt, yt), (xs, ys) = read_split(root, "train"), read_split(root, "test")
        perm = np.random.default_rng(self.split_seed).permutation(len(xt))[: self.n_train + self.n_val]
        p = self.pool

        def seq(x):
            x = x.astype(np.float64).reshape(len(x), 28 // p, p, 28 // p, p).mean(axis=(2, 4))
            return pixels_as_sequences(x)
        x = torch.cat([seq(xt[perm]), seq(xs[: self.n_test])])
        y = torch.as_tensor(np.concatenate([yt[perm], ys[: self.n_test]]), dtype=torch.long)
        n, v = self.n_train, self.n_val
        return TaskData(self, Split(x[:n], y[:n]), Split(x[n:n + v], y[n:n + v]), Split(x[n + v:], y[n + v:]),
                        mean=torch.zeros(1), std=torch.ones(1))

    def probe_inputs(self) -> torch.Tensor:
        return self.load().val.x[:256]

    def fit(self, model):
        from dataclasses import replace

        if model.max_len < self.length:
            raise ValueError(f"{self.name}: {self.length} positions exceed model.max_len={model.max_len}")
        return replace(model, d_in=1, n_classes=10)


def _content(root: Path) -> str:
    h = hashlib.sha256()
    for split in ("train", "test"):
        for a in read_split(root, split):
            h.update(np.asarray(a.shape, dtype=np.int64).tobytes())
            h.update(a.tobytes())
    return h.hexdigest()


def _from_fields(d: dict):
    return FashionSource(**d["data"]), None


def _from_args(args, names: list[str], configs: dict):
    if len(names) > 1:
        raise ValueError("--data: one Fashion-MNIST folder, fashion_mnist:DIR")
    return [FashionSource.at(names[0] if names else None)], None


register("fashion_mnist", _from_fields, from_args=_from_args, model_defaults=MODEL, train_defaults=PIXEL_TRAIN,
         describe=lambda s: f"{s.name} from {s.root}: train {s.n_train} / val {s.n_val} / test {s.n_test}",
         usage=f"fashion_mnist[:DIR] (the four IDX files; default ${ENV})")

__all__ = ["FashionSource", "FashionNotFound", "find_root", "read_split", "ENV", "SYSTEM_DIRS"]
