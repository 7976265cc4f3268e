"""toyspt.gains.gains on planted tables: families, one test for direction and significance,
the metric and alpha each function is given, the weight-group contrasts, the across-set unit
test, the toy headline's gain and share (the same functions), pairing by seed."""
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from toyspt.analysis import gains, rank_tests
from toyspt.analysis.multiplicity import holm
from toyspt.analysis.paired import tost
from toyspt.ucr import design
from toyspt.ucr.archive import unit_of

METRICS, PRIMARY = design.STUDY_METRICS, design.PRIMARY

SETS = ("GunPoint", "GunPointAgeSpan", "ECG200", "ECGFiveDays")


def _table(gains: dict, sets=SETS, n=10, metric_gain=None) -> pd.DataFrame:
    """scratch at 0.7 + seed-level noise; each arm scratch + its gain vector (per seed) on every
    set; ``metric_gain``: {metric: added gain} so that metrics differ."""
    rng = np.random.default_rng(0)
    rows = []
    for ds in sets:
        base = 0.7 + rng.normal(0, 0.05, n)
        rows += [dict(dataset=ds, arm="scratch", seed=k, **{m: base[k] for m in METRICS}) for k in range(n)]
        for arm, g in gains.items():
            g = np.broadcast_to(np.asarray(g, float), (n,))
            rows += [dict(dataset=ds, arm=arm, seed=k, **{m: base[k] + g[k] + (metric_gain or {}).get(m, 0.0)
                                                           for m in METRICS}) for k in range(n)]
    return pd.DataFrame(rows)


def test_verdicts_read_direction_from_the_signed_rank_test():
    """19 seeds win by +0.01, one loses by -0.5 on every set: the mean is negative, the
    signed-rank test (and its Hodges-Lehmann estimate) positive and significant: "helps"."""
    f = _table({"spt": [0.01] * 19 + [-0.5]}, n=20)
    g = gains.gain_table(f, ["spt"], METRICS, PRIMARY)
    row = g[(g.metric == PRIMARY)].iloc[0]
    assert row.mean_diff < 0 and row.direction == 1 and row.hl == pytest.approx(0.01)
    assert row.p_wilcoxon == pytest.approx(2 * 192 / 2 ** 20, rel=1e-9)
    v = gains.verdicts(g, PRIMARY).set_index("arm").loc["spt"]
    assert (v.helps, v.hurts, v.sets) == (4, 0, 4)


def test_the_confirmatory_family_is_spt_on_the_primary_metric_over_the_sets():
    f = _table({"spt": np.linspace(0.0, 0.04, 10), "qk_transfer": np.linspace(-0.01, 0.03, 10)})
    g = gains.gain_table(f, ["spt", "qk_transfer"], METRICS, PRIMARY)
    assert "p_holm_all" not in g and {"family", "holm_m", "p_holm"} <= set(g.columns)
    conf = g[g.family == "confirmatory"]
    assert sorted(conf.dataset) == sorted(SETS) and set(conf.arm) == {"spt"} and set(conf.metric) == {PRIMARY}
    assert conf.p_holm.tolist() == pytest.approx(holm(conf.p_wilcoxon.to_numpy()).tolist())
    assert (conf.holm_m == 4).all()
    for (arm, m), d in g[g.family == "descriptive"].groupby(["arm", "metric"]):
        assert (d.holm_m == 4).all()
        assert d.p_holm.tolist() == pytest.approx(holm(d.p_wilcoxon.to_numpy()).tolist())
    assert len(g) == len(conf) + len(g[g.family == "descriptive"]) == 4 * 2 * len(METRICS)


def test_mde_is_the_signed_rank_tests_at_the_holm_level():
    f = _table({"spt": np.linspace(0.0, 0.04, 10)})
    g = gains.gain_table(f, ["spt"], METRICS, PRIMARY)
    r = g[(g.metric == PRIMARY)].iloc[0]
    assert r.mde80 == pytest.approx(rank_tests.mde_signed_rank(r.sd_diff, 10, 0.05 / 4))
    five = gains.gain_table(_table({"spt": np.linspace(0.0, 0.04, 5)}, n=5), ["spt"], METRICS, PRIMARY)
    assert (five.mde80 == math.inf).all()  # 5 seeds: p >= 0.0625 whatever the effect


def test_verdicts_use_the_metric_and_alpha_they_are_given():
    """The primary metric gains +0.02 +- noise, final_test_acc loses 0.04: each metric's verdict
    is its own; an alpha below every Holm p gives no verdict at all."""
    planted = np.linspace(0.0, 0.04, 10)
    f = _table({"spt": planted}, metric_gain={"final_test_acc": -0.06})
    g = gains.gain_table(f, ["spt"], METRICS, PRIMARY)
    prim = gains.verdicts(g, PRIMARY).set_index("arm").loc["spt"]
    fin = gains.verdicts(g, "final_test_acc").set_index("arm").loc["spt"]
    assert (prim.helps, prim.hurts) == (4, 0) and (fin.helps, fin.hurts) == (0, 4)
    p = g[g.metric == PRIMARY].p_holm.max()
    assert 0.001 < p <= 0.05  # 9 of 10 positive with one zero, Holm x 4
    tight = gains.verdicts(g, PRIMARY, alpha=p / 2).set_index("arm").loc["spt"]
    assert (tight.helps, tight.hurts) == (0, 0)


def test_weight_group_contrasts_and_equivalence():
    """qk_transfer = spt +- 0.002 (it carries the whole gain): spt - qk equivalent to 0 within the
    0.01 margin (TOST), qk - scratch not; mlp_transfer = scratch + 0.001 +- 0.002 (carries
    none): arm - scratch equivalent to 0, spt - mlp not; scratch_matched = spt - 0.03 on every
    seed: SPT's gain over the budget control is +0.03, ten of ten seeds (p = 2 / 2^10)."""
    spt = np.linspace(0.02, 0.06, 10)
    jitter = np.array([-2, -1, 0, 1, 2, -2, -1, 0, 1, 2]) * 0.001
    f = _table({"spt": spt, "qk_transfer": spt + jitter, "mlp_transfer": 0.001 + jitter,
                "scratch_matched": spt - 0.03})
    g = gains.gain_table(f, ["spt", "qk_transfer", "mlp_transfer", "scratch_matched"], METRICS, PRIMARY).set_index(
        ["dataset", "arm", "metric"])
    qk, mlp = (g.loc[("ECG200", a, PRIMARY)] for a in ("qk_transfer", "mlp_transfer"))
    assert gains.EQUIVALENCE_MARGIN == 0.01
    assert qk.spt_minus_arm == pytest.approx(-jitter.mean(), abs=1e-12)
    assert qk.spt_minus_arm_tost_p == pytest.approx(tost(-jitter, 0.01).p) and qk.spt_minus_arm_tost_p < 0.05
    assert qk.tost_p > 0.5  # Q/K is not equivalent to scratch
    assert mlp.tost_p == pytest.approx(tost(0.001 + jitter, 0.01).p) and mlp.tost_p < 0.05
    assert mlp.spt_minus_arm_tost_p > 0.5
    budget = g.loc[("ECG200", "scratch_matched", PRIMARY)]
    assert budget.spt_minus_arm == pytest.approx(0.03) and budget.spt_minus_arm_p == pytest.approx(2 / 2 ** 10)
    assert math.isnan(g.loc[("ECG200", "spt", PRIMARY)].spt_minus_arm)
    # summed over arms and sets, Holm within each arm over the four sets: qk carries all of the gain on
    # every set, mlp none of it; scratch_matched neither; spt itself has no contrasts, and spt - scratch_matched
    # (0.03 on every seed: no spread) has an undefined TOST, not counted
    eq = gains.equivalences(g.reset_index(), PRIMARY)
    assert eq["margin"] == 0.01 and eq["arm_minus_scratch"]["rows"] == 12 and eq["spt_minus_arm"]["rows"] == 8
    assert eq["arm_minus_scratch"]["equivalent"] == 4 and eq["spt_minus_arm"]["equivalent"] == 4
    assert eq["arm_minus_scratch"]["min_at"].endswith("mlp_transfer")
    assert eq["spt_minus_arm"]["min_at"].endswith("qk_transfer")
    assert eq["spt_minus_arm"]["min_p"] == pytest.approx(qk.spt_minus_arm_tost_p)  # identical on every set
    held = gains.equivalences(g.reset_index(), PRIMARY, alpha=qk.spt_minus_arm_tost_p * 3.9)
    assert held["spt_minus_arm"]["equivalent"] == 0  # Holm: 4 x p > the level on each of the four sets


def _archive_frame(gains: dict, n=8) -> pd.DataFrame:
    f = _table({}, sets=tuple(gains), n=n)
    rows = []
    for ds, gain in gains.items():
        s = f[(f.dataset == ds) & (f.arm == "scratch")]
        for arm, k in (("spt", 1.0), ("qk_transfer", 0.5)):
            rows.append(s.assign(arm=arm, **{m: s[m] + k * (gain + 0.002 * np.arange(n) - 0.007 + (
                0.05 if m == "final_test_acc" else 0.0)) for m in METRICS}))
    return pd.concat([f, *rows], ignore_index=True)


def test_archive_table_uses_the_metric_it_is_given_and_names_units():
    planted = {"GunPointMaleVersusFemale": 0.02, "Coffee": -0.03, "DistalPhalanxTW": 0.01}
    f = _archive_frame(planted)
    sizes = {k: (10, 20, 2) for k in planted}
    prim = gains.archive_table(f, sizes, PRIMARY, unit_of).set_index("dataset")
    fin = gains.archive_table(f, sizes, "final_test_acc", unit_of).set_index("dataset")
    for ds, gain in planted.items():
        assert prim.loc[ds].gain == pytest.approx(gain) and fin.loc[ds].gain == pytest.approx(gain + 0.05)
    assert prim.unit.to_dict() == {"GunPointMaleVersusFemale": "GunPoint family", "Coffee": "Coffee",
                                   "DistalPhalanxTW": "DistalPhalanx TW/AgeGroup"}
    assert {"dataset", "n_seeds", "gain", "ci_low", "ci_high", "p_holm", "qk_share", "unit"} <= set(prim.reset_index())
    assert prim.p_holm.tolist() == pytest.approx(holm(prim.p_wilcoxon.to_numpy()).tolist())
    c = gains.archive_counts(prim.reset_index(), alpha=0.05)
    assert (c["helps"], c["hurts"]) == (2, 1)  # 8 seeds all one sign: p 2/256, Holm x 3 < 0.05
    assert gains.archive_counts(prim.reset_index(), alpha=0.01)["helps"] == 0


def test_across_sets_merges_related_sets_into_units():
    """Four GunPoint sets and two DistalPhalanx sets are two units (mean of their gains); with
    the four other sets: 6 units, gains +0.04 (GunPoint family), +0.015, +0.03, +0.02, -0.01,
    +0.05: five of six positive, exact signed-rank p = 2 x 2 / 64 (T+ = 20 of 21)."""
    t = pd.DataFrame(dict(dataset=["GunPoint", "GunPointAgeSpan", "GunPointMaleVersusFemale", "GunPointOldVersusYoung",
                                   "DistalPhalanxOutlineAgeGroup", "DistalPhalanxTW", "ECG200", "ECGFiveDays", "Coffee",
                                   "BME"],
                          gain=[0.01, 0.03, 0.05, 0.07, 0.01, 0.02, 0.03, 0.02, -0.01, 0.05]))
    r = gains.across_sets(t, unit_of)
    assert (r["n_sets"], r["n_units"], r["wins"], r["losses"]) == (10, 6, 5, 1)
    units = {u["unit"]: u["gain"] for u in r["units"]}
    assert units["GunPoint family"] == pytest.approx(0.04)
    assert units["DistalPhalanx TW/AgeGroup"] == pytest.approx(0.015)
    assert r["p"] == pytest.approx(4 / 64) and r["direction"] == 1
    assert r["p"] == pytest.approx(sps.wilcoxon(list(units.values()), method="exact").pvalue)


def _runs(gains: dict, n=10, sets=("A", "B"), sd=0.01, seed=0) -> pd.DataFrame:
    """A run table: scratch at 0.6 + noise, every arm scratch + gain + noise (seed by seed)."""
    rng = np.random.default_rng(seed)
    rows = []
    for ds in sets:
        base = 0.6 + rng.normal(0, 0.05, n)
        rows += [dict(dataset=ds, arm="scratch", seed=k, **{m: base[k] for m in METRICS}) for k in range(n)]
        for arm, gain in gains.items():
            v = base + gain + rng.normal(0, sd, n)
            rows += [dict(dataset=ds, arm=arm, seed=k, **{m: v[k] for m in METRICS}) for k in range(n)]
    return pd.DataFrame(rows)


def test_gain_table_pairs_by_seed_and_corrects_per_family():
    f = _runs({"spt": 0.10, "qk_transfer": 0.05, "mlp_transfer": 0.0})
    g = gains.gain_table(f, ["spt", "qk_transfer", "mlp_transfer"], METRICS, PRIMARY)
    assert list(g.columns) == gains.GAIN_COLUMNS
    assert len(g) == 2 * 3 * len(METRICS)
    row = g[(g.dataset == "A") & (g.arm == "spt") & (g.metric == PRIMARY)].iloc[0]
    d = f[(f.dataset == "A") & (f.arm == "spt")][PRIMARY].to_numpy() - \
        f[(f.dataset == "A") & (f.arm == "scratch")][PRIMARY].to_numpy()
    assert row.mean_diff == pytest.approx(d.mean()) and row.ci_low < d.mean() < row.ci_high
    assert row.p_holm <= gains.ALPHA and row.share != row.share  # spt is not a share of itself
    qk = g[(g.arm == "qk_transfer") & (g.metric == PRIMARY)]
    assert (qk.share.between(0.3, 0.7)).all() and (qk.share_low < 0.5).all() and (qk.share_high > 0.5).all()
    mlp = g[(g.arm == "mlp_transfer")]
    assert (mlp.p_holm > gains.ALPHA).all()  # no effect planted: none survives Holm
    # Holm within a family is never below the raw p; only spt x the primary metric is confirmatory
    assert (g.p_holm >= g.p_wilcoxon - 1e-15).all() and "p_holm_all" not in g
    conf = g[g.family == "confirmatory"]
    assert set(conf.arm) == {"spt"} and set(conf.metric) == {PRIMARY} and (conf.holm_m == 2).all()
    v = gains.verdicts(g, PRIMARY).set_index("arm")
    assert v.loc["spt"].helps == 2 and v.loc["mlp_transfer"].helps == 0 and v.loc["spt"].hurts == 0


def test_archive_table_counts_helps_hurts_and_qk_halves():
    f = pd.concat([_runs({"spt": 0.10, "qk_transfer": 0.09}, sets=("Up",)),
                   _runs({"spt": -0.10, "qk_transfer": -0.01}, sets=("Down",), seed=1),
                   _runs({"spt": 0.0, "qk_transfer": 0.0}, sets=("Flat",), seed=2)])
    t = gains.archive_table(f, {"Up": (50, 100, 2), "Down": (40, 80, 3), "Flat": (30, 60, 2)}, PRIMARY)
    assert list(t.columns) == gains.ARCHIVE_COLUMNS and list(t.dataset) == ["Up", "Down", "Flat"]
    c = gains.archive_counts(t)
    assert (c["sets"], c["helps"], c["hurts"], c["unclear"]) == (3, 1, 1, 1)
    assert t.set_index("dataset").loc["Up"].qk_share == pytest.approx(0.9, abs=0.1)
    assert c["qk_keeps_half_where_spt_helps"] == 1


def test_the_toy_headline_gain_and_share_are_the_gain_tables():
    """gain_and_share on one set's per-seed values gives the numbers gain_table gives for it:
    SPT's paired gain with its t interval and signed-rank p, qk_transfer's Fieller share."""
    f = _runs({"spt": 0.10, "qk_transfer": 0.05}, sets=("A",))
    per_seed = {a: f[f.arm == a].sort_values("seed")[PRIMARY].tolist() for a in ("scratch", "spt", "qk_transfer")}
    h = gains.gain_and_share(per_seed, "qk_transfer")
    g = gains.gain_table(f, ["spt", "qk_transfer"], [PRIMARY], PRIMARY).set_index("arm")
    spt, qk = g.loc["spt"], g.loc["qk_transfer"]
    assert (h["gain"], h["gain_low"], h["gain_high"]) == (spt.mean_diff, spt.ci_low, spt.ci_high)
    assert (h["gain_p"], h["gain_hl"]) == (spt.p_wilcoxon, spt.hl)
    assert (h["share"], h["share_low"], h["share_high"]) == (qk.share, qk.share_low, qk.share_high)
    one = gains.gain_and_share({a: v[:1] for a, v in per_seed.items()}, "qk_transfer")
    assert set(one) == {"gain", "share"}  # one seed: the means, no interval


def _verdict_rows(p_holm, direction=1):
    return pd.DataFrame(dict(dataset=["A"], arm=["spt"], metric=[PRIMARY], p_holm=[p_holm], direction=[direction]))


def test_verdicts_honour_alpha_between_half_and_whole():
    """A Holm p of 0.04 lies between alpha / 2 and alpha = 0.05: significant at 0.05 (a
    two-sided p is compared with alpha itself, not alpha / 2), not at 0.03; the same at the edge."""
    for p, alpha, helps in ((0.04, 0.05, 1), (0.04, 0.03, 0), (0.05, 0.05, 1), (0.026, 0.05, 1)):
        v = gains.verdicts(_verdict_rows(p), PRIMARY, alpha).iloc[0]
        assert (v.helps, v.hurts) == (helps, 0), (p, alpha)
    assert gains.verdicts(_verdict_rows(0.04, -1), PRIMARY).iloc[0].hurts == 1


def test_the_arms_on_the_primary_metric_are_one_holm_family():
    """Three arms x four sets on the primary metric: one family of 12 (Holm over all of them);
    a secondary metric stays per arm (4); spt is the confirmatory family (4)."""
    f = _table({"spt": np.linspace(0.0, 0.04, 10), "qk_transfer": np.linspace(0.03, -0.01, 10),
                "vo_transfer": np.linspace(0.0, 0.05, 10), "mlp_transfer": 0.02 * np.sin(np.arange(10))})
    g = gains.gain_table(f, ["spt", "qk_transfer", "vo_transfer", "mlp_transfer"], METRICS, PRIMARY)
    arms = g[(g.metric == PRIMARY) & (g.arm != "spt")]
    assert len(arms) == 12 and (arms.holm_m == 12).all() and set(arms.family) == {"descriptive"}
    assert arms.p_holm.tolist() == pytest.approx(holm(arms.p_wilcoxon.to_numpy()).tolist())
    sec = g[(g.metric != PRIMARY) & (g.arm == "qk_transfer")]
    assert (sec.holm_m == 4).all() and (g[g.family == "confirmatory"].holm_m == 4).all()
    fam = gains.arm_family(g, PRIMARY)
    assert fam["tests"] == fam["m"] == 12 and fam["min_p_holm"] == pytest.approx(arms.p_holm.min())
    eq = gains.equivalences(g, PRIMARY)["spt_minus_arm"]
    assert eq["rows"] == 12 and eq["min_p_holm"] == pytest.approx(holm(arms.spt_minus_arm_tost_p.to_numpy()).min())


def test_qk_keeps_half_counts_only_positive_gains_and_reads_the_lower_end():
    """Four sets: a positive gain with share 0.8 [0.3, 1.5] (half by the estimate, not by the
    interval's lower end), one with 0.9 [0.6, 1.2] (both), one with 0.2 (neither), and a
    negative gain with share 0.9 [0.7, 1.1] (Q/K-only worse still: not counted)."""
    t = pd.DataFrame(dict(gain=[0.02, 0.03, 0.01, -0.02], qk_share=[0.8, 0.9, 0.2, 0.9],
                          qk_share_low=[0.3, 0.6, -1.0, 0.7], qk_share_high=[1.5, 1.2, 1.0, 1.1],
                          p_holm=[0.5] * 4, direction=[1, 1, 1, -1]))
    c = gains.archive_counts(t)
    assert c["gain_positive"] == 3 and c["qk_keeps_half_where_gain_positive"] == 2
    assert c["qk_keeps_half_lower_bound_where_gain_positive"] == 1


def test_pooled_gain_pools_each_sets_mean_with_its_variance():
    f = _table({"spt": np.linspace(0.0, 0.04, 10)}, sets=("A", "B", "C"))
    f.loc[(f.dataset == "B") & (f.arm == "spt"), PRIMARY] += np.linspace(-0.03, 0.05, 10)
    r = gains.pooled_gain(f, PRIMARY)
    from toyspt.analysis.pooling import random_effects

    d = [gains.diffs(f, s, "spt", PRIMARY) for s in ("A", "B", "C")]
    ref = random_effects([x.mean() for x in d], [x.var(ddof=1) / len(x) for x in d])
    assert r["sets"] == ["A", "B", "C"] and r["estimate"] == pytest.approx(ref.estimate, rel=1e-12)
    assert (r["low"], r["high"], r["i2"]) == pytest.approx((ref.low, ref.high, ref.i2), rel=1e-9)


def test_pooled_gain_names_sets_whose_differences_do_not_vary_and_refuses_when_too_few_vary():
    """A set where spt equals scratch at every seed (differences exactly 0, as tiny quick runs
    can tie) has no sampling variance: left out and named, the others pooled as without it.
    With fewer than 2 varying sets nothing is pooled: refused, naming the constant ones."""
    f = _table({"spt": np.linspace(0.0, 0.04, 10)}, sets=("A", "B", "C"))
    f.loc[(f.dataset == "B") & (f.arm == "spt"), PRIMARY] += np.linspace(-0.03, 0.05, 10)
    tied = f.copy()
    c_spt, c_scratch = (tied.dataset == "C") & (tied.arm == "spt"), (tied.dataset == "C") & (tied.arm == "scratch")
    tied.loc[c_spt, PRIMARY] = tied.loc[c_scratch, PRIMARY].to_numpy()
    r = gains.pooled_gain(tied, PRIMARY)
    assert r["sets"] == ["A", "B"] and r["constant_sets"] == ["C"]
    assert r["estimate"] == gains.pooled_gain(f[f.dataset != "C"], PRIMARY)["estimate"]
    with pytest.raises(ValueError, match=r"constant: \['C'\]"):
        gains.pooled_gain(tied[tied.dataset != "A"], PRIMARY)
