"""The mechanism on the LRA tasks (toyspt.studies.lra_mechanism): a tracked run's records at its phase
ends are the mechanism's rows of its models (so the figure redraws from the ledger), a toy model
and its bridge model give the same rows, the exact zeros the theory gives (frozen W_Q, W_K do not
move; at W_Q = W_K = 0 attention is exactly uniform and their gradient exactly zero), the
tracked twins' specs, and the SPT loss of the best context-free prediction."""
import math
from dataclasses import replace

import pandas as pd
import pytest
import torch
from helpers.tiny_runs import SOURCES, task, tiny_run

from toyspt.lra.convert import to_lra  # noqa: E402
from toyspt.probe.tracking import attention_maps, tracker_price  # noqa: E402
from toyspt.studies.lra_design import TASKS, mechanism_specs, study_specs  # noqa: E402
from toyspt.studies.lra_mechanism import (  # noqa: E402
    MechanismConfig,
    at_state,
    constant_recon_loss,
    mechanism_rows,
    mechanism_table,
    mechanism_trackers,
    task_view,
)
from toyspt.train.run import load_model  # noqa: E402

CFG = MechanismConfig(n_attention=8, n_probe=8)
EPS32 = torch.finfo(torch.float32).eps


def _rows(kind, model, init, cfg=CFG):
    d = SOURCES[kind].load()
    return mechanism_table(mechanism_rows(model, init, d.val.x, d.train.x, d.train.y, task_view(task(kind)), cfg))


@pytest.mark.parametrize("kind", list(SOURCES))
def test_tracked_records_are_the_mechanism_rows(kind):
    """The trackers of mechanism_trackers record, at the first phase's start and the last phase's
    end, what mechanism_rows computes from the stored init and final weights. The trackers run the
    attention in the run's float32: those columns agree to float32 rounding of a softmax row
    (a few eps32 per entry, summed over a neighbourhood of <= 4 keys, relative to uniform)."""
    t = task(kind)
    spec = mechanism_specs({kind: t}, seeds=(0,), cfg=CFG)[f"mechanism/{kind}/spt/0"]
    res = spec.execute()
    for state in ("init", "final"):
        want = _rows(kind, load_model(res, state), res.states["init"])
        got = mechanism_table(at_state(res.records, state))
        assert list(got.columns) == list(want.columns)
        attn = ["proximity_index", "self_index"] + (["neighbourhood_index"] if kind != "listops" else [])
        T = SOURCES[kind].length
        pd.testing.assert_frame_equal(got[attn], want[attn], rtol=0, atol=64 * T * EPS32)
        rest = [c for c in want.columns if c not in attn]
        pd.testing.assert_frame_equal(got[rest], want[rest], rtol=1e-12, atol=1e-14)
    assert (want.filter(like="disp_group_init").abs().sum(axis=1) > 0).all()  # trained weights moved


@pytest.mark.parametrize("kind", list(SOURCES))
def test_a_toy_model_and_its_bridge_model_give_the_same_rows(kind):
    """Same mask, same inputs, same function: every column agrees, the embedding's displacement
    aside for tokens (the bridge holds embedding rows W[:, i] + b, another parametrisation)."""
    _, res = tiny_run(kind, "spt", 2)
    token = kind == "listops"
    toy = _rows(kind, load_model(res, "final"), res.states["init"])
    bridge = _rows(kind, to_lra(load_model(res, "final").double(), token),
                   to_lra(load_model(res, "init").double(), token).state_dict())
    cols = [c for c in toy.columns if not (token and c.endswith("_embed"))]
    pd.testing.assert_frame_equal(toy[cols], bridge[cols], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("arm", ["frozen_attention", "no_attention"])
def test_frozen_queries_and_keys_do_not_move(arm):
    _, res = tiny_run("pathfinder", arm)
    f = _rows("pathfinder", load_model(res, "final"), res.states["init"])
    for g in ("Q", "K", "Q_h", "K_h"):
        assert (f[f"disp_group_init_{g}"] == 0.0).all()
    assert (f["disp_group_init_V"] > 0).all() and (f["disp_group_init_O"] > 0).all()


def test_no_attention_is_exactly_uniform_with_zero_query_key_gradient():
    """W_Q = W_K = 0 with zero biases: every score is 0, so attention is exactly 1/T, and the
    gradient of any loss w.r.t. W_Q (through k = 0) and W_K (through q = 0) is exactly zero."""
    _, res = tiny_run("digits", "no_attention")
    model = load_model(res, "final").double()
    x = SOURCES["digits"].load().train.x[:8].double()
    T = x.shape[1]
    for A in attention_maps(model, x).values():
        assert torch.equal(A, torch.full_like(A, 1.0 / T))
    f = _rows("digits", model, res.states["init"])
    assert f.proximity_index.sub(1).abs().max() < 4 * T * torch.finfo(torch.float64).eps
    model.zero_grad()
    torch.nn.functional.cross_entropy(model.classify(x), SOURCES["digits"].load().train.y[:8]).backward()
    attn = model.blocks[0].attn
    for p in (attn.W_Q.weight, attn.W_Q.bias, attn.W_K.weight, attn.W_K.bias):
        assert torch.count_nonzero(p.grad) == 0
    assert torch.count_nonzero(attn.W_V.weight.grad) > 0


def test_an_lra_checkpoint_model_is_probed_with_constructed_heads():
    """A fine-tuned pixel classifier (no mask channel, no decoder) gets a recon ratio through the
    zero mask column and the least-squares decoder; an SPT model a fitted classifier."""
    _, res = tiny_run("digits", "spt")
    for state, form in (("final", "classifier"), ("pretrained", "spt")):
        model = to_lra(load_model(res, state), False, form)
        init = to_lra(load_model(res, "init"), False, form).state_dict()
        f = _rows("digits", model, init)
        assert f.filter(like="ratio_").notna().all().all() and (f.filter(like="cos_recon_").abs() > 0).all().all()


def test_mechanism_specs_are_tracked_twins_of_the_study_runs():
    specs = mechanism_specs()
    study = study_specs()
    assert len(specs) == sum(int(label.rsplit("/", 1)[1]) in (0, 1, 2) for label in study)
    for label, spec in specs.items():
        twin = study[label.removeprefix("mechanism/")]
        assert replace(spec, trackers=()) == twin and spec.key() != twin.key()
        assert spec.trackers == mechanism_trackers(task_view(TASKS[label.split("/")[1]]))
    pf = specs["mechanism/pathfinder/spt/0"].trackers
    assert "grid=16" in pf[1] and "mask_rate=0.5" in pf[2]
    assert "grid" not in specs["mechanism/listops/spt/0"].trackers[1]
    assert "mask_rate=0.1" in specs["mechanism/listops/spt/0"].trackers[2]
    run = dict(n_train=4000, n_val=500, steps=1900, epochs=30, spt_epochs=20)
    for name in pf:  # priced as four records (two phase starts, two ends), not one per epoch or step
        assert tracker_price(name, **run)[0] == 4


def test_task_views_of_the_study():
    v = {k: task_view(t) for k, t in TASKS.items()}
    assert (v["pathfinder"].side, v["image"].side, v["listops"].side) == (16, 8, 0)
    assert v["listops"].token and v["listops"].recon == "ce" and v["listops"].mask_rate == 0.1
    assert v["image"].n_classes == 10 and v["pathfinder"].n_classes == 2


def test_the_best_context_free_prediction_and_its_loss():
    """constant_recon_loss: L1 at the train median, MSE at the train mean, CE at the train token
    frequencies, each no worse than any other constant (checked on a grid); an unseen token: inf."""
    x = torch.tensor([0.0, 0.0, 1.0, -1.0, 0.5]).reshape(1, 5, 1)
    v = torch.tensor([1.0, 0.0, 0.25]).reshape(1, 3, 1)
    assert constant_recon_loss(x, v, "l1") == pytest.approx((1.0 + 0.0 + 0.25) / 3, abs=1e-15)
    assert constant_recon_loss(x, v, "mse") == pytest.approx(((1 - 0.1) ** 2 + 0.1 ** 2 + 0.15 ** 2) / 3, abs=1e-15)
    g = torch.randn(4, 50, 1, generator=torch.Generator().manual_seed(0)).double()
    grid = torch.linspace(-2, 2, 401, dtype=torch.float64)
    for kind, err in (("l1", lambda c: (g - c).abs().mean()), ("mse", lambda c: (g - c).pow(2).mean())):
        # fitted and scored on the same values it is the lowest constant loss (200 terms of float64 sums)
        assert constant_recon_loss(g, g, kind) <= min(float(err(c)) for c in grid) + 200 * 2.0 ** -52
    tokens = torch.eye(3)[torch.tensor([[0, 0, 1]])]  # frequencies 2/3, 1/3, 0
    assert constant_recon_loss(tokens, torch.eye(3)[torch.tensor([[0, 1]])], "ce") == pytest.approx(
        -(math.log(2 / 3) + math.log(1 / 3)) / 2, abs=1e-15)
    assert constant_recon_loss(tokens, torch.eye(3)[torch.tensor([[2]])], "ce") == math.inf
    with pytest.raises(ValueError, match="recon: one of"):
        constant_recon_loss(x, v, "huber")


def test_the_levels_constant_is_the_cross_entropy_of_the_training_grey_level_frequencies():
    import numpy as np

    from toyspt.kinds.tasks import pixels_as_sequences

    train = pixels_as_sequences(np.array([[[0, 0], [255, 128]]], dtype=np.float64))  # levels 0, 0, 255, 128
    val = pixels_as_sequences(np.array([[[0, 255]]], dtype=np.float64))  # levels 0, 255
    want = -(np.log(2 / 4) + np.log(1 / 4)) / 2
    assert constant_recon_loss(train, val, "levels") == pytest.approx(want, rel=1e-12)
    unseen = pixels_as_sequences(np.array([[[7, 0]]], dtype=np.float64))
    assert constant_recon_loss(train, unseen, "levels") == float("inf")
