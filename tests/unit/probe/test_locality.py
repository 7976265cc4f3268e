"""Attention locality indices (toyspt.probe.locality): neighbourhoods and the mass relative to uniform."""
import pytest
import torch

from toyspt.probe.locality import grid_neighbours, neighbourhood_index, proximity_index, window_neighbours


def test_grid_neighbours_are_the_four_neighbourhood_without_row_wrap():
    near = grid_neighbours(12, 4)  # 3 rows of 4
    assert near.sum(-1).tolist() == [2, 3, 3, 2, 3, 4, 4, 3, 2, 3, 3, 2]
    assert not near[3, 4] and near[3, 7] and near[5, 6]  # end of a row is not next to the next row's start
    assert torch.equal(near, near.T)
    with pytest.raises(ValueError, match="width"):
        grid_neighbours(10, 4)


def test_uniform_attention_scores_one_and_local_attention_more():
    T, W = 16, 4
    uniform = torch.full((1, T, T), 1.0 / T, dtype=torch.float64)
    assert proximity_index(uniform, 1).item() == pytest.approx(1.0, abs=1e-15)
    assert neighbourhood_index(uniform, W).item() == pytest.approx(1.0, abs=1e-15)
    up = torch.zeros(1, T, T, dtype=torch.float64)  # every query attends to the pixel above (row 0: itself)
    for i in range(T):
        up[0, i, i - W if i >= W else i] = 1.0
    n = grid_neighbours(T, W).sum(-1).double().mean()
    assert neighbourhood_index(up, W).item() == pytest.approx((12 / 16) / (n / T), rel=1e-12)
    assert proximity_index(up, 1).item() == 0.0  # offset W is not a 1-D neighbour
    assert torch.equal(window_neighbours(5, 2).sum(-1), torch.tensor([2, 3, 4, 3, 2]))
