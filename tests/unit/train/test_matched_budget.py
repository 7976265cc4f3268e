"""scratch_matched trains with labels for SPT's whole budget: epochs + pre_epochs label epochs
(the study's 200 + 300 = 500), not twice the label epochs; the other recipes keep theirs."""
from toyspt.train.recipes import TrainConfig, get_recipe


def test_scratch_matched_label_epochs_are_epochs_plus_pre_epochs():
    cfg = TrainConfig(epochs=200, pre_epochs=300)  # unequal: 2 x epochs would be 400, epochs + pre 500
    assert get_recipe("scratch_matched").label_epochs(cfg) == 500
    assert get_recipe("scratch_matched").label_epochs(TrainConfig(epochs=7, pre_epochs=3)) == 10
    assert get_recipe("scratch").label_epochs(cfg) == get_recipe("spt").label_epochs(cfg) == 200
    assert get_recipe("spt_only").label_epochs(cfg) == 0  # no label phase
