"""Weight groups (toyspt.probe.groups) and their displacement through tracking.displacement."""
import math

import pytest

from toyspt.nn.model import ModelConfig, build_model
from toyspt.probe.groups import group_matrices
from toyspt.probe.tracking import displacement


def test_groups_partition_the_attention_and_heads_partition_the_layer():
    cfg = ModelConfig(d_in=1, d_model=8, n_heads=2, n_layers=2, d_mlp=16, max_len=16)
    a, b = build_model(cfg, 0).state_dict(), build_model(cfg, 1).state_dict()
    rows = {r["name"]: r["value"] for r in displacement(group_matrices(a, 2), group_matrices(b, 2), "g")
            if r["metric"] == "disp_g"}
    for layer in (0, 1):
        for n in "QKV":  # row blocks (with their biases) partition the layer's map
            per_head = math.sqrt(sum(rows[f"blocks.{layer}.{n}.h{h}"] ** 2 for h in (0, 1)))
            assert per_head == pytest.approx(rows[f"blocks.{layer}.{n}"], rel=1e-12)
        w = (a[f"blocks.{layer}.mlp.0.weight"] - b[f"blocks.{layer}.mlp.0.weight"]).double().norm()
        assert rows[f"blocks.{layer}.mlp"] >= w.item()
    assert {"embed", "final_norm"} <= set(rows) and not any("head_" in k for k in rows)
