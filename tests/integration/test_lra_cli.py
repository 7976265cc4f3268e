"""``toyspt lra ...`` through its own parser: inspect, probe on generated ListOps with a
reference checkpoint, clear errors, and the quick demo."""
import argparse
import json

import numpy as np
import pytest
import torch

from toyspt.cli import lra as cli
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


SMALL = ["--min-len", "8", "--max-len", "30", "--max-depth", "3", "--max-args", "4", "--no-figure",
         "--directions", "circ_w1,prev"]


def test_fit_n_2_on_an_spt_checkpoint(tmp_path):
    """The fitted classifier has the task's 10 ListOps classes, whatever two labels it saw."""
    spt = LRAConfig(n_layers=1, d_model=16, n_heads=2, d_ff=32, max_len=64, head="none", rec_out=19)
    save_lra(tmp_path / "spt.ckpt", build_lra(spt, 0), dataset={"mlm_prob": 0.5})
    assert run(["lra", "probe", str(tmp_path / "spt.ckpt"), "--n", "6", "--fit-n", "2",
                "--out", str(tmp_path / "rep"), *SMALL]) == 0
    doc = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert len(doc["table"]) == 2 and any("a linear head was fitted" in n for n in doc["notes"])
    assert not any("from the labels seen" in n for n in doc["notes"])  # sized by the task, not the fit set


def test_pixel_classifier_without_mask_channel_gets_a_constructed_decoder(tmp_path):
    pix = LRAConfig(n_layers=2, d_model=8, n_heads=2, d_ff=8, max_len=64, encoder="linear",
                    use_lengths=False, n_classes=2)
    save_lra(tmp_path / "pix.ckpt", build_lra(pix, 0), dataset={"mlm_prob": 0.0})
    np.save(tmp_path / "x.npy", np.random.default_rng(0).integers(0, 256, (6, 4, 4), dtype=np.uint8))
    np.save(tmp_path / "y.npy", np.arange(6) % 2)
    assert run(["lra", "probe", str(tmp_path / "pix.ckpt"), "--task", "pathfinder", "--data",
                str(tmp_path / "x.npy"), "--labels", str(tmp_path / "y.npy"), "--n", "2", "--fit-n", "2",
                "--out", str(tmp_path / "rep"), "--no-figure", "--directions", "prev"]) == 0
    import pandas as pd
    table = pd.read_csv(tmp_path / "rep" / "table.csv")
    assert len(table) == 4 and table["cos_label_prev"].notna().all()
    assert table["ratio_prev"].notna().all()  # the recon side: a zero mask column and the least-squares decoder
    doc = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert any("zero mask column" in n for n in doc["notes"]) and any("least-squares" in n for n in doc["notes"])


def test_config_less_file_needs_and_takes_flags(tmp_path):
    from toyspt.lra.checkpoint import lra_state_dict
    from toyspt.lra.lightning import CheckpointError, write_checkpoint
    write_checkpoint(tmp_path / "bare.ckpt", lra_state_dict(build_lra(CFG, 0), attn_kind="mha"), None)
    with pytest.raises(CheckpointError, match="--causal"):
        run(["lra", "inspect", str(tmp_path / "bare.ckpt"), "--heads", "2"])
    with pytest.raises(CheckpointError, match="--activation"):
        run(["lra", "inspect", str(tmp_path / "bare.ckpt"), "--heads", "2", "--no-causal"])
    assert run(["lra", "inspect", str(tmp_path / "bare.ckpt"), "--heads", "2", "--no-causal", "--activation", "gelu",
                "--pool", "mean", "--use-lengths"]) == 0


def test_retrieval_probe_table_per_layer_and_head(tmp_path):
    ret = LRAConfig(n_layers=2, d_model=16, n_heads=2, d_ff=32, max_len=64, head="retrieval",
                    n_classes=2, head_activation="gelu")
    save_lra(tmp_path / "ret.ckpt", build_lra(ret, 0), dataset={"_name_": "aan_new", "mlm_prob": 0.0})
    rng = np.random.default_rng(0)
    ids = rng.integers(4, 19, (5, 2, 20))
    ids[0, 1, 12:] = 1  # a shorter second document (padding id 1)
    np.save(tmp_path / "pairs.npy", ids)
    np.save(tmp_path / "y.npy", np.arange(5) % 2)
    with pytest.raises(ValueError, match="--task retrieval"):
        run(["lra", "probe", str(tmp_path / "ret.ckpt"), "--n", "1", *SMALL])
    assert run(["lra", "probe", str(tmp_path / "ret.ckpt"), "--task", "retrieval", "--data",
                str(tmp_path / "pairs.npy"), "--labels", str(tmp_path / "y.npy"), "--n", "2",
                "--fit-n", "3", "--out", str(tmp_path / "rep"), "--no-figure",
                "--directions", "circ_w1,prev"]) == 0
    import pandas as pd
    table = pd.read_csv(tmp_path / "rep" / "table.csv")
    assert sorted(zip(table.layer, table["head"])) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert table["ratio_prev"].notna().all() and table["cos_label_prev"].notna().all()


def test_pair_label_loss_is_the_stacked_classification():
    from toyspt.lra.inputs import label_loss, make_pair_batch
    ret = LRAConfig(n_layers=1, d_model=8, n_heads=2, d_ff=16, max_len=32, head="retrieval",
                    n_classes=2, head_activation="gelu")
    model = build_lra(ret, 1).double()
    ids = torch.randint(4, 19, (3, 10, 2))
    lengths = torch.tensor([[10, 7], [4, 10], [9, 9]])
    y = torch.tensor([0, 1, 1])
    batch = make_pair_batch(ids, y, lengths)
    docs = torch.cat([ids[..., 0], ids[..., 1]])
    ref = torch.nn.functional.cross_entropy(model.classify(docs, torch.cat([lengths[:, 0], lengths[:, 1]])), y)
    torch.testing.assert_close(label_loss(model, batch), ref, rtol=0, atol=0)


def test_fields_command_prints_the_table(capsys):
    from toyspt.lra.runconfig import FIELDS
    assert run(["lra", "fields"]) == 0
    out = capsys.readouterr().out
    assert all(f"`{f.path}`" in out for f in FIELDS)
