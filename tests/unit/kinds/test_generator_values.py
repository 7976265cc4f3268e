"""The LRA-like generators' values and distributions, not only their shapes (toyspt.kinds.pathfinder,
toyspt.kinds.listops, toyspt.kinds.tasks): PathFinder's turn angles (their grid and their cos²
weights), the gap between consecutive dashes, the dash length, the stroke width and the
anti-aliasing (an independent renderer redraws every image), the exact grey levels a config
produces, labels balanced per image property; ListOps' inclusive length bounds and ``<eos>`` after a
sequence of ``max_len`` tokens; the digits' grey levels and labels against scikit-learn's own.

Proportions are checked against binomial bounds whose false-failure probability is at most 1e-6
per test (Bonferroni over the bins checked); exact quantities exactly or to float rounding."""
from dataclasses import replace

import numpy as np
import pytest
import torch
from scipy.stats import binom

from toyspt.data.pixels import pixel_levels
from toyspt.kinds import listops as lo
from toyspt.kinds.pathfinder import PathfinderConfig, _Canvas, _grow, draw
from toyspt.kinds.tasks import VOCAB, DigitsSource, ListOpsSource, PathfinderSource

FALSE_FAILURE = 1e-6  # per test, split evenly over the bounds it checks (two sides each)
CFG = PathfinderConfig()  # the 16px default


def _binomial_ok(count: int, n: int, p: float, n_bounds: int) -> bool:
    """``count`` inside the two-sided Binomial(n, p) bounds of false-failure FALSE_FAILURE / n_bounds."""
    a = FALSE_FAILURE / (2 * n_bounds)
    return binom.ppf(a, n, p) <= count <= binom.isf(a, n, p)


def _turn_grid(cfg: PathfinderConfig) -> np.ndarray:
    """The documented candidates: ``n_turns`` evenly spread over the open interval (-90°, 90°)."""
    return ((np.arange(cfg.n_turns) + 0.5) / cfg.n_turns - 0.5) * np.pi


def _wrap(a):
    return (a + np.pi) % (2 * np.pi) - np.pi


def _chains(d):
    """Per image and contour, its dashes (k, 4) in drawing order (output pixels)."""
    for i in range(len(d.labels)):
        for c in np.unique(d.contour[i][d.contour[i] >= 0]):
            yield i, c, d.segments[i][d.contour[i] == c]


# ------------------------------------------------------------------ PathFinder geometry


@pytest.mark.parametrize("cfg", [CFG, replace(PathfinderConfig.lra32(6), continuity=2.0),
                                 replace(PathfinderConfig.lra32(6), n_turns=10)],
                         ids=["default16", "lra32_c2", "lra32_n10"])
def test_every_turn_is_on_the_grid_and_consecutive_dashes_are_gap_apart(cfg):
    """Each dash turns from the previous one by a candidate of the grid (never ±90°; within the
    continuity cap), starts exactly ``gap`` beyond the previous dash's end along its own heading,
    and is ``dash_length`` long."""
    d = draw(cfg, 40, seed=5)
    grid = _turn_grid(cfg)
    cap = np.pi / (2 * cfg.continuity)
    turns = []
    for _, _, s in _chains(d):
        a, b = s[:, :2], s[:, 2:]
        v = b - a
        assert np.allclose(np.hypot(*v.T), cfg.dash_length, rtol=0, atol=1e-9)
        heading = np.arctan2(v[:, 1], v[:, 0])
        turns += _wrap(np.diff(heading)).tolist()
        step = a[1:] - b[:-1]  # from a dash's end to the next one's start
        assert np.allclose(np.hypot(*step.T), cfg.gap, rtol=0, atol=1e-9)
        assert np.allclose(_wrap(np.arctan2(step[:, 1], step[:, 0]) - heading[1:]), 0.0, atol=1e-9)
    turns = np.array(turns)
    assert len(turns) > 100
    dist = np.abs(turns[:, None] - grid[None, :])
    assert (dist.min(axis=1) < 1e-9).all(), "a turn off the documented grid"
    assert (np.abs(turns) < cap).all() and (np.abs(turns) < np.pi / 2 - 1e-6).all()
    used = set(dist.argmin(axis=1).tolist())  # the grid is used, not one corner of it
    assert len(used) >= 5


@pytest.mark.parametrize("continuity", [1.0, 2.0])
def test_turns_are_drawn_with_cos_squared_weights(continuity):
    """Where every candidate is free (an empty canvas, the previous dash only), the turn's
    frequencies are max(cos(min(c|Δ|, π/2)), 0)² normalised: Binomial bounds per candidate."""
    cfg = replace(CFG, continuity=continuity)
    m = 12_000
    canvas = _Canvas(m, cfg)
    rows = np.arange(m)
    pivot = np.full((m, 2), canvas.R / 2)
    prev = np.concatenate([pivot - [canvas.L, 0.0], pivot], axis=1)  # the previous dash ends at the pivot, heading 0
    canvas.stamp(rows, prev, 0)
    ok, _, th, _ = _grow(canvas, rows, pivot, np.zeros(m), prev, np.random.default_rng(7), cfg)
    assert ok.all()
    grid = _turn_grid(cfg)
    idx = np.abs(_wrap(th)[:, None] - grid[None, :]).argmin(axis=1)
    assert np.allclose(_wrap(th), grid[idx], atol=1e-12)
    counts = np.bincount(idx, minlength=cfg.n_turns)
    w = np.where(continuity * np.abs(grid) < np.pi / 2, np.cos(continuity * grid) ** 2, 0.0)
    p = w / w.sum()
    for k in range(cfg.n_turns):
        if p[k] == 0:
            assert counts[k] == 0, (k, np.degrees(grid[k]))
        else:
            assert _binomial_ok(counts[k], m, p[k], cfg.n_turns), (k, counts[k], m * p[k])


def _reference_render(d, cfg: PathfinderConfig) -> np.ndarray:
    """Every image redrawn from its geometry, by brute force: fine pixel centres within
    ``thickness``/2 of a dash or within ``marker_radius`` of a marker are ink (1), then the
    ``antialias`` x ``antialias`` blocks are averaged."""
    a = cfg.antialias
    R = cfg.size * a
    c = np.arange(R) + 0.5
    px, py = np.meshgrid(c, c)  # [y, x]
    out = np.zeros((len(d.labels), cfg.size, cfg.size))
    for i in range(len(d.labels)):
        ink = np.zeros((R, R), dtype=bool)
        for ax, ay, bx, by in d.segments[i][d.contour[i] >= 0] * a:
            dx, dy = bx - ax, by - ay
            t = np.clip(((px - ax) * dx + (py - ay) * dy) / (dx * dx + dy * dy), 0, 1)
            ink |= np.hypot(px - ax - t * dx, py - ay - t * dy) <= cfg.thickness * a / 2
        for mx, my in d.markers[i] * a:
            ink |= (px - mx) ** 2 + (py - my) ** 2 <= (cfg.marker_radius * a) ** 2
        out[i] = ink.reshape(cfg.size, a, cfg.size, a).mean(axis=(1, 3))
    return out


@pytest.mark.parametrize("cfg", [CFG, replace(CFG, antialias=3), PathfinderConfig.lra32(6)],
                         ids=["default16", "aa3", "lra32"])
def test_images_are_the_dashes_inked_at_their_thickness_and_averaged_down(cfg):
    """The images equal an independent rendering of their own geometry: the stroke width is
    ``thickness``, the markers' radius ``marker_radius``, anti-aliasing a block mean."""
    d = draw(cfg, 24, seed=9)
    want = _reference_render(d, cfg)
    assert np.abs(d.images - want).max() <= 1e-6


@pytest.mark.parametrize("cfg, levels", [
    (CFG, [0, 64, 128, 191, 255]),  # antialias 2: k/4 of 255, rounded (63.75 -> 64, 127.5 -> 128)
    (replace(CFG, antialias=3), [0, 28, 57, 85, 113, 142, 170, 198, 227, 255]),  # k/9 of 255, rounded
], ids=["aa2", "aa3"])
def test_pathfinder_grey_levels_are_the_rounded_block_means(cfg, levels):
    """The data kind's values are exactly the normalised rounded levels round(255 k / antialias²),
    each of them present, and the 256-way decoder's targets (pixel_levels) read them back."""
    src = PathfinderSource(cfg, n_train=40, n_val=10, n_test=10, seed=2)
    d = src.make()
    x = torch.cat([d.train.x, d.val.x, d.test.x])
    want = {float(np.float32((v / 255.0 - 0.5) / 0.5)) for v in levels}
    assert set(torch.unique(x).tolist()) == want
    assert set(torch.unique(pixel_levels(x, "pathfinder")).tolist()) == set(levels)


def test_labels_stay_balanced_per_image_property():
    """Labels are balanced overall (alternating, shuffled) and stay balanced within each group of
    images of the same drawn property: distractor dashes drawn, the marked target, the distance of
    the two markers (rounded); Binomial(group, 1/2) bounds over every group."""
    d = draw(CFG, 1200, seed=13)
    y = d.labels
    assert abs(int(y.sum()) - len(y) // 2) <= 1
    distractor_dashes = (d.contour >= 2).sum(axis=1)
    marker_distance = np.rint(np.hypot(*(d.markers[:, 0] - d.markers[:, 1]).T) / 4)  # 4px bins
    groups = []
    for prop in (distractor_dashes, d.marked, marker_distance):
        for v in np.unique(prop):
            sel = prop == v
            if sel.sum() >= 30:
                groups.append((int(y[sel].sum()), int(sel.sum())))
    assert len(groups) >= 5
    for ones, n in groups:
        assert _binomial_ok(ones, n, 0.5, len(groups)), (ones, n)


# ------------------------------------------------------------------ ListOps bounds and <eos>


def test_listops_length_bounds_are_inclusive():
    """Trees of exactly ``min_len`` and exactly ``max_len`` tokens are kept: a config with
    min_len == max_len draws trees of that length only, and both ends of a range occur."""
    exact = lo.ListOpsConfig(max_depth=3, max_args=4, min_len=9, max_len=9, max_tries=20_000)
    trees = lo.generate(exact, 30, seed=1)
    assert [len(lo.tokens(t)) for t in trees] == [9] * 30
    rng = lo.ListOpsConfig(max_depth=3, max_args=4, min_len=8, max_len=12, max_tries=20_000)
    lengths = [len(lo.tokens(t)) for t in lo.generate(rng, 400, seed=2)]
    assert min(lengths) == 8 and max(lengths) == 12 and set(lengths) == set(range(8, 13))


def test_listops_sequences_of_max_len_tokens_end_with_eos():
    """A data kind whose trees all have ``max_len`` tokens: every row is the tree's tokens, whole,
    then ``<eos>`` at position ``max_len`` (no padding, no token lost)."""
    cfg = lo.ListOpsConfig(max_depth=3, max_args=4, min_len=13, max_len=13, max_tries=20_000)
    src = ListOpsSource(cfg, n_train=12, n_val=4, n_test=4, seed=3)
    d = src.make()
    x = torch.cat([d.train.x, d.val.x, d.test.x])
    assert src.length == 14 and x.shape[1] == 14
    trees = lo.generate(cfg, 20, seed=3)
    for row, tree, y in zip(x.argmax(-1).tolist(), trees, torch.cat([d.train.y, d.val.y, d.test.y]).tolist()):
        assert [VOCAB.itos[i] for i in row] == lo.tokens(tree) + ["<eos>"]
        assert y == lo.evaluate(tree)
    b = lo.encode_batch([lo.tokens(t) for t in trees], [0] * 20, VOCAB, l_max=14)
    assert (b.lengths == 14).all() and (b.ids[:, 13] == lo.EOS_ID).all()


# ------------------------------------------------------------------ digits


def _digits():
    from sklearn.datasets import load_digits

    return load_digits()


def test_digit_grey_levels_are_the_17_levels_scaled_by_255_over_16():
    """The 8x8 digits' values are exactly (k·255/16 / 255 - 0.5)/0.5 = k/8 - 1 for k = 0..16,
    each present; the 256-way targets are round(k·255/16)."""
    d = DigitsSource(side=8).make()
    x = torch.cat([d.train.x, d.val.x, d.test.x])
    assert set(torch.unique(x).tolist()) == {k / 8 - 1 for k in range(17)}
    want = {int(v) for v in np.rint(np.arange(17) * 255 / 16)}
    assert 128 in want and set(torch.unique(pixel_levels(x, "digits")).tolist()) == want


def test_digit_labels_follow_their_images_through_the_split():
    """Each split example's image and label are scikit-learn's image and target of one index of
    the split's permutation; and, independently of the permutation, its label is a target of an
    image of sklearn equal to its own."""
    raw = _digits()
    for src in (DigitsSource(side=8), DigitsSource(side=8, split_seed=3, n_val=100, n_test=300)):
        d = src.make()
        x = torch.cat([d.train.x, d.val.x, d.test.x])[..., 0].double().numpy().reshape(-1, 8, 8)
        y = torch.cat([d.train.y, d.val.y, d.test.y]).numpy()
        perm = np.random.default_rng(src.split_seed).permutation(len(raw.target))
        assert np.array_equal(x, raw.images[perm] / 8 - 1) and np.array_equal(y, raw.target[perm])
        targets: dict[bytes, set] = {}
        for img, t in zip(raw.images, raw.target):
            targets.setdefault(img.astype(np.int64).tobytes(), set()).add(int(t))
        for img, t in zip(x, y):
            assert int(t) in targets[np.rint((img + 1) * 8).astype(np.int64).tobytes()]
        assert len(d.train) == 1797 - src.n_val - src.n_test
