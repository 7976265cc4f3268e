"""Probe records and their tables, built by hand (no gradients): each tensor held once, tidy
rows carry the right numbers, and the records sit below the engine."""
import dataclasses
import subprocess
import sys

import pytest
import torch

from toyspt.probe import engine as probes
from toyspt.probe import losses
from toyspt.probe import results as res

H, T, K, B, d = 2, 3, 2, 4, 4


def _records(with_parts: bool = True) -> res.LayerProbe:
    g = torch.Generator().manual_seed(0)
    rnd = lambda *shape: torch.randn(*shape, generator=g, dtype=torch.float64)  # noqa: E731
    qk = res.QKGrads(grad_W_Q=rnd(d, d), grad_W_K=rnd(d, d), dLdM=rnd(H, d, d),
                     dLdM_sv=torch.tensor([[3.0, 1.0, 0.0, 0.0], [2.0, 2.0, 1.0, 0.5]], dtype=torch.float64))
    pe = res.PerExampleProbe(G=rnd(B, H, T, T), deriv=rnd(B, H, K), row_heterogeneity=rnd(B, H).abs(),
                             grad_W_Q=rnd(B, d, d), grad_W_K=rnd(B, d, d), dLdM_sv=rnd(B, H, d).abs())
    G = rnd(H, T, T)
    return res.LayerProbe(site="blocks.0.attn.hook_attn_scores", G=G, grad_norm=torch.linalg.matrix_norm(G),
                          row_heterogeneity=rnd(H),
                          column_share=rnd(H), blind_share=rnd(H), deriv=rnd(H, K), cos=rnd(H, K),
                          deriv_jvp=rnd(H, K), qk=qk if with_parts else None,
                          per_example=pe if with_parts else None)


def test_records_hold_each_tensor_once():
    """Weight-side and per-example quantities live in their parts, never as flat copies."""
    lp = _records()
    with pytest.raises(dataclasses.FrozenInstanceError):
        lp.qk = None
    assert {f.name for f in dataclasses.fields(lp)} == {"site", "G", "grad_norm", "row_heterogeneity",
                                                         "column_share", "blind_share", "deriv", "cos",
                                                         "deriv_jvp", "qk", "per_example"}
    assert not hasattr(lp, "grad_W_Q") and not hasattr(lp, "G_per_example")


def test_frame_rows_carry_the_record():
    lp = _records()
    r = res.ProbeResult("label", 0.5, ("a", "b"), torch.zeros(K, T, T), (lp,))
    assert r[lp.site] is lp
    with pytest.raises(KeyError, match="no score site"):
        r["nope"]
    f = r.to_frame()
    assert list(f.columns) == ["loss", "layer", "head", "direction", "metric", "value"]
    one = lambda h, metric, direction=None: f.query(  # noqa: E731
        "head == @h and metric == @metric and " + ("direction.isnull()" if direction is None
                                                    else "direction == @direction"), engine="python").value
    # rank with the threshold sv1 * d * eps: [3, 1, 0, 0] has two non-zero singular values
    assert one(0, "dLdM_rank").item() == 2 and one(1, "dLdM_rank").item() == 4
    assert one(0, "dLdM_sv2_over_sv1").item() == 1 / 3
    rows_h1 = slice(d // H, d)  # head 1's rows of W_Q
    assert one(1, "grad_W_Q_norm").item() == lp.qk.grad_W_Q[rows_h1].norm().item()
    assert one(1, "cos", "b").item() == lp.cos[1, 1].item()
    cos_rms = lp.per_example.deriv.pow(2).mean(0).sqrt() / torch.linalg.matrix_norm(
        lp.per_example.G).pow(2).mean(0).sqrt()[:, None]
    assert torch.equal(lp.cos_rms_per_example, cos_rms)
    assert one(0, "cos_rms_per_example", "a").item() == cos_rms[0, 0].item()
    bare = res.ProbeResult("label", 0.5, ("a", "b"), torch.zeros(K, T, T), (_records(False),)).to_frame()
    assert not {"dLdM_rank", "grad_W_Q_norm", "cos_rms_per_example"} & set(bare.metric)


def test_blindness_ratio_and_table():
    a, b = _records(), _records()
    b = dataclasses.replace(b, cos=2 * a.cos)
    bl = res.Blindness(res.ProbeResult("label", 1.0, ("a", "b"), torch.zeros(K, T, T), (a,)),
                       res.ProbeResult("recon", 1.0, ("a", "b"), torch.zeros(K, T, T), (b,)))
    assert torch.equal(bl.ratio[a.site], torch.full((H, K), 0.5, dtype=torch.float64))
    t = bl.table()
    assert len(t) == H * K and (t.ratio == 0.5).all() and "ratio_per_example" in t
    assert set(bl.to_frame().loss) == {"label", "recon", "label/recon"}
    blind = res.Blindness(bl.label, dataclasses.replace(bl.recon, layers=(_records(False),)))
    assert blind.ratio_per_example is None and "ratio_per_example" not in blind.table()


def test_the_engine_reexports_nothing_and_sits_above_its_parts():
    for mod in (res, losses):
        assert not set(mod.__all__) & set(probes.__all__)
    # the records, the losses and the instrumentation sit below the engine
    code = ("import sys, toyspt.probe.results, toyspt.probe.losses, toyspt.probe.instrument; "
            "assert 'toyspt.probe.engine' not in sys.modules, 'imported the engine'")
    subprocess.run([sys.executable, "-c", code], check=True)
