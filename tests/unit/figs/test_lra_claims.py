"""The lra_claims table (toyspt.figs.lra_claims) on planted per-run rows: arm - scratch paired by
seed, the signed-rank test's direction and Holm over the 9 confirmatory rows, each verdict
reachable, descriptive rows in their own families without a verdict, the paper's numbers on the
primary metric only, the documented columns."""
from types import SimpleNamespace

import matplotlib
import numpy as np
import pandas as pd
import pytest

from toyspt.analysis import gates as gt
from toyspt.analysis.multiplicity import holm
from toyspt.analysis.paired import paired, tost
from toyspt.analysis.stats import mcnemar_bound
from toyspt.figs import lra_claims as lc
from toyspt.studies import lra_design as design
from toyspt.studies.lra_claim_gates import TaskFacts

matplotlib.use("Agg")

SEEDS = range(10)
# arm - scratch per seed on the primary metric, planted per (task, arm); every other row: noise
PLANTED = {
    ("pathfinder", "spt"): [0.10, 0.12, 0.09, 0.11, 0.13, 0.08, 0.1, 0.105, 0.095, 0.115],  # claimed +: confirmed
    ("image", "spt"): [-0.10, -0.12, -0.09, -0.11, -0.13, -0.08, -0.1, -0.105, -0.095, -0.115],  # contradicted
    ("listops", "frozen_attention"): [0.001, -0.002, 0.0015, 0.0, -0.001, 0.002, -0.0005, 0.001, -0.0015, 0.0005],
    # significant alone (signed-rank p 0.012) but not after Holm over the 9, and not inside ±0.02: not resolved
    ("image", "qk_transfer"): [0.03, 0.02, 0.025, 0.01, -0.005, 0.015, 0.02, -0.01, 0.035, 0.012],
    ("listops", "depth2_spt"): [0.10, 0.12, 0.09, 0.11, 0.13, 0.08, 0.1, 0.105, 0.095, 0.115],  # against depth2_scratch
}


def _frame(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    arms = ["scratch", *design.CONFIRMATORY_ARMS, *design.DESCRIPTIVE_ARMS, "depth2_scratch", "depth2_spt"]
    rows = []
    for task in design.TASKS:
        base = 0.5 + rng.normal(0, 0.05, len(SEEDS))  # the pairing matters: scratch varies by seed
        depth2 = base + rng.normal(0, 0.05, len(SEEDS))
        for arm in arms:
            own = depth2 if arm == "depth2_spt" else base
            d = np.array(PLANTED.get((task, arm), rng.normal(0, 0.03, len(SEEDS)) if arm != "scratch" else 0.0))
            if arm == "depth2_scratch":
                v = depth2
            else:
                v = own + d
            rows += [dict(study=1, task=task, arm=arm, seed=s, peak_val_acc=v[s], mean_test_last20=v[s] - 0.01,
                          final_test_acc=v[s], final_train_acc=v[s], test_at_peak=v[s], stopped_by_rule=True,
                          seconds=1.0) for s in SEEDS]
    return pd.DataFrame(rows, columns=lc.RUN_COLUMNS)


def _row(table, task, arm, metric=design.PRIMARY):
    r = table[(table.study == 1) & (table.task == task) & (table.arm == arm) & (table.metric == metric)]
    assert len(r) == 1, (task, arm, metric)
    return r.iloc[0]


def test_every_verdict_is_reached_from_planted_runs():
    t = lc.claims_table(_frame())
    assert list(t.columns) == lc.COLUMNS
    assert (t.verdict == t.ungated).all() and (t.gates == "").all()  # no gates asked: the rule alone
    assert _row(t, "pathfinder", "spt").verdict == lc.CONFIRMED
    assert _row(t, "image", "spt").verdict == lc.CONTRADICTED
    assert _row(t, "listops", "frozen_attention").verdict == lc.EQUIVALENT
    q = _row(t, "image", "qk_transfer")
    assert q.p < design.ALPHA < q.p_holm and q.verdict == lc.UNRESOLVED  # Holm, not the raw p, decides
    assert set(t[t.family == "confirmatory"].verdict) <= set(lc.VERDICTS)


def test_a_failed_gate_makes_the_verdict_not_tested_and_the_row_stays_in_holm():
    """Frozen attention on PathFinder planted far below scratch, significant after Holm: the rule
    alone confirms the claim, but with scratch at chance (its gate failed) the verdict is "not tested";
    the family stays 9 and every other row keeps its verdict."""
    planted = [-0.10, -0.12, -0.09, -0.11, -0.13, -0.08, -0.1, -0.105, -0.095, -0.115]
    f = _frame()
    rows = (f.task == "pathfinder") & (f.arm == "frozen_attention")
    base = f[(f.task == "pathfinder") & (f.arm == "scratch")].peak_val_acc.to_numpy()
    f.loc[rows, "peak_val_acc"] = base + np.array(planted)

    def gates(study, task, arm, ungated, claim):
        at_chance = (task, arm) == ("pathfinder", "frozen_attention")
        return [gt.Gate("learnable", True, ""), gt.Gate("off chance", not at_chance, "")]

    t = lc.claims_table(f, gates=gates)
    r = _row(t, "pathfinder", "frozen_attention")
    assert r.p_holm <= design.ALPHA and r.direction == -1 and r.ungated == lc.CONFIRMED  # what the rule alone says
    assert r.verdict == "not tested: off chance" and r.gates == "learnable: pass; off chance: fail"
    assert (t[t.family == "confirmatory"].holm_m == 9).all()
    assert _row(t, "pathfinder", "spt").verdict == lc.CONFIRMED == _row(t, "pathfinder", "spt").ungated


def test_equivalence_reads_the_tost_holm_adjusted_over_the_family():
    t = lc.claims_table(_frame())
    c = t[t.family == "confirmatory"]
    assert np.allclose(c.tost_p_holm, holm(c.tost_p.to_numpy()))
    for r in c.itertuples():
        assert r.ungated == lc.verdict(r.claim, r.direction, r.p_holm, r.tost_p_holm)


def test_below_half_the_papers_gain_is_tested_beside_each_claimed_gain():
    t = lc.claims_table(_frame())
    r = _row(t, "pathfinder", "spt")  # planted +0.10 against the paper's +0.18: not below half (+0.09)
    assert r.below_half_p > 0.5
    assert np.isnan(_row(t, "listops", "frozen_attention").below_half_p)  # no claimed gain


def test_the_share_of_scratchs_errors_an_arm_removes_beside_the_papers():
    """error_share: the mean over seeds of (arm - scratch) / (1 - scratch), with its t interval;
    paper_error_share: the paper's gain over its own scratch's errors (0.18 / 0.33 on PathFinder)."""
    f = _frame()
    t = lc.claims_table(f)
    d = f[(f.task == "pathfinder")].pivot_table(index="seed", columns="arm", values=design.PRIMARY)
    share = ((d.spt - d.scratch) / (1 - d.scratch)).to_numpy()
    r, p = _row(t, "pathfinder", "spt"), paired(share).t
    assert (r.error_share, r.error_share_low, r.error_share_high) == (p.estimate, p.low, p.high)
    assert r.paper_error_share == pytest.approx((0.85 - 0.67) / (1 - 0.67), abs=1e-15)
    assert np.isnan(_row(t, "listops", "spt").paper_error_share)  # the paper gives no number there
    f.loc[(f.task == "image") & (f.arm == "scratch") & (f.seed == 3), design.PRIMARY] = 1.0  # no errors to remove
    assert np.isnan(_row(lc.claims_table(f), "image", "spt").error_share)


def test_confirmatory_family_is_the_nine_and_holm_is_over_them():
    t = lc.claims_table(_frame())
    c = t[t.family == "confirmatory"]
    assert len(c) == 9 and set(c.metric) == {design.PRIMARY} and set(c.arm) == set(design.CONFIRMATORY_ARMS)
    assert (c.holm_m == 9).all() and np.allclose(c.p_holm, holm(c.p.to_numpy()))
    for r in c.itertuples():  # direction and p are the signed-rank test's, the interval the t test's
        d = _frame().pivot_table(index="seed", columns=["task", "arm"], values=design.PRIMARY)
        diff = (d[r.task, r.arm] - d[r.task, "scratch"]).to_numpy()
        p = paired(diff)
        assert r.p == p.rank.p and r.direction == p.direction and np.isclose(r.mean_diff, diff.mean())
        assert np.isclose(r.ci_low, p.t.low) and np.isclose(r.tost_p, tost(diff, design.MARGIN).p)
        assert r.n_seeds == 10


def test_descriptive_rows_have_their_own_families_and_no_verdict():
    t = lc.claims_table(_frame())
    d = t[t.family == "descriptive"]
    assert (d.verdict == "").all() and "confirmatory" not in set(d.holm_family)
    # the secondary metric: every arm descriptive, the paper's number (about peak validation) left empty
    sec = t[t.metric == design.SECONDARY]
    assert (sec.family == "descriptive").all() and sec.paper_value.isna().all()
    for fam, g in d.groupby("holm_family"):
        assert np.allclose(g.p_holm, holm(g.p.to_numpy())), fam
    # depth-2 SPT against depth-2 scratch, not against the 1-layer scratch
    r = _row(t, "listops", "depth2_spt")
    assert r.base == "depth2_scratch" and np.isclose(r.mean_diff, np.mean(PLANTED["listops", "depth2_spt"]))
    assert _row(t, "pathfinder", "no_attention").base == "scratch"


def test_the_papers_numbers_and_claims():
    t = lc.claims_table(_frame())
    assert np.isclose(_row(t, "pathfinder", "spt").paper_value, 0.85 - 0.67)
    assert _row(t, "listops", "frozen_attention").paper_value == 0.0
    assert np.isnan(_row(t, "listops", "spt").paper_value)
    assert lc.claim("listops", "frozen_attention") == 0 and lc.claim("pathfinder", "frozen_attention") == -1
    assert lc.claim("listops", "spt") == 1 and lc.claim("image", "no_attention") is None


@pytest.mark.parametrize("sign, direction, p_holm, tost_p, expected", [
    (1, 1, 0.01, 0.9, lc.CONFIRMED), (-1, -1, 0.01, 0.9, lc.CONFIRMED), (1, -1, 0.01, 0.9, lc.CONTRADICTED),
    (0, 1, 0.01, 0.9, lc.CONTRADICTED), (0, -1, 0.049, 0.01, lc.CONTRADICTED), (0, 1, 0.2, 0.01, lc.EQUIVALENT),
    (1, 1, 0.06, 0.01, lc.EQUIVALENT), (1, 1, 0.06, 0.2, lc.UNRESOLVED), (1, 0, 0.01, float("nan"), lc.UNRESOLVED),
    (1, 1, float("nan"), float("nan"), lc.UNRESOLVED)])
def test_verdict_rule(sign, direction, p_holm, tost_p, expected):
    assert lc.verdict(sign, direction, p_holm, tost_p) == expected


def test_a_confirmatory_row_needs_a_claim():
    with pytest.raises(ValueError, match="claim"):
        lc.verdict(None, 1, 0.01, 0.5)


def test_run_frame_keeps_the_studys_order_and_every_metric():
    res = lambda v: SimpleNamespace(summary=dict(peak_val_acc=v, mean_test_last20=v / 2, final_test_acc=v,  # noqa: E731
                                                 final_train_acc=v, stopped_early=1.0), seconds=2.0, history=[])
    runs = {(1, "pathfinder", "scratch", 0): res(0.5), (1, "pathfinder", "spt", 0): res(0.6),
            (1, "image", "scratch", 0): res(0.7), (1, "pathfinder", "scratch", 1): res(0.55)}
    f = lc.run_frame(runs)
    assert list(f.columns) == lc.RUN_COLUMNS
    assert list(zip(f.task, f.arm, f.seed)) == [("pathfinder", "scratch", 0), ("pathfinder", "scratch", 1),
                                                ("pathfinder", "spt", 0), ("image", "scratch", 0)]
    assert f.stopped_by_rule.all() and (f.study == 1).all()
    assert f.mean_test_last20.tolist() == [0.25, 0.275, 0.3, 0.35]


def test_draw_writes_both_tables_from_the_runs(monkeypatch):
    frame = _frame()
    runs = {(1, r.task, r.arm, r.seed): SimpleNamespace(summary={m: getattr(r, m) for m in lc.METRICS},
                                                        seconds=r.seconds, history=[]) for r in frame.itertuples()}
    monkeypatch.setattr(lc, "gate_function", lambda ctx, runs, fact=None: lambda *a: [gt.Gate("learnable", True, "")])
    facts = TaskFacts(0.5, 200, n_test=100, classes=2)  # 100 test examples, half in the majority class
    monkeypatch.setattr(lc, "facts_function", lambda ctx, runs: lambda n, t: facts)
    ctx = SimpleNamespace(meta={}, quick=True, study=SimpleNamespace(margins=dict))
    fig, tables = lc.draw(ctx, runs)
    assert set(tables) == {lc.NAME, f"{lc.NAME}_runs"} and len(tables[f"{lc.NAME}_runs"]) == len(frame)
    # per run: above the majority class by the McNemar bound on 100 test examples (0.6 is not, 0.7 is)
    per_run = tables[f"{lc.NAME}_runs"]
    want = [mcnemar_bound(round(a * 100), 100, 50) <= design.ALPHA for a in per_run.test_at_peak]
    assert per_run.above_majority.tolist() == want and 0 < sum(want) < len(want)
    assert facts.above_majority(0.7, 0.05) and not facts.above_majority(0.6, 0.05)
    meta = ctx.meta[lc.NAME]
    assert meta["holm_m"] == 9 and meta["claims"]["pathfinder"]["spt"]["verdict"] == lc.CONFIRMED
    row = _row(tables[lc.NAME], "image", "qk_transfer")
    got = meta["claims"]["image"]["qk_transfer"]["mean_diff"]
    assert type(got) is float and got == row.mean_diff  # exact, and a number json writes
    assert meta["descriptive"]["listops"]["depth2_spt"]["mean_diff"] == _row(tables[lc.NAME], "listops",
                                                                             "depth2_spt").mean_diff
    assert "spt" not in meta["descriptive"]["image"] and set(meta["secondary"]["image"]) >= {"spt", "qk_transfer"}
    assert meta["secondary"]["image"]["spt"]["ci_low"] == _row(tables[lc.NAME], "image", "spt",
                                                               design.SECONDARY).ci_low
    g = frame[(frame.task == "image") & (frame.arm == "spt")].final_train_acc
    assert meta["run_means"]["image"]["spt"]["final_train_acc"] == g.mean()
    assert meta["run_means"]["image"]["spt"]["final_train_acc_std"] == g.std()
    mine = per_run[(per_run.task == "image") & (per_run.arm == "spt")]
    assert meta["run_means"]["image"]["spt"]["above_majority"] == int(mine.above_majority.sum())
    assert meta["run_means"]["image"]["spt"]["runs"] == len(mine)
    assert len(fig.axes) == len(design.TASKS)
