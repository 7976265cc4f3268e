"""Heads an LRA checkpoint lacks (toyspt.lra.heads), and that code's PathFinder SPT setting
(lm_loss ce: a 256-way decoder over grey levels) loaded and probed instead of refused."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from toyspt.kinds.tasks import pixels_as_sequences
from toyspt.lra.checkpoint import load_lra, save_lra
from toyspt.lra.heads import fit_missing_heads, least_squares_decoder, with_mask_column
from toyspt.lra.inputs import LOSSES, make_batch, mask_pixels, pixel_levels
from toyspt.lra.lightning import CheckpointError
from toyspt.lra.model import LRAConfig, build_lra
from toyspt.lra.report import ReportConfig, lra_report

CLS = LRAConfig(n_layers=1, d_model=8, n_heads=2, d_ff=16, encoder="linear", d_input=1, max_len=64,
                n_classes=2, use_lengths=False)
CE256 = LRAConfig(n_layers=1, d_model=8, n_heads=2, d_ff=16, encoder="linear", d_input=2, max_len=64,
                  head="none", rec_out=256, use_lengths=False)
RCFG = ReportConfig(directions=("circ_w1", "toep_w1"), summary_directions=("toep_w1",), fit_steps=20)


def _pixels(n=6, side=6, seed=0):
    raw = np.random.default_rng(seed).integers(0, 256, (n, side, side)).astype(np.uint8)
    return raw, pixels_as_sequences(raw).double()


def test_levels_are_the_raw_grey_levels():
    raw, x = _pixels()
    assert torch.equal(pixel_levels(x, "pathfinder"), torch.from_numpy(raw.reshape(len(raw), -1)).long())


def test_a_pixel_classifier_gets_a_zero_mask_column_and_the_least_squares_decoder():
    model = build_lra(CLS, 0).double()
    _, x = _pixels()
    batch = make_batch(x, torch.tensor([0, 1, 0, 1, 1, 0]), None, 0.5, 3)
    wide = with_mask_column(model)
    with torch.no_grad():  # clean inputs: the same function
        assert torch.equal(wide.classify(torch.cat([x, torch.zeros_like(x)], -1)), model.classify(x))
    fitted, notes = fit_missing_heads(model, batch)
    assert fitted.cfg.d_input == 2 and model.cfg.d_input == 1 and model.head_rec is None
    assert torch.equal(fitted.embed.weight[:, 1], torch.zeros(8, dtype=torch.float64))
    assert any("zero mask column" in n for n in notes) and any("least-squares" in n for n in notes)
    # the decoder solves the least-squares problem: the residual is orthogonal to [H, 1]
    m = batch["mask"]
    with torch.no_grad():
        H = fitted.encode(mask_pixels(x, m))[m]
        r = fitted.head_rec(H)[:, 0] - x[m][:, 0]
    A = torch.cat([H, torch.ones(len(H), 1, dtype=H.dtype)], 1)
    assert (A.T @ r).abs().max() <= 64 * len(H) * torch.finfo(torch.float64).eps * A.abs().max() * r.abs().max()
    head, r2, l1 = least_squares_decoder(fitted, x, m)
    with torch.no_grad():
        assert 0 <= r2 <= 1 and l1 == pytest.approx(float(LOSSES["recon"](fitted, batch)), rel=1e-12)
    rep = lra_report(model, batch, cfg=RCFG)
    assert rep.table()["ratio_toep_w1"].notna().all()


def _train_ce256(x, levels, steps=20):
    """A few AdamW steps of that code's PathFinder SPT setting: [x (1-m), m] in, 256-way CE on masked pixels."""
    model = build_lra(CE256, 0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(0)
    for _ in range(steps):
        m = torch.rand(x.shape[:2], generator=g) < 0.5
        loss = F.cross_entropy(model.reconstruct(mask_pixels(x.float(), m))[m], levels[m])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model


def test_pathfinder_lm_loss_ce_checkpoint_is_loaded_and_probed(tmp_path):
    raw, x = _pixels()
    levels = pixel_levels(x, "pathfinder")
    model = _train_ce256(x, levels)
    p = tmp_path / "pf_lm.ckpt"
    save_lra(p, model, dataset={"_name_": "pathfinder_lm", "mlm_prob": 0.5, "lm_loss": "ce"})
    loaded = load_lra(p)
    assert loaded.cfg.rec_out == 256 and any("256 grey levels" in n for n in loaded.report.notes)
    batch = make_batch(x, torch.tensor([0, 1, 0, 1, 1, 0]), None, 0.5, 1, levels)
    m = batch["mask"]
    with torch.no_grad():
        want = F.cross_entropy(loaded.model.reconstruct(mask_pixels(x, m))[m], torch.from_numpy(
            raw.reshape(len(raw), -1).astype(np.int64))[m])
        assert float(LOSSES["recon"](loaded.model, batch)) == pytest.approx(float(want), rel=1e-12)
    rep = lra_report(loaded.model, batch, cfg=RCFG, n_classes=2)
    assert rep.table()["ratio_toep_w1"].notna().all()
    with pytest.raises(ValueError, match="levels"):
        LOSSES["recon"](loaded.model, {k: v for k, v in batch.items() if k != "levels"})


@pytest.mark.parametrize("loss,out", [("ce", 1), ("l1", 256)])
def test_an_lm_loss_that_contradicts_the_decoder_is_refused(tmp_path, loss, out):
    model = build_lra(LRAConfig(**{**CE256.__dict__, "rec_out": out}), 0)
    save_lra(tmp_path / "m.ckpt", model, dataset={"mlm_prob": 0.5, "lm_loss": loss})
    with pytest.raises(CheckpointError, match="lm_loss"):
        load_lra(tmp_path / "m.ckpt")


@pytest.mark.parametrize("bad", [{"seed": 0}, {"arm": 3}, {"arm": "spt", "x": [1]}])
def test_a_malformed_provenance_section_is_refused(tmp_path, bad):
    from toyspt.lra.checkpoint import lra_state_dict, run_config
    from toyspt.lra.lightning import write_checkpoint

    model = build_lra(CLS, 0)
    write_checkpoint(tmp_path / "m.ckpt", lra_state_dict(model),
                     run_config(model.cfg, dataset={"mlm_prob": 0.0}, extra={"toyspt": bad}))
    with pytest.raises(CheckpointError, match="toyspt"):
        load_lra(tmp_path / "m.ckpt")
