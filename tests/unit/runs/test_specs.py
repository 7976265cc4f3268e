"""One run spec whatever its data: keys that hold across the refactor, data sources, entries."""
from dataclasses import replace

import pytest
import torch

from toyspt.data.source import DataSource, from_fields
from toyspt.data.tasks import TaskConfig
from toyspt.nn.model import ModelConfig
from toyspt.runs import RunCache, RunSpec
from toyspt.runs.specs import Table, spec_from_dict
from toyspt.train.recipes import TrainConfig
from toyspt.ucr.data import UCRSource, is_available, load_ucr
from toyspt.ucr.design import TIERS, _arm
from toyspt.ucr.runs import ucr_run, ucr_spec

# keys computed by the classes this spec replaced (RunSpec with a task field, UCRRunSpec) at
# format 3, before the two were one: a key that moves would orphan every cached run
GOLDEN = {
    "toy spt": "ce993711798536b4ba0e9233",
    "toy scratch peak seed 3": "26436608009a4dee7bc436a7",
    "toy data_swap": "41043e4a66b150250401411a",
    "toy tracked": "9b50e353e60b8e636201e6d7",
    "toy compiled": "7847e56e7685c2361205ad4b",
    "ucr GunPoint spt seed 3": "18c0e1a0f11e68232286b606",
    "ucr study ECG200 vo_transfer seed 7": "05638bb6d7368b97bfae191d",
    "ucr study GunPoint scratch seed 0": "7fda82328595b7cc5dff44a1",
    "ucr data_swap": "77e15141778c136e11a6e2f9",
    "ucr tracked": "1ef05d42ff2e2cfccfebb482",
}
needs_ucr = pytest.mark.skipif(not (is_available("GunPoint", location="package") and is_available("ECG200")),
                               reason="needs the ucr-all extra")


def _toy():
    return {"toy spt": RunSpec("spt"), "toy scratch peak seed 3": RunSpec("scratch", seed=3, evaluate="peak"),
            "toy data_swap": RunSpec("data_swap", swap=TaskConfig(family="freq_band", seed=1)),
            "toy tracked": RunSpec("spt_only", 2, data=TaskConfig(n_train=512),
                                   train=TrainConfig(pre_epochs=3, epochs=3), trackers=("beta",)),
            "toy compiled": RunSpec("spt", numerics="compiled")}


def test_toy_keys_hold():
    for name, spec in _toy().items():
        assert spec.key() == GOLDEN[name], name


@needs_ucr
def test_ucr_keys_hold_and_ignore_where_the_files_are():
    gp, e200 = load_ucr("GunPoint"), load_ucr("ECG200")
    specs = {"ucr GunPoint spt seed 3": ucr_spec("spt", gp, 3),
             "ucr study ECG200 vo_transfer seed 7": _arm(e200, "vo_transfer", 7, TIERS["study"]),
             "ucr study GunPoint scratch seed 0": _arm(gp, "scratch", 0, TIERS["study"]),
             "ucr data_swap": ucr_spec("data_swap", gp, 1, swap=e200),
             "ucr tracked": ucr_spec(ucr_run("spt_only", evaluate="peak"), gp, 4,
                                     trackers=("beta", "profile:every=1000"))}
    for name, spec in specs.items():
        assert spec.key() == GOLDEN[name], name
        assert spec.kind == "run" and spec.data.kind == "ucr" and spec_from_dict(spec.to_dict()).key() == spec.key()
    s = specs["ucr GunPoint spt seed 3"]
    moved = replace(s, data=replace(s.data, config=replace(s.data.config, root="/elsewhere", location="archive")))
    assert moved.key() == s.key()  # the content hash names the data, not its path
    assert replace(s, data=replace(s.data, content="0" * 64)).key() != s.key()


def test_data_sources_follow_the_protocol_and_rebuild_from_their_fields():
    task = TaskConfig(T=16, n_train=32, n_val=16, n_test=16)
    assert isinstance(task, DataSource) and task.kind == "toy"
    assert task.fingerprint() == replace(task).fingerprint() != replace(task, seed=1).fingerprint()
    assert from_fields("toy", task.key_fields(None)) == (task, None)
    assert task.load() is task.load()  # drawn once per process
    spec = RunSpec("spt", data=task)
    assert spec_from_dict(spec.to_dict()) == spec
    with pytest.raises(TypeError, match="data source"):
        RunSpec("spt", data={"T": 16})
    with pytest.raises(ValueError, match="unknown kind"):
        from_fields("lra", {})


@needs_ucr
def test_a_ucr_source_refuses_changed_files_and_foreign_swap(tmp_path):
    gp = UCRSource.of(load_ucr("GunPoint"))
    assert isinstance(gp, DataSource) and gp.name == "GunPoint" and gp.size() == (40, 150)
    with pytest.raises(ValueError, match="has changed"):
        replace(gp, content="f" * 64).load()
    with pytest.raises(ValueError, match="another UCR set"):
        gp.key_fields(TaskConfig())
    with pytest.raises(ValueError, match="univariate"):
        gp.fit(ModelConfig(d_in=2))


def test_a_table_entry_round_trips_through_the_cache(tmp_path):
    from toyspt.figs.theory import TheoryFigSpec

    class Fake(TheoryFigSpec):
        def execute(self, progress=False, start=None):
            return Table([dict(panel="p", x=1.0, value=float("nan"))], dict(exponent=-2.0))

    spec = Fake(quick=True)
    cache = RunCache(tmp_path)
    cache.store(spec, spec.execute())
    got = cache.load(spec)
    assert isinstance(got, Table) and got.details == {"exponent": -2.0}
    assert got.rows[0]["panel"] == "p" and got.rows[0]["value"] != got.rows[0]["value"]  # NaN back as NaN
    assert torch.load(cache.path(spec) / "weights.pt", weights_only=True) == {}  # a weights-free entry
