"""LRA inputs and losses: pixel arrays normalised as the LRA code does, SPT masking, and
the label and reconstruction losses that the probes differentiate.

Pixels (user-supplied ``.npy``, raw 0..255 values) are normalised by the one rule the LRA-like data
kinds share (:mod:`toyspt.data.pixels`: ``image`` = grayscale CIFAR10, ``pathfinder``, ``digits``).

SPT in that code: each valid position is masked i.i.d. with probability ``p`` (0.5 in
its examples; padding is never masked). Token tasks: masked ids become ``<mask>`` = 0 and
the loss is cross-entropy on masked positions only. Pixel tasks: the input is
``[value * (1 - m), m]`` and the loss is L1 on masked positions only, or, with that code's
PathFinder setting ``lm_loss: ce``, cross-entropy of a 256-way decoder against the pixel's
grey level (``(x * 255).long()`` of the 0..1 image, which is the raw 0..255 level exactly for
every level in float32; here recovered from the normalised value by :func:`pixel_levels`).
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from toyspt.data.pixels import PIXEL_LEVELS, PIXEL_TASKS, normalize_pixels, pixel_levels
from toyspt.kinds.listops import MASK_ID
from toyspt.lra.model import LRATransformer
from toyspt.util.files import open_regular
from toyspt.util.validation import MAX_ARRAY_BYTES


def load_npy(path: str, what: str = "array", expect=None, count: int | None = None) -> np.ndarray:
    """A plain ``.npy`` array: refused by ``stat`` if not a regular file, and from its header
    (before any data is read) if it holds objects or declares more bytes than the file has
    (a header declaring 2^40 elements) or than MAX_ARRAY_BYTES; ``expect(shape, dtype)``
    may refuse it from the header too (a wrong shape is never read, let alone widened). With
    ``count``, only the first ``count`` rows of a C-ordered array are read."""
    f, size = open_regular(path, f".npy {what}")
    with f:
        try:
            version = np.lib.format.read_magic(f)
            shape, fortran, dtype = (np.lib.format.read_array_header_1_0(f) if version == (1, 0)
                                     else np.lib.format.read_array_header_2_0(f))
        except (ValueError, OSError, SyntaxError) as e:
            raise ValueError(f"{path}: not a plain .npy array ({' '.join(str(e).split())[:200]})") from None
        if dtype.hasobject:
            raise ValueError(f"{path}: an array of Python objects (pickled); refused")
        nbytes = math.prod(shape) * dtype.itemsize
        if nbytes > size - f.tell() or nbytes > MAX_ARRAY_BYTES:
            raise ValueError(f"{path}: its header declares shape {shape} of {dtype} ({nbytes} bytes) "
                             f"in a file of {size} bytes (limit {MAX_ARRAY_BYTES}); refused before "
                             "reading")
        if expect is not None:
            expect(shape, dtype)
        if count is not None and shape and not fortran:
            rows = min(count, shape[0])
            data = f.read(rows * (nbytes // shape[0] if shape[0] else 0))
            return np.frombuffer(data, dtype).reshape((rows,) + tuple(shape[1:])).copy()
        f.seek(0)
        try:
            return np.load(f, allow_pickle=False)
        except ValueError as e:
            raise ValueError(f"{path}: not a plain .npy array ({e})") from None


def load_labels(path: str, n_classes: int | None, count: int | None = None) -> torch.Tensor:
    """(N,) int64 labels from ``.npy``: integers (or integral floats), within 0..n_classes-1;
    only the first ``count`` are converted."""
    a = load_npy(path, "labels array").reshape(-1)[:count]
    if a.dtype.kind not in "iuf" or (a.dtype.kind == "f" and not (np.isfinite(a).all()
                                                                 and (a == np.round(a)).all())):
        raise ValueError(f"{path}: labels must be integers, got dtype {a.dtype}"
                         + (" with NaN/inf or fractions" if a.dtype.kind == "f" else ""))
    if len(a) and (a.min() < 0 or (n_classes is not None and a.max() >= n_classes)):
        bad = a.min() if a.min() < 0 else a.max()
        raise ValueError(f"{path}: label {bad} is out of range; labels must lie in 0.."
                         f"{'' if n_classes is None else n_classes - 1}")
    return torch.from_numpy(a.astype(np.int64))


def _pixel_header(path: str):
    def expect(shape, dtype):
        if len(shape) not in (2, 3, 4) or dtype.kind not in "uif":
            raise ValueError(f"{path}: pixel array must be numbers (N, L), (N, H, W) or (N, H, W, 3), "
                             f"got {dtype} {shape}")
    return expect


def load_pixels(x_path: str, task: str, y_path: str | None = None, count: int | None = None
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Normalised pixels (N, L, 1) and labels (N,) from ``.npy`` files (no pickles); only the
    first ``count`` images are converted (the rest are never widened to float64)."""
    x = load_npy(x_path, "pixel array", _pixel_header(x_path), count)
    y = None
    if y_path is not None:
        y = load_labels(y_path, None, count)
        if y.shape[0] != x.shape[0]:
            raise ValueError(f"{y_path}: {y.shape[0]} labels for {x.shape[0]} images")
    return normalize_pixels(x, task), y


# --------------------------------------------------------------------------- SPT masking

def spt_mask(shape: tuple[int, int], p: float, lengths: torch.Tensor | None = None,
             generator: torch.Generator | None = None) -> torch.Tensor:
    """(B, T) bool, each valid position masked i.i.d. with probability ``p``."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"mask probability must lie in (0, 1), got {p}")
    B, T = shape
    m = torch.rand(B, T, generator=generator) < p
    if lengths is not None:
        m &= torch.arange(T)[None] < lengths[:, None]
    return m


def mask_tokens(ids_BxT: torch.Tensor, mask_BxT: torch.Tensor) -> torch.Tensor:
    return ids_BxT.masked_fill(mask_BxT, MASK_ID)


def mask_pixels(values_BxTx1: torch.Tensor, mask_BxT: torch.Tensor) -> torch.Tensor:
    """[value * (1 - m), m] (B, T, 2)."""
    m = mask_BxT[..., None].to(values_BxTx1.dtype)
    return torch.cat([values_BxTx1 * (1 - m), m], dim=-1)


def _check_mask(mask_BxT):
    if not bool(mask_BxT.any()):
        raise ValueError("the SPT mask selects no position; the reconstruction loss is undefined")


def token_recon_loss(logits_BxTxV: torch.Tensor, ids_BxT: torch.Tensor,
                     mask_BxT: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over masked positions (targets: the original ids)."""
    _check_mask(mask_BxT)
    return F.cross_entropy(logits_BxTxV[mask_BxT], ids_BxT[mask_BxT])


def pixel_recon_loss(pred_BxTx1: torch.Tensor, values_BxTx1: torch.Tensor,
                     mask_BxT: torch.Tensor) -> torch.Tensor:
    """Mean absolute error over masked positions."""
    _check_mask(mask_BxT)
    return (pred_BxTx1[..., 0] - values_BxTx1[..., 0].to(pred_BxTx1.dtype))[mask_BxT].abs().mean()


def pixel_level_loss(logits_BxTx256: torch.Tensor, levels_BxT: torch.Tensor,
                     mask_BxT: torch.Tensor) -> torch.Tensor:
    """That code's PathFinder ``lm_loss: ce``: mean cross-entropy of the 256-way decoder against
    the grey levels, over masked positions (targets -100 elsewhere there)."""
    _check_mask(mask_BxT)
    return F.cross_entropy(logits_BxTx256[mask_BxT], levels_BxT[mask_BxT])


# ------------------------------------------------------------------------------ batches
# A batch is a dict of tensors with one leading batch dimension (what toyspt.probe.engine takes):
# "inputs" (B, T) ids or (B, T, 1) pixel values, "lengths" (B,), "mask" (B, T) bool SPT
# mask, and "y" (B,) labels when known. Retrieval pairs keep the two documents on a last
# axis: "inputs" (B, T, 2) ids, "lengths" (B, 2), "mask" (B, T, 2), so that one example is
# one pair and trimming/selecting rows works unchanged.

Batch = dict


def make_pair_batch(ids_BxTx2: torch.Tensor, y: torch.Tensor | None, lengths_Bx2: torch.Tensor,
                    p_mask: float = 0.5, seed: int = 0) -> Batch:
    """A retrieval probe batch: pairs of documents (see the layout note above)."""
    B, T, two = ids_BxTx2.shape
    if two != 2 or lengths_Bx2.shape != (B, 2):
        raise ValueError(f"pairs must be ids (B, T, 2) with lengths (B, 2), got "
                         f"{tuple(ids_BxTx2.shape)} and {tuple(lengths_Bx2.shape)}")
    if int(lengths_Bx2.min()) < 1 or int(lengths_Bx2.max()) > T:
        raise ValueError(f"pair lengths must lie in [1, {T}]")
    g = torch.Generator().manual_seed(seed)
    m = torch.stack([spt_mask((B, T), p_mask, lengths_Bx2[:, j], g) for j in (0, 1)], dim=-1)
    batch = dict(inputs=ids_BxTx2.long(), lengths=lengths_Bx2.long(), mask=m)
    if y is not None:
        if y.shape != (B,):
            raise ValueError(f"y must have shape ({B},), got {tuple(y.shape)}")
        batch["y"] = y.long()
    return batch


def is_pairs(batch: Batch) -> bool:
    return batch["lengths"].dim() == 2


def documents(batch: Batch) -> Batch:
    """A pair batch as 2B single documents (first documents, then second ones: the order of
    that code's collate); other batches unchanged. ``y`` is dropped (it labels pairs)."""
    if not is_pairs(batch):
        return batch
    out = {k: torch.cat([batch[k][..., 0], batch[k][..., 1]]) for k in ("inputs", "mask")}
    out["lengths"] = torch.cat([batch["lengths"][:, 0], batch["lengths"][:, 1]])
    return out


def make_batch(inputs: torch.Tensor, y: torch.Tensor | None, lengths: torch.Tensor | None = None,
               p_mask: float = 0.5, seed: int = 0, levels: torch.Tensor | None = None) -> Batch:
    """A probe batch with a fixed SPT mask drawn from ``seed`` (valid positions only);
    ``levels`` (B, T): the grey levels of pixel inputs (:func:`pixel_levels`), the targets of a
    256-way pixel decoder."""
    B, T = inputs.shape[:2]
    if lengths is None:
        lengths = torch.full((B,), T, dtype=torch.long)
    if lengths.shape != (B,) or int(lengths.min()) < 1 or int(lengths.max()) > T:
        raise ValueError(f"lengths must be (B,) = ({B},) in [1, {T}], got {tuple(lengths.shape)}")
    g = torch.Generator().manual_seed(seed)
    batch = dict(inputs=inputs, lengths=lengths.long(), mask=spt_mask((B, T), p_mask, lengths, g))
    if y is not None:
        if y.shape != (B,):
            raise ValueError(f"y must have shape ({B},), got {tuple(y.shape)}")
        batch["y"] = y.long()
    if levels is not None:
        if levels.shape != (B, T):
            raise ValueError(f"levels must have shape ({B}, {T}), got {tuple(levels.shape)}")
        batch["levels"] = levels.long()
    return batch


def select(batch: Batch, idx) -> Batch:
    """Rows ``idx`` (slice or index tensor), padding trimmed to their longest valid length."""
    T = int(batch["lengths"][idx].max())
    return {k: (v[idx][:, :T] if k in ("inputs", "mask", "levels") else v[idx]) for k, v in batch.items()}


def _pixel_input(model: LRATransformer, values_BxTx1, mask_BxT=None):
    d_in = model.cfg.d_input
    if mask_BxT is None:  # classification: clean values (+ an all-zero indicator if present)
        zeros = torch.zeros_like(values_BxTx1)
        return values_BxTx1 if d_in == 1 else torch.cat([values_BxTx1, zeros], -1)
    if d_in != 2:
        raise ValueError("pixel reconstruction needs a 2-channel encoder (value + mask indicator)")
    return mask_pixels(values_BxTx1, mask_BxT)


def label_loss(model: LRATransformer, batch: Batch) -> torch.Tensor:
    """Mean cross-entropy of the classifier on clean inputs."""
    if "y" not in batch:
        raise KeyError("the label loss needs labels: the batch has no 'y'")
    if (model.cfg.head == "retrieval") != is_pairs(batch):
        raise ValueError("retrieval models take pair batches (inputs (B, T, 2)), others single ones")
    docs = documents(batch)
    x = docs["inputs"]
    inputs = x if model.cfg.token_task else _pixel_input(model, x)
    return F.cross_entropy(model.classify(inputs, docs["lengths"]), batch["y"])


def spt_loss(model: LRATransformer, batch: Batch) -> torch.Tensor:
    """The SPT (masked reconstruction) loss of that code on the batch's fixed mask; named
    apart from :func:`toyspt.data.tasks.recon_loss`, which is toyspt's own task loss."""
    docs = documents(batch)  # a pair batch: the SPT loss over the masked tokens of both documents
    x, m = docs["inputs"], docs["mask"]
    if model.cfg.token_task:
        return token_recon_loss(model.reconstruct(mask_tokens(x, m)), x, m)
    pred = model.reconstruct(_pixel_input(model, x, m))
    if pred.shape[-1] == PIXEL_LEVELS:
        if "levels" not in docs:
            raise ValueError("a 256-way pixel decoder (lm_loss ce) needs the grey levels: the batch has no 'levels'")
        return pixel_level_loss(pred, docs["levels"], m)
    if pred.shape[-1] != 1:
        raise ValueError(f"pixel reconstruction expects one output per token (L1) or {PIXEL_LEVELS} "
                         f"(cross-entropy over grey levels), got {pred.shape[-1]}")
    return pixel_recon_loss(pred, x, m)


LOSSES = {"label": label_loss, "recon": spt_loss}  # the bridge's adapters for toyspt.probe.engine


__all__ = ["PIXEL_TASKS", "PIXEL_LEVELS", "pixel_levels", "pixel_level_loss",
           "normalize_pixels", "load_npy", "load_labels", "load_pixels", "spt_mask", "mask_tokens",
           "mask_pixels", "token_recon_loss", "pixel_recon_loss", "make_batch", "make_pair_batch",
           "is_pairs", "documents", "select",
           "label_loss", "spt_loss", "LOSSES"]
