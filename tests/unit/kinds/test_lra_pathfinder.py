"""PathFinder (toyspt.kinds.pathfinder): balanced labels, determinism by seed, the geometry the
generator promises (markers on contour ends, contours never touching, turns within the cap),
and no shortcut: classifiers that cannot trace stay inside the binomial chance interval."""
from dataclasses import replace

import numpy as np
import pytest

from toyspt.kinds.pathfinder import PathfinderConfig, draw, pathfinder
from toyspt.kinds.pathfinder_checks import chance_interval, geometry_checks, shortcut_checks

CFG = PathfinderConfig()  # the 16px default the pilot chose


def test_labels_balanced_and_draw_deterministic_by_seed():
    x, y = pathfinder(CFG, 301, seed=3)
    assert x.shape == (301, 16, 16) and x.dtype == np.float32 and y.dtype == np.int64
    assert abs(int(y.sum()) - 150) <= 1  # alternating labels, shuffled: 150 or 151 ones
    assert 0.0 <= x.min() and x.max() <= 1.0
    x2, y2 = pathfinder(CFG, 301, seed=3)
    assert np.array_equal(x, x2) and np.array_equal(y, y2)
    x3, _ = pathfinder(CFG, 301, seed=4)
    assert not np.array_equal(x, x3)


@pytest.mark.parametrize("cfg", [CFG, PathfinderConfig.lra32(), replace(PathfinderConfig.lra32(6), continuity=2.0)],
                         ids=["default16", "lra32", "c2"])
def test_geometry_is_what_the_generator_promises(cfg):
    d = draw(cfg, 60, seed=11)
    g = geometry_checks(d, cfg)
    assert g["markers_on_ends"] == 1.0
    # sampled segment distances overshoot the exact one by at most half the sample spacing
    assert g["closest_non_neighbour"] >= cfg.gap - cfg.dash_length / 64
    assert g["max_turn_deg"] < g["turn_cap_deg"]
    # the markers are drawn: full ink at their centres
    for i in range(len(d.labels)):
        for x, y in d.markers[i]:
            assert d.images[i, int(y), int(x)] > 0.5
    # both targets hold contour_length dashes; distractors at most distractor_length
    for i in range(len(d.labels)):
        counts = np.bincount(d.contour[i][d.contour[i] >= 0])
        assert counts[0] == counts[1] == cfg.contour_length
        assert (counts[2:] <= cfg.distractor_length).all()


def test_no_shortcut_classifier_beats_chance():
    res = shortcut_checks(CFG, n_train=1500, n_test=1000, seed=20)
    lo, hi = chance_interval(1000)
    assert (res["chance_low"], res["chance_high"]) == (lo, hi) and 0.45 < lo < 0.5 < hi < 0.55
    for name in ("pixels", "marker_distance", "pixel_histogram"):
        assert res[name]["at_chance"], (name, res[name])


def test_a_shortcut_is_caught():
    """With short contours and distant origins the marker distance gives the label away: the
    check must say so (it is not a check that cannot fail)."""
    res = shortcut_checks(replace(CFG, contour_length=4, origin_distance=5.0), n_train=1500, n_test=1000, seed=20)
    assert not res["marker_distance"]["at_chance"] and res["marker_distance"]["test_acc"] > 0.55


def test_bad_settings_refused_by_name():
    with pytest.raises(ValueError, match="thickness"):
        PathfinderConfig(thickness=1.0, gap=1.0)
    with pytest.raises(ValueError, match="origin_distance"):
        PathfinderConfig(size=8, origin_distance=7.0)
    with pytest.raises(ValueError, match="fail to fit"):
        draw(PathfinderConfig(size=8, contour_length=40, origin_distance=3.0), 4, 0)


def test_the_data_check_command_checks_every_preset(tmp_path, monkeypatch, capsys):
    """``toyspt data check pathfinder``: a line per preset (and the LRA setting), the numbers as JSON."""
    import json

    from toyspt.cli.main import main
    from toyspt.kinds import pathfinder_checks
    from toyspt.kinds.tasks import PATHFINDER

    monkeypatch.setattr(pathfinder_checks, "speed", lambda cfg: 1.0)  # its timing is not what is checked here
    out = tmp_path / "checks.json"
    assert main(["data", "check", "pathfinder", "--n-train", "40", "--n-test", "40", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert set(report) == {*PATHFINDER, "lra32_K6"}
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()] == list(report)
    assert main(["data", "check", "listops"]) == 2
