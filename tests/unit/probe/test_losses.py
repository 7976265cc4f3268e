"""The toy model's probe losses and batch format."""
import pytest
import torch

from toyspt.data.tasks import recon_loss
from toyspt.nn.model import ModelConfig, build_model
from toyspt.probe import losses


def test_make_batch_checks_shapes_and_is_seeded(small_data):
    x, y = small_data.train.x[:8], small_data.train.y[:8]
    a, b = losses.make_batch(x, y, seed=4), losses.make_batch(x, y, seed=4)
    assert set(a) == {"x", "y", "mask"} and a["mask"].shape == x.shape[:2]
    assert torch.equal(a["mask"], b["mask"])
    assert "y" not in losses.make_batch(x)
    with pytest.raises(ValueError, match="expected \\(B, T, dim\\)"):
        losses.make_batch(x[0])
    with pytest.raises(ValueError, match="y: expected shape"):
        losses.make_batch(x, y[:3])


def test_losses_match_the_model_heads(small_data):
    model = build_model(ModelConfig(d_model=16, d_mlp=32), seed=0)
    batch = losses.make_batch(small_data.train.x[:8], small_data.train.y[:8], seed=1)
    ce = torch.nn.functional.cross_entropy(model.classify(batch["x"]), batch["y"])
    assert torch.equal(losses.TOY_LOSSES["label"](model, batch), ce)
    x, m = batch["x"], batch["mask"]
    mse = losses.recon("mse")
    assert mse.__name__ == "recon_mse"
    assert torch.equal(mse(model, batch), recon_loss(model.reconstruct(x, m, "all"), x, m, "mse"))
    with pytest.raises(KeyError, match="no 'y'"):
        losses.label_loss(model, {"x": x})
    with pytest.raises(KeyError, match="needs a mask"):
        losses.TOY_LOSSES["recon"](model, {"x": x})
