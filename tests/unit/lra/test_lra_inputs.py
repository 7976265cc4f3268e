"""Pixel normalisation as the LRA code does it, SPT masking, and the two losses."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from toyspt.lra import inputs as li
from toyspt.lra.model import LRAConfig, build_lra


def test_pixel_normalisation():
    x = np.array([[[0, 255], [122, 61]]], dtype=np.uint8)  # (1, 2, 2)
    img = li.normalize_pixels(x, "image")
    assert img.shape == (1, 4, 1)
    expect = (np.array([0, 255, 122, 61]) / 255 - 122.6 / 255) / (61 / 255)
    np.testing.assert_allclose(img[0, :, 0].numpy(), expect, rtol=1e-6)
    pf = li.normalize_pixels(x, "pathfinder")
    np.testing.assert_allclose(pf[0, :, 0].numpy(), np.array([0, 255, 122, 61]) / 127.5 - 1, rtol=1e-6)
    rgb = np.zeros((1, 1, 1, 3), dtype=np.uint8)
    rgb[..., 0], rgb[..., 1], rgb[..., 2] = 200, 100, 50
    # PIL's L = (19595 R + 38470 G + 7471 B + 32768) >> 16 = 124 (0.299 R + 0.587 G + 0.114 B = 124.2)
    assert li.normalize_pixels(rgb, "image")[0, 0, 0].item() == pytest.approx((124 - 122.6) / 61, rel=1e-6)
    with pytest.raises(ValueError, match="0..255"):
        li.normalize_pixels(np.full((1, 4), 300.0), "image")
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        li.normalize_pixels(np.full((1, 4), 0.5), "image")


def test_load_pixels_refuses_pickled_arrays(tmp_path):
    p = tmp_path / "x.npy"
    np.save(p, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match="pickled"):
        li.load_pixels(str(p), "image")
    np.save(p, np.zeros((3, 4, 4), dtype=np.uint8))
    np.save(tmp_path / "y.npy", np.array([0, 1, 2]))
    x, y = li.load_pixels(str(p), "pathfinder", str(tmp_path / "y.npy"))
    assert x.shape == (3, 16, 1) and y.tolist() == [0, 1, 2]


def test_spt_mask_respects_lengths_and_rate():
    m = li.spt_mask((200, 50), 0.5, torch.full((200,), 30), torch.Generator().manual_seed(0))
    assert not m[:, 30:].any()
    assert abs(m[:, :30].float().mean().item() - 0.5) < 0.02  # 6000 Bernoulli draws: sd 0.0065


def test_token_and_pixel_reconstruction_losses():
    ids = torch.tensor([[5, 6, 7, 3]])
    mask = torch.tensor([[True, False, True, False]])
    assert li.mask_tokens(ids, mask).tolist() == [[0, 6, 0, 3]]
    logits = torch.randn(1, 4, 19)
    ref = (F.cross_entropy(logits[0, 0], ids[0, 0]) + F.cross_entropy(logits[0, 2], ids[0, 2])) / 2
    torch.testing.assert_close(li.token_recon_loss(logits, ids, mask), ref)
    v = torch.tensor([[[1.0], [2.0], [3.0], [4.0]]])
    assert li.mask_pixels(v, mask).tolist() == [[[0.0, 1.0], [2.0, 0.0], [0.0, 1.0], [4.0, 0.0]]]
    pred = torch.zeros(1, 4, 1)
    assert li.pixel_recon_loss(pred, v, mask).item() == pytest.approx(2.0)
    with pytest.raises(ValueError, match="no position"):
        li.pixel_recon_loss(pred, v, torch.zeros(1, 4, dtype=torch.bool))


def test_losses_on_models():
    tok = build_lra(LRAConfig(n_layers=1, d_model=8, n_heads=2, d_ff=8, max_len=32, rec_out=19))
    batch = li.make_batch(torch.randint(4, 19, (3, 10)), torch.tensor([1, 2, 3]),
                          torch.tensor([10, 6, 3]), p_mask=0.5, seed=0)
    assert li.label_loss(tok, batch).item() > 0 and li.spt_loss(tok, batch).item() > 0
    pix = build_lra(LRAConfig(n_layers=1, d_model=8, n_heads=2, d_ff=8, max_len=32, encoder="linear",
                              d_input=2, rec_out=1, use_lengths=False))
    pb = li.make_batch(torch.randn(3, 10, 1), torch.tensor([0, 1, 2]), seed=1)
    assert li.spt_loss(pix, pb).item() > 0 and li.label_loss(pix, pb).item() > 0
