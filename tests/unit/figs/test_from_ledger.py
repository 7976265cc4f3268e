"""metadata.json says, per figure, which kernels made the numbers it drew from ledger records."""
import json
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402

import toyspt.figs.job as job_mod  # noqa: E402
from tests.conftest import SMALL_TASK  # noqa: E402
from toyspt.figs.job import FigureJob, run_job  # noqa: E402
from toyspt.runs import RunCache, RunSpec  # noqa: E402
from toyspt.runs.ledger import Ledger  # noqa: E402
from toyspt.runs.planning import make_plan  # noqa: E402
from toyspt.runs.store import LayeredStore  # noqa: E402
from toyspt.train.recipes import TrainConfig  # noqa: E402

SPECS = {seed: RunSpec("scratch", seed, SMALL_TASK, train=TrainConfig(epochs=1, batch_size=64)) for seed in (0, 1)}


def _draw(ctx, results):
    fig, ax = plt.subplots(figsize=(3, 2))
    frame = pd.DataFrame([dict(seed=s, acc=r.summary["final_test_acc"]) for s, r in results.items()])
    ax.plot(frame.seed, frame.acc)
    return fig, frame


FAKE = SimpleNamespace(NAME="fake", TITLE="two tiny runs", COLUMNS=["seed", "acc"], specs=lambda ctx: SPECS,
                       draw=_draw)


def _job(tmp_path, cache):
    ledger = Ledger(tmp_path / "ledger.jsonl", kinds=("toy",), warn=lambda m: None)
    return FigureJob(("fake",), tmp_path / "out", (0,), quick=True, cache=str(tmp_path / cache), ledger=ledger)


def _figure(tmp_path):
    return json.loads((tmp_path / "out" / "metadata.json").read_text())["figures"]["fake"]


def test_a_figure_drawn_from_records_names_their_kernels(tmp_path, monkeypatch):
    monkeypatch.setattr(job_mod, "load", lambda name: FAKE)
    assert run_job(_job(tmp_path, "trained")) == 0
    assert "from_ledger" not in _figure(tmp_path)  # trained here: nothing read from records
    assert _figure(tmp_path)["written_on"]["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    # the records came from other hosts: one of AVX512 kernels, one older than the field
    path = tmp_path / "ledger.jsonl"
    recs = {r["key"]: r for r in map(json.loads, path.read_text().splitlines())}
    recs[SPECS[0].key()]["cpu_capability"] = "AVX512"
    del recs[SPECS[1].key()]["cpu_capability"]
    path.write_text("".join(json.dumps(r) + "\n" for r in recs.values()))
    store = LayeredStore((RunCache(tmp_path / "empty"), Ledger(path, kinds=("toy",))))
    plan = make_plan(list(SPECS.values()), store)
    assert not plan.todo and {store.provenance(s) for s in SPECS.values()} == {"AVX512", "unknown"}
    assert all(store.answered[s.key()] == "ledger" for s in SPECS.values())
    assert run_job(_job(tmp_path, "fresh")) == 0  # a fresh cache: both answered by their records
    assert _figure(tmp_path)["from_ledger"] == {"AVX512": 1, "unknown": 1}


def test_each_figure_keeps_the_call_that_drew_it(tmp_path, monkeypatch):
    monkeypatch.setattr(job_mod, "load", lambda name: FAKE)
    assert run_job(_job(tmp_path, "trained")) == 0
    meta = json.loads((tmp_path / "out" / "metadata.json").read_text())
    call = meta["figures"]["fake"]["call"]
    assert call["git_revision"] == meta["git_revision"] and call["seeds"] == [0] and call["tier"] == meta["tier"]
    meta["figures"]["fake"]["call"]["seeds"] = [7]  # as if drawn by an earlier call with other seeds
    (tmp_path / "out" / "metadata.json").write_text(json.dumps(meta))
    other = SimpleNamespace(**{**vars(FAKE), "NAME": "other"})
    monkeypatch.setattr(job_mod, "load", lambda name: other)
    job = FigureJob(("other",), tmp_path / "out", (1,), quick=True, cache=str(tmp_path / "trained"),
                    ledger=Ledger(tmp_path / "ledger.jsonl", kinds=("toy",), warn=lambda m: None))
    assert run_job(job) == 0
    merged = json.loads((tmp_path / "out" / "metadata.json").read_text())
    assert merged["seeds"] == [1] and merged["figures"]["other"]["call"]["seeds"] == [1]
    assert merged["figures"]["fake"]["call"]["seeds"] == [7]  # the earlier figure keeps its own call
