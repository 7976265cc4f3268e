import itertools

import numpy as np
import pytest
import torch
from torch import nn

from toyspt.data.tasks import TaskConfig, make_task, sample_mask
from toyspt.nn.model import ModelConfig, build_model
from toyspt.probe.basin import BetaTracker, beta_unif, mask_moments, model_beta, peak_offset, uniform_moments
from toyspt.train.config import RunConfig
from toyspt.train.loop import RunContext, clone_state
from toyspt.train.recipes import TrainConfig
from toyspt.train.run import load_model, run_recipe


def _brute_moments(x_NxTxD, q):
    """num, den of uniform_moments by enumerating every mask with its sample_mask
    probability (an empty draw becomes each single position with prob (1-q)^T / T)."""
    N, T, D = x_NxTxD.shape
    num = torch.zeros(D, dtype=torch.float64)
    den = torch.zeros(D, dtype=torch.float64)
    for bits in itertools.product([0, 1], repeat=T):
        k = sum(bits)
        if k == 0:
            continue
        p = q ** k * (1 - q) ** (T - k) + ((1 - q) ** T / T if k == 1 else 0.0)
        m = torch.tensor(bits, dtype=torch.bool)
        v = ~m
        u = x_NxTxD[:, v].mean(1) if v.any() else torch.zeros(N, D, dtype=torch.float64)
        num += p * (x_NxTxD[:, m] * u[:, None]).sum((0, 1))
        den += p * k * (u * u).sum(0)
    return num, den


@pytest.mark.parametrize("T,q", [(2, 0.5), (3, 0.3), (5, 0.5), (6, 0.8)])
def test_exact_moments_match_enumeration_of_masks(T, q):
    x = torch.randn(7, T, 2, generator=torch.Generator().manual_seed(T), dtype=torch.float64)
    num, den = uniform_moments(x, q)
    bn, bd = _brute_moments(x, q)
    # both are float64 sums of O(100) terms of size O(10): agreement to ~1e-13 relative
    assert torch.allclose(num, bn, rtol=1e-11, atol=1e-12)
    assert torch.allclose(den, bd, rtol=1e-11, atol=1e-12)


def test_exact_moments_match_sample_mask_monte_carlo():
    """The law in mask_moments is the one toyspt.data.tasks.sample_mask draws (T=32, q=0.5, where
    the empty-mask fallback is negligible but the 1/|V| weights are not): per-draw sums of
    num and den agree with the exact values within 4 standard errors."""
    data = make_task(TaskConfig(n_train=64, n_val=1, n_test=1, seed=2))
    x = data.train.x.double()
    N, T, D = x.shape
    num, den = uniform_moments(x, 0.5)
    gen = torch.Generator().manual_seed(0)
    draws = []
    for _ in range(400):
        m = sample_mask(N, T, 0.5, gen)
        v = (~m).double()[..., None]
        u = (x * v).sum(1) / v.sum(1).clamp_min(1)  # (N, D)
        draws.append(torch.stack([(x * m.double()[..., None] * u[:, None]).sum((0, 1)),
                                  (m.double().sum(1)[:, None] * u * u).sum(0)]))
    d = torch.stack(draws)  # (draws, 2, D)
    mean, se = d.mean(0), d.std(0) / len(d) ** 0.5
    assert ((mean - torch.stack([num, den])).abs() < 4 * se).all()


def test_mask_moments_validation():
    with pytest.raises(ValueError, match="mask_rate"):
        mask_moments(8, 0.0)
    with pytest.raises(ValueError, match="T"):
        mask_moments(1, 0.5)


def test_beta_unif_sign_follows_the_offset():
    """A zero-mean oscillation of 1-3 cycles makes the gain negative; a per-sequence offset
    (shared level, the default task) or slower oscillation makes it positive."""
    small = dict(n_train=1000, n_val=1, n_test=1, offset=0.0)
    assert beta_unif(make_task(TaskConfig(**small))) < 0
    assert beta_unif(make_task(TaskConfig(**{**small, "offset": TaskConfig().offset}))) > 0
    assert beta_unif(make_task(TaskConfig(**{**small, "offset": 0.5}))) > 0
    assert beta_unif(make_task(TaskConfig(**small, freq_range=(0.5, 1.5)))) > 0


def test_beta_unif_per_coordinate_and_pooled():
    x = torch.randn(20, 8, 3, generator=torch.Generator().manual_seed(1))
    per = beta_unif(x, 0.5, per_coordinate=True)
    num, den = uniform_moments(x, 0.5)
    assert per.shape == (3,)
    assert beta_unif(x, 0.5) == pytest.approx((num.sum() / den.sum()).item(), rel=1e-12)
    # a common level (constant sequences) is predicted perfectly from any visible token
    const = torch.randn(20, 1, 2, dtype=torch.float64).expand(20, 8, 2)
    assert beta_unif(const, 0.5) == pytest.approx(1.0, rel=1e-12)


def _linear_model(gain: float, qk_scale: float = 1.0):
    """A one-layer toy model whose reconstruction is exactly c_m + gain * u when attention
    is the uniform mean of the visible tokens: no LN on the attention input, no MLP, no final
    LN, no PE, and value path embed -> W_V -> W_O -> head_rec equal to gain * I on the
    data coordinates."""
    cfg = ModelConfig(d_mlp=0, final_norm=False, pos="none", qk_init_scale=qk_scale)
    m = build_model(cfg, 0).double()
    m.blocks[0].ln1 = nn.Identity()
    with torch.no_grad():
        D, d = cfg.d_in, cfg.d_model
        m.embed.weight.zero_()
        m.embed.weight[:D, :D] = torch.eye(D)
        m.embed.weight[D, D] = 1.0  # mask channel in its own direction
        m.embed.bias.normal_()  # a constant on every token: only the intercept moves
        m.blocks[0].attn.W_V.weight.copy_(torch.eye(d))
        m.blocks[0].attn.W_O.weight.copy_(torch.eye(d))
        m.head_rec.weight.zero_()
        m.head_rec.weight[:, :D] = gain * torch.eye(D, dtype=torch.float64)
    return m


@pytest.mark.parametrize("gain", [0.7, -0.3])
def test_model_beta_reads_the_gain_of_a_linear_model(gain):
    data = make_task(TaskConfig(T=16, n_train=8, n_val=128, n_test=1, seed=4))
    mask = sample_mask(128, 16, 0.5, torch.Generator().manual_seed(0))
    # random W_Q, W_K (scale 3): the forced uniform pattern must override them
    m = _linear_model(gain, qk_scale=3.0)
    # the model is linear in u in float64: exact up to rounding
    assert model_beta(m, data.val.x, mask) == pytest.approx(gain, rel=1e-10)


def test_model_beta_leaves_the_model_unchanged():
    m = build_model(ModelConfig(), 0)
    before = clone_state(m)
    m.train()
    x = make_task(TaskConfig(T=16, n_train=8, n_val=32, n_test=1)).val.x
    model_beta(m, x, sample_mask(32, 16, 0.5, torch.Generator().manual_seed(0)))
    assert m.training and all(torch.equal(v, m.state_dict()[k]) for k, v in before.items())
    assert next(m.parameters()).dtype == torch.float32


def test_peak_offset():
    T = 10
    d = torch.arange(T)
    A = ((d[None] - d[:, None]).abs() == 3).double() + 0.01
    A = A / A.sum(-1, keepdim=True)
    assert peak_offset(torch.stack([A, A.T])).tolist() == [3, 3]


def test_beta_tracker_records_spt_epochs_only():
    data = make_task(TaskConfig(T=16, n_train=128, n_val=64, n_test=1, seed=3))
    tr = BetaTracker(data, n=64)
    res = run_recipe(RunConfig("spt_only", train=TrainConfig(pre_epochs=2)), data, callbacks=[tr])
    model = load_model(res)
    ctx = RunContext(model, "spt_only", 0, records=list(res.records))  # to call the tracker after the run
    betas = [r for r in ctx.records if r["metric"] == "beta"]
    assert [r["epoch"] for r in betas] == [0, 1, 2]
    assert all(r["phase"] == "pretrain" and r["name"] == "recon" for r in betas)
    assert betas[-1]["value"] == pytest.approx(model_beta(model, tr.x, tr.mask), rel=1e-12)
    (bu,) = [r for r in ctx.records if r["metric"] == "beta_unif"]
    assert bu["value"] == beta_unif(data)
    n = len(ctx.records)
    ctx.phase = "finetune"
    tr.on_phase_start(ctx)
    tr.on_epoch(ctx, {})
    assert len(ctx.records) == n


def test_beta_unif_of_zero_sum_series_is_a_constant_of_T_and_q():
    """A series summing to 0 (any z-normalised UCR series) has sum_M x = -|V| u, and for a
    uniform n-subset M, E (sum_M x)^2 = n (T - n) / (T (T - 1)) * sum_t x_t^2: beta_unif is
    then -E[n] / E[n^2 / (T - n)] over the mask law (|M| = n ~ Binomial(T, q), an empty mask
    made one position, nothing visible when all are masked), whatever the data. Three series
    with opposite local structure give that number to float64 rounding."""
    from scipy.stats import binom

    T, q = 40, 0.5
    n = np.arange(T + 1)
    p = binom.pmf(n, T, q)
    p[1] += p[0]
    n, p = n[1:T], p[1:T]
    closed = -(p * n).sum() / (p * n ** 2 / (T - n)).sum()
    g = torch.Generator().manual_seed(0)
    t = torch.arange(T, dtype=torch.float64)
    smooth = torch.cos(2 * torch.pi * t / T + 6.3 * torch.rand(64, 1, generator=g, dtype=torch.float64)) + 3.0
    alternating = (-1.0) ** t * (1 + torch.rand(64, 1, generator=g, dtype=torch.float64))
    noise = torch.randn(64, T, generator=g, dtype=torch.float64)
    assert beta_unif(smooth[..., None], q) > 0.5  # with its offset the smooth series says "proximity"
    for x in (smooth, alternating, noise):
        z = (x - x.mean(1, keepdim=True))[..., None]
        assert beta_unif(z, q) == pytest.approx(closed, rel=1e-12)


def test_beta_tracker_honours_the_runs_mask_rate():
    """A run with mask rate 0.3: the tracker built for it (make_trackers, as the run system
    builds it) records beta_unif at 0.3, not at the default 0.5, and masks its probe batch at
    0.3 (binomial count within 5 sd); an explicit option that contradicts the run is refused."""
    from toyspt.probe.tracking import make_trackers
    from toyspt.runs.specs import RunSpec

    task = TaskConfig(T=16, n_train=64, n_val=64, n_test=1, seed=3)
    data = make_task(task)
    (tr,) = make_trackers(["beta"], data, TrainConfig(mask_rate=0.3))
    assert tr.beta_unif == beta_unif(data, 0.3) and tr.beta_unif != beta_unif(data, 0.5)
    n = tr.mask.numel()
    assert abs(tr.mask.sum().item() - 0.3 * n) < 5 * (n * 0.3 * 0.7) ** 0.5
    with pytest.raises(ValueError, match="mask_rate differs"):
        make_trackers(["beta:mask_rate=0.5"], data, TrainConfig(mask_rate=0.3))
    spec = RunSpec("spt_only", 0, data=task, model=ModelConfig(d_model=16, d_mlp=32),
                   train=TrainConfig(pre_epochs=1, batch_size=32, mask_rate=0.3), trackers=("beta",))
    (bu,) = [r["value"] for r in spec.execute().records if r["metric"] == "beta_unif"]
    assert bu == beta_unif(data, 0.3)


def test_basin_predictor_reads_the_data_unless_the_series_sum_to_zero():
    """Free per-sequence levels: beta_unif (the data decide). Zero-sum series (z-normalised):
    beta_unif is a constant, so the seed's init gain, which differs between seeds."""
    from toyspt.probe.basin import basin_predictor, init_beta, zero_sum

    cfg = ModelConfig(d_in=1, d_model=16, d_mlp=32)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 12, 1, generator=g).cumsum(1) + 2.0
    assert not zero_sum(x)
    assert basin_predictor(x, cfg, 0) == beta_unif(x, 0.5)
    z = (x - x.mean(1, keepdim=True)) / x.std(1, unbiased=False, keepdim=True)
    assert zero_sum(z) and not zero_sum(z + 1e-3)
    got = [basin_predictor(z, cfg, s) for s in range(4)]
    assert got == [init_beta(cfg, s, z, 0.5) for s in range(4)]
    assert len({v > 0 for v in got}) == 2  # the sign depends on the seed's init, not on the data


def test_zero_sum_needs_every_sequence_to_sum_to_zero():
    """The toy task's own data hold a few near-zero-mean sequences (|mean| / rms below the
    tolerance in some coordinate; 10 of the basin grid's 11 settings have some): the series are
    not zero-sum, so basin_predictor stays beta_unif. Judging *any* sequence instead of every
    one would switch the toy to the init gain."""
    from toyspt.probe.basin import ZERO_SUM_TOL, basin_predictor, zero_sum

    x = make_task(TaskConfig(n_train=3000, n_val=1, n_test=1)).train.x  # the default toy task (offset 0.5)
    ratio = x.double().mean(1).abs() / x.double().pow(2).mean(1).sqrt()
    assert (ratio < ZERO_SUM_TOL).any() and not (ratio < ZERO_SUM_TOL).all()
    assert not zero_sum(x)
    assert basin_predictor(x, ModelConfig(), 0) == beta_unif(x, 0.5)
    few = torch.randn(64, 12, 1, generator=torch.Generator().manual_seed(1)) + 2.0
    few[:3] -= few[:3].mean(1, keepdim=True)  # three zero-mean sequences among free levels
    assert not zero_sum(few) and zero_sum(few - few.mean(1, keepdim=True))


def test_basin_predictor_honours_the_mask_rate_on_both_paths():
    """mask_rate 0.3 reaches beta_unif (free levels) and every mask of the init gain (zero-sum
    series), recomputed here from model_beta and sample_mask; both differ from the 0.5 values."""
    from toyspt.probe.basin import INIT_MASKS, basin_predictor

    cfg = ModelConfig(d_in=1, d_model=16, d_mlp=32)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 12, 1, generator=g).cumsum(1) + 2.0
    assert basin_predictor(x, cfg, 0, 0.3) == beta_unif(x, 0.3) != beta_unif(x, 0.5)
    z = (x - x.mean(1, keepdim=True)) / x.std(1, unbiased=False, keepdim=True)
    reps = z.repeat(INIT_MASKS, 1, 1)
    for seed in (0, 1):
        model = build_model(cfg, seed)
        at = {q: model_beta(model, reps, sample_mask(len(reps), 12, q, torch.Generator().manual_seed(0)))
              for q in (0.3, 0.5)}
        assert basin_predictor(z, cfg, seed, 0.3) == pytest.approx(at[0.3], rel=1e-12)
        assert basin_predictor(z, cfg, seed) == pytest.approx(at[0.5], rel=1e-12)
        assert abs(at[0.3] - at[0.5]) > 1e-3
