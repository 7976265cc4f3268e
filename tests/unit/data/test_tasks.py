import numpy as np
import pytest
import torch

from toyspt.data.tasks import TaskConfig, make_task, mask_inputs, recon_loss, sample_mask


def test_shapes_and_balance(small_data):
    cfg = small_data.config
    assert small_data.train.x.shape == (cfg.n_train, cfg.T, cfg.dim)
    assert small_data.val.x.shape == (cfg.n_val, cfg.T, cfg.dim)
    assert small_data.test.y.shape == (cfg.n_test,)
    assert small_data.train.x.dtype == torch.float32 and small_data.train.y.dtype == torch.long
    assert small_data.train.y.float().mean().item() == 0.5


def test_standardised_with_train_statistics_only(small_data):
    x = small_data.train.x
    assert torch.allclose(x.mean((0, 1)), torch.zeros(2), atol=1e-5)
    assert torch.allclose(x.std((0, 1), unbiased=False), torch.ones(2), atol=1e-4)
    # the test split is transformed with the same (train) statistics, so it is not exactly standard
    assert not torch.allclose(small_data.test.x.mean((0, 1)), torch.zeros(2), atol=1e-5)


def test_determinism_and_seed_dependence():
    cfg = TaskConfig(T=8, n_train=16, n_val=8, n_test=8, seed=11)
    a, b = make_task(cfg), make_task(cfg)
    assert torch.equal(a.train.x, b.train.x) and torch.equal(a.test.y, b.test.y)
    c = make_task(TaskConfig(T=8, n_train=16, n_val=8, n_test=8, seed=12))
    assert not torch.equal(a.train.x, c.train.x)


def test_local_shuffle_keeps_the_point_set():
    """Class 1 is a permutation of a class-0-style curve: with no noise, its points are
    exactly the points of a smooth curve, only reordered by at most ceil(width) steps."""
    cfg = TaskConfig(T=32, n_train=64, n_val=2, n_test=2, noise=0.0, shuffle_width=3.0, seed=0)
    from toyspt.data.tasks import _draw

    rng = np.random.default_rng(5)
    x, y = _draw(cfg, 64, rng)
    # undo: each class-1 sequence must be a local permutation of a cosine curve; check that
    # sorting by the first coordinate gives the same multiset as the clean curve's draw
    rng = np.random.default_rng(5)
    x0, _ = _draw(TaskConfig(**{**cfg.__dict__, "shuffle_width": 0.0}), 64, rng)
    for i in range(64):
        assert np.allclose(np.sort(x[i, :, 0]), np.sort(x0[i, :, 0]))
        if y[i] == 1:
            assert not np.allclose(x[i], x0[i])  # the order did change
            # points moved at most ceil(width) positions
            pos = [np.argmin(np.abs(x0[i, :, 0] - v) + np.abs(x0[i, :, 1] - w)) for v, w in x[i]]
            assert np.max(np.abs(np.array(pos) - np.arange(32))) <= 3
        else:
            assert np.allclose(x[i], x0[i])


def test_per_position_marginals_match_across_classes():
    """Uniform phases make each time step's marginal equal across classes: per-position means
    and stds agree within sampling error (4 standard errors)."""
    d = make_task(TaskConfig(T=16, n_train=4000, n_val=2, n_test=2, seed=1))
    x, y = d.train.x, d.train.y
    for c in range(2):
        xc = x[y == c]
        se = xc.std(0) / np.sqrt(len(xc))
        assert (xc.mean(0).abs() < 4 * se + 1e-3).float().mean() > 0.95


def test_freq_band_family():
    d = make_task(TaskConfig(family="freq_band", T=32, n_train=64, n_val=8, n_test=8, noise=0.0))
    # class 1 uses higher frequencies: more sign changes per sequence
    x, y = d.train.x[:, :, 0], d.train.y
    changes = (np.diff(np.sign(x.numpy()), axis=1) != 0).sum(1)
    assert changes[y.numpy() == 1].mean() > changes[y.numpy() == 0].mean() + 3


@pytest.mark.parametrize("kw,field", [
    (dict(T=1), "T"), (dict(n_train=0), "n_train"), (dict(dim=0), "dim"), (dict(n_test=-1), "n_test"),
    (dict(family="spiral"), "family"), (dict(band0=()), "band0"), (dict(band1=()), "band1"),
    (dict(shuffle_width=-1.0), "shuffle_width"), (dict(noise=-0.1), "noise"),
    (dict(freq_range=(3.0, 1.0)), "freq_range"), (dict(amp_range=(0.0, 1.0)), "amp_range"),
])
def test_invalid_configs_name_the_field(kw, field):
    with pytest.raises(ValueError, match=field):
        TaskConfig(**kw)


def test_mask_statistics_and_indicator_channel():
    g = torch.Generator().manual_seed(0)
    m = sample_mask(2000, 32, 0.5, g)
    assert m.shape == (2000, 32) and m.dtype == torch.bool
    # rate 0.5 over 64000 draws: std of the mean is 0.002; allow 5 sd
    assert abs(m.float().mean().item() - 0.5) < 0.01
    assert m.any(1).all()  # never an empty mask
    x = torch.randn(2000, 32, 2)
    t = mask_inputs(x, m)
    assert t.shape == (2000, 32, 3)
    assert torch.equal(t[..., 2], m.float())
    assert torch.all(t[..., :2][m] == 0) and torch.equal(t[..., :2][~m], x[~m])
    assert torch.equal(mask_inputs(x, None)[..., :2], x)


def test_recon_loss_only_counts_masked_positions():
    x = torch.zeros(1, 4, 2)
    pred = torch.zeros(1, 4, 2)
    pred[0, 1] = 10.0  # error on an unmasked position: ignored
    pred[0, 2] = 1.0
    m = torch.tensor([[False, False, True, True]])
    assert recon_loss(pred, x, m, "l1").item() == pytest.approx(0.5)
    assert recon_loss(pred, x, m, "mse").item() == pytest.approx(0.5)
    with pytest.raises(ValueError, match="l1"):
        recon_loss(pred, x, m, "huber")
    with pytest.raises(ValueError, match="rate"):
        sample_mask(2, 4, 0.0)


def test_families_are_a_registry_and_an_unknown_name_is_refused(monkeypatch):
    from toyspt.data import tasks
    from toyspt.runs.arms import arm_spec
    from toyspt.runs.specs import RunSpec
    with pytest.raises(ValueError, match="unknown task family 'sine'; registered: \\['freq_band', 'local_shuffle'\\]"):
        TaskConfig(family="sine")

    def flat(cfg, y, amp, phase, t, rng):  # a new family: one function, registered in tasks.py only
        return np.broadcast_to(amp[:, None, :] * (2 * y[:, None, None] - 1), (len(y), cfg.T, cfg.dim)).copy()

    monkeypatch.setitem(tasks.TASK_FAMILIES, "flat", flat)
    cfg = TaskConfig(family="flat", T=8, n_train=16, n_val=8, n_test=8)
    assert make_task(cfg).train.x.shape == (16, 8, 2)
    spec = arm_spec("data_swap", RunSpec("scratch", 0, cfg))  # arms.py knows no family by name
    assert spec.swap.family == "local_shuffle"


def test_freq_band_above_nyquist_is_refused():
    TaskConfig(family="freq_band", T=16)  # band1 reaches 8 = T/2: allowed
    with pytest.raises(ValueError, match="above the Nyquist frequency T/2 = 7.5"):
        TaskConfig(family="freq_band", T=15)
