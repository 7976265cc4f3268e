"""Assertions shared by several test files."""
import torch


def assert_bitwise(ref, out):
    for a, b in zip(ref, out, strict=True):
        assert (a.recipe, a.seed, a.history, a.summary, a.records, a.config) == \
               (b.recipe, b.seed, b.history, b.summary, b.records, b.config)
        assert list(a.states) == list(b.states)
        for which in a.states:
            assert list(a.states[which]) == list(b.states[which])  # same keys, same order
            for n, v in a.states[which].items():
                assert torch.equal(v, b.states[which][n]), (which, n)
