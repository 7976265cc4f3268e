"""Every tracker only reads the model: a tracked run's weights, history, summary and resume
state are bitwise those of the untracked run, so the tracked run answers for its untracked twin
and serves as a parent in its place (toyspt.runs.planning)."""
from dataclasses import replace

import pytest
from conftest import SMALL_TASK
from helpers.checks import assert_bitwise

from toyspt.figs import TRACKED
from toyspt.probe.tracking import TRACKERS
from toyspt.runs import RunCache, RunSpec, sweep
from toyspt.runs.planning import make_plan
from toyspt.runs.sweeps import SweepOptions
from toyspt.train.recipes import TrainConfig
from toyspt.ucr.design import basin_trackers

TC = TrainConfig(epochs=3, pre_epochs=2, batch_size=32)
# every registered tracker, with options that make it record often (more chances to disturb)
OPTIONS = {"displacement": "displacement", "profile": "profile:every=1", "probes": "probes:every=2,n=16",
           "beta": "beta"}


def test_every_tracker_is_covered():
    assert set(OPTIONS) == set(TRACKERS)


def _untracked(result):
    """The parts of a run the untracked twin holds (records aside)."""
    return replace(result, records=[])


@pytest.mark.parametrize("recipe", ["spt", "spt_only", "scratch"])
@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_a_tracker_only_reads_the_model(name, recipe):
    spec = RunSpec(recipe, 1, data=SMALL_TASK, train=TC)
    tracked = replace(spec, trackers=(OPTIONS[name],)).execute()
    if name != "beta" or recipe != "scratch":  # beta records in SPT phases only
        assert tracked.records, "the tracker recorded nothing"
    assert_bitwise([spec.execute()], [_untracked(tracked)])
    assert tracked.states["resume"]["generator"].equal(spec.execute().states["resume"]["generator"])


@pytest.mark.parametrize("trackers", [TRACKED, basin_trackers(TC)])
def test_the_figures_tracker_sets_only_read_the_model(trackers):
    spec = RunSpec("spt", 0, data=SMALL_TASK, train=TC)
    assert_bitwise([spec.execute()], [_untracked(replace(spec, trackers=trackers).execute())])


def test_a_tracked_run_answers_its_twin_and_serves_as_a_parent(tmp_path, monkeypatch):
    """Asked together, the tracked runs train and the untracked ones (and the runs continuing
    them) are answered by them; later sweeps find the twins in the cache; every result is
    bitwise what training each spec afresh gives."""
    import toyspt.runs.sweeps as sw

    jobs = []
    real = sw.train_job
    monkeypatch.setattr(sw, "train_job", lambda specs, *a, **k: jobs.append(list(specs)) or real(specs, *a, **k))
    cache = RunCache(tmp_path)
    tracked_scratch = RunSpec("scratch", 0, data=SMALL_TASK, train=TC, trackers=("displacement",))
    tracked_spt_only = RunSpec("spt_only", 0, data=SMALL_TASK, train=TC, trackers=("beta",), evaluate="peak")
    asked = [RunSpec("scratch", 0, data=SMALL_TASK, train=TC, evaluate="peak"),  # answered by tracked_scratch
             RunSpec("scratch_matched", 0, data=SMALL_TASK, train=TC),  # continues tracked_scratch's twin
             RunSpec("qk_transfer", 0, data=SMALL_TASK, train=TC),  # continues tracked_spt_only's twin
             tracked_scratch, tracked_spt_only]
    todo = make_plan(asked, cache).todo
    assert [(s.recipe, s.trackers) for s in todo] == [("scratch", ("displacement",)), ("scratch_matched", ()),
                                                      ("spt_only", ("beta",)), ("qk_transfer", ())]
    got = sweep(asked, cache, options=SweepOptions(progress=False))
    assert sorted(s.recipe for job in jobs for s in job) == ["qk_transfer", "scratch", "scratch_matched", "spt_only"]
    fresh = [replace(asked[0], evaluate="all").execute()] + [s.execute() for s in asked[1:]]
    assert got[0].summary == asked[0].execute().summary  # "peak" answered by the "all" run, as always
    assert_bitwise(fresh[:3], [_untracked(r) for r in got[:3]])
    assert_bitwise(fresh[3:], got[3:])
    jobs.clear()  # the untracked ones alone: answered by the twins' entries in the cache
    again = sweep(asked[:3] + [RunSpec("spt_only", 0, data=SMALL_TASK, train=TC)], cache,
                  options=SweepOptions(progress=False))
    assert jobs == []
    assert_bitwise(fresh[:3], again[:3])
    assert again[3].records == [] and again[3].config["evaluate"] == "all"


def test_a_run_killed_between_its_entry_and_its_twins_is_not_trained_again(tmp_path, monkeypatch):
    import toyspt.runs.sweeps as sw

    cache = RunCache(tmp_path)
    tracked = RunSpec("spt_only", 0, data=SMALL_TASK, train=TC, trackers=("beta",), evaluate="peak")
    cache.store(tracked, tracked.execute())  # the twin's entry never written
    child = RunSpec("spt", 0, data=SMALL_TASK, train=TC)
    jobs = []
    real = sw.train_job
    monkeypatch.setattr(sw, "train_job", lambda specs, *a, **k: jobs.append(list(specs)) or real(specs, *a, **k))
    got = sweep([tracked, child], cache, options=SweepOptions(progress=False))
    assert [[s.recipe for s in job] for job in jobs] == [["spt"]]
    assert cache.load(tracked.twins()[0]) is not None
    assert_bitwise([child.execute()], [got[1]])


def test_twins_of_a_run():
    spec = RunSpec("spt", 0, data=SMALL_TASK, train=TC, evaluate="peak")
    assert spec.twins() == []
    assert replace(spec, trackers=("beta",)).twins() == [spec]
    only = RunSpec("spt_only", 0, data=SMALL_TASK, train=TC, evaluate="peak", trackers=("beta",))
    assert only.twins() == [replace(only, trackers=(), evaluate="all")]  # the parents' form
    assert spec.parent() == only.twins()[0]
    with pytest.raises(ValueError, match="is not a twin"):
        only.twin_result(spec, None)


def test_trackers_record_after_the_epochs_asked_only():
    tc = TrainConfig(epochs=2, pre_epochs=4, batch_size=32)
    trackers = ("beta:at=1/3", "profile:every=100,at=3")
    res = RunSpec("spt_only", 0, data=SMALL_TASK, train=tc, trackers=trackers).execute()
    beta = sorted(r["epoch"] for r in res.records if r["metric"] == "beta")
    prox = sorted({r["epoch"] for r in res.records if r["metric"] == "proximity_index"})
    assert beta == [0, 1, 3] and prox == [0, 3]  # 0: the phase start, always
    for bad, msg in (("beta:at=0", "positive integers"), ("profile:at=1/x", "integers separated by '/'")):
        with pytest.raises(ValueError, match=msg):
            RunSpec("spt_only", 0, data=SMALL_TASK, train=tc, trackers=(bad,)).execute()


@pytest.mark.parametrize("lockstep", [False, True])  # with lockstep, probes ready together are one job
def test_a_probe_of_a_stored_run_is_a_cached_entry_read_from_any_entry_answering_the_run(tmp_path, monkeypatch,
                                                                                        lockstep):
    """A ProximitySpec reads its run's weights (the run evaluated every epoch, or its tracked
    twin, will do); its numbers are those of probing the weights directly; it is cached."""
    import toyspt.runs.sweeps as sw
    from toyspt.probe.tracking import proximity_of
    from toyspt.runs.state_probes import ProximitySpec, proximities

    jobs = []
    real = sw.train_job
    monkeypatch.setattr(sw, "train_job", lambda specs, *a, **k: jobs.append([s.kind for s in specs])
                        or real(specs, *a, **k))
    cache = RunCache(tmp_path)
    peak = RunSpec("spt", 0, data=SMALL_TASK, train=TC, evaluate="peak")
    tracked = RunSpec("spt_only", 1, data=SMALL_TASK, train=TC, trackers=("beta",), evaluate="peak")
    probes = [ProximitySpec.of(peak), ProximitySpec.of(replace(tracked, trackers=(), evaluate="all"))]
    assert probes[0] == ProximitySpec(peak, ("pretrained", "final"))
    assert probes[0].key() == ProximitySpec.of(replace(peak, evaluate="all", trackers=("beta",))).key()
    got = sweep([replace(peak, evaluate="all"), tracked, *probes, peak], cache,
                options=SweepOptions(progress=False, lockstep=lockstep))
    assert sorted(k for job in jobs for k in job) == ["proximity", "proximity", "run", "run", "run"]  # no peak run
    for run, probe in zip((got[0], got[1]), got[2:4]):
        x = SMALL_TASK.probe_inputs()
        assert proximities(probe) == {w: proximity_of(run, w, x) for w in ("pretrained", "final")}
    jobs.clear()
    assert sweep(probes, cache, options=SweepOptions(progress=False))[0].rows == got[2].rows and jobs == []
    with pytest.raises(ValueError, match="needs its run's stored entry"):
        probes[0].execute()
