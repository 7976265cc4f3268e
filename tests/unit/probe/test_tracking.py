"""Trackers: displacement, profiles and the proximity index against direct computations."""
import math

import pandas as pd
import pytest
import torch

from toyspt.nn.model import ModelConfig, build_model
from toyspt.probe import tracking
from toyspt.runs import RunSpec
from toyspt.train.config import RunConfig
from toyspt.train.recipes import TrainConfig
from toyspt.train.run import run_recipe

SMALL = dict(d_model=16, d_mlp=32)
TINY_TRAIN = TrainConfig(epochs=2, pre_epochs=1, batch_size=64)


@pytest.fixture(scope="module")
def spt_run(small_data):
    cbs = tracking.make_trackers(("displacement", "profile:every=1", "probes:every=2,n=32"), small_data)
    return run_recipe(RunConfig("spt", ModelConfig(**SMALL), TINY_TRAIN), small_data, 1, callbacks=cbs)


def test_displacement_records_equal_a_direct_computation(spt_run):
    f = tracking.records_frame(spt_run.records)
    last = f[(f.phase == "finetune") & (f.step == f.step.max())]
    init, final = spt_run.states["init"], spt_run.states["final"]
    for name in ("blocks.0.attn.W_Q", "blocks.0.attn.W_K", "blocks.0.mlp.0", "embed"):
        W, W0 = final[name + ".weight"].double(), init[name + ".weight"].double()
        direct = torch.sqrt(((W - W0) ** 2).sum()).item()
        rec = last[(last.name == name) & (last.metric == "disp_init")].value.item()
        # float64 sums of <= 4096 squares: rounding ~1e-15 relative
        assert math.isclose(rec, direct, rel_tol=1e-12)
        rel = last[(last.name == name) & (last.metric == "rel_disp_init")].value.item()
        assert math.isclose(rel, direct / torch.sqrt((W0 ** 2).sum()).item(), rel_tol=1e-12)
        sv = last[(last.name == name) & (last.metric == "sv_init")].sort_values("index").value.tolist()
        assert sv == pytest.approx(torch.linalg.svdvals(W - W0)[:3].tolist(), rel=1e-12)
    # the fine-tuning phase starts from the transferred weights, not from the init
    start = f[(f.phase == "finetune") & (f.epoch == 0) & (f.metric == "disp_phase")]
    assert (start.value == 0).all()
    assert f[(f.phase == "finetune") & (f.epoch == 0) & (f.name == "blocks.0.attn.W_Q")
             & (f.metric == "disp_init")].value.item() > 0
    # the same numbers from the stored states
    st = pd.DataFrame(tracking.displacement(spt_run.states["final"], spt_run.states["init"], "init"))
    assert st[(st.name == "blocks.0.attn.W_Q") & (st.metric == "disp_init")].value.item() == pytest.approx(
        last[(last.name == "blocks.0.attn.W_Q") & (last.metric == "disp_init")].value.item(), rel=1e-12)
    assert tracking.relative_displacement(final, init, "W_K") == pytest.approx(
        last[(last.name == "blocks.0.attn.W_K") & (last.metric == "rel_disp_init")].value.item(), rel=1e-12)


def test_all_trackers_emit_tidy_records(spt_run):
    f = tracking.records_frame(spt_run.records)
    assert {"recipe", "seed", "phase", "step", "epoch", "name", "metric", "value"} <= set(f.columns)
    assert {"proximity_index", "self_index", "pos_score", "attn_weight", "cos_label", "cos_recon",
            "ratio", "row_heterogeneity_label"} <= set(f.metric)
    T = 16
    prof = f[(f.metric == "pos_score") & (f.phase == "finetune") & (f.epoch == 1)]
    assert sorted(prof.offset) == list(range(-(T - 1), T))
    probe_steps = sorted(set(f[f.metric == "cos_label"].step))
    assert all(s % 2 == 0 for s in probe_steps) and len(probe_steps) >= 3


def test_proximity_index_of_known_patterns():
    T = 10
    uniform = torch.full((1, T, T), 1.0 / T, dtype=torch.float64)
    assert tracking.proximity_index(uniform).item() == pytest.approx(1.0, abs=1e-14)
    assert tracking.self_index(uniform).item() == pytest.approx(1.0, abs=1e-14)
    eye = torch.eye(T, dtype=torch.float64)[None]
    assert tracking.proximity_index(eye).item() == 0.0 and tracking.self_index(eye).item() == T
    i = torch.arange(T)
    near = ((i[:, None] - i[None]).abs() == 1).double()
    near = near / near.sum(-1, keepdim=True)
    assert tracking.proximity_index(near[None]).item() > 2.0  # all mass on neighbours


def test_diagonal_means():
    M = torch.arange(9.0).reshape(3, 3)
    assert tracking.diagonal_means(M).tolist() == [6.0, 5.0, 4.0, 3.0, 2.0]
    assert tracking.offsets(3) == [-2, -1, 0, 1, 2]


def test_positional_profile_is_the_documented_formula():
    # layer 0 on the mean input: scores ln1(b_E + p_i)^T M ln1(b_E + p_j) (zero Q/K biases at
    # init), row-centred, averaged along diagonals
    model = build_model(ModelConfig(**SMALL), seed=4)
    T = 12
    prof = tracking.positional_profile(model, T)["blocks.0.attn"]
    with torch.no_grad():
        blk = model.blocks[0]
        X = blk.ln1(model.embed.bias + model.pe.table[:T])
        S = X @ blk.attn.qk_matrix(0) @ X.T
        S = S - S.mean(-1, keepdim=True)
    # float32 model: scores O(1), rounding ~1e-6
    assert torch.allclose(prof[0], tracking.diagonal_means(S), atol=1e-5)
    flat = tracking.positional_profile(build_model(ModelConfig(**SMALL, qk_init_scale=0.0), 0), T)
    assert flat["blocks.0.attn"].abs().max() == 0


def test_uniform_attention_profile(small_data):
    model = build_model(ModelConfig(**SMALL, qk_init_scale=0.0), seed=0)
    rows = tracking.profile_rows(model, small_data.val.x[:8])
    w = [r["value"] for r in rows if r["metric"] == "attn_weight"]
    T = small_data.val.x.shape[1]
    assert max(abs(v - 1 / T) for v in w) < 1e-7  # float32 softmax of zeros
    pi = [r["value"] for r in rows if r["metric"] == "proximity_index"]
    assert pi == [pytest.approx(1.0, abs=1e-6)]


def test_learned_pe_counts_as_a_matrix_and_alibi_profile_peaks_at_zero():
    m = build_model(ModelConfig(**SMALL, pos="learned"), 0)
    assert "pe" in tracking.matrices(m.state_dict(), learned_pe=tracking._is_learned_pe(m), T=8)
    assert tracking.matrices(m.state_dict(), learned_pe=True, T=8)["pe"].shape == (8, 16)
    assert "pe" not in tracking.matrices(build_model(ModelConfig(**SMALL), 0).state_dict())
    alibi = build_model(ModelConfig(**SMALL, pos="alibi", qk_init_scale=0.0), 0)
    prof = tracking.positional_profile(alibi, 9)["blocks.0.attn"][0]
    assert prof.argmax().item() == 8  # offset 0


def test_make_trackers_registry_and_errors(small_data):
    cbs = tracking.make_trackers(("displacement", "profile:every=3", "probes:every=7"), small_data)
    assert [type(c).__name__ for c in cbs] == ["DisplacementTracker", "ProfileTracker", "ProbeTracker"]
    assert cbs[1].every == 3 and cbs[2].every == 7
    with pytest.raises(ValueError, match="unknown tracker"):
        tracking.make_trackers(("weights",), small_data)
    with pytest.raises(ValueError, match="key=value"):
        tracking.make_trackers(("probes:7",), small_data)
    with pytest.raises(ValueError, match="probes:speed=2"):
        tracking.make_trackers(("probes:speed=2",), small_data)
    with pytest.raises(ValueError, match="every"):
        tracking.make_trackers(("profile:every=0",), small_data)


def test_run_spec_trackers_and_compare_columns(small_data):
    from toyspt.analysis.tables import default_columns

    cols = default_columns()
    spec = RunSpec("scratch", seed=0, data=small_data.config, model=ModelConfig(**SMALL),
                   train=TrainConfig(epochs=1, batch_size=64), trackers=("displacement",))
    res = spec.execute()
    assert {r["metric"] for r in res.records} >= {"disp_init", "rel_disp_phase"}
    for col in ("rel_disp_WQ", "rel_disp_WK", "proximity_index"):
        assert col in cols
    wq = cols["rel_disp_WQ"](spec, res)
    W, W0 = res.states["final"]["blocks.0.attn.W_Q.weight"], res.states["init"]["blocks.0.attn.W_Q.weight"]
    assert wq == pytest.approx(((W - W0).norm() / W0.norm()).item(), rel=1e-6)
    pi = cols["proximity_index"](spec, res)
    assert 0 < pi < 16
    # the index is that of the final model's attention on the spec's validation inputs
    from toyspt.train.run import load_model
    m = load_model(res)
    A = tracking.attention_maps(m, small_data.val.x[:tracking.PROFILE_BATCH])["blocks.0.attn"]
    assert pi == pytest.approx(tracking.proximity_index(A).mean().item(), rel=1e-12)


def test_ends_records_the_end_of_a_phase_a_stopping_rule_ended():
    """``ends=1`` on a run whose SPT stops at its plateau and whose labels stop by patience, both long
    before their caps: each phase's end is recorded at the epoch its rule stopped it (before, only the
    caps counted as ends, so such a run's trackers recorded no phase end at all)."""
    from toyspt.data.tasks import TaskConfig, make_task

    data = make_task(TaskConfig(n_train=16, n_val=8, n_test=8, T=8))
    train = TrainConfig(epochs=200, pre_epochs=200, batch_size=8, patience=1, pre_patience=1)
    model = ModelConfig(d_in=data.train.x.shape[-1], d_model=8, n_heads=1, d_mlp=8, max_len=16)
    names = ["displacement:ends=1,groups=1", "profile:ends=1,window=1,grid=4", "probes:ends=1,n=8"]
    res = run_recipe(RunConfig("spt", model, train), data, 0, callbacks=tracking.make_trackers(names, data, train))
    stops = {h["phase"]: (h["epoch"], h["stopped"]) for h in res.history if "stopped" in h}
    assert stops["pretrain"][1] == "plateau" and stops["finetune"][1] == "patience"
    assert stops["pretrain"][0] < 200 and stops["finetune"][0] < 200
    seen = {(r["phase"], r["epoch"]) for r in res.records}
    assert seen == {("pretrain", 0), ("pretrain", stops["pretrain"][0]), ("finetune", 0),
                    ("finetune", stops["finetune"][0])}
    for phase in ("pretrain", "finetune"):  # every tracker recorded the end
        assert {r["metric"] for r in res.records if (r["phase"], r["epoch"]) == (phase, stops[phase][0])} >= {
            "disp_group_init", "proximity_index", "ratio"}


def test_ends_records_only_at_phase_starts_and_ends():
    """``ends=1``: displacement, profile and probes record at each phase's start and after its last
    epoch only (SPT: pre_epochs; labels: the recipe's label epochs), with the run's SPT loss."""
    from toyspt.data.tasks import TaskConfig, make_task

    data = make_task(TaskConfig(n_train=16, n_val=8, n_test=8, T=8))
    train = TrainConfig(epochs=3, pre_epochs=2, batch_size=8)
    model = ModelConfig(d_in=data.train.x.shape[-1], d_model=8, n_heads=1, d_mlp=8, max_len=16)
    names = ["displacement:ends=1,groups=1", "profile:ends=1,window=1,grid=4", "probes:ends=1,n=8"]
    cbs = tracking.make_trackers(names, data, train)
    res = run_recipe(RunConfig("spt", model, train), data, 0, callbacks=cbs)
    seen = {(r["phase"], r["epoch"]) for r in res.records}
    assert seen == {("pretrain", 0), ("pretrain", 2), ("finetune", 0), ("finetune", 3)}
    metrics = {r["metric"] for r in res.records}
    assert {"neighbourhood_index", "disp_group_init", "ratio"} <= metrics
    with pytest.raises(ValueError, match="TrainConfig"):
        tracking.make_trackers(["probes:ends=1"], data, None)
