"""Score-space directions and the subspaces of theory.md T2: exact linear algebra."""
import pytest
import torch

from toyspt.data import directions as dr

T = 12


def test_named_directions_are_row_centred_unit_norm():
    dirs = dr.named_directions(T)
    assert tuple(dirs) == dr.DEFAULT
    for name, D in dirs.items():
        assert D.dtype == torch.float64 and D.shape == (T, T)
        # sums of T terms of size <= 1: rounding is a few ulps of 1
        assert D.sum(dim=1).abs().max() < 1e-14, name
        assert abs(torch.linalg.matrix_norm(D).item() - 1) < 1e-14, name


def test_kernels_match_their_definition():
    i, j = torch.meshgrid(torch.arange(T), torch.arange(T), indexing="ij")
    circ = dr.direction("circ_w2", T)
    for a, b in [(0, T - 1), (0, T - 2), (3, 5), (0, 3)]:
        d = min((b - a) % T, (a - b) % T)
        assert circ[a, b] == float(d <= 2)
    assert torch.equal(dr.direction("toep_w1", T), ((i - j).abs() <= 1).double())
    assert torch.equal(dr.direction("prev", T), (j == i - 1).double())
    assert torch.equal(dr.direction("next", T), (j == i + 1).double())
    assert torch.equal(dr.direction("random_s3", T), dr.direction("random_s3", T))
    assert not torch.equal(dr.direction("random_s3", T), dr.direction("random_s4", T))


def test_bad_names_and_shapes_raise():
    with pytest.raises(ValueError, match="unknown direction"):
        dr.direction("gauss", T)
    with pytest.raises(ValueError, match="at least 2"):
        dr.direction("prev", 1)
    with pytest.raises(ValueError, match="constant along rows"):
        dr.normalise(torch.ones(T, T))  # circulant wider than T/2 is all ones
    with pytest.raises(ValueError, match="shape"):
        dr.row_centre(torch.ones(3, 4))


@pytest.mark.parametrize("w", [0, 1, 2, 5])
def test_circulant_is_blind_toeplitz_only_at_the_boundary(w):
    assert dr.is_blind(dr.circulant(T, w))
    k = dr.kappa(dr.toeplitz(T, w))
    if w == 0:  # the identity is circulant too
        assert k.abs().max() < 1e-14
        return
    # kappa is constant on the interior columns and differs only on the first and last w
    # (columns and rows there have fewer ones); a gradient 1 g^T with sum(g) = 0 sees
    # <g, kappa>, so only that boundary deviation counts. Entries are O(1) sums of T terms.
    dev = k - k[T // 2]
    assert dev[w:T - w].abs().max() < 1e-13
    assert dev[:w].abs().min() > 1e-3 and dev[T - w:].abs().min() > 1e-3


def test_shift_directions_see_the_boundary():
    # prev misses column T-1, next misses column 0: kappa is non-zero there
    assert not dr.is_blind(dr.shift(T, -1))
    assert not dr.is_blind(dr.shift(T, 1))
    assert dr.is_blind(dr.random_direction(T, 0)).item() is False


def test_projectors_are_orthogonal_with_the_right_ranks():
    # eigenvalues of an exact projector are 0/1; float64 rounding of sums of T^2 terms
    for which, rank in [("blind", T * T - (T - 1)), ("visible", T - 1), ("column_only", T)]:
        P = dr.projector_matrix(T, which)
        assert torch.allclose(P, P.T, atol=1e-15)
        assert torch.allclose(P @ P, P, atol=1e-14)
        assert torch.linalg.matrix_rank(P).item() == rank
    Pb, Pv = dr.projector_matrix(T, "blind"), dr.projector_matrix(T, "visible")
    assert torch.allclose(Pb + Pv, torch.eye(T * T, dtype=torch.float64), atol=1e-15)
    assert (Pb @ Pv).abs().max() < 1e-14


def test_blind_projection_kills_kappa_and_visible_is_column_only():
    D = dr.random_direction(T, 1)
    assert dr.kappa(dr.blind(D)).abs().max() < 1e-13
    V = dr.visible(D)
    assert torch.allclose(V, V[:1].expand_as(V), atol=0)  # identical rows
    assert abs(V[0].sum().item()) < 1e-13  # c sums to zero
    # the blind subspace is exactly the kernel of kappa: kappa(D) = T * C colmean(D)
    assert torch.allclose(dr.kappa(D), T * V[0], atol=1e-12)


def test_row_identical_gradient_is_orthogonal_to_blind_directions():
    gamma = torch.randn(T, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    G = ((gamma - gamma.mean()) / T**2).expand(T, T)  # theory.md T2 at uniform attention
    # column means of T equal float64 values are exact up to an ulp of the ratio
    assert dr.row_heterogeneity(G) < 1e-15
    assert abs(dr.energy_share(G, dr.blind).item()) < 1e-28
    for w in (1, 2, 4):
        assert abs((G * dr.normalise(dr.circulant(T, w))).sum().item()) < 1e-17
    assert abs((G * dr.normalise(dr.toeplitz(T, 2))).sum().item()) > 1e-6


def test_stack_from_names_or_dict():
    names, S = dr.stack(["prev", "toep_w1"], T)
    assert names == ("prev", "toep_w1") and S.shape == (2, T, T)
    names2, S2 = dr.stack({"a": dr.shift(T, -1)})
    assert names2 == ("a",) and torch.allclose(S2[0], S[0])
    with pytest.raises(ValueError, match="T is required"):
        dr.stack(["prev"])


def test_named_lists_parse_and_compose():
    assert dr.DEFAULT == dr.PROXIMITY + dr.SHIFTS + dr.RANDOM
    assert set(dr.DIRECTION_SETS) == {"proximity", "proximity_w1", "shifts", "random", "default", "compact"}
    for key, names in dr.DIRECTION_SETS.items():
        assert len(set(names)) == len(names), key
        assert set(names) <= set(dr.DEFAULT), key  # every list draws from the default set
        for n in names:
            assert dr.direction(n, T).shape == (T, T)
    assert len(dr.COMPACT) == 7
    # the width-1 pair: circulant blind, Toeplitz seen through the boundary (theory.md T2)
    circ, toep = dr.PROXIMITY_W1
    assert dr.is_blind(dr.direction(circ, T)) and not dr.is_blind(dr.direction(toep, T))


def test_offsets_are_the_diagonal_axis():
    assert dr.offsets(3) == [-2, -1, 0, 1, 2]
    assert all(type(o) is int for o in dr.offsets(T))
    assert dr.offsets(1) == [0]
    M = dr.offset_matrix(T)
    assert M.dtype == torch.long and M.shape == (T, T) and M[2, 5] == 3
    for o in dr.offsets(T):  # each offset names the diagonal torch.diagonal(M, o) it indexes
        assert (torch.diagonal(M, offset=o) == o).all()
    with pytest.raises(ValueError, match="at least 1"):
        dr.offsets(0)
