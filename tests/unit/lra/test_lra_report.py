"""The probe report on bridge models: probes through toyspt.probe.engine agree with a direct
autograd computation, the aggregation is the documented rms cosine, heads are fitted
when missing, displacement is exact, and the outputs are written."""
import json
import math

import pandas as pd
import pytest
import torch

from toyspt.data import directions as dr
from toyspt.kinds import listops as lo
from toyspt.lra.inputs import LOSSES, make_batch, select
from toyspt.lra.model import LRAConfig, build_lra
from toyspt.lra.report import (
    ReportConfig,
    aggregate_probes,
    displacement_rows,
    fit_missing_heads,
    lra_report,
    probe_rows,
)
from toyspt.nn.attention import hooks

CFG = LRAConfig(n_layers=2, d_model=16, n_heads=2, d_ff=32, max_len=64, rec_out=19)
RCFG = ReportConfig(directions=("circ_w1", "toep_w1", "prev"))


@pytest.fixture(scope="module")
def batch():
    b, vocab = lo.make_listops(lo.ListOpsConfig(max_depth=3, max_args=4, min_len=8, max_len=24), 6, seed=2)
    assert len(vocab) <= 19
    return make_batch(b.ids, b.y, b.lengths, 0.5, seed=0)


def _direct_deriv(model, ex, loss, layer, head, name):
    """<dL/dS, D_hat> for one example by plain autograd on a captured score tensor."""
    got = {}

    def keep(t, n):
        t.retain_grad()
        got["S"] = t
        return t

    with hooks(model, [(f"blocks.{layer}.attn.hook_attn_scores", keep)]):
        LOSSES[loss](model, ex).backward()
    T = got["S"].shape[-1]
    D = dr.normalise(dr.direction(name, T))
    G = got["S"].grad[0, head]
    return float((G * D).sum()), float(torch.linalg.matrix_norm(G))


def test_probe_rows_match_direct_autograd_and_aggregate(batch):
    model = build_lra(CFG, seed=0).double()
    rows = probe_rows(model, batch, RCFG)
    f = pd.DataFrame(rows)
    for ex_i in (0, 3):
        ex = select(batch, slice(ex_i, ex_i + 1))
        for loss in ("label", "recon"):
            d, g = _direct_deriv(model, ex, loss, 1, 1, "toep_w1")
            model.zero_grad()
            sel = f[(f.example == ex_i) & (f.loss == loss) & (f.layer == 1) & (f["head"] == 1)]
            # float64 autograd of the same graph in a different order: relative rounding ~1e-15
            got = sel[(sel.metric == "deriv") & (sel.direction == "toep_w1")].value.item()
            assert got == pytest.approx(d, rel=1e-9, abs=1e-14)
            assert sel[sel.metric == "grad_norm"].value.item() == pytest.approx(g, rel=1e-9)
    agg = aggregate_probes(rows)
    sel = f[(f.layer == 0) & (f["head"] == 0)]
    rms = lambda v: math.sqrt((v ** 2).mean())  # noqa: E731
    cos = {loss: rms(sel[(sel.loss == loss) & (sel.direction == "prev")].value.values)
           / rms(sel[(sel.loss == loss) & (sel.metric == "grad_norm")].value.values)
           for loss in ("label", "recon")}
    a = agg[(agg.layer == 0) & (agg["head"] == 0) & (agg.direction == "prev")].set_index("metric").value
    assert a["cos_rms_label"] == pytest.approx(cos["label"], rel=1e-12)
    assert a["ratio"] == pytest.approx(cos["label"] / cos["recon"], rel=1e-12)


def test_missing_heads_are_fitted(batch):
    spt = build_lra(LRAConfig(n_layers=1, d_model=16, n_heads=2, d_ff=16, max_len=64, head="none",
                              rec_out=19), 0).double()
    fitted, notes = fit_missing_heads(spt, batch, RCFG)
    assert fitted.head_cls is not None and spt.head_cls is None  # the input model is untouched
    assert any("classifier" in n for n in notes)
    # the fit reaches lower loss than the zero head (log 10 for 10 classes)
    assert LOSSES["label"](fitted, batch).item() < math.log(10)
    cls = build_lra(LRAConfig(n_layers=1, d_model=16, n_heads=2, d_ff=16, max_len=64), 0).double()
    fitted, notes = fit_missing_heads(cls, batch, RCFG)
    assert fitted.head_rec is not None and any("decoder" in n for n in notes)
    assert LOSSES["recon"](fitted, batch).item() < math.log(19)


def test_displacement_is_exact():
    a, b = build_lra(CFG, 0), build_lra(CFG, 1)
    rows, skipped = displacement_rows(a, b)
    f = pd.DataFrame(rows)
    want = torch.linalg.matrix_norm(a.blocks[1].attn.W_K.weight.double() - b.blocks[1].attn.W_K.weight.double()).item()
    got = f[(f.section == "matrix") & (f.name == "blocks.1.attn.W_K") & (f.metric == "disp_ref")].value.item()
    assert got == pytest.approx(want, rel=1e-12)
    per_head = f[(f.section == "head") & (f.name == "blocks.1.attn.W_K") & (f.metric == "disp_ref")].value
    assert math.sqrt((per_head ** 2).sum()) == pytest.approx(want, rel=1e-12)  # row blocks partition W_K
    assert rows and skipped == []
    zero, _ = displacement_rows(a, a)
    assert max(r["value"] for r in zero if r["metric"] == "disp_ref") == 0.0


def test_report_outputs(tmp_path, batch):
    model = build_lra(CFG, 0)
    rep = lra_report(model, select(batch, slice(0, 3)), fit_batch=batch, ref=build_lra(CFG, 1), cfg=RCFG)
    t = rep.table()
    assert len(t) == CFG.n_layers * CFG.n_heads
    assert {"ratio_circ_w1", "ratio_toep_w1", "rowhet_label", "rowhet_recon", "proximity_index",
            "self_index", "rel_M", "rel_W_Q"} <= set(t.columns)
    assert t.notna().all().all()
    paths = rep.write(tmp_path)
    assert {p.name for p in paths} == {"table.csv", "records.csv", "report.json", "report.png"}
    doc = json.loads((tmp_path / "report.json").read_text())
    assert len(doc["table"]) == 4 and doc["meta"]["n_examples"] == 3
    prof = rep.profiles
    assert set(prof.metric) >= {"attn_weight", "score_centred", "pos_score", "proximity_index"}
    # attention weights by offset average probabilities: each lies in [0, 1]
    aw = prof[prof.metric == "attn_weight"].value
    assert aw.between(0, 1).all()


@pytest.mark.parametrize("cfg", [CFG, LRAConfig(n_layers=2, d_model=16, n_heads=2, d_ff=32, max_len=64,
                                                 rec_out=19, window=4, look_backward=2, rotary=True)],
                         ids=["global", "local_rotary"])
def test_lean_engine_equals_the_probes_engine(batch, cfg):
    """The per-layer/per-head reduction gives the rows of toyspt.probe.engine.probe."""
    model = build_lra(cfg, seed=0).double()
    b = select(batch, slice(0, 3))
    if cfg.window:  # local attention needs lengths that are multiples of the window (no padding)
        ids = torch.randint(4, 19, (3, 16), generator=torch.Generator().manual_seed(1))
        b = make_batch(ids, b["y"], None, 0.5, seed=0)
    lean = pd.DataFrame(probe_rows(model, b, RCFG))
    ref = pd.DataFrame(probe_rows(model, b, ReportConfig(directions=RCFG.directions, engine="probes")))
    key = ["example", "loss", "layer", "head", "metric", "direction"]
    m = lean.merge(ref, on=key, how="outer", suffixes=("_lean", "_ref"))
    assert len(m) == len(ref) == len(lean) and m.value_ref.notna().all()
    # float64, the same gradients reduced in a different order: relative rounding ~1e-14
    assert ((m.value_lean - m.value_ref).abs() <= 1e-10 * (1 + m.value_ref.abs())).all()
    assert all(p.requires_grad for p in model.parameters())  # weights unfrozen afterwards
