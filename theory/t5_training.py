"""T5 - what training does (measured, not proved).

Runs the toy recipes through the run cache of :mod:`toyspt.runs` (a cached run is reused,
a missing one is trained and stored) and reports, per recipe and seed:

* relative Frobenius displacement ||W - W_init||_F / ||W_init||_F of W_Q and W_K
  (:func:`toyspt.probe.tracking.relative_displacement`), after SPT and after fine-tuning;
* the proximity index on validation data (:func:`toyspt.probe.tracking.proximity_index`: attention
  mass on the neighbours 1 <= |i - j| <= 2 relative to uniform; 1 = flat, > 1 proximity,
  < 1 anti-local), the self index (T mean_i A_ii) and the positional profile contrast
  Pi(+-1) - mean_{delta != 0} Pi(delta)
  of :func:`toyspt.probe.tracking.positional_profile` (row-centred scores on the mean input);
* peak-validation test accuracy, and SPT's gain over scratch paired by seed with Q/K-only
  transfer's share of it (:func:`toyspt.analysis.gains.gain_and_share`);
* over the basin figure's SPT-only runs (:mod:`toyspt.analysis.basin_grid`: a grid of offsets and
  frequency ranges, every seed), how often three predictors name the basin SPT lands in
  (proximity index after SPT > 1): the sign of the data statistic beta_unif, the sign of
  the model's recon gain after SPT epoch 1, and T3's sign rule at the random init.

Rows that state a claim about the full configuration's runs are *checked* against a stated
threshold there (T5.1: the displacement ratio; T5.2: SPT's proximity index after SPT above 1
and above scratch's final one in every seed; T5.3: the lower end of the paired 95% interval
of SPT's gain in test accuracy over scratch; T5.4-T5.6: the share of runs whose basin a
predictor names, :func:`share_verdict`; each also reports the share against always answering
the majority basin, :func:`share_base_rate`), so a claim the runs contradict fails the report.
``--quick`` uses a small configuration (one seed, short runs: too short to show the effect)
unless every run of the full configuration is already in the cache; its rows are reported
as ``measured`` and say that they were not checked.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from toyspt.analysis import basin_grid as basin_runs
from toyspt.analysis.gains import gain_and_share
from toyspt.analysis.stats import hits_vs_base_rate
from toyspt.data.tasks import TaskConfig
from toyspt.nn.model import ModelConfig, build_model
from toyspt.probe import engine as probes
from toyspt.probe import losses, tracking
from toyspt.runs import RunCache, RunSpec, get_run, load_answer
from toyspt.train.recipes import TrainConfig
from toyspt.train.run import load_model

from . import toy
from .result import Result, checked_result, measured_result
from .t3_recon import neighbour_direction


@dataclass(frozen=True)
class T5Config:
    task: TaskConfig  # the labelled task
    model: ModelConfig  # the architecture (default: the toy model of paper.md)
    train: TrainConfig  # epochs, SPT settings
    seeds: tuple[int, ...]  # one run per recipe and seed
    recipes: tuple[str, ...]  # which recipes to run (scratch and spt at least)


QUICK = T5Config(TaskConfig(n_train=512, n_val=256, n_test=512), ModelConfig(),
                 TrainConfig(epochs=10, pre_epochs=10), (0,), ("scratch", "spt"))
FULL = T5Config(TaskConfig(), ModelConfig(), TrainConfig(), (0, 1, 2, 3, 4),
                ("scratch", "spt", "qk_transfer", "frozen_attention"))


def specs(cfg: T5Config) -> list[RunSpec]:
    return [RunSpec(r, s, data=cfg.task, model=cfg.model, train=cfg.train, evaluate="peak")
            for r in cfg.recipes for s in cfg.seeds]


@functools.lru_cache(maxsize=4)
def _runs(quick: bool, cache: str | None) -> tuple[T5Config, dict[tuple[str, int], object]]:
    """The configuration used and its runs, through the cache when one is given. With
    ``quick``, the full configuration is still used when all its runs are cached."""
    store = RunCache(Path(cache)) if cache is not None else None
    cfg = FULL
    if quick and (store is None or not all(load_answer(store, sp) is not None for sp in specs(FULL))):
        cfg = QUICK
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small models: one thread is fastest and shares the machine
    try:
        runs = {(sp.recipe, sp.seed): (get_run(sp, store) if store is not None else sp.execute())
                for sp in specs(cfg)}
    finally:
        torch.set_num_threads(threads)
    return cfg, runs


def _tag(cfg: T5Config) -> str:
    return "[quick config] " if cfg is QUICK else "[full config] "


def _qk_disp(state, ref) -> float:
    return float(np.mean([tracking.relative_displacement(state, ref, w) for w in ("W_Q", "W_K")]))


def _proximity(result, which: str, x: torch.Tensor) -> tuple[float, float, float]:
    """(proximity index on x, self index on x, positional profile contrast) of a stored
    model (layer 0, head 0)."""
    model = load_model(result, which)
    A = next(iter(tracking.attention_maps(model, x).values()))
    prof = next(iter(tracking.positional_profile(model, x.shape[1]).values()))[0]
    T = x.shape[1]
    off = np.array(tracking.offsets(T))
    p = prof.double().numpy()
    contrast = p[np.abs(off) == 1].mean() - p[off != 0].mean()
    return tracking.proximity_of(result, which, x), tracking.self_index(A)[0].item(), float(contrast)


# T5.1: under AdamW scratch moves W_Q, W_K at least this fraction of what SPT moves them
DISPLACEMENT_RATIO = 0.8
# T5.4-T5.6: shares of the basin grid's clear runs a predictor must reach (ge) or stay under (le)
BASIN_UNIF_SHARE = 0.95  # sign(beta_unif)
BASIN_EARLY_SHARE = 0.95  # sign(model beta after SPT epoch 1)
BASIN_INIT_MAX_SHARE = 0.75  # T3's sign rule at init on the toy: not a predictor there
# T5.3: the lower end of the paired 95% t interval of SPT's gain in test accuracy over scratch
# (full configuration's seeds) must be at least this: the interval lies above 0 (p_t <= 0.05)
GAIN_LOW_MIN = 0.0


def _checked_or_measured(cfg: T5Config, cid: str, claim: str, what: str, figure: float, kind: str,
                         tol: float, sense: str, why: str, **details) -> Result:
    """A checked row on the full configuration's runs; on the quick configuration (too short
    to show the effect) the same numbers as a measured row that says it was not checked."""
    if cfg is QUICK:
        return measured_result(cid, claim, what + f" (not checked on the quick config; threshold "
                               f"{'>=' if sense == 'ge' else '<='} {tol:g} on the full one)", figure, kind, **details)
    return checked_result(cid, claim, what, "n.a.", figure, kind, tol, sense, why, **details)


def _val(cfg: T5Config) -> torch.Tensor:
    return cfg.task.probe_inputs()


def measure_displacement(quick: bool = False, cache: str | None = None) -> Result:
    """T5.1: relative Frobenius displacement of W_Q, W_K, scratch vs SPT."""
    cfg, runs = _runs(quick, cache)
    rows = {}
    for (rec, sd), res in runs.items():
        st = res.states
        rows[f"{rec}/s{sd}"] = dict(final=_qk_disp(st["final"], st["init"]),
                                    pretrained=_qk_disp(st["pretrained"], st["init"])
                                    if "pretrained" in st else None)
    scratch = np.mean([v["final"] for k, v in rows.items() if k.startswith("scratch/")])
    spt_pre = np.mean([v["pretrained"] for k, v in rows.items() if k.startswith("spt/")])
    spt_fin = np.mean([v["final"] for k, v in rows.items() if k.startswith("spt/")])
    opt = cfg.train.optimizer
    return _checked_or_measured(
        cfg, "T5.1", f"under {opt}, label-only training moves W_Q, W_K at least {DISPLACEMENT_RATIO:g}x as far as "
        "SPT then fine-tuning (rel. Frobenius from init): displacement does not separate the recipes, "
        "its direction does (T5.2)",
        _tag(cfg) + f"mean over {len(cfg.seeds)} seed(s) of (||dW_Q||/||W_Q|| + ||dW_K||/||W_K||)/2 from init: "
        f"scratch {scratch:.3f}; spt after SPT {spt_pre:.3f}, after fine-tuning {spt_fin:.3f}; ratio scratch / spt "
        f"final {scratch / spt_fin:.3f} ({opt}, lr {cfg.train.lr:g}, {cfg.train.pre_epochs}+{cfg.train.epochs} epochs, "
        f"n_train={cfg.task.n_train})", float(scratch / spt_fin), "scratch / spt rel. displacement",
        DISPLACEMENT_RATIO, "ge", "a claim about runs: 'about as far' stated as at least "
        f"{DISPLACEMENT_RATIO:g} of SPT's displacement", runs=rows, scratch=float(scratch),
        spt_pretrained=float(spt_pre), spt_final=float(spt_fin))


def measure_proximity(quick: bool = False, cache: str | None = None) -> Result:
    """T5.2: proximity index and positional profile contrast, scratch vs SPT."""
    cfg, runs = _runs(quick, cache)
    x = _val(cfg)
    rows = {}
    for (rec, sd), res in runs.items():
        rows[f"{rec}/s{sd}"] = {w: dict(zip(("proximity_index", "self_index", "profile_contrast"),
                                            _proximity(res, w, x)))
                                for w in ("init", "pretrained", "final") if w in res.states
                                and (w != "init" or rec == "scratch")}  # one init per seed
    mean = lambda rec, w, k: float(np.mean([v[w][k] for n, v in rows.items()  # noqa: E731
                                            if n.startswith(rec + "/")]))
    # per seed: how far SPT's index after SPT lies above 1 (the basin rule, toyspt.analysis.basin:
    # pi > 1 is proximity) and above scratch's final index; the claim needs both in every seed
    margins = {sd: min(rows[f"spt/s{sd}"]["pretrained"]["proximity_index"] - 1.0,
                       rows[f"spt/s{sd}"]["pretrained"]["proximity_index"]
                       - rows[f"scratch/s{sd}"]["final"]["proximity_index"]) for sd in cfg.seeds}
    return _checked_or_measured(
        cfg, "T5.2", "SPT peaks the positional profile at small |i - j| and scratch does not: in every seed the "
        "proximity index after SPT is above 1 (the basin rule) and above scratch's final index",
        _tag(cfg) + f"proximity index (1 = uniform) on {len(x)} validation sequences, mean over seeds: "
        f"scratch final {mean('scratch', 'final', 'proximity_index'):.2f}; spt after SPT "
        f"{mean('spt', 'pretrained', 'proximity_index'):.2f}, final "
        f"{mean('spt', 'final', 'proximity_index'):.2f}; self index (1 = uniform): scratch "
        f"{mean('scratch', 'final', 'self_index'):.2f}, spt after SPT "
        f"{mean('spt', 'pretrained', 'self_index'):.2f}; profile contrast Pi(+-1) - mean Pi: "
        f"scratch {mean('scratch', 'final', 'profile_contrast'):+.3f}, spt "
        f"{mean('spt', 'final', 'profile_contrast'):+.3f}; smallest margin over seeds {min(margins.values()):+.2f}",
        min(margins.values()), "min over seeds of (spt index after SPT - max(1, scratch final index))", 0.0, "ge",
        "a claim about runs: the basin rule's pi > 1 for SPT, and SPT above scratch, in every seed of the full "
        "configuration (a margin of 0 or less in any seed fails)", runs=rows, margins=margins)


def per_seed_accuracy(cfg: T5Config, runs: dict) -> dict[str, list[float]]:
    """{recipe: test accuracy at peak validation per seed}, every recipe in the seed order of
    ``cfg.seeds`` (so that position k is the same seed in every recipe: the pairing of
    :func:`toyspt.analysis.gains.gain_and_share`); a run missing for a recipe and seed raises."""
    return {rec: [float(runs[rec, sd].summary["test_at_peak"]) for sd in cfg.seeds] for rec in cfg.recipes}


def measure_accuracy(quick: bool = False, cache: str | None = None) -> Result:
    """T5.3: SPT's gain in test accuracy at peak validation over scratch, paired by seed, and
    Q/K-only transfer's share of it."""
    cfg, runs = _runs(quick, cache)
    acc = per_seed_accuracy(cfg, runs)
    arm = "qk_transfer" if "qk_transfer" in acc else None
    g = gain_and_share(acc, arm or "spt")
    if arm is None:  # no Q/K-only arm: the share gain_and_share computed is spt's own
        g = {k: v for k, v in g.items() if not k.startswith("share")}
    means = "; ".join(f"{rec} {np.mean(v):.3f}" + (f" (+-{np.std(v, ddof=1):.3f})" if len(v) > 1 else "")
                      for rec, v in acc.items())
    text = (_tag(cfg) + f"test accuracy at peak validation, mean (sd) over seed(s) "
            f"{', '.join(map(str, cfg.seeds))}: {means}; spt - scratch paired by seed {g['gain']:+.3f}")
    if "gain_low" in g:
        text += (f" (95% t interval {g['gain_low']:+.3f}..{g['gain_high']:+.3f}; signed-rank p {g['gain_p']:.2g}, "
                 f"Hodges-Lehmann {g['gain_hl']:+.3f})")
        if arm is not None:
            text += (f"; {arm}'s share of the gain {g['share']:.2f} (Fieller 95% {g['share_low']:.2f}.."
                     f"{g['share_high']:.2f}, {g['share_interval']})")
    else:
        text += f" (no interval with {len(cfg.seeds)} seed(s))"
    statement = ("SPT then fine-tuning beats scratch in test accuracy: the paired 95% interval of the gain lies "
                 "above 0 (Q/K-only transfer's share of the gain: reported with its Fieller interval, not checked)")
    details = dict(per_recipe=acc, seeds=list(cfg.seeds),
                   per_seed_spt_minus_scratch=[a - b for a, b in zip(acc["spt"], acc["scratch"])], **g)
    if cfg is QUICK:
        return measured_result(
            "T5.3", statement, text + f" (not checked on the quick config; threshold >= {GAIN_LOW_MIN:g} on the full "
            "one, for the lower end of the paired 95% interval)", g["gain"],
            "spt - scratch test acc.", **details)
    return checked_result(
        "T5.3", statement, text, "n.a.", g.get("gain_low", float("nan")),
        "lower end of the paired 95% t interval of spt - scratch test acc.", GAIN_LOW_MIN, "ge",
        "a claim about runs: the paired t interval of the gain over the full configuration's seeds "
        f"(toyspt.analysis.gains.gain_and_share) must lie at or above {GAIN_LOW_MIN:g} (p_t <= 0.05); no interval "
        "(fewer than 2 seeds, or every seed's gain equal: undefined) fails. The signed-rank p is reported, not "
        f"held to 0.05: with {len(cfg.seeds)} seeds its smallest two-sided p is {2.0 ** (1 - len(cfg.seeds)):.3g} "
        "(it cannot reach 0.05 below 6 seeds)", **details)


@functools.lru_cache(maxsize=4)
def _phase(quick: bool, cache: str | None):
    """(config, phase-diagram table) of the basin figure's SPT-only runs
    (:mod:`toyspt.analysis.basin_grid`), through the cache; with ``quick``, the full grid when all of
    its runs are cached, else the quick configuration's."""
    store = RunCache(Path(cache)) if cache is not None else None
    cfg = FULL
    base = RunSpec("scratch", data=cfg.task, model=cfg.model, train=cfg.train, evaluate="peak")
    pairs = basin_runs.phase_specs(base, cfg.seeds)
    if quick and (store is None or not all(load_answer(store, sp) is not None for _, sp in pairs)):
        cfg = QUICK
        pairs = basin_runs.phase_specs(replace(base, data=cfg.task, model=cfg.model, train=cfg.train), cfg.seeds)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        results = [get_run(sp, store) if store is not None else sp.execute() for _, sp in pairs]
        table = basin_runs.phase_table(pairs, results)
        table["drec_N_init"] = [_init_sign(cfg, sp) for _, sp in pairs]
    finally:
        torch.set_num_threads(threads)
    return cfg, table


def _init_sign(cfg: T5Config, spec: RunSpec) -> float:
    """T3's first-order quantity at init: dL_rec[N] (the SPT loss along the neighbour
    direction) of the seed's initial model on 64 training sequences of the spec's task."""
    data = spec.data.load()
    batch = losses.make_batch(data.train.x[:64].double(), data.train.y[:64], spec.train.mask_rate, 0)
    model = build_model(spec.model, spec.seed).double().eval()
    N = {"neighbours": neighbour_direction(spec.data.T)}
    return probes.probe(model, batch, losses.recon(spec.train.recon), N, per_example=False,
                        use_jvp=False)[toy.HOOK_S].deriv[0, 0].item()


def _scored(table, predict):
    """(predicts proximity, is proximity) over the clear runs of a phase table (|beta_unif| >
    CLEAR_MARGIN) whose predictor has a value."""
    clear = table[table.beta_unif.abs() > basin_runs.CLEAR_MARGIN]
    pred = predict(clear)
    keep = pred.notna()
    return (pred[keep] > 0).to_numpy(bool), (clear.basin[keep] == "proximity").to_numpy(bool)


def share_verdict(table, predict, threshold: float, sense: str) -> tuple[int, int, str]:
    """(hits, n, verdict) of a basin predictor over the clear runs of a phase table (|beta_unif|
    > CLEAR_MARGIN; runs where the predictor is NaN do not count): a run is a hit when
    ``predict(table) > 0`` agrees with the basin (proximity index after SPT > 1); pass iff
    hits / n >= threshold (``sense="ge"``) or <= it (``"le"``). No clear run: fail (nothing
    supports the claim)."""
    said, truth = _scored(table, predict)
    hits, n = int((said == truth).sum()), len(truth)
    if n == 0:
        return hits, n, "fail"
    share = hits / n
    return hits, n, "pass" if (share >= threshold if sense == "ge" else share <= threshold) else "fail"


def share_base_rate(table, predict) -> dict:
    """The same runs as :func:`share_verdict`, tested against always answering their majority
    basin on the same runs (:func:`toyspt.analysis.stats.hits_vs_base_rate`: exact one-sided McNemar p); NaN
    figures when fewer than 2 runs count."""
    said, truth = _scored(table, predict)
    if len(truth) < 2:
        return dict(hits=int((said == truth).sum()), n=len(truth), majority_hits=len(truth), base_rate=float("nan"),
                    p=float("nan"), majority="none")
    out = hits_vs_base_rate(said, truth)
    return dict(out, majority="proximity" if out["majority"] else "anti-local")


def _share_result(cid: str, claim: str, what: str, quick: bool, cache: str | None, predict,
                  threshold: float, sense: str) -> Result:
    cfg, table = _phase(quick, cache)
    hits, n, _ = share_verdict(table, predict, threshold, sense)
    base = share_base_rate(table, predict)
    cells = table.groupby(["sweep", "offset", "freq_lo", "freq_hi"]).ngroups
    all_hits = int(((predict(table) > 0) == (table.basin == "proximity")).sum())
    return _checked_or_measured(
        cfg, cid, claim, _tag(cfg) + f"{what}: basin predicted in {hits}/{n} SPT-only runs with |beta_unif| > "
        f"{basin_runs.CLEAR_MARGIN} ({cells} task settings x {len(cfg.seeds)} seed(s), the basin figure's runs; "
        f"all runs: {all_hits}/{len(table)}); always answering the majority basin ({base['majority']}) names "
        f"{base['majority_hits']}/{n}, exact McNemar p (one-sided) = {base['p']:.2g} against it on the same runs",
        hits / n if n else float("nan"), "share of runs", threshold, sense,
        "a claim about runs: the share of the basin grid's clear runs it must reach" if sense == "ge"
        else "a claim about runs: the share it must stay under", rows=table.to_dict("records"), hits=hits, n=n,
        base_rate=base["base_rate"], majority=base["majority"], p_base_rate=base["p"])


def measure_basin(quick: bool = False, cache: str | None = None) -> Result:
    """T5.4: the data statistic beta_unif > 0 <=> the proximity basin after SPT."""
    return _share_result("T5.4", f"the sign of beta_unif (a statistic of the data under the mask law) names the "
                         f"SPT basin in >= {BASIN_UNIF_SHARE:.0%} of the toy grid's clear runs",
                         "sign(beta_unif) > 0 <=> proximity index > 1 after SPT", quick, cache,
                         lambda t: t.beta_unif, BASIN_UNIF_SHARE, "ge")


def measure_basin_early(quick: bool = False, cache: str | None = None) -> Result:
    """T5.5: the sign of the model's recon gain after the first SPT epoch predicts the basin."""
    return _share_result("T5.5", f"the sign of the model's recon gain beta after SPT epoch 1 names the basin in "
                         f">= {BASIN_EARLY_SHARE:.0%} of the toy grid's clear runs",
                         "model beta after epoch 1 > 0 <=> proximity", quick, cache, lambda t: t.beta_epoch1,
                         BASIN_EARLY_SHARE, "ge")


def measure_basin_init(quick: bool = False, cache: str | None = None) -> Result:
    """T5.6: T3's sign rule at the random init is no basin predictor on the toy (the gain at
    init comes from random weights and flips within the first epoch where beta_unif is clear)."""
    return _share_result("T5.6", f"T3's sign rule at random init (dL_rec[N] < 0) names the toy basin in at most "
                         f"{BASIN_INIT_MAX_SHARE:.0%} of the clear runs (the data, not the init, decides there)",
                         "dL_rec[N] < 0 at init <=> proximity", quick, cache, lambda t: -t.drec_N_init,
                         BASIN_INIT_MAX_SHARE, "le")


CHECKS = [measure_displacement, measure_proximity, measure_accuracy, measure_basin, measure_basin_early,
          measure_basin_init]

__all__ = ["T5Config", "QUICK", "FULL", "specs", "per_seed_accuracy", "share_verdict", "share_base_rate",
           "DISPLACEMENT_RATIO", "GAIN_LOW_MIN", "BASIN_UNIF_SHARE", "BASIN_EARLY_SHARE", "BASIN_INIT_MAX_SHARE",
           "measure_displacement", "measure_proximity", "measure_accuracy", "measure_basin", "measure_basin_early",
           "measure_basin_init", "CHECKS"]
