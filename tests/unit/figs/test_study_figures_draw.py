"""The study tier's real_gain and archive_scan figures draw from planted per-run rows (no
training): the gain table with its family column, the archive table with its related-set
units, the across-set test in the metadata."""
from dataclasses import dataclass, field
from types import SimpleNamespace

import matplotlib
import numpy as np
import pandas as pd
import pytest
import torch

from toyspt.analysis import rows as label_rows
from toyspt.analysis.seed_blocks import BLOCK_COLUMNS
from toyspt.data.tasks import Split
from toyspt.figs import archive_scan, real_gain
from toyspt.ucr import design

matplotlib.use("Agg")

TIER = SimpleNamespace(name="study", power_seeds=tuple(range(6)), qk_seeds=tuple(range(6)), arm_seeds=tuple(range(6)),
                       baseline_seeds=tuple(range(6)), archive_seeds=tuple(range(6)), archive_sets=2,
                       basin_seeds=tuple(range(3)))


@dataclass(frozen=True)
class _Src:
    name: str
    loaded: object = field(default=None, compare=False)

    def load(self):
        return self.loaded


def _rows(sets, arms, n=6, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for ds in sets:
        base = 0.7 + rng.normal(0, 0.03, n)
        for k, arm in enumerate(arms):
            v = base + (0.0 if arm == "scratch" else 0.01 * (k % 4) + rng.normal(0, 0.005, n))
            out += [dict({c: np.nan for c in label_rows.ROW_COLUMNS}, dataset=ds, arm=arm, seed=s,
                         **{m: v[s] for m in design.STUDY_METRICS}) for s in range(n)]
    return out


def _patch(monkeypatch, mod, rows_by_key):
    monkeypatch.setattr(label_rows, "label_runs", lambda runs: list(rows_by_key.items()))
    monkeypatch.setattr(label_rows, "label_row", lambda source, arm, seed, res, pi=None: res)
    monkeypatch.setattr(label_rows, "probed", lambda runs, label: None)


def _draw_real_gain(monkeypatch, planted: list[dict]):
    """real_gain drawn from ``planted`` label rows: (its metadata, its frames)."""
    sets = tuple(dict.fromkeys(r["dataset"] for r in planted))
    src = {d: _Src(d) for d in sets}
    rows = {(src[r["dataset"]], r["arm"], r["seed"]): r for r in planted}
    _patch(monkeypatch, real_gain, rows)
    ctx = SimpleNamespace(study=design.Study(TIER, tuple(SimpleNamespace(config=SimpleNamespace(name=d)) for d in sets),
                                             {}), meta={})
    _, frames = real_gain.draw(ctx, rows)
    return ctx.meta, frames


def test_real_gain_draws_with_families(monkeypatch):
    meta, frames = _draw_real_gain(monkeypatch, _rows(("GunPoint", "ECG200"), real_gain.ARMS))
    gain = frames["real_gain"]
    assert list(gain.columns) == real_gain.COLUMNS and set(gain.family) == {"confirmatory", "descriptive"}
    assert len(meta["real_gain"]["confirmatory"]) == 2
    assert meta["real_gain"]["seed_block"]["sets"] == []  # seeds 0-4 and one more: no test
    assert frames["real_gain_seeds_20_39"].empty  # no seed from 20 on


def test_real_gain_replicates_on_seeds_20_to_39_and_tests_the_seed_block(monkeypatch):
    sets = ("GunPoint", "ECG200")
    planted = _rows(sets, ("scratch", "spt"), n=24)
    for r in planted:  # seeds 0-4 gain 0.05 more than the rest
        if r["arm"] == "spt" and r["seed"] < 5:
            r.update({m: r[m] + 0.05 for m in design.STUDY_METRICS})
    meta, frames = _draw_real_gain(monkeypatch, planted)
    unseen = frames["real_gain_seeds_20_39"]
    assert list(unseen.columns) == real_gain.COLUMNS and list(unseen.n_seeds) == [4, 4]
    assert set(unseen.family) == {"confirmatory"} and set(unseen.holm_m) == {2}
    block = meta["real_gain"]["seed_block"]
    assert block["block"] == [0, 1, 2, 3, 4] and [r["dataset"] for r in block["sets"]] == list(sets)
    for r in block["sets"]:  # the planted block is the most extreme of C(24, 5) = 42,504 blocks
        assert r["exact"] and r["blocks"] == 42_504 and r["difference"] > 0.04 and r["perm_p"] < 1e-3
        assert r["scan_seeds"] == "0-4" and r["scan_blocks"] == 4 and r["scan_p"] < 1e-3
    # the tracked parents' seeds (the tier's basin seeds) are tested as a block of their own
    assert block["tracked"]["block"] == list(TIER.basin_seeds)
    table = frames["real_gain_seed_block"]
    assert list(table.columns) == BLOCK_COLUMNS
    assert table.block_name.tolist() == ["default_tier"] * 2 + ["tracked_parents"] * 2
    assert table[table.block_name == "default_tier"].to_dict("records") == block["sets"]


def test_archive_scan_marks_related_sets_and_tests_across_units(monkeypatch):
    arch_sets, paper_sets = ("GunPointMaleVersusFemale", "Coffee"), ("GunPoint", "ECG200")
    two = lambda n: Split(torch.zeros(n, 1, 1), torch.arange(n) % 2)  # noqa: E731  (two classes)
    loaded = SimpleNamespace(train=two(20), val=two(5), length=50, n_classes=2)
    src = {d: _Src(d, loaded) for d in arch_sets + paper_sets}
    arms = design.ARCHIVE_ARMS
    frames = {"archive": pd.DataFrame(_rows(arch_sets, arms)), "paper": pd.DataFrame(_rows(paper_sets, arms, seed=1))}
    monkeypatch.setattr(archive_scan, "label_frame", lambda runs, group: frames[group])
    runs = {(g, src[d], "spt", 0): None for g, sets in (("archive", arch_sets), ("paper", paper_sets)) for d in sets}
    planted = [dict(dataset=d, baseline=b, protocol=p, n_train=25, n_test=50, n_correct=40 + k, test_acc=(40 + k) / 50,
                    seconds=1.0) for k, d in enumerate(arch_sets + paper_sets) for b in ("1nn_dtw", "rocket")
               for p in ("train", "train+val")]
    runs |= {("baselines", src[d]): SimpleNamespace(rows=[r for r in planted if r["dataset"] == d])
             for d in arch_sets + paper_sets}
    ctx = SimpleNamespace(study=design.Study(TIER, (), {}), meta={})
    fig, out = archive_scan.draw(ctx, runs)
    assert out["archive_scan_baselines"].to_dict("records") == planted  # every set's baselines, as computed
    standing = fig.axes[2]
    assert len(standing.lines) == 4 * 4  # per set: scratch, spt, 1-NN DTW, ROCKET
    assert {t.get_text() for t in standing.get_legend().get_texts()} == {"scratch", "spt", "1-NN DTW", "ROCKET"}
    table = out["archive_scan"]
    assert list(table.columns) == archive_scan.COLUMNS
    assert dict(zip(table.dataset, table.unit)) == {"GunPointMaleVersusFemale": "GunPoint family", "Coffee": "Coffee"}
    meta = ctx.meta["archive_scan"]
    across = meta["across_sets"]
    assert (across["n_sets"], across["n_units"]) == (4, 3)  # GunPoint and GunPointMaleVersusFemale: one unit
    pooled = meta["pooling"]  # every set, archive and paper, pooled by random effects
    assert pooled["sets"] == [*arch_sets, *paper_sets] and meta["pooled"] == pooled["estimate"]
    assert meta["pooled_low"] < meta["pooled"] < meta["pooled_high"] and 0 <= meta["i2"] < 1
    assert meta["gain_vs_per_class"]["n"] == 4 and meta["gain_vs_per_class"]["per_class"]["Coffee"] == 12.5
    assert meta["gain_vs_smallest_class"]["smallest_class"]["Coffee"] == 12 and "small_sets" not in meta
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert "GunPointMaleVersusFemale [GunPoint family]" in labels and "GunPoint (paper) [GunPoint family]" in labels
    standing = out["archive_scan_standing"]
    assert list(standing.columns) == archive_scan.STANDING_COLUMNS
    assert list(standing.dataset) == [*arch_sets, *paper_sets]
    assert list(standing.group) == ["archive"] * 2 + ["paper"] * 2
    assert standing.set_index("dataset").loc["ECG200", "rocket_train+val"] == 43 / 50  # the fourth set's planted score
    spt = pd.concat(frames.values()).query("arm == 'spt'").groupby("dataset")[design.PRIMARY].mean()
    assert dict(zip(standing.dataset, standing.spt)) == pytest.approx(spt.to_dict())
    # the counts the docs quote: per baseline x protocol, sets where it beats SPT's and scratch's means
    counts = ctx.meta["archive_scan"]["standing"]
    for col, c in counts.items():
        assert c == dict(sets=4, above_spt=int((standing[col] > standing.spt).sum()),
                         above_scratch=int((standing[col] > standing.scratch).sum())), col


def test_a_reference_classifier_tied_with_spt_is_not_above_it():
    baselines = archive_scan.STANDING_COLUMNS[6:]
    frame = pd.DataFrame([dict(dataset="A", scratch=0.5, spt=0.7, **dict.fromkeys(baselines, 0.7)),
                          dict(dataset="B", scratch=0.7, spt=0.6, **dict.fromkeys(baselines, 0.7))])
    assert all(c == dict(sets=2, above_spt=1, above_scratch=1) for c in archive_scan.standing_counts(frame).values())


def test_standing_counts_skip_sets_without_the_baseline():
    baselines = archive_scan.STANDING_COLUMNS[6:]
    frame = pd.DataFrame([dict(dataset="A", scratch=0.5, spt=0.7, **dict.fromkeys(baselines, 0.6)),
                          dict(dataset="B", scratch=0.5, spt=0.7, **dict.fromkeys(baselines, float("nan")))])
    counts = archive_scan.standing_counts(frame)
    assert set(counts) == set(baselines)
    assert all(c == dict(sets=1, above_spt=0, above_scratch=1) for c in counts.values())


def test_leave_block_out_repeats_the_confirmatory_test_on_seed_subsets():
    """Without the default tier's seeds 0-4 (19 of 24 seeds left) and on the seeds before the
    unseen 20-39 (0-19): spt vs scratch on the primary metric, Holm over the sets."""
    frame = pd.DataFrame(_rows(("GunPoint", "ECG200"), ("scratch", "spt"), n=24))
    out = real_gain.leave_block_out(frame, tuple(range(24)), (0, 1, 2, 3, 4))
    assert (out["without_default_tier"]["seeds"], out["before_unseen"]["seeds"]) == ("5-23", "0-19")
    for name, n in (("without_default_tier", 19), ("before_unseen", 20)):
        rows = pd.DataFrame(out[name]["rows"])
        assert list(rows.n_seeds) == [n, n] and set(rows.family) == {"confirmatory"} and set(rows.holm_m) == {2}
