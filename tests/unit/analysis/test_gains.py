"""toyspt.ucr.analysis on planted tables: families, one test for direction and significance,
the metric and alpha each function is given, the weight-group contrasts, the across-set unit
test, and the per-run metrics row."""
import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from toyspt.runs import rank_tests, stats
from toyspt.ucr import analysis, plan

SETS = ("GunPoint", "GunPointAgeSpan", "ECG200", "ECGFiveDays")


def _table(gains: dict, sets=SETS, n=10, metric_gain=None) -> pd.DataFrame:
    """scratch at 0.7 + seed-level noise; each arm scratch + its gain vector (per seed) on every
    set; ``metric_gain``: {metric: added gain} so that metrics differ."""
    rng = np.random.default_rng(0)
    rows = []
    for ds in sets:
        base = 0.7 + rng.normal(0, 0.05, n)
        rows += [dict(dataset=ds, arm="scratch", seed=k, **{m: base[k] for m in plan.METRICS}) for k in range(n)]
        for arm, g in gains.items():
            g = np.broadcast_to(np.asarray(g, float), (n,))
            rows += [dict(dataset=ds, arm=arm, seed=k, **{m: base[k] + g[k] + (metric_gain or {}).get(m, 0.0)
                                                           for m in plan.METRICS}) for k in range(n)]
    return pd.DataFrame(rows)


def test_verdicts_read_direction_from_the_signed_rank_test():
    """19 seeds win by +0.01, one loses by -0.5 on every set: the mean is negative, the
    signed-rank test (and its Hodges-Lehmann estimate) positive and significant: "helps"."""
    f = _table({"spt": [0.01] * 19 + [-0.5]}, n=20)
    g = analysis.gain_table(f, ["spt"])
    row = g[(g.metric == plan.PRIMARY)].iloc[0]
    assert row.mean_diff < 0 and row.direction == 1 and row.hl == pytest.approx(0.01)
    assert row.p_wilcoxon == pytest.approx(2 * 192 / 2 ** 20, rel=1e-9)
    v = analysis.verdicts(g).set_index("arm").loc["spt"]
    assert (v.helps, v.hurts, v.sets) == (4, 0, 4)


def test_the_confirmatory_family_is_spt_on_the_primary_metric_over_the_sets():
    f = _table({"spt": np.linspace(0.0, 0.04, 10), "qk_transfer": np.linspace(-0.01, 0.03, 10)})
    g = analysis.gain_table(f, ["spt", "qk_transfer"])
    assert "p_holm_all" not in g and {"family", "holm_m", "p_holm"} <= set(g.columns)
    conf = g[g.family == "confirmatory"]
    assert sorted(conf.dataset) == sorted(SETS) and set(conf.arm) == {"spt"} and set(conf.metric) == {plan.PRIMARY}
    assert conf.p_holm.tolist() == pytest.approx(stats.holm(conf.p_wilcoxon.to_numpy()).tolist())
    assert (conf.holm_m == 4).all()
    for (arm, m), d in g[g.family == "descriptive"].groupby(["arm", "metric"]):
        assert (d.holm_m == 4).all()
        assert d.p_holm.tolist() == pytest.approx(stats.holm(d.p_wilcoxon.to_numpy()).tolist())
    assert len(g) == len(conf) + len(g[g.family == "descriptive"]) == 4 * 2 * len(plan.METRICS)


def test_mde_is_the_signed_rank_tests_at_the_holm_level():
    f = _table({"spt": np.linspace(0.0, 0.04, 10)})
    g = analysis.gain_table(f, ["spt"])
    r = g[(g.metric == plan.PRIMARY)].iloc[0]
    assert r.mde80 == pytest.approx(rank_tests.mde_signed_rank(r.sd_diff, 10, 0.05 / 4))
    five = analysis.gain_table(_table({"spt": np.linspace(0.0, 0.04, 5)}, n=5), ["spt"])
    assert (five.mde80 == math.inf).all()  # 5 seeds: p >= 0.0625 whatever the effect


def test_verdicts_use_the_metric_and_alpha_they_are_given():
    """The primary metric gains +0.02 +- noise, final_test_acc loses 0.04: each metric's verdict
    is its own; an alpha below every Holm p gives no verdict at all."""
    gains = np.linspace(0.0, 0.04, 10)
    f = _table({"spt": gains}, metric_gain={"final_test_acc": -0.06})
    g = analysis.gain_table(f, ["spt"])
    prim = analysis.verdicts(g, plan.PRIMARY).set_index("arm").loc["spt"]
    fin = analysis.verdicts(g, "final_test_acc").set_index("arm").loc["spt"]
    assert (prim.helps, prim.hurts) == (4, 0) and (fin.helps, fin.hurts) == (0, 4)
    p = g[g.metric == plan.PRIMARY].p_holm.max()
    assert 0.001 < p <= 0.05  # 9 of 10 positive with one zero, Holm x 4
    tight = analysis.verdicts(g, plan.PRIMARY, alpha=p / 2).set_index("arm").loc["spt"]
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
    g = analysis.gain_table(f, ["spt", "qk_transfer", "mlp_transfer", "scratch_matched"]).set_index(
        ["dataset", "arm", "metric"])
    qk, mlp = (g.loc[("ECG200", a, plan.PRIMARY)] for a in ("qk_transfer", "mlp_transfer"))
    assert analysis.EQUIVALENCE_MARGIN == 0.01
    assert qk.spt_minus_arm == pytest.approx(-jitter.mean(), abs=1e-12)
    assert qk.spt_minus_arm_tost_p == pytest.approx(stats.tost(-jitter, 0.01)["p"]) and qk.spt_minus_arm_tost_p < 0.05
    assert qk.tost_p > 0.5  # Q/K is not equivalent to scratch
    assert mlp.tost_p == pytest.approx(stats.tost(0.001 + jitter, 0.01)["p"]) and mlp.tost_p < 0.05
    assert mlp.spt_minus_arm_tost_p > 0.5
    budget = g.loc[("ECG200", "scratch_matched", plan.PRIMARY)]
    assert budget.spt_minus_arm == pytest.approx(0.03) and budget.spt_minus_arm_p == pytest.approx(2 / 2 ** 10)
    assert math.isnan(g.loc[("ECG200", "spt", plan.PRIMARY)].spt_minus_arm)


def _archive_frame(gains: dict, n=8) -> pd.DataFrame:
    f = _table({}, sets=tuple(gains), n=n)
    rows = []
    for ds, gain in gains.items():
        s = f[(f.dataset == ds) & (f.arm == "scratch")]
        for arm, k in (("spt", 1.0), ("qk_transfer", 0.5)):
            rows.append(s.assign(arm=arm, **{m: s[m] + k * (gain + 0.002 * np.arange(n) - 0.007 + (
                0.05 if m == "final_test_acc" else 0.0)) for m in plan.METRICS}))
    return pd.concat([f, *rows], ignore_index=True)


def test_archive_table_uses_the_metric_it_is_given_and_names_units():
    gains = {"GunPointMaleVersusFemale": 0.02, "Coffee": -0.03, "DistalPhalanxTW": 0.01}
    f = _archive_frame(gains)
    sizes = {k: (10, 20, 2) for k in gains}
    prim = analysis.archive_table(f, sizes).set_index("dataset")
    fin = analysis.archive_table(f, sizes, metric="final_test_acc").set_index("dataset")
    for ds, gain in gains.items():
        assert prim.loc[ds].gain == pytest.approx(gain) and fin.loc[ds].gain == pytest.approx(gain + 0.05)
    assert prim.unit.to_dict() == {"GunPointMaleVersusFemale": "GunPoint family", "Coffee": "Coffee",
                                   "DistalPhalanxTW": "DistalPhalanx TW/AgeGroup"}
    assert {"dataset", "n_seeds", "gain", "ci_low", "ci_high", "p_holm", "qk_share", "unit"} <= set(prim.reset_index())
    assert prim.p_holm.tolist() == pytest.approx(stats.holm(prim.p_wilcoxon.to_numpy()).tolist())
    c = analysis.archive_counts(prim.reset_index(), alpha=0.05)
    assert (c["helps"], c["hurts"]) == (2, 1)  # 8 seeds all one sign: p 2/256, Holm x 3 < 0.05
    assert analysis.archive_counts(prim.reset_index(), alpha=0.01)["helps"] == 0


def test_across_sets_merges_related_sets_into_units():
    """Four GunPoint sets and two DistalPhalanx sets are two units (mean of their gains); with
    the four other sets: 6 units, gains +0.04 (GunPoint family), +0.015, +0.03, +0.02, -0.01,
    +0.05: five of six positive, exact signed-rank p = 2 x 2 / 64 (T+ = 20 of 21)."""
    t = pd.DataFrame(dict(dataset=["GunPoint", "GunPointAgeSpan", "GunPointMaleVersusFemale", "GunPointOldVersusYoung",
                                   "DistalPhalanxOutlineAgeGroup", "DistalPhalanxTW", "ECG200", "ECGFiveDays", "Coffee",
                                   "BME"],
                          gain=[0.01, 0.03, 0.05, 0.07, 0.01, 0.02, 0.03, 0.02, -0.01, 0.05]))
    r = analysis.across_sets(t)
    assert (r["n_sets"], r["n_units"], r["wins"], r["losses"]) == (10, 6, 5, 1)
    units = {u["unit"]: u["gain"] for u in r["units"]}
    assert units["GunPoint family"] == pytest.approx(0.04)
    assert units["DistalPhalanx TW/AgeGroup"] == pytest.approx(0.015)
    assert r["p"] == pytest.approx(4 / 64) and r["direction"] == 1
    assert r["p"] == pytest.approx(sps.wilcoxon(list(units.values()), method="exact").pvalue)


def test_metrics_row_puts_each_metric_in_its_own_column():
    ft = [dict(phase="finetune", epoch=e, test_acc=0.5 + e / 100, val_acc=0.6 + (e % 3) / 10) for e in range(1, 8)]
    summary = dict(mean_test_last20=0.111, test_at_min_val_loss=0.222, final_test_acc=0.333, test_at_peak=0.444,
                   peak_val_acc=0.8, min_val_loss=0.666, final_train_acc=0.777)
    res = SimpleNamespace(history=[dict(phase="pretrain", epoch=1)] + ft, summary=summary,
                          config=dict(evaluate="all"), states={"final": None, "pretrained": None})
    data = SimpleNamespace(config=SimpleNamespace(name="ECG200"), val=list(range(17)))
    row = analysis.metrics_row(data, "spt", 3, res, pi=dict(final=1.5, pretrained=2.5))
    assert set(row) == set(analysis.ROW_COLUMNS)
    for k, v in summary.items():
        assert row[k] == v, k
    assert row["peak_held_out"] == pytest.approx(0.57)  # max test over the label epochs
    assert row["epochs_at_peak_val"] == 2  # val 0.8 at epochs 2 and 5
    assert (row["n_val"], row["proximity_final"], row["proximity_after_spt"]) == (17, 1.5, 2.5)
    assert (row["dataset"], row["arm"], row["seed"], row["evaluate"]) == ("ECG200", "spt", 3, "all")
    other = SimpleNamespace(**{**vars(res), "config": dict(evaluate="peak")})
    peak = analysis.metrics_row(data, "mlp_transfer", 3, other)
    assert math.isnan(peak["peak_held_out"]) and math.isnan(peak["proximity_final"])
