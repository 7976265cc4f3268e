"""The LRA tasks as data kinds (toyspt.kinds.tasks, toyspt.kinds.fashion): splits and shapes, keys that
rebuild their source, the run's model is the LRA architecture (toyspt.lra.convert), token SPT's
cross-entropy, Fashion-MNIST read from IDX files and refused in one line without them."""
import gzip
from dataclasses import replace

import numpy as np
import pytest
import torch

from toyspt.data import source
from toyspt.data.tasks import mask_inputs, recon_loss
from toyspt.kinds import listops as lo
from toyspt.kinds.fashion import FashionNotFound, FashionSource, find_root
from toyspt.kinds.pathfinder import PathfinderConfig
from toyspt.kinds.tasks import VOCAB, DigitsSource, ListOpsSource, PathfinderSource
from toyspt.lra.convert import to_lra
from toyspt.nn.model import ModelConfig, build_model
from toyspt.runs.specs import RunSpec, spec_from_dict

TINY_PF = PathfinderSource(PathfinderConfig(size=8, origin_distance=3.0, contour_length=2, n_distractors=1,
                                            distractor_length=1, dash_length=1.5), n_train=24, n_val=8, n_test=8)
TINY_LO = ListOpsSource(lo.ListOpsConfig(max_depth=3, max_args=4, min_len=8, max_len=24), n_train=24, n_val=8,
                        n_test=8)
MODEL = ModelConfig(d_model=8, n_heads=2, d_mlp=16, max_len=300)


@pytest.mark.parametrize("src", [TINY_PF, DigitsSource(side=16), TINY_LO], ids=["pathfinder", "digits", "listops"])
def test_a_source_is_a_data_kind_whose_key_rebuilds_it(src):
    d = src.load()
    assert d.train.x.shape[1:] == (src.length, src.width) and len(d.val) == src.load().val.x.shape[0]
    assert int(d.train.y.max()) < src.n_classes
    model = src.fit(MODEL)
    assert (model.d_in, model.n_classes) == (src.width, src.n_classes)
    spec = RunSpec("scratch", seed=3, data=src, model=model)
    again = spec_from_dict(spec.to_dict())
    assert again == spec and again.key() == spec.key()
    assert src.kind in source.kinds()
    with pytest.raises(ValueError, match="max_len"):
        src.fit(replace(MODEL, max_len=src.length - 1))


def test_pixels_normalised_as_the_bridge_does():
    x = DigitsSource(side=8).load().train.x
    assert float(x.min()) == -1.0 and float(x.max()) == 1.0  # (x/255 - 0.5)/0.5 of 0..255
    y = TINY_PF.load().train.x
    assert float(y.min()) == -1.0 and float(y.max()) <= 1.0


def test_a_key_of_other_generated_data_is_refused():
    d = RunSpec("scratch", data=TINY_PF, model=TINY_PF.fit(MODEL)).to_dict()
    d["version"] = "lra-tasks-0"
    with pytest.raises(ValueError, match="data"):
        spec_from_dict(d)


def test_listops_one_hot_rows_label_and_pad():
    d = TINY_LO.load()
    x = d.train.x
    assert torch.equal(x.sum(-1), torch.ones(x.shape[:2]))  # one token per position
    ids = x.argmax(-1)
    for row, y in zip(ids[:8], d.train.y[:8]):
        toks = [VOCAB.itos[i] for i in row.tolist()]
        assert lo.evaluate_tokens(toks) == int(y)
        n = toks.index("<eos>")
        assert set(toks[n + 1:]) <= {"<pad>"}


def test_token_spt_loss_is_cross_entropy_on_masked_tokens():
    x = TINY_LO.load().train.x[:4]
    m = torch.zeros(x.shape[:2], dtype=torch.bool)
    m[:, 2] = True
    logits = torch.randn(*x.shape)
    want = torch.nn.functional.cross_entropy(logits[:, 2], x[:, 2].argmax(-1))
    assert torch.allclose(recon_loss(logits, x, m, "ce"), want)


@pytest.mark.parametrize("token", [False, True], ids=["pixels", "tokens"])
def test_the_run_model_is_the_lra_architecture(token):
    """The toy model the trainer trains computes what toyspt.lra.model computes with its weights:
    class logits, and the SPT decoder on masked inputs (float64: equal to rounding)."""
    src = TINY_LO if token else TINY_PF
    model = build_model(replace(src.fit(MODEL), n_layers=2), 5).double()
    lra = to_lra(model, token).double()
    x = src.load().train.x[:6].double()
    m = torch.rand(x.shape[:2], generator=torch.Generator().manual_seed(0)) < 0.3
    with torch.no_grad():
        want_cls, want_rec = model.classify(x), model.reconstruct(x, m)
        if token:
            ids = x.argmax(-1)
            got_cls = lra.classify(ids)
            got_rec = lra.reconstruct(torch.where(m, torch.zeros_like(ids), ids))
        else:
            got_cls = lra.classify(mask_inputs(x, None))  # [value, mask = 0], the LRA SPT code's pixel input
            got_rec = lra.reconstruct(mask_inputs(x, m))
    assert torch.allclose(got_cls, want_cls, atol=1e-12) and torch.allclose(got_rec, want_rec, atol=1e-12)


def _idx(path, arr, magic, compress):
    head = magic.to_bytes(4, "big") + b"".join(int(s).to_bytes(4, "big") for s in arr.shape)
    data = head + arr.astype(np.uint8).tobytes()
    (gzip.open if compress else open)(path, "wb").write(data)


def _fake_fashion(root, n_train=40, n_test=20, compress=True):
    rng = np.random.default_rng(0)
    suffix = ".gz" if compress else ""
    for split, n in (("train", n_train), ("t10k", n_test)):
        _idx(root / f"{split}-images-idx3-ubyte{suffix}", rng.integers(0, 256, (n, 28, 28)), 0x803, compress)
        _idx(root / f"{split}-labels-idx1-ubyte{suffix}", rng.integers(0, 10, n), 0x801, compress)


def test_fashion_mnist_read_from_files_and_refused_without(tmp_path, monkeypatch):
    monkeypatch.delenv("TOYSPT_FASHION_MNIST", raising=False)
    with pytest.raises(FashionNotFound, match="name their folder"):
        find_root(str(tmp_path))
    _fake_fashion(tmp_path)
    src = FashionSource.at(str(tmp_path), n_train=20, n_val=10, n_test=20)
    d = src.load()
    assert d.train.x.shape == (20, 196, 1) and d.test.x.shape == (20, 196, 1)
    spec = RunSpec("scratch", data=src, model=src.fit(MODEL))
    moved = replace(src, root=str(tmp_path / "elsewhere"))
    assert RunSpec("scratch", data=moved, model=src.fit(MODEL)).key() == spec.key()  # content names the data
    (tmp_path / "t10k-labels-idx1-ubyte.gz").write_bytes(gzip.compress(b"\x00\x00\x08\x01" + b"\x00" * 3))
    with pytest.raises(ValueError, match="t10k-labels"):
        FashionSource.at(str(tmp_path))
