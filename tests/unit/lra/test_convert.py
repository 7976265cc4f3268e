"""The study's runs as checkpoints of the LRA SPT code's layout, read back through the bridge
(toyspt.lra.convert.save_run, toyspt.lra.checkpoint.load_lra): every arm on every data kind at
1 and 2 layers gives the same logits (SPT outputs for pretrained weights) and the same probe
numbers in and out, and its arm's name comes back."""
from dataclasses import replace

import pandas as pd
import pytest
import torch
from helpers.parity import parity_tol
from helpers.tiny_runs import SOURCES, STUDY_ARMS, task, tiny_run

from toyspt.data.tasks import mask_inputs, sample_mask
from toyspt.lra.checkpoint import load_lra, lra_state_dict
from toyspt.lra.convert import save_run, state_form, to_lra
from toyspt.lra.inputs import make_batch, pixel_levels
from toyspt.lra.report import ReportConfig, lra_report
from toyspt.studies.lra_mechanism import MechanismConfig, mechanism_rows, mechanism_table
from toyspt.train.recipes import get_recipe
from toyspt.train.run import load_model

RCFG = ReportConfig(directions=("circ_w1", "toep_w1", "prev"), summary_directions=("toep_w1",), fit_steps=20)
MCFG = MechanismConfig(n_attention=4, n_probe=4)


def _outputs(model, x, token, form, mask, toy):
    """Class logits (classifier) or SPT outputs on masked inputs (spt), of the toy model or a bridge model."""
    if toy:
        return model.classify(x) if form == "classifier" else model.reconstruct(x, mask)
    ids = x.argmax(-1)
    if form == "classifier":
        return model.classify(ids if token else x)
    return model.reconstruct(torch.where(mask, torch.zeros_like(ids), ids) if token else mask_inputs(x, mask))


@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("arm", STUDY_ARMS)
@pytest.mark.parametrize("kind", list(SOURCES))
def test_every_study_model_round_trips(tmp_path, kind, arm, layers):
    spec, res = tiny_run(kind, arm, layers)
    token, label_phase = kind == "listops", get_recipe(spec.recipe).label_phase
    data = SOURCES[kind].load()
    x = data.val.x[:4].double()
    mask = sample_mask(4, x.shape[1], 0.5, torch.Generator().manual_seed(1))
    for state in ("pretrained", "final"):
        if state not in res.states:
            continue
        form = state_form(state, label_phase)
        prov = dict(arm=arm, task=kind, seed=0, state=state)
        written = save_run(tmp_path / f"{state}.ckpt", load_model(res, state), token, form, provenance=prov,
                           mask_rate=spec.train.mask_rate)
        init = save_run(tmp_path / "init.ckpt", load_model(res, "init"), token, form,
                        provenance=dict(prov, state="init"), mask_rate=spec.train.mask_rate)
        loaded, ref = load_lra(tmp_path / f"{state}.ckpt"), load_lra(tmp_path / "init.ckpt")
        assert loaded.report.provenance == prov and loaded.report.unused == []
        # an SPT file has no classifier: its n_classes is LRAConfig's default, unused
        assert loaded.cfg == (written.cfg if form == "classifier" else replace(written.cfg, n_classes=10))
        assert any(f"arm {arm}" in n for n in loaded.report.notes)
        with torch.no_grad():
            want = _outputs(load_model(res, state).double(), x, token, form, mask, toy=True)
            got = _outputs(loaded.model, x, token, form, mask, toy=False)
        assert (got - want).abs().max().item() <= parity_tol(loaded.cfg, x.shape[1], torch.float64, want)
        # the same probe numbers in (the model as written) and out (as read back), float64
        mine = mechanism_table(mechanism_rows(written, init.state_dict(), data.val.x, data.train.x, data.train.y,
                                              _view(kind), MCFG))
        theirs = mechanism_table(mechanism_rows(loaded.model, ref.model.state_dict(), data.val.x, data.train.x,
                                                data.train.y, _view(kind), MCFG))
        pd.testing.assert_frame_equal(mine, theirs, check_exact=True)


def _view(kind):
    from toyspt.studies.lra_mechanism import task_view
    return task_view(task(kind))


@pytest.mark.parametrize("kind", list(SOURCES))
def test_the_probe_report_is_the_same_in_and_out(tmp_path, kind):
    """``lra_report`` (what ``toyspt lra probe`` prints) on the SPT checkpoint and on the fine-tuned
    classifier of the spt arm, with the init as reference: identical in and out."""
    spec, res = tiny_run(kind, "spt")
    token = kind == "listops"
    data = SOURCES[kind].load()
    x, y = data.train.x[:3], data.train.y[:3]
    inputs = x.argmax(-1) if token else x
    batch = make_batch(inputs, y, None, 0.5, 0, None if token else pixel_levels(x, "digits"))
    for state in ("pretrained", "final"):
        form = state_form(state)
        written = save_run(tmp_path / "m.ckpt", load_model(res, state), token, form, provenance=dict(arm="spt"),
                           mask_rate=0.5)
        init = save_run(tmp_path / "i.ckpt", load_model(res, "init"), token, form, provenance=dict(arm="spt"),
                        mask_rate=0.5)
        before = lra_report(written, batch, ref=init, cfg=RCFG, n_classes=SOURCES[kind].n_classes)
        after = lra_report(load_lra(tmp_path / "m.ckpt").model, batch, ref=load_lra(tmp_path / "i.ckpt").model,
                           cfg=RCFG, n_classes=SOURCES[kind].n_classes)
        pd.testing.assert_frame_equal(before.records(), after.records(), check_exact=True)
        assert before.notes == after.notes and before.table()["ratio_toep_w1"].notna().all()


def test_a_model_with_both_heads_is_refused_not_halved():
    """That code's layout has one decoder slot: writing the toy model entire (classifier and SPT
    decoder) would keep one of them under the other's name."""
    _, res = tiny_run("pathfinder", "scratch")
    with pytest.raises(ValueError, match="both a classifier and a per-token decoder"):
        lra_state_dict(to_lra(load_model(res, "final"), False, "both"))


def test_a_pixel_classifier_is_written_without_its_mask_column():
    _, res = tiny_run("digits", "spt")
    model = load_model(res, "final").double()
    lra = to_lra(model, False, "classifier")
    assert lra.cfg.d_input == 1 and lra.head_rec is None and lra.embed.weight.shape == (8, 1)
    x = SOURCES["digits"].load().val.x[:4].double()
    with torch.no_grad():
        torch.testing.assert_close(lra.classify(x), model.classify(x), rtol=0, atol=1e-13)


def test_toyspt_lra_probe_reads_a_run_checkpoint_and_names_its_arm(tmp_path, capsys):
    """The CLI on a fine-tuned digits classifier written by save_run: its arm is printed and stored,
    and its table is lra_report's on the model as written (same raw pixels, same seed)."""
    import argparse
    import json

    import numpy as np

    from toyspt.cli import lra as cli

    _, res = tiny_run("digits", "qk_transfer")
    written = save_run(tmp_path / "final.ckpt", load_model(res, "final"), False, "classifier",
                       provenance=dict(arm="qk_transfer", task="digits", seed=0, state="final"), mask_rate=0.5)
    d = SOURCES["digits"].load()
    raw = ((d.train.x[:5, :, 0].double() * 0.5 + 0.5) * 255).numpy()  # the 0..255 values the task normalised
    np.save(tmp_path / "x.npy", raw)
    np.save(tmp_path / "y.npy", d.train.y[:5].numpy())
    p = argparse.ArgumentParser()
    cli.register(p.add_subparsers(dest="cmd", required=True))
    args = p.parse_args(["lra", "probe", str(tmp_path / "final.ckpt"), "--task", "digits", "--data",
                         str(tmp_path / "x.npy"), "--labels", str(tmp_path / "y.npy"), "--n", "2", "--fit-n", "3",
                         "--out", str(tmp_path / "rep"), "--no-figure", "--directions", "circ_w1,toep_w1"])
    assert args.func(args) == 0
    assert "arm qk_transfer" in capsys.readouterr().out
    doc = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert doc["meta"]["arm"] == "qk_transfer"
    from toyspt.lra.inputs import load_pixels, select

    x, _ = load_pixels(str(tmp_path / "x.npy"), "digits")
    batch = make_batch(x, d.train.y[:5], None, 0.5, 0, pixel_levels(x, "digits"))
    cfg = ReportConfig(directions=("circ_w1", "toep_w1"), summary_directions=("circ_w1", "toep_w1"))
    want = lra_report(written, select(batch, slice(0, 2)), fit_batch=select(batch, slice(2, None)), cfg=cfg,
                      n_classes=10).table()
    got = pd.read_csv(tmp_path / "rep" / "table.csv")
    pd.testing.assert_frame_equal(got[want.columns], want, check_dtype=False, rtol=1e-12)
