"""ListOps generator: labels equal an independent evaluation, bounds hold, the vocabulary
follows the LRA code's order, and files round-trip."""
import random

import pytest
import torch

from toyspt.kinds import listops as lo

SMALL = lo.ListOpsConfig(max_depth=5, max_args=5, min_len=10, max_len=80)


def test_labels_equal_token_evaluation_and_bounds_hold():
    trees = lo.generate(SMALL, 300, seed=0)
    for t in trees:
        toks = lo.tokens(t)
        assert SMALL.min_len <= len(toks) <= SMALL.max_len
        # stack evaluation of the token sequence: a code path independent of the tree recursion
        assert lo.evaluate(t) == lo.evaluate_tokens(toks)
    depth = lambda t: 0 if isinstance(t, int) else 1 + max(map(depth, t[1]))  # noqa: E731
    arity = lambda t: [] if isinstance(t, int) else [len(t[1])] + sum(map(arity, t[1]), [])  # noqa: E731
    assert max(map(depth, trees)) <= SMALL.max_depth - 1  # root depth 1, leaves at <= max_depth
    assert set(sum(map(arity, trees), [])) <= set(range(2, SMALL.max_args + 1))
    labels = [lo.evaluate(t) for t in trees]
    assert len(set(labels)) == 10  # every class occurs
    assert lo.generate(SMALL, 5, seed=0) == trees[:5]  # reproducible


def test_operators_by_hand():
    assert lo.evaluate(("[MED", [1, 2, 9, 4])) == 3  # median 3.0 of (2, 4)
    assert lo.evaluate(("[MED", [1, 2])) == 1  # int(1.5)
    assert lo.evaluate(("[SM", [9, 8, ("[MAX", [3, 7])])) == 4
    assert lo.evaluate_tokens("[MIN 4 [MAX 2 9 X 6 X".split()) == 4
    assert lo.evaluate_tokens(lo.lra_tokenize("( ( ( [SM 3 ) 9 ) ] )")) == 2
    with pytest.raises(ValueError, match="unbalanced"):
        lo.evaluate_tokens("[MIN 4 5".split())


def test_operators_against_a_brute_force_reference():
    import statistics
    rng = random.Random(1)
    for _ in range(500):
        args = [rng.randrange(10) for _ in range(rng.randint(2, 10))]
        assert lo.apply_op("[MED", args) == int(statistics.median(args))
        assert lo.apply_op("[SM", args) == sum(args) % 10


def test_vocabulary_order_and_encoding():
    toks = [["[MAX", "2", "2", "X"], ["[MIN", "3", "X"]]
    v = lo.build_vocab(toks)
    # specials, then by decreasing count, ties alphabetical
    assert v.itos == ["<mask>", "<pad>", "<unk>", "<eos>", "2", "X", "3", "[MAX", "[MIN"]
    b = lo.encode_batch(toks, [2, 3], v)
    assert b.ids.tolist() == [[7, 4, 4, 5, 3], [8, 6, 5, 3, 1]]
    assert b.lengths.tolist() == [5, 4] and b.y.tolist() == [2, 3]
    assert lo.encode_batch([["[MAX", "2", "2", "X"]], [2], v, l_max=3).ids.tolist() == [[7, 4, 3]]
    assert v.encode(["9"]) == [lo.UNK_ID]


def test_tsv_roundtrip(tmp_path):
    trees = lo.generate(SMALL, 20, seed=3)
    p = tmp_path / "basic_train.tsv"
    lo.write_tsv(str(p), trees)
    toks, ys = lo.read_tsv(str(p))
    assert toks == [lo.tokens(t) for t in trees] and ys == [lo.evaluate(t) for t in trees]
    assert lo.vocab_from_tsv(str(p)).itos == lo.build_vocab(toks).itos
    (tmp_path / "bad.tsv").write_text("a\tb\n")
    with pytest.raises(ValueError, match="Source<TAB>Target"):
        lo.read_tsv(str(tmp_path / "bad.tsv"))


def test_make_listops_batch():
    batch, vocab = lo.make_listops(SMALL, 8, seed=5)
    assert batch.ids.dtype == torch.long and batch.ids.shape[0] == 8
    assert (batch.ids[torch.arange(8), batch.lengths - 1] == lo.EOS_ID).all()
    assert len(vocab) <= 19
