"""``toyspt lra ...`` through its own parser: inspect, probe on generated ListOps with a
reference checkpoint, clear errors, and the quick demo."""
import argparse
import json

import numpy as np
import pytest
import torch

from toyspt.lra import cli
from toyspt.lra.checkpoint import save_lra
from toyspt.lra.model import LRAConfig, build_lra

CFG = LRAConfig(n_layers=2, d_model=16, n_heads=2, d_ff=32, max_len=64)


def run(argv):
    p = argparse.ArgumentParser(prog="toyspt")
    cli.register(p.add_subparsers(dest="cmd", required=True))
    args = p.parse_args(argv)
    return args.func(args)


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory):
    d = tmp_path_factory.mktemp("ckpt")
    save_lra(d / "a.ckpt", build_lra(CFG, 0), dataset={"_name_": "listops_new", "mlm_prob": 0.0})
    save_lra(d / "b.ckpt", build_lra(CFG, 1), dataset={"_name_": "listops_new", "mlm_prob": 0.0})
    return d


def test_inspect(ckpts, capsys):
    assert run(["lra", "inspect", str(ckpts / "a.ckpt")]) == 0
    out = capsys.readouterr().out
    assert "n_heads          2" in out and "linears attention layout" in out


def test_probe_generated_listops_with_reference(ckpts, tmp_path, capsys):
    out_dir = tmp_path / "rep"
    assert run(["lra", "probe", str(ckpts / "a.ckpt"), "--task", "listops", "--n", "2", "--fit-n", "16",
                "--min-len", "8", "--max-len", "30", "--max-depth", "3", "--max-args", "4",
                "--ref", str(ckpts / "b.ckpt"), "--out", str(out_dir), "--no-figure",
                "--directions", "circ_w1,toep_w1"]) == 0
    out = capsys.readouterr().out
    assert "ratio_toep_w1" in out and "rel_M" in out and "fitted" in out
    doc = json.loads((out_dir / "report.json").read_text())
    assert doc["meta"]["ref"].endswith("b.ckpt") and len(doc["table"]) == 4
    assert (out_dir / "records.csv").exists() and not (out_dir / "report.png").exists()


def test_probe_errors(ckpts, tmp_path):
    with pytest.raises(ValueError, match="--vocab"):
        bad_vocab = tmp_path / "v.txt"
        bad_vocab.write_text("<mask>\n<pad>\n<unk>\n<eos>\nX\n")
        run(["lra", "probe", str(ckpts / "a.ckpt"), "--vocab", str(bad_vocab), "--n", "1", "--fit-n", "0",
             "--min-len", "8", "--max-len", "30", "--max-depth", "3"])
    with pytest.raises(ValueError, match="pixel"):
        run(["lra", "probe", str(ckpts / "a.ckpt"), "--task", "image", "--data", "x.npy"])
    pix = LRAConfig(n_layers=1, d_model=8, n_heads=2, d_ff=8, max_len=64, encoder="linear",
                    use_lengths=False)
    save_lra(tmp_path / "pix.ckpt", build_lra(pix, 0), dataset={"mlm_prob": 0.0})
    np.save(tmp_path / "x.npy", np.random.default_rng(0).integers(0, 256, (6, 4, 4), dtype=np.uint8))
    with pytest.raises(ValueError, match="--labels"):
        run(["lra", "probe", str(tmp_path / "pix.ckpt"), "--task", "image", "--data", str(tmp_path / "x.npy")])
    np.save(tmp_path / "y.npy", np.arange(6) % 2)
    assert run(["lra", "probe", str(tmp_path / "pix.ckpt"), "--task", "pathfinder", "--data",
                str(tmp_path / "x.npy"), "--labels", str(tmp_path / "y.npy"), "--n", "2", "--fit-n", "4",
                "--directions", "prev"]) == 0


def test_probe_refuses_a_malicious_file(tmp_path):
    import os

    class Boom:
        def __reduce__(self):
            return (os.system, (f"touch {tmp_path / 'ran'}",))

    torch.save({"state_dict": {}, "hyper_parameters": Boom()}, tmp_path / "evil.ckpt")
    from toyspt.lra.lightning import CheckpointRefused
    with pytest.raises(CheckpointRefused):
        run(["lra", "probe", str(tmp_path / "evil.ckpt")])
    assert not (tmp_path / "ran").exists()


def test_quick_demo_command(tmp_path, capsys):
    assert run(["lra", "demo", "--quick", "--seeds", "0", "--out", str(tmp_path / "demo"),
                "--cache", str(tmp_path / "cache")]) == 0
    assert "spt_finetuned" in capsys.readouterr().out
    for name in ("init", "scratch", "spt_pretrained", "spt_finetuned"):
        assert (tmp_path / "demo" / "seed0" / f"{name}.ckpt").exists()
