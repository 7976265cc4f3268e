"""Which attention basin SPT falls into: the sign of the reconstruction gain on the
uniform mean of the visible tokens.

theory.md T3 (scalar model ``yhat_m = beta sum_j A_mj x~_j``): at uniform attention the
expected derivative of the reconstruction loss along the neighbour direction has the sign
of ``-beta`` for positively correlated neighbours, so more weight on close (positively
correlated) tokens lowers the loss only if the gain beta is positive. With beta < 0 the
loss favours the most *negatively* correlated lag instead, and attention on that lag makes
the best gain still more negative: a self-reinforcing "anti-local" basin. Two numbers:

* :func:`beta_unif`, a statistic of the data under the SPT mask law: the least-squares gain
  of a masked value on the mean of the visible tokens. Where it is positive the gain the
  model learns at (near) uniform attention is positive, and proximity lowers the loss.
* :func:`model_beta`, the same gain read off a model: its reconstruction at masked
  positions with every attention pattern forced to the uniform mean of the visible tokens,
  regressed on that mean. :class:`BetaTracker` records it per SPT epoch.

Both are pooled over coordinates with the matched coordinate only (``x_mc`` on ``u_c``):
the task's coordinates are independent, so cross-coordinate gains carry nothing.
"""
from __future__ import annotations

import torch
from scipy.stats import binom

from toyspt.data.tasks import TaskData, sample_mask
from toyspt.nn.attention import hooks
from toyspt.nn.model import ModelConfig, build_model
from toyspt.probe import instrument

BETA_BATCH = 256  # validation sequences on which the model's gain is read
INIT_MASKS = 4  # mask draws per training sequence for the init gain (init_beta)
INIT_BATCH = 512  # at most this many training sequences for the init gain


# ---------------------------------------------------------------------------------------
# the data statistic

def mask_moments(T: int, mask_rate: float) -> tuple[float, float, float]:
    """``(a1, b1, b2)`` of toyspt.data.tasks.sample_mask (Bernoulli(q) per position, an empty
    mask replaced by one uniform position), with V the visible (unmasked) set, m, j, k
    distinct positions and ``1/|V| := 0`` when V is empty:

        a1 = E[1{m in M} 1{j in V} / |V|],   b1 = E[1{m in M} 1{j in V} / |V|^2],
        b2 = E[1{m in M} 1{j in V} 1{k in V} / |V|^2].

    Given |M| = n the masked set is a uniform n-subset (also for the empty-mask fallback),
    so each is a sum over the law of n (float64)."""
    if T < 2:
        raise ValueError(f"T: need at least 2 positions, got {T}")
    if not 0.0 < mask_rate <= 1.0:
        raise ValueError(f"mask_rate: must be in (0, 1], got {mask_rate}")
    w = [float(binom.pmf(n, T, mask_rate)) for n in range(T + 1)]
    w[1] += w[0]  # an empty mask becomes one uniformly chosen position
    a1 = b1 = b2 = 0.0
    for n in range(1, T):  # n = T leaves nothing visible: contributes 0 by the convention
        a1 += w[n] * n / (T * (T - 1))
        b1 += w[n] * n / (T * (T - 1) * (T - n))
        if T >= 3:
            b2 += w[n] * n * (T - n - 1) / (T * (T - 1) * (T - 2) * (T - n))
    return a1, b1, b2


def uniform_moments(x_NxTxD: torch.Tensor, mask_rate: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Per coordinate c, exactly averaged over the mask law and summed over sequences:
    ``num_c = E sum_{m in M} x_mc u_c`` and ``den_c = E sum_{m in M} u_c^2``, where
    ``u = mean_{j in V} x_j`` is the mean of the visible tokens (u := 0 when nothing is
    visible). With S = sum_j x_j and Q = sum_j x_j^2 per sequence and coordinate:
    ``num = a1 sum (S^2 - Q)``, ``den = b1 (T-1) sum Q + b2 (T-2) sum (S^2 - Q)``. (D,), (D,)."""
    if x_NxTxD.dim() != 3:
        raise ValueError(f"expected sequences of shape (N, T, D), got {tuple(x_NxTxD.shape)}")
    x = x_NxTxD.double()
    T = x.shape[1]
    a1, b1, b2 = mask_moments(T, mask_rate)
    S2 = x.sum(1).pow(2)  # (N, D)
    Q = x.pow(2).sum(1)
    cross = (S2 - Q).sum(0)  # sum over sequences of sum_{j != k} x_j x_k
    return a1 * cross, b1 * (T - 1) * Q.sum(0) + b2 * (T - 2) * cross


def beta_unif(data: TaskData | torch.Tensor, mask_rate: float = 0.5, per_coordinate: bool = False
              ) -> float | torch.Tensor:
    """Least-squares gain of a masked value on the mean of the visible tokens under the
    SPT mask law: ``sum_c num_c / sum_c den_c`` of :func:`uniform_moments` (``num / den``
    per coordinate when ``per_coordinate``), i.e. the beta minimising
    ``E sum_{m in M} ||x_m - beta u||^2``, expectation exact over masks, empirical over the
    sequences (``data.train.x`` for a TaskData; the SPT loss's pooling over masked entries
    of a batch). Masked positions never count as visible. Exact: no sampling, no seed."""
    x = data.train.x if isinstance(data, TaskData) else data
    num, den = uniform_moments(x, mask_rate)
    if per_coordinate:
        return num / den
    return (num.sum() / den.sum()).item()


def uniform_share(data: TaskData | torch.Tensor, mask_rate: float = 0.5) -> float:
    """How much of the masked values the uniform visible mean can explain at all: the R^2 of
    the least-squares fit ``x_m ~ beta_unif u`` over the mask law, ``num^2 / (den * E sum_{m
    in M} ||x_m||^2)`` (pooled coordinates; ``P(m in M) = E|M| / T`` under sample_mask). This is
    the rate at which the data pull the head's gain towards beta_unif at uniform attention
    (gradient flow on the gain: ``d beta/dt ~ E[u^2] (beta_unif - beta)``). On a series summing
    to 0 it is about 1/T (the visible mean of a z-normalised series is -sum_M x / |V|, whose
    mean square is ~ 1/T): the pull is weak there and the init's own gain survives."""
    x = (data.train.x if isinstance(data, TaskData) else data).double()
    T = x.shape[1]
    num, den = uniform_moments(x, mask_rate)
    w = [float(binom.pmf(n, T, mask_rate)) for n in range(T + 1)]
    w[1] += w[0]
    p_masked = sum(n * wn for n, wn in enumerate(w)) / T
    total = p_masked * x.pow(2).sum().item()
    return (num.sum().item() ** 2) / (den.sum().item() * total)


# ---------------------------------------------------------------------------------------
# the model's gain

def _pattern_sites(model: torch.nn.Module) -> None:
    if not any(n.endswith("hook_pattern") for n, _ in model.named_modules()):
        raise ValueError("model_beta: the model has no '*hook_pattern' hook points (toyspt.nn.attention)")


@torch.no_grad()
def model_beta(model: torch.nn.Module, x_BxTxD: torch.Tensor, mask_BxT: torch.Tensor,
               dtype: torch.dtype = torch.float64) -> float:
    """The model's reconstruction gain on the uniform visible mean.

    Every attention pattern (all layers, heads and queries) is replaced by uniform weight
    on the visible keys, ``A_ij = 1{j in V} / |V|``; the reconstruction ``xhat`` at masked
    positions m is regressed on ``u = mean_{j in V} x_j`` (matched coordinates, pooled),
    both centred per (position, coordinate) over the batch so that each position's
    constant (positional encoding, mask embedding) is not read as gain:
    ``beta = sum <xhat_c, u_c> / sum ||u_c||^2``. Sequences with nothing visible are left
    out. Why uniform and not the model's own attention: T3's sign rule is a statement at
    uniform attention, where ``dyhat_m/dA_mj`` is the gain applied to token j's value; to
    first order the slope of xhat on the uniform mean is that gain (the same linear map
    from a value to the output), so its sign says which way reconstruction pushes the
    attention, and it is directly comparable with :func:`beta_unif` (the gain a perfect
    uniform-attention reconstructor would have). With the model's own attention the slope
    would also measure where the attention already looks. Float64 copy; eval mode."""
    _pattern_sites(model)
    if mask_BxT.shape != x_BxTxD.shape[:2]:
        raise ValueError(f"mask shape {tuple(mask_BxT.shape)} does not match inputs {tuple(x_BxTxD.shape[:2])}")
    x = x_BxTxD.to(dtype)
    B, T, D = x.shape
    visible_BxT = ~mask_BxT
    n_vis_B = visible_BxT.sum(1)
    denom_B = n_vis_B.clamp_min(1).to(dtype)
    U_BxTxT = (visible_BxT[:, None, :].to(dtype) / denom_B[:, None, None]).expand(B, T, T)

    def force(t, name):
        return U_BxTxT[:, None].expand_as(t)

    with instrument.working_model(model, dtype) as m, hooks(m, [(lambda n: n.endswith("hook_pattern"), force)]):
        xhat_BxTxD = m.reconstruct(x, mask_BxT)
    u_BxTxD = ((x * visible_BxT[..., None]).sum(1) / denom_B[:, None])[:, None, :].expand(B, T, D)
    w_BxTx1 = (mask_BxT & (n_vis_B > 0)[:, None]).to(dtype)[..., None]
    cnt_Tx1 = w_BxTx1.sum(0).clamp_min(1.0)
    xc = xhat_BxTxD - (xhat_BxTxD * w_BxTx1).sum(0) / cnt_Tx1
    uc = u_BxTxD - (u_BxTxD * w_BxTx1).sum(0) / cnt_Tx1
    den = (uc * uc * w_BxTx1).sum().item()
    if not den > 0:
        raise ValueError("model_beta: no masked position with a varying visible mean in the batch")
    return (xc * uc * w_BxTx1).sum().item() / den


def init_beta(model_cfg: ModelConfig, seed: int, x_NxTxD: torch.Tensor, mask_rate: float = 0.5,
              n_masks: int = INIT_MASKS, mask_seed: int = 0, n: int = INIT_BATCH) -> float:
    """:func:`model_beta` of the seed's initial model (``build_model(model_cfg, seed)``, the
    weights every recipe of that seed starts from) on the first ``n`` sequences of
    ``x_NxTxD`` (training inputs: no labels, no validation or test data), each under
    ``n_masks`` masks of the run's rate drawn from ``mask_seed``. No training: one forward
    pass of ``n_masks * n`` sequences in float64."""
    if n_masks <= 0 or n <= 0:
        raise ValueError(f"n_masks and n must be positive, got {n_masks}, {n}")
    x = x_NxTxD[:n].repeat(n_masks, 1, 1)
    mask = sample_mask(len(x), x.shape[1], mask_rate, torch.Generator().manual_seed(mask_seed))
    return model_beta(build_model(model_cfg, seed), x, mask)


ZERO_SUM_TOL = 1e-4  # |mean_t x| / rms_t x below this for every sequence: the series sum to zero


def zero_sum(x_NxTxD: torch.Tensor, tol: float = ZERO_SUM_TOL) -> bool:
    """Whether every sequence sums to zero over time in every coordinate (per-series
    z-normalisation does this), up to ``tol`` relative to its root mean square: then
    :func:`beta_unif` is a constant of T and the mask rate and says nothing of the data."""
    x = x_NxTxD.double()
    rms = x.pow(2).mean(1).sqrt().clamp_min(torch.finfo(torch.float64).tiny)
    return bool((x.mean(1).abs() / rms).max() < tol)


def basin_predictor(x_train: torch.Tensor, model_cfg: ModelConfig, seed: int, mask_rate: float = 0.5,
                    **init_kw) -> float:
    """> 0 predicts the proximity basin after SPT, < 0 the anti-local one, computed without
    training. Where the series are free to have a per-sequence level (not zero-sum), the
    data decide: :func:`beta_unif` (the toy: 48/50 clear runs). Where every series sums to
    zero (:func:`zero_sum`), beta_unif is a constant and the data's pull on the gain is ~1/T
    (:func:`uniform_share`), so the seed's own init gain decides: :func:`init_beta`. See
    docs/basin.md for its share on the UCR sets (below the 90% goal) and where it fails."""
    if zero_sum(x_train):
        return init_beta(model_cfg, seed, x_train, mask_rate, **init_kw)
    return beta_unif(x_train, mask_rate)


def peak_offset(A_HxTxT: torch.Tensor) -> torch.Tensor:
    """(H,) the offset |delta| >= 1 with the largest mean attention weight (mean of the
    diagonals +delta and -delta). (No import of toyspt.probe.tracking: it may register this module.)"""
    T = A_HxTxT.shape[-1]
    sym_HxW = torch.stack([(torch.diagonal(A_HxTxT, d, -2, -1).mean(-1)
                            + torch.diagonal(A_HxTxT, -d, -2, -1).mean(-1)) / 2
                           for d in range(1, T)], dim=-1)  # delta = 1..T-1
    return sym_HxW.argmax(-1) + 1


# ---------------------------------------------------------------------------------------
# tracker

def check_epochs(at) -> frozenset[int] | None:
    """The epochs a tracker records after (``at=1/2/5`` in its name: those epochs of each
    phase; None: every epoch); a clear error for epochs that are not positive integers."""
    if at is None:
        return None
    at = (at,) if isinstance(at, int) else tuple(at)
    if not at or any(not isinstance(e, int) or e <= 0 for e in at):
        raise ValueError(f"at: epochs must be positive integers, got {at}")
    return frozenset(at)


def records_at(epochs: int, at=None) -> int:
    """Records of a tracker that records after ``epochs`` epochs (``at``: those only) and at two phase starts."""
    return (len(at) if isinstance(at, tuple) else 1 if at is not None else epochs) + 2


class BetaTracker:
    """SPT phase only: the data's :func:`beta_unif` (metric ``beta_unif``, at phase start)
    and :func:`model_beta` (metric ``beta``) at the phase start (epoch 0) and after every
    epoch (``at``: after those epochs only), on the first ``n`` validation sequences with a
    mask seeded by ``seed``. Nothing is recorded in the label phase: the reconstruction head
    is not trained there. ``mask_rate`` must be the SPT run's (TrainConfig.mask_rate); the
    tracker cannot see it."""

    def __init__(self, data: TaskData, n: int = BETA_BATCH, mask_rate: float = 0.5, seed: int = 0, at=None):
        if n <= 0:
            raise ValueError(f"n: must be positive, got {n}")
        self.at = check_epochs(at)
        self.x = data.val.x[:n]
        self.mask = sample_mask(len(self.x), self.x.shape[1], mask_rate,
                                torch.Generator().manual_seed(seed))
        self.beta_unif = beta_unif(data, mask_rate)

    @staticmethod
    def price(run: dict, at=None, **_) -> tuple[int, float, float]:
        """(records, fixed seconds, float32 forward sequences) per record in a run of shape ``run``
        (:func:`toyspt.probe.tracking.tracker_price`): a float64 forward of its batch per SPT epoch."""
        return records_at(run["spt_epochs"], at), 3e-3, 2.0 * min(BETA_BATCH, run["n_val"])

    def _beta(self, ctx) -> None:
        ctx.record("recon", "beta", model_beta(ctx.model, self.x, self.mask))

    def on_phase_start(self, ctx) -> None:
        if ctx.phase == "pretrain":
            ctx.record("data", "beta_unif", self.beta_unif)
            self._beta(ctx)

    def on_epoch(self, ctx, record) -> None:
        if ctx.phase == "pretrain" and (self.at is None or ctx.epoch in self.at):
            self._beta(ctx)


__all__ = ["mask_moments", "uniform_moments", "beta_unif", "uniform_share", "model_beta", "init_beta",
           "zero_sum", "basin_predictor", "ZERO_SUM_TOL",
           "peak_offset", "check_epochs", "records_at", "BetaTracker", "BETA_BATCH", "INIT_MASKS", "INIT_BATCH"]
