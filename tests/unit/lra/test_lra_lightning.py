"""Safe reading of Lightning checkpoints: the pickled config loads as plain data, code in a
pickle never runs, broken files give clear errors."""
import os
import pickle

import pytest
import torch

from toyspt.lra.lightning import CheckpointError, CheckpointRefused, read_checkpoint, write_checkpoint

CONFIG = {"model": {"d_model": 8, "n_layers": 1, "prenorm": True,
                    "layer": [{"_name_": "mhfa", "n_heads": 2, "causal": False, "dropout": None},
                              {"_name_": "ff", "expand": 2, "dropout": "${...dropout}"}]},
          "dataset": {"_name_": "listops_new", "l_max": 2048, "mlm_prob": 0.0},
          "encoder": "embedding", "rate": 0.5, "nothing": None}


def _globals(path):
    """Names of the globals the checkpoint's pickle refers to."""
    import pickletools
    import zipfile
    with zipfile.ZipFile(path) as zf:
        data = zf.read(next(n for n in zf.namelist() if n.endswith("data.pkl")))
    return {arg for op, arg, _ in pickletools.genops(data) if op.name == "GLOBAL"}


def test_written_checkpoint_holds_a_pickled_dictconfig_and_reads_back(tmp_path):
    p = tmp_path / "a.ckpt"
    sd = {"w": torch.randn(3, 2), "b": torch.arange(3.0)}
    write_checkpoint(p, sd, CONFIG, epoch=4, global_step=40)
    g = _globals(p)
    assert "omegaconf.dictconfig DictConfig" in g and "omegaconf.nodes AnyNode" in g
    # the pickled config really is beyond weights_only=True
    with pytest.raises(pickle.UnpicklingError):
        torch.load(p, weights_only=True)
    raw = read_checkpoint(p)
    assert raw.config == CONFIG
    assert raw.meta["epoch"] == 4 and raw.meta["global_step"] == 40
    assert raw.meta["hparams_type"] == "omegaconf.dictconfig.DictConfig"
    assert set(raw.state_dict) == set(sd) and all(torch.equal(raw.state_dict[k], v) for k, v in sd.items())
    assert not list(tmp_path.glob(".tmp_*"))


def test_real_omegaconf_checkpoint_reads_safely_and_ours_load_with_omegaconf(tmp_path):
    oc = pytest.importorskip("omegaconf")
    real = oc.OmegaConf.create(CONFIG)
    p = tmp_path / "real.ckpt"
    torch.save({"state_dict": {"w": torch.ones(2)}, "hyper_parameters": real,
                "hparams_type": type(real), "epoch": 1}, p)
    assert read_checkpoint(p).config == CONFIG
    q = tmp_path / "ours.ckpt"
    write_checkpoint(q, {"w": torch.ones(2)}, CONFIG)
    back = torch.load(q, weights_only=False)["hyper_parameters"]
    assert isinstance(back, oc.DictConfig)
    assert oc.OmegaConf.to_container(back) == CONFIG


class _Touch:
    """Unpickling this object would create a file (if anything ran it)."""

    def __init__(self, target, fn):
        self.target, self.fn = target, fn

    def __reduce__(self):
        if self.fn == "system":
            return (os.system, (f"touch {self.target}",))
        return (eval, (f"open({str(self.target)!r}, 'w').close()",))


@pytest.mark.parametrize("fn", ["system", "eval"])
def test_code_in_a_pickle_is_refused_and_nothing_runs(tmp_path, fn):
    marker = tmp_path / "ran"
    p = tmp_path / "evil.ckpt"
    torch.save({"state_dict": {"w": torch.ones(1)}, "hyper_parameters": _Touch(marker, fn)}, p)
    with pytest.raises(CheckpointRefused, match="Nothing from the file was executed") as e:
        read_checkpoint(p)
    assert ("system" in str(e.value)) if fn == "system" else ("eval" in str(e.value))
    assert not marker.exists()
    # with trust the same file does run code: the refusal above is what protects the user
    read_checkpoint(p, trust=True)
    assert marker.exists()


def test_truncated_empty_and_foreign_files(tmp_path):
    good = tmp_path / "good.ckpt"
    write_checkpoint(good, {"w": torch.randn(64, 64)}, CONFIG)
    data = good.read_bytes()
    for cut in (len(data) // 2, len(data) - 10):
        t = tmp_path / f"cut{cut}.ckpt"
        t.write_bytes(data[:cut])
        with pytest.raises(CheckpointError, match="truncated or corrupt"):
            read_checkpoint(t)
    (tmp_path / "empty.ckpt").write_bytes(b"")
    with pytest.raises(CheckpointError, match="empty file"):
        read_checkpoint(tmp_path / "empty.ckpt")
    (tmp_path / "text.ckpt").write_text("hello")
    with pytest.raises(CheckpointError, match="not a checkpoint"):
        read_checkpoint(tmp_path / "text.ckpt")
    with pytest.raises(CheckpointError, match="no such file"):
        read_checkpoint(tmp_path / "missing.ckpt")


def test_unknown_formats(tmp_path):
    p = tmp_path / "list.ckpt"
    torch.save([torch.ones(1)], p)
    with pytest.raises(CheckpointError, match="unknown format"):
        read_checkpoint(p)
    torch.save({"model_state_dict": {"w": torch.ones(1)}, "step": 3}, p)
    with pytest.raises(CheckpointError, match="no 'state_dict'"):
        read_checkpoint(p)
    torch.save({"w": torch.ones(2)}, p)  # a bare state dict is accepted
    assert read_checkpoint(p).config is None
