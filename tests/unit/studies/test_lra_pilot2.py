"""The second pilot's choices (toyspt.studies.lra_pilot2) on planted tables: the SPT loss that beats
its constant by most, PathFinder's admission rule (CNN, a Transformer arm off chance by the largest
McNemar p its accuracy allows, the study's price), and stage d refused until stage b is recorded."""
import pandas as pd
import pytest

from toyspt.studies import lra_pilot2 as p2

PF, PF50 = "pathfinder16_n20000", "pathfinder16_n50000"


def _table(cnn=0.83, scratch_right=973, ratios=(1.03, 0.95, 0.90), scratch_s=100.0, spt_s=200.0) -> pd.DataFrame:
    rows = [dict(task=PF, arm="cnn", model="cnn", test_at_peak=cnn, seconds=50.0),
            dict(task=PF, arm="scratch", model="transformer 1L", test_at_peak=scratch_right / 2000, n_test=2000,
                 majority_count=1027, seconds=scratch_s)]
    rows += [dict(task=PF, arm=f"spt_only_{r}", model="transformer 1L", recon=r, loss_over_constant=q, n_test=2000,
                  majority_count=1027, seconds=spt_s) for r, q in zip(p2.PIXEL_LOSSES, ratios)]
    return pd.DataFrame(rows)


def test_the_loss_is_the_one_furthest_below_its_constant():
    assert p2.chosen_loss(_table(), PF) == "levels"  # 0.90 of its constant
    assert p2.chosen_loss(_table(ratios=(0.5, 0.95, 0.90)), PF) == "l1"
    assert p2.chosen_loss(_table(ratios=(1.03, 1.0, 1.2)), PF) is None  # none learned from the context
    assert p2.chosen_loss(_table().iloc[:-1], PF) is None  # not every loss recorded


def test_pathfinder_is_admitted_only_where_the_cnn_learns_a_transformer_leaves_chance_and_it_is_affordable():
    at_chance = p2.pathfinder_rule(_table())
    assert not at_chance["admitted"] and at_chance["settings"][PF]["off_chance"] == []
    assert at_chance["settings"][PF]["arms_p_holm"]["scratch"] >= 0.5
    assert at_chance["pending"] == [f"{PF}: scratch_patience30, scratch_2layers, spt_levels",  # stage d's arm too
                                    f"{PF50}: cnn, scratch"]
    lifted = p2.pathfinder_rule(_table(scratch_right=1200))
    assert lifted["admitted"] and lifted["setting"] == PF and lifted["settings"][PF]["off_chance"] == ["scratch"]
    assert lifted["settings"][PF]["spt_loss"] == "levels" and lifted["settings"][PF]["study_hours"] < 30
    assert not p2.pathfinder_rule(_table(cnn=0.69, scratch_right=1200))["admitted"]  # the CNN under 0.70
    dear = p2.pathfinder_rule(_table(scratch_right=1200, scratch_s=1400.0, spt_s=2000.0))["settings"][PF]
    assert dear["study_hours"] > p2.BUDGET_HOURS and not dear["priced_ok"]  # ~50 CPU-hours at these seconds
    assert dear["priced_out"] and dear["study_hours_at_least"] < dear["study_hours"]
    # SPT's seconds not measured (no loss chosen): a lower bound, scratch's label runs alone
    bound = p2.pathfinder_rule(_table(scratch_s=1400.0, ratios=(1.1, 1.1, 1.1)))["settings"][PF]
    assert bound["study_hours"] is None and not bound["priced_ok"] and bound["priced_out"]
    assert bound["study_hours_at_least"] == pytest.approx(100 * 1400.0 / 3600)  # 20 x 3 + 10 x 4 scratch runs
    cheap = p2.pathfinder_rule(_table(ratios=(1.1, 1.1, 1.1)))["settings"][PF]
    assert not cheap["priced_out"] and not cheap["priced_ok"]  # not over by the bound, not priced either


def test_stage_d_waits_for_stage_b(monkeypatch):
    monkeypatch.setattr(p2, "run", lambda *a, **k: _table().iloc[:-1])
    with pytest.raises(ValueError, match=r"stage d needs stage b's SPT runs recorded \(spt_only_levels\)"):
        p2.stage_specs("d")
    monkeypatch.setattr(p2, "run", lambda *a, **k: _table())
    (label, spec), = p2.stage_specs("d").items()
    assert label == f"{PF}/spt_levels" and spec.recipe == "spt" and spec.model.rec_levels == p2.LEVELS
    assert spec.parent().key() == p2.stage_specs("b")[f"{PF}/spt_only_levels"].key()  # continues stage b's run
