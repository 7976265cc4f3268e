"""The offline demo: checkpoints in the code's format that load back through the bridge,
SPT checkpoints with a decoder and no classifier, tidy records, and the demo figure."""

import pytest
import torch

import toyspt.lra.demo as lra_demo
from toyspt.lra.checkpoint import load_lra
from toyspt.lra.demo import MODELS, DemoConfig, run_demo
from toyspt.lra.figure import demo_figure
from toyspt.lra.lightning import read_checkpoint
from toyspt.runs import RunCache


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    return run_demo(DemoConfig.quick(), out / "ckpt", seeds=(0,), cache=RunCache(out / "cache")), out


def test_checkpoints_are_in_the_code_format_and_load_back(demo):
    res, out = demo
    raw = read_checkpoint(res.paths[0, "spt_pretrained"])
    assert raw.config["dataset"]["mlm_prob"] == 0.5 and raw.config["model"]["layer"][0]["_name_"] == "mhfa"
    assert "model.layers.0.layer.linears.3.weight" in raw.state_dict
    pre, ft, init = (load_lra(res.paths[0, m]) for m in ("spt_pretrained", "spt_finetuned", "init"))
    assert pre.model.head_cls is None and pre.model.head_rec is not None
    assert ft.model.head_rec is None and ft.model.head_cls is not None
    # fine-tuning starts from the pretrained backbone and moves it; pretraining moved init
    w = lambda m: m.model.blocks[0].attn.W_Q.weight  # noqa: E731
    assert not torch.equal(w(pre), w(init)) and not torch.equal(w(ft), w(pre))


def test_records_and_summary(demo, tmp_path):
    res, _ = demo
    r = res.records
    assert set(r.model) == set(MODELS) and set(r.seed) == {0}
    assert {"probe_summary", "probe", "profile", "displacement"} <= set(r.section)
    assert set(res.summary.model) == set(MODELS)
    assert res.summary.loc[res.summary.model == "scratch", "val_acc"].between(0, 1).all()
    fig, f = demo_figure(r)
    assert list(f.columns) == ["panel", "model", "layer", "direction", "offset", "metric", "mean", "std", "n"]
    assert set(f.panel) == {"ratio", "proximity", "attention_by_offset", "displacement"}
    assert len(fig.axes) == 4 and not list(tmp_path.iterdir())  # drawn, nothing written


def test_cache_is_reused(demo, tmp_path, monkeypatch):
    res, out = demo
    calls = []
    monkeypatch.setattr(lra_demo, "_train_models", lambda *a, **k: calls.append(a) or None)
    again = run_demo(DemoConfig.quick(), tmp_path / "again", seeds=(0,), cache=RunCache(out / "cache"))
    assert calls == []  # read from the run cache, nothing trained
    assert again.summary.equals(res.summary) and again.records.equals(res.records)
    for name in ("init", *MODELS):  # the checkpoints written again from the cache are the same files
        assert (tmp_path / "again" / "seed0" / f"{name}.ckpt").read_bytes() == res.paths[0, name].read_bytes()
