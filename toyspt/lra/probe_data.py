"""The batch an LRA probe reads: ListOps text (a file, or freshly generated trees) or a NumPy
array of pixels, token ids or retrieval pairs with their labels, checked against the loaded
model (token or pixel encoder, retrieval head, vocabulary size, positional table) before any
of it is widened or probed. ``toyspt lra probe`` builds a :class:`ProbeInputs` from its flags."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from toyspt.kinds import listops as lo
from toyspt.lra.checkpoint import LoadedLRA
from toyspt.lra.inputs import (
    PIXEL_TASKS,
    load_labels,
    load_npy,
    load_pixels,
    make_batch,
    make_pair_batch,
    pixel_levels,
)

TASKS = ("listops",) + PIXEL_TASKS + ("tokens", "retrieval")
# class counts: LRA's, and toyspt's digits (tokens: from labels)
N_CLASSES = {"listops": 10, "image": 10, "pathfinder": 2, "digits": 10, "retrieval": 2}


@dataclass(frozen=True)
class ProbeInputs:
    task: str  # listops | image | pathfinder | digits | tokens | retrieval
    n: int  # examples to read (probed and, beyond those, fitting a missing head)
    data: str | None = None  # ListOps .tsv (Source<TAB>Target) or .npy array; None: generated ListOps
    labels: str | None = None  # .npy labels for array data
    vocab: str | None = None  # ListOps vocabulary (the run's basic_train.tsv, or one token per line)
    p_mask: float = 0.5  # SPT mask probability of the reconstruction loss
    seed: int = 0  # seed of generated data and of the SPT mask
    listops: lo.ListOpsConfig = field(default_factory=lo.ListOpsConfig)  # the generator, without --data

    def __post_init__(self):
        if self.task not in TASKS:
            raise ValueError(f"task: choose one of {TASKS}, got {self.task!r}")
        if self.data is None:
            return
        suffix = Path(self.data).suffix.lower()  # the wrong kind of file is refused before it is read
        if self.task == "listops" and suffix in (".npy", ".npz"):
            raise ValueError(f"--task listops reads ListOps text (.tsv: Source<TAB>Target), got the NumPy file "
                             f"{self.data}; arrays go with --task image, pathfinder or retrieval")
        if self.task != "listops" and suffix != ".npy":
            raise ValueError(f"--task {self.task} reads a .npy array (numpy.save), got {self.data}"
                             + (" (an .npz archive: save the array itself with numpy.save)" if suffix == ".npz"
                                else ""))

    def check_model(self, loaded: LoadedLRA) -> None:
        """Refuse a model this task's inputs cannot feed."""
        if (loaded.cfg.head == "retrieval") != (self.task == "retrieval"):
            raise ValueError("retrieval (two-document) models need --task retrieval with pairs "
                             "(N, 2, T), and --task retrieval needs a retrieval model")
        if self.task == "listops" and not loaded.cfg.token_task:
            raise ValueError("--task listops needs a token (embedding) model; this one has a linear encoder")
        if self.task in PIXEL_TASKS and loaded.cfg.token_task:
            raise ValueError(f"--task {self.task} needs a pixel (linear encoder) model")


def probe_inputs(inp: ProbeInputs, loaded: LoadedLRA) -> tuple[dict, list[str]]:
    """(batch of ``inp.n`` examples, notes on where they came from)."""
    return (_listops if inp.task == "listops" else _arrays)(inp, loaded)


def _listops(inp: ProbeInputs, loaded: LoadedLRA) -> tuple[dict, list[str]]:
    cfg, notes = loaded.cfg, []
    vocab = lo.read_vocab_file(inp.vocab) if inp.vocab else None
    if inp.data:
        toks, ys = lo.read_tsv(inp.data)
        toks, ys = toks[:inp.n], ys[:inp.n]
        src = inp.data
    else:
        g = inp.listops
        if g.max_len + 1 > cfg.max_len:
            raise ValueError(f"generated ListOps reach {g.max_len + 1} tokens (with <eos>) but the "
                             f"model's positional table has {cfg.max_len} rows; lower --max-len")
        trees = lo.generate(g, inp.n, inp.seed)
        toks, ys = [lo.tokens(t) for t in trees], [lo.evaluate(t) for t in trees]
        src = f"generated ListOps ({g}, seed {inp.seed})"
    if vocab is None:
        vocab = lo.build_vocab(toks)
        notes.append(f"vocabulary built from the probed data ({src}); the checkpoint's symbol ids "
                     "follow its training file's frequency order: pass --vocab basic_train.tsv to match")
    else:
        notes.append(f"vocabulary from {inp.vocab}")
    if len(vocab) != cfg.n_tokens:
        raise ValueError(f"the vocabulary has {len(vocab)} tokens but the checkpoint's embedding has "
                         f"{cfg.n_tokens} rows; pass the run's vocabulary with --vocab")
    b = lo.encode_batch(toks, ys, vocab, l_max=min(2048, cfg.max_len))
    notes.append(f"data: {src}, {len(ys)} examples, lengths {int(b.lengths.min())}..{int(b.lengths.max())}")
    return make_batch(b.ids, b.y, b.lengths, inp.p_mask, inp.seed), notes


def _token_ids(inp: ProbeInputs, loaded: LoadedLRA, ndim: int, layout: str) -> torch.Tensor:
    """The first ``inp.n`` rows of an id array, its shape and ids checked before widening."""
    def expect(shape, dtype):
        if len(shape) != ndim or (ndim == 3 and shape[1] != 2) or dtype.kind not in "iu":
            raise ValueError(f"{inp.data}: {layout} must be integer ids, got {dtype} {shape}")

    a = load_npy(inp.data, "id array", expect, inp.n)
    if a.size and (a.min() < 0 or a.max() >= loaded.cfg.n_tokens):
        raise ValueError(f"{inp.data}: ids must lie in 0..{loaded.cfg.n_tokens - 1} (the embedding's "
                         f"rows), found {a.min() if a.min() < 0 else a.max()}")
    return torch.from_numpy(a.astype(np.int64))


def _arrays(inp: ProbeInputs, loaded: LoadedLRA) -> tuple[dict, list[str]]:
    if not inp.data:
        raise ValueError(f"--task {inp.task} needs --data FILE.npy (and --labels FILE.npy)")
    n_classes = loaded.cfg.n_classes if loaded.cfg.head != "none" else N_CLASSES.get(inp.task)
    y = load_labels(inp.labels, n_classes, inp.n) if inp.labels else None
    if inp.task == "retrieval":
        x = _token_ids(inp, loaded, 3, "retrieval pairs (N, 2, T)").transpose(1, 2)
        lengths = (x != lo.PAD_ID).long().cumsum(1).argmax(1) + 1  # (N, 2): up to the last non-<pad>
        if y is None:
            raise ValueError("--labels FILE.npy is needed for the label loss")
        return (make_pair_batch(x, y, lengths, inp.p_mask, inp.seed),
                [f"data: {inp.data} ({len(x)} document pairs; <pad> = {lo.PAD_ID})"])
    levels = None
    if inp.task == "tokens":
        x = _token_ids(inp, loaded, 2, "token ids (N, T)")
        lengths = (x != lo.PAD_ID).long().cumsum(1).argmax(1) + 1  # up to the last non-<pad>
    else:
        x, _ = load_pixels(inp.data, inp.task, count=inp.n)
        lengths, levels = None, pixel_levels(x, inp.task)  # targets of a 256-way pixel decoder
    if y is not None and len(y) != len(x):
        raise ValueError(f"{inp.labels}: {len(y)} labels for {len(x)} examples")
    if y is None:
        raise ValueError("--labels FILE.npy is needed for the label loss")
    return make_batch(x, y, lengths, inp.p_mask, inp.seed, levels), [f"data: {inp.data} ({len(x)} examples)"]


__all__ = ["TASKS", "N_CLASSES", "ProbeInputs", "probe_inputs"]
