"""The mechanism figure of the lra tier (toyspt.figs.lra_mechanism): the rows of tracked twins at
init, after SPT (runs that pretrain only) and at the end; frozen W_Q, W_K exactly unmoved in the
table; the summary is the mean over the twins; the figure writes both CSVs."""
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from helpers.tiny_runs import task

from toyspt.figs import FigContext, lra_mechanism
from toyspt.studies.lra_claim_gates import pretrain_end
from toyspt.studies.lra_design import mechanism_specs
from toyspt.studies.lra_mechanism import STATES2, MechanismConfig, at_state

CFG = MechanismConfig(n_attention=8, n_probe=8)
ARMS = ("scratch", "spt", "frozen_attention", "qk_transfer")


@pytest.fixture(scope="module")
def runs():
    t = task("pathfinder")
    specs = mechanism_specs({"pathfinder": t}, seeds=(0,), cfg=CFG)
    return {("pathfinder", a, 0): specs[f"mechanism/pathfinder/{a}/0"].execute() for a in ARMS}


def test_states_of_a_tracked_run(runs):
    spt, scratch = runs["pathfinder", "spt", 0].records, runs["pathfinder", "scratch", 0].records
    assert at_state(scratch, "pretrained") == []  # one phase: no SPT model
    pre, final = at_state(spt, "pretrained"), at_state(spt, "final")
    assert pre and {r["phase"] for r in pre} == {"pretrain"} and {r["phase"] for r in final} == {"finetune"}
    assert at_state(scratch, "label_start") == []  # one phase: no label phase after another
    start = at_state(spt, "label_start")
    steps = {r["step"] for r in start}  # the step count runs on: the label phase starts where SPT stopped
    assert {r["phase"] for r in start} == {"finetune"} and steps == {r["step"] for r in pre} and len(steps) == 1
    with pytest.raises(ValueError, match="state: one of init, pretrained, label_start, final"):
        at_state(spt, "best")
    starts_only = [r for r in spt if r["step"] in {min(x["step"] for x in spt if x["phase"] == r["phase"])}]
    with pytest.raises(ValueError, match="final: the run's finetune phase has records at its start only"):
        at_state(starts_only, "final")  # never the start read as the end
    with pytest.raises(ValueError, match="pretrained: the run's pretrain phase has records at its start only"):
        at_state(starts_only, "pretrained")
    assert pd.DataFrame(at_state(starts_only, "label_start")).equals(pd.DataFrame(start))


def test_the_label_start_shows_what_a_transfer_carries(runs):
    """qk_transfer's label phase starts from the init with SPT's W_Q, W_K: their displacement from the
    init is SPT's own, every other group's exactly 0; spt's starts from SPT's model (its attention)."""
    table = lra_mechanism.probe_table(runs, STATES2)
    at = {(a, s): g.iloc[0] for (a, s), g in table.groupby(["arm", "state"])}
    qk, pre = at["qk_transfer", "label_start"], at["qk_transfer", "pretrained"]
    for g in ("Q", "K"):
        assert qk[f"disp_group_init_{g}"] == pre[f"disp_group_init_{g}"] > 0
    for g in ("V", "O", "mlp"):
        assert qk[f"disp_group_init_{g}"] == 0.0 < pre[f"disp_group_init_{g}"]
    assert at["spt", "label_start"].proximity_index == at["spt", "pretrained"].proximity_index
    assert ("scratch", "label_start") not in at


def test_the_probe_table_and_its_summary(runs, tmp_path):
    table = lra_mechanism.probe_table(runs)
    assert list(table.columns[:6]) == ["task", "arm", "state", "seed", "layer", "head"]
    states = {a: list(dict.fromkeys(table[table.arm == a].state)) for a in ARMS}
    assert states == {"scratch": ["init", "final"], "spt": ["init", "pretrained", "final"],
                      "frozen_attention": ["init", "final"], "qk_transfer": ["init", "pretrained", "final"]}
    frozen = table[(table.arm == "frozen_attention") & (table.state == "final")]
    assert (frozen.disp_group_init_Q == 0.0).all() and (frozen.disp_group_init_K == 0.0).all()
    assert (table[table.state == "init"].filter(like="disp_group_init").to_numpy() == 0.0).all()
    s = lra_mechanism.summary(table)
    assert list(s.columns) == lra_mechanism.COLUMNS and len(s) == 10  # 3 + 2 + 2 + 3 states, one layer
    row = s[(s.arm == "spt") & (s.state == "final")].iloc[0]
    want = table[(table.arm == "spt") & (table.state == "final")].proximity_index.mean()
    assert row.proximity_index == want and row.n_seeds == 1
    assert np.isfinite(s.neighbourhood_index).all()  # an image task
    ctx = FigContext(out=tmp_path, tier="lra")
    labels = mechanism_specs({"pathfinder": task("pathfinder")}, seeds=(0,), cfg=CFG)  # the runs' tiny task
    twins = {("pathfinder", a, 0): labels[f"mechanism/pathfinder/{a}/0"] for a in ARMS}
    ctx.study = SimpleNamespace(data_of=lambda n: {"pathfinder": task("pathfinder").data}, mechanism=lambda n: twins)
    fig, frames = lra_mechanism.draw(ctx, runs)
    assert set(frames) == {"lra_mechanism", "lra_claims_probes"}
    pd.testing.assert_frame_equal(frames["lra_claims_probes"], table)
    meta = ctx.meta["lra_mechanism"]
    assert meta["twins"] == 4 and meta["means"]["pathfinder"]["spt"]["final"]["L0"]["proximity_index"] == want
    assert meta["means"]["pathfinder"]["frozen_attention"]["final"]["L0"]["rel_disp_Q"] == 0.0
    loss = meta["spt_loss"]["pathfinder"]["spt"]  # the only twin of the spt recipe
    assert meta["spt_loss"].keys() == {"pathfinder"} and meta["spt_loss"]["pathfinder"].keys() == {"spt"}  # recipe spt
    assert loss["n_seeds"] == 1 and loss["recon"] == "l1"
    assert loss["val_loss"] == pretrain_end(runs["pathfinder", "spt", 0]) > 0
    assert loss["below_constant"] == (loss["val_loss_max"] < loss["constant"])
    assert meta["accuracy"].keys() == {"peak_val_acc", "mean_test_last20"}
    acc = meta["accuracy"]["peak_val_acc"]["pathfinder"]
    peak = {a: runs["pathfinder", a, 0].summary["peak_val_acc"] for a in ("spt", "scratch")}
    gap = peak["spt"] - peak["scratch"]
    assert acc["spt"]["minus_scratch"] == gap and acc["scratch"]["minus_scratch"] == 0.0 and acc["spt"]["n_seeds"] == 1
