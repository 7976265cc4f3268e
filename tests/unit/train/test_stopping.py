"""Stopping rules (TrainConfig.patience, pre_patience): where a phase stops, what its history
and summary say, that a record's checks accept exactly those stops, and that keys made before
the rules existed are unchanged."""
from dataclasses import replace

import pytest
import torch

from toyspt.data.tasks import TaskConfig, make_task
from toyspt.nn.model import ModelConfig
from toyspt.runs.record_checks import Impossible, check_entry
from toyspt.runs.specs import RunSpec
from toyspt.train.recipes import PLATEAU_TOL, TrainConfig
from toyspt.train.run import plateaued, run_recipe, run_recipe_seeds, stalled
from toyspt.util.hashing import jsonable

MODEL = ModelConfig(d_model=8, d_mlp=8, max_len=32)
TASK = TaskConfig(n_train=64, n_val=32, n_test=32)


def _ft(*accs):
    return [dict(phase="finetune", val_acc=a) for a in accs]


def _pre(*losses):
    return [dict(phase="pretrain", val_loss=v) for v in losses]


def test_stalled_fires_after_patience_epochs_without_a_higher_accuracy():
    assert not stalled(_ft(0.5, 0.6, 0.6), 2)  # two epochs, but the first of them is the peak itself
    assert stalled(_ft(0.5, 0.6, 0.6, 0.55), 2)
    assert not stalled(_ft(0.5, 0.6, 0.6, 0.61), 2)  # a higher accuracy in the window resets it
    assert not stalled(_ft(0.5, 0.5), 2)  # fewer epochs than patience + 1: never
    assert stalled(_ft(0.5, 0.5, 0.5), 2)  # a tie is not higher


def test_plateau_needs_a_relative_improvement_larger_than_the_tolerance():
    best = 1.0
    just_not = best * (1 - PLATEAU_TOL)  # exactly the tolerance below: not an improvement
    assert plateaued(_pre(2.0, best, just_not, just_not), 2)
    assert not plateaued(_pre(2.0, best, best * (1 - 2 * PLATEAU_TOL), best), 2)
    assert not plateaued(_pre(2.0, best), 2)


def _data():
    return make_task(TASK)


def test_a_label_phase_stops_by_its_rule_and_says_so():
    tr = TrainConfig(epochs=40, pre_epochs=0, batch_size=16, patience=2)
    r = run_recipe(_run("scratch", tr), _data(), seed=3)
    ft = [h for h in r.history if h["phase"] == "finetune"]
    assert ft[-1]["stopped"] == "patience" and len(ft) < 40
    assert stalled(ft, 2) and not any(stalled(ft[:n], 2) for n in range(1, len(ft)))
    assert all("test_acc" in h for h in ft)  # the stop is known only after validation: test every epoch
    assert r.summary["stop_epoch"] == len(ft) and r.summary["stopped_early"] == 1.0
    assert r.summary["final_test_acc"] == ft[-1]["test_acc"]


def test_a_phase_that_reaches_its_cap_says_cap():
    tr = TrainConfig(epochs=3, pre_epochs=2, batch_size=16, patience=50, pre_patience=50)
    r = run_recipe(_run("spt", tr), _data(), seed=1)
    assert [h.get("stopped") for h in r.history] == [None, "cap", None, None, "cap"]
    assert r.summary["stopped_early"] == 0.0 and r.summary["spt_plateaued"] == 0.0 and r.summary["spt_epochs"] == 2


def test_spt_stops_at_its_plateau():
    tr = TrainConfig(epochs=1, pre_epochs=60, batch_size=64, lr=3e-2, pre_patience=1)
    r = run_recipe(_run("spt_only", tr), _data(), seed=0)
    pre = [h for h in r.history if h["phase"] == "pretrain"]
    assert pre[-1]["stopped"] == "plateau" and len(pre) < 60 and plateaued(pre, 1)
    assert r.summary["spt_plateaued"] == 1.0


def _run(recipe, tr):
    from toyspt.train.config import RunConfig

    return RunConfig(recipe, MODEL, tr, "peak")


def test_runs_with_a_stopping_rule_train_one_seed_at_a_time():
    tr = TrainConfig(epochs=2, pre_epochs=0, patience=1)
    with pytest.raises(ValueError, match="trains one seed at a time"):
        run_recipe_seeds(_run("scratch", tr), _data(), [0, 1])
    spec = RunSpec("scratch", data=TASK, model=MODEL, train=tr)
    assert spec.group() is None
    assert RunSpec("scratch_matched", data=TASK, model=MODEL, train=tr).parent() is None  # scratch may stop early


def test_fields_added_later_leave_every_older_key_unchanged():
    spec = RunSpec("spt", seed=2, data=TASK, model=MODEL)
    assert "patience" not in spec.to_dict()["train"] and "rec_levels" not in spec.to_dict()["model"]
    with_rule = replace(spec, train=replace(spec.train, patience=5))
    assert with_rule.to_dict()["train"]["patience"] == 5 and with_rule.key() != spec.key()


def _record(tr, seed=3):
    spec = RunSpec("scratch", seed=seed, data=TASK, model=MODEL, train=tr, evaluate="peak")
    return jsonable(spec.to_dict()), jsonable(spec.execute().to_json())


def test_record_checks_accept_a_true_stop_and_refuse_a_truncated_or_relabelled_one():
    spec, entry = _record(TrainConfig(epochs=40, pre_epochs=0, batch_size=16, patience=2))
    check_entry(spec, entry)
    cut = dict(entry, history=entry["history"][:-1])  # one epoch dropped: the rule did not fire there
    cut["history"][-1] = dict(cut["history"][-1], stopped="patience")
    with pytest.raises(Impossible, match="stops by its rule"):
        check_entry(spec, cut)
    relabelled = dict(entry, history=[*entry["history"][:-1], dict(entry["history"][-1], stopped="cap")])
    with pytest.raises(Impossible, match="stops by its rule"):
        check_entry(spec, relabelled)


def test_levels_loss_targets_the_nearest_grey_level():
    from toyspt.data.tasks import grey_levels, recon_loss

    v = torch.tensor([0.0, 1.0, 127.0, 128.0, 254.0, 255.0])
    x = ((v / 255 - 0.5) / 0.5).float().reshape(1, -1, 1)  # the pixel normalisation
    assert grey_levels(x, 256).reshape(-1).tolist() == v.long().tolist()
    logits = torch.full((1, 6, 256), -30.0)
    logits[0, torch.arange(6), v.long()] = 30.0
    mask = torch.ones(1, 6, dtype=torch.bool)
    assert float(recon_loss(logits, x, mask, "levels")) < 1e-20  # every masked value predicted exactly
    mask[0, :3] = False
    wrong = logits.clone()
    wrong[0, 0] = 0.0  # an unmasked position's logits do not count
    assert torch.equal(recon_loss(wrong, x, mask, "levels"), recon_loss(logits, x, mask, "levels"))
    uniform = torch.zeros(1, 6, 256)
    assert float(recon_loss(uniform, x, mask, "levels")) == pytest.approx(float(torch.log(torch.tensor(256.0))),
                                                                          rel=1e-6)


def test_levels_loss_and_rec_levels_come_together():
    from toyspt.train.config import RunConfig

    with pytest.raises(ValueError, match="'levels' loss needs rec_levels"):
        RunConfig("spt", MODEL, TrainConfig(recon="levels"))
    with pytest.raises(ValueError, match="'levels' loss needs rec_levels"):
        RunConfig("spt", replace(MODEL, rec_levels=16), TrainConfig(recon="l1"))
    with pytest.raises(ValueError, match="rec_levels"):
        replace(MODEL, rec_levels=1)
