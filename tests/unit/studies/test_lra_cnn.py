"""The CNN learnability reference: the image layout it reads, its stopping rule, determinism,
and that it learns what a small network should (digits far above chance)."""
import pytest
import torch

from toyspt.kinds.tasks import DigitsSource, ListOpsSource, pixels_as_sequences
from toyspt.studies.lra_cnn import CNNConfig, CNNReferenceSpec, as_images, summary
from toyspt.train.run import stalled


def test_sequences_are_laid_back_out_row_by_row():
    with pytest.raises(ValueError, match="square single-channel"):
        as_images(torch.zeros(1, 12, 1))  # 12 positions: no square image
    raw = (torch.arange(16.0) * 10).reshape(1, 4, 4).numpy()
    back = as_images(pixels_as_sequences(raw))
    assert torch.equal(back[0, 0], pixels_as_sequences(raw)[0, :, 0].reshape(4, 4))
    assert float(back[0, 0, 1, 0]) == pytest.approx((40 / 255 - 0.5) / 0.5)  # row 1, column 0 = pixel 4


def test_only_image_sources_are_taken():
    with pytest.raises(ValueError, match="an image source"):
        CNNReferenceSpec(ListOpsSource(), 0)


def test_digits_learned_far_above_chance_and_stopped_by_the_rule():
    spec = CNNReferenceSpec(DigitsSource(side=8), seed=1000, cnn=CNNConfig(epochs=12, patience=3))
    t = spec.execute()
    s = t.details
    assert s["test_at_peak"] > 0.8  # chance is 0.1 (10 balanced classes); the Transformers reach ~0.6 here
    rows = [dict(r, phase="finetune") for r in t.rows]
    assert (rows[-1]["stopped"] == "patience") == stalled(rows, 3)
    assert all(not stalled(rows[:n], 3) for n in range(1, len(rows)))
    assert summary(t.rows) == {k: v for k, v in s.items() if k != "cnn_version"}
    again = spec.execute()
    assert again.rows == t.rows  # same seed, same numbers


def test_the_key_names_the_network_and_the_data():
    a = CNNReferenceSpec(DigitsSource(side=8), seed=0)
    assert a.key() != CNNReferenceSpec(DigitsSource(side=8), seed=1).key()
    assert a.key() != CNNReferenceSpec(DigitsSource(side=8), seed=0, cnn=CNNConfig(channels=8)).key()
    assert a.key() != CNNReferenceSpec(DigitsSource(side=16), seed=0).key()
    assert a.to_dict()["data_kind"] == "digits"


def test_the_counts_against_the_majority_rule_are_those_of_the_same_examples():
    from toyspt.analysis.stats import mcnemar_exact

    t = CNNReferenceSpec(DigitsSource(side=8), seed=1000, cnn=CNNConfig(epochs=3, patience=3)).execute()
    d = DigitsSource(side=8).load()
    majority = int(torch.bincount(d.train.y).argmax())
    rule = int((d.test.y == majority).sum())
    for r in t.rows:  # right = only_model + right on both; the rule's right ones = only_majority + right on both
        both = round(r["test_acc"] * len(d.test.y)) - r["only_model"]
        assert 0 <= both <= rule and rule - both == r["only_majority"]
    assert mcnemar_exact(t.details["only_model"], t.details["only_majority"]) < 1e-6
