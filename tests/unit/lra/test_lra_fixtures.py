"""Parity with the public LRA self-pretraining code on checkpoints its own modules wrote
(tests/fixtures/lra, made by make_fixtures.py there, which needs a checkout of that code
and is not run in CI): the bridge's outputs equal the outputs that code computed."""
from pathlib import Path

import pytest
import torch
from helpers.parity import parity_tol

from toyspt.lra.checkpoint import load_lra

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "lra"
NAMES = sorted(p.name[:-5] for p in FIXTURES.glob("*.ckpt"))
# Same operations in a different order (fused vs explicit attention, einsum vs elementwise
# rotary): the bound is the rounding of the reductions along one output (parity.py: the
# accumulation count x eps x the output size), about 1e-4 in float32 and 2e-13 in float64 here.
EXPECTED = {  # what each fixture exercises, as the bridge reads it
    "listops_relu": dict(activation="relu"), "listops_silu": dict(activation="silu"),
    "local_lookaround2": dict(window=4, look_backward=2, look_forward=1, pool="max"),
    "local_rotary_causal": dict(window=4, look_backward=2, look_forward=0, causal=True, rotary=True),
    "rotary": dict(rotary=True), "mha_causal": dict(causal=True), "mha_noncausal": dict(causal=False),
    "retrieval": dict(head="retrieval", head_activation="gelu"), "image_mlp": dict(head="mlp", encoder="linear"),
    "spt_tokens": dict(head="none", rec_out=12),
}


def test_fixtures_present():
    assert set(EXPECTED) <= set(NAMES) and "listops_gelu" in NAMES


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", NAMES)
def test_bridge_equals_that_code(name, dtype):
    ref = torch.load(FIXTURES / f"{name}.ref.pt", weights_only=True)
    loaded = load_lra(FIXTURES / f"{name}.ckpt", dtype=dtype)
    for k, v in EXPECTED.get(name, {}).items():
        assert getattr(loaded.cfg, k) == v, (k, getattr(loaded.cfg, k))
    assert loaded.report.unused == []
    x = ref["inputs"].to(dtype) if ref["inputs"].is_floating_point() else ref["inputs"]
    with torch.no_grad():
        out = (loaded.model.reconstruct(x) if loaded.cfg.rec_out
               else loaded.model.classify(x, ref["lengths"]))
        explicit_vs_fused = (loaded.model.classify(x, ref["lengths"], impl="sdpa")
                             if not loaded.cfg.rec_out else loaded.model.reconstruct(x, impl="sdpa"))
    want = ref[f"out_{str(dtype).split('.')[-1]}"]
    assert out.shape == want.shape
    tol = parity_tol(loaded.cfg, ref["inputs"].shape[1], dtype, want)
    assert float((out - want).abs().max()) <= tol
    assert float((explicit_vs_fused - want).abs().max()) <= tol
