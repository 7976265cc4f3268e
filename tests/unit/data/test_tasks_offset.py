"""TaskConfig.offset: a per-sequence, per-coordinate translation drawn after everything else."""
import math

import numpy as np
import pytest
import torch

from toyspt.data.tasks import TaskConfig, _draw, make_task

CFG = TaskConfig(T=16, n_train=400, n_val=50, n_test=60, seed=7, offset=0.0)  # the zero-mean task


def _raw(data):
    """Undo the standardisation (float64): the generated sequences before scaling."""
    return [s.x.double() * data.std.double() + data.mean.double() for s in (data.train, data.val, data.test)]


@pytest.mark.parametrize("family", ["local_shuffle", "freq_band"])
def test_offset_zero_is_the_pipeline_without_the_knob(family):
    """offset=0 draws nothing: make_task equals the three _draw calls on one stream followed
    by train-statistics standardisation, bit for bit (the pre-knob pipeline)."""
    cfg = TaskConfig(family=family, T=16, n_train=64, n_val=16, n_test=16, seed=5, offset=0.0)
    rng = np.random.default_rng(cfg.seed)
    raw = [_draw(cfg, n, rng) for n in (cfg.n_train, cfg.n_val, cfg.n_test)]
    mean, std = raw[0][0].mean(axis=(0, 1)), raw[0][0].std(axis=(0, 1)) + 1e-8
    data = make_task(cfg)
    for (x, y), split in zip(raw, (data.train, data.val, data.test)):
        assert torch.equal(split.x, torch.tensor((x - mean) / std, dtype=torch.float32))
        assert torch.equal(split.y, torch.tensor(y, dtype=torch.long))


def test_offset_translates_the_same_trajectories():
    """With offset > 0 every split holds the offset=0 sequences (same labels), each shifted
    by one constant per sequence and coordinate."""
    base, off = make_task(CFG), make_task(TaskConfig(**{**CFG.__dict__, "offset": 0.5}))
    for split_b, split_o in zip((base.train, base.val, base.test), (off.train, off.val, off.test)):
        assert torch.equal(split_b.y, split_o.y)
    for xb, xo in zip(_raw(base), _raw(off)):
        d = xo - xb  # (N, T, D): the offsets, repeated over time
        # float32 storage of standardised values: ~6e-8 relative of |x| <~ 3 scaled by std
        assert torch.allclose(d, d[:, :1].expand_as(d), atol=1e-5)
        assert d[:, 0].abs().min() > 0  # every sequence moved


def test_offset_has_the_requested_spread():
    """b ~ N(0, offset^2): the sample std of the 2 x 510 draws is within 4 standard errors
    (SE of a normal sample std = offset / sqrt(2 n))."""
    offset = 0.3
    base, off = make_task(CFG), make_task(TaskConfig(**{**CFG.__dict__, "offset": offset}))
    b = torch.cat([(xo - xb)[:, 0] for xb, xo in zip(_raw(base), _raw(off))]).flatten()
    se = offset / math.sqrt(2 * b.numel())
    assert abs(b.std().item() - offset) < 4 * se
    assert abs(b.mean().item()) < 4 * offset / math.sqrt(b.numel())


def test_offset_is_seeded():
    cfg = TaskConfig(**{**CFG.__dict__, "offset": 0.2})
    assert torch.equal(make_task(cfg).train.x, make_task(cfg).train.x)
    other = make_task(TaskConfig(**{**CFG.__dict__, "offset": 0.2, "seed": 8}))
    assert not torch.equal(make_task(cfg).train.x, other.train.x)


def test_default_task_is_the_proximity_regime():
    assert TaskConfig().offset == 0.5  # the default; offset=0 is the zero-mean contrast


@pytest.mark.parametrize("bad", [-0.1, math.nan, math.inf])
def test_offset_validation(bad):
    with pytest.raises(ValueError, match="offset"):
        TaskConfig(offset=bad)
