"""ListOps: random operator trees, their values, and the LRA code's tokens and vocabulary.

A tree is a digit 0-9 or ``(op, [children])`` with op in MIN, MAX, MED (median of the
arguments, rounded down: ``int(np.median)`` in the public generator) and SM (sum mod 10).
The public generator draws a node below ``max_depth`` as an operator with probability 0.25
(its constant ``VALUE_P``; a digit otherwise), 2..``max_args`` arguments, the root at depth
1, and keeps trees whose token count n satisfies 500 < n < 2000 (defaults below:
``min_len=501, max_len=1999``, inclusive). A fresh draw is not the official split.

Tokens as the LRA code sees them: ``[MAX 2 9 X`` (brackets ``]`` become ``X``, parentheses
are dropped), then ``<eos>``. Vocabulary: ``<mask>``=0, ``<pad>``=1, ``<unk>``=2, ``<eos>``=3,
then the symbols in decreasing frequency *in the training file*, ties alphabetical (how
torchtext's ``build_vocab_from_iterator`` orders them). The ids of the 15 symbols therefore
depend on the training data: to probe a real checkpoint, build the vocabulary from its
``basic_train.tsv`` (:func:`vocab_from_tsv`).
"""
from __future__ import annotations

import csv
import io
import random
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Union

import torch

from toyspt.util.atomic import atomic_write
from toyspt.util.files import open_regular
from toyspt.util.validation import Float, Int, validate, validated

OPS = ("[MAX", "[MIN", "[MED", "[SM")
END = "X"
DIGITS = tuple(str(i) for i in range(10))
SYMBOLS = OPS + DIGITS + (END,)
SPECIALS = ("<mask>", "<pad>", "<unk>", "<eos>")
MASK_ID, PAD_ID, UNK_ID, EOS_ID = 0, 1, 2, 3

Tree = Union[int, tuple]


# caps that bound a draw (LRA: depth 10, 10 arguments, 1,999 tokens): the generator and the tree
# walks recurse once a level, so a depth far below Python's recursion limit (1000); a tree holds at
# most max_len tokens (a draw past it is cut off), so memory is O(max_len) a draw and O(n·max_len)
# for n trees (about 100 bytes a token as Python objects: under 1 MB a tree at the cap)
MAX_DEPTH, MAX_ARGS, MAX_TOKENS = 64, 64, 8192


@dataclass(frozen=True)
class ListOpsConfig:
    max_depth: int = validated(10, Int(ge=2, le=MAX_DEPTH))  # nodes at this depth are digits (root depth 1)
    max_args: int = validated(10, Int(ge=2, le=MAX_ARGS))  # operators take 2..max_args arguments
    # probability that a node above max_depth is an operator
    p_op: float = validated(0.25, Float(gt=0, lt=1))
    min_len: int = validated(501, Int(ge=1, le=MAX_TOKENS))  # fewest tokens (without <eos>) of an accepted tree
    max_len: int = validated(1999, Int(ge=1, le=MAX_TOKENS))  # most tokens (without <eos>) of an accepted tree
    # draws allowed per accepted tree before giving up
    max_tries: int = validated(1_000_000, Int(gt=0))

    def __post_init__(self):
        validate(self)
        if not 1 <= self.min_len <= self.max_len:
            raise ValueError(f"need 1 <= min_len <= max_len, got {self.min_len}, {self.max_len}")


def _draw(rng: random.Random, depth: int, cfg: ListOpsConfig, budget: list[int]) -> Tree:
    # ``budget`` counts the tokens still allowed; past max_len the draw is rejected anyway,
    # so stop early instead of growing a huge tree.
    if depth >= cfg.max_depth or rng.random() >= cfg.p_op:
        budget[0] -= 1
        if budget[0] < 0:
            raise OverflowError
        return rng.randrange(10)
    budget[0] -= 2
    if budget[0] < 0:
        raise OverflowError
    n = rng.randint(2, cfg.max_args)
    children = [_draw(rng, depth + 1, cfg, budget) for _ in range(n)]
    return (rng.choice(OPS), children)


def tokens(tree: Tree) -> list[str]:
    """The tree as LRA tokens (without <eos>)."""
    out: list[str] = []

    def walk(t):
        if isinstance(t, int):
            out.append(str(t))
        else:
            out.append(t[0])
            for c in t[1]:
                walk(c)
            out.append(END)
    walk(tree)
    return out


def apply_op(op: str, args: list[int]) -> int:
    if not args:
        raise ValueError(f"operator {op} without arguments")
    if op == "[MIN":
        return min(args)
    if op == "[MAX":
        return max(args)
    if op == "[SM":
        return sum(args) % 10
    if op == "[MED":
        s = sorted(args)
        n = len(s)
        return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) // 2
    raise ValueError(f"unknown operator {op!r}")


def evaluate(tree: Tree) -> int:
    """Value of a tree (recursive)."""
    if isinstance(tree, int):
        return tree
    return apply_op(tree[0], [evaluate(c) for c in tree[1]])


def evaluate_tokens(toks: Iterable[str]) -> int:
    """Value of a token sequence (stack machine; independent of the tree code). Raises
    ``ValueError`` on a malformed sequence."""
    stack: list[tuple[str, list[int]]] = []
    result = None
    for tok in toks:
        if tok in SPECIALS:
            continue
        if tok in OPS:
            stack.append((tok, []))
        elif tok in (END, "]"):
            if not stack:
                raise ValueError("closing bracket without an operator")
            op, args = stack.pop()
            val = apply_op(op, args)
            if stack:
                stack[-1][1].append(val)
            else:
                result = val
        elif tok in DIGITS:
            if not stack:
                if result is not None:
                    raise ValueError("more than one top-level value")
                result = int(tok)
            else:
                stack[-1][1].append(int(tok))
        else:
            raise ValueError(f"unknown ListOps token {tok!r}")
    if stack or result is None:
        raise ValueError("unbalanced or empty ListOps sequence")
    return result


def generate(cfg: ListOpsConfig, n: int, seed: int) -> list[Tree]:
    """``n`` trees with min_len <= token count <= max_len, reproducible from ``seed``."""
    rng = random.Random(seed)
    trees: list[Tree] = []
    for _ in range(n):
        for _ in range(cfg.max_tries):
            try:
                t = _draw(rng, 1, cfg, [cfg.max_len])
            except OverflowError:
                continue
            if cfg.min_len <= len(tokens(t)) <= cfg.max_len:
                trees.append(t)
                break
        else:
            raise RuntimeError(f"no tree of {cfg.min_len}..{cfg.max_len} tokens in "
                               f"{cfg.max_tries} draws; loosen the bounds")
    return trees


# ------------------------------------------------------------------------ vocabulary & I/O

class Vocab:
    """Token <-> id, specials first (see the module docstring)."""

    def __init__(self, itos: list[str]):
        if tuple(itos[:4]) != SPECIALS:
            raise ValueError(f"vocabulary must start with {SPECIALS}, got {itos[:4]}")
        if len(set(itos)) != len(itos):
            raise ValueError("vocabulary has duplicate tokens")
        self.itos = list(itos)
        self.stoi = {t: i for i, t in enumerate(itos)}

    def __len__(self):
        return len(self.itos)

    def encode(self, toks: Iterable[str]) -> list[int]:
        return [self.stoi.get(t, UNK_ID) for t in toks]

    def decode(self, ids: Iterable[int]) -> list[str]:
        return [self.itos[i] for i in ids]


def build_vocab(token_lists: Iterable[list[str]]) -> Vocab:
    """Specials, then tokens by decreasing count, ties alphabetical (torchtext's order)."""
    counts = Counter(t for toks in token_lists for t in toks)
    for s in SPECIALS:
        counts.pop(s, None)
    return Vocab(list(SPECIALS) + [t for t, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))])


def lra_tokenize(source: str) -> list[str]:
    """The LRA code's tokenizer: ``]`` -> ``X``, parentheses dropped, split on whitespace."""
    return source.replace("]", "X").replace("(", "").replace(")", "").split()


MAX_TEXT_BYTES = 1 << 30  # a ListOps / vocabulary file; LRA's basic_train.tsv is ~0.2 GB


def _open_text(path: str, what: str):
    """``path`` as text, after refusing special files and oversized ones by ``stat``."""
    f, _ = open_regular(path, what, max_bytes=MAX_TEXT_BYTES)
    return io.TextIOWrapper(f, encoding="utf-8", newline="")


def read_tsv(path: str) -> tuple[list[list[str]], list[int]]:
    """(token lists, labels) from an LRA ListOps file with a ``Source<TAB>Target`` header;
    labels must be ints 0..9, and a line longer than csv's field limit (131,072 characters,
    ten times LRA's longest ListOps line) is refused with its line number."""
    toks, ys = [], []
    with _open_text(path, "ListOps file") as f:
        reader = csv.reader(f, delimiter="\t")
        i = 1
        try:
            header = next(reader, None)
            if not header or [h.strip() for h in header[:2]] != ["Source", "Target"]:
                raise ValueError(f"{path}: expected a header 'Source<TAB>Target', got {header}")
            for i, row in enumerate(reader, start=2):
                if len(row) < 2:
                    raise ValueError(f"{path}:{i}: expected 2 tab-separated columns, got {len(row)}")
                label = row[1].strip()
                if not label.isdecimal() or not 0 <= int(label) <= 9:
                    raise ValueError(f"{path}:{i}: the label must be an int 0..9, got {label[:20]!r}")
                toks.append(lra_tokenize(row[0]))
                ys.append(int(label))
        except csv.Error as e:
            raise ValueError(f"{path}:{i + 1}: not a ListOps line ({e}; LRA's longest lines have "
                             "~10^4 characters)") from None
        except UnicodeDecodeError as e:
            raise ValueError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    return toks, ys


def vocab_from_tsv(path: str) -> Vocab:
    """The vocabulary the LRA code builds from this training file."""
    return build_vocab(read_tsv(path)[0])


def read_vocab_file(path: str) -> Vocab:
    """A vocabulary from a ``.tsv`` training file or a text file with one token per line."""
    if path.endswith(".tsv"):
        return vocab_from_tsv(path)
    try:
        with _open_text(path, "vocabulary file") as f:
            return Vocab([ln.strip() for ln in f if ln.strip()])
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None


@dataclass
class ListOpsBatch:
    ids: torch.Tensor  # (N, T) long, <pad>-padded to the longest sequence (the code's collate)
    lengths: torch.Tensor  # (N,) long, tokens incl. <eos>
    y: torch.Tensor  # (N,) long labels 0..9


def encode_batch(token_lists: list[list[str]], labels: list[int], vocab: Vocab,
                 l_max: int = 2048, append_eos: bool = True) -> ListOpsBatch:
    """Ids as the LRA code feeds them: truncate to l_max - 1, append <eos>, pad with <pad>."""
    if len(token_lists) != len(labels) or not token_lists:
        raise ValueError("need as many labels as sequences, and at least one")
    seqs = [vocab.encode(t[: l_max - int(append_eos)]) + ([EOS_ID] if append_eos else [])
            for t in token_lists]
    T = max(map(len, seqs))
    ids = torch.full((len(seqs), T), PAD_ID, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
    return ListOpsBatch(ids, torch.tensor([len(s) for s in seqs]), torch.tensor(labels))


def make_listops(cfg: ListOpsConfig, n: int, seed: int, vocab: Vocab | None = None
                 ) -> tuple[ListOpsBatch, Vocab]:
    """Generate, label (by evaluating the tree) and encode ``n`` examples; the vocabulary is
    built from them unless given."""
    trees = generate(cfg, n, seed)
    toks = [tokens(t) for t in trees]
    vocab = vocab or build_vocab(toks)
    return encode_batch(toks, [evaluate(t) for t in trees], vocab), vocab


def write_tsv(path: str, trees: list[Tree]) -> None:
    """Trees in the LRA file format (``Source<TAB>Target``), atomically. Sources are written
    without the parentheses of the public files, which the tokenizer drops anyway."""
    def write(tmp: str) -> None:
        with open(tmp, "w", newline="") as f:
            w = csv.writer(f, delimiter="\t")
            w.writerow(["Source", "Target"])
            for t in trees:
                w.writerow([" ".join(tokens(t)).replace(END, "]"), evaluate(t)])

    atomic_write(path, write)


__all__ = ["ListOpsConfig", "ListOpsBatch", "Vocab", "OPS", "DIGITS", "END", "SPECIALS",
           "MASK_ID", "PAD_ID", "UNK_ID", "EOS_ID", "generate", "tokens", "evaluate",
           "evaluate_tokens", "apply_op", "build_vocab", "lra_tokenize", "read_tsv",
           "vocab_from_tsv", "read_vocab_file", "encode_batch", "make_listops", "write_tsv"]
