"""The six mdos losses (math.md §1.2–§1.3): values, closed-form LMO, validation."""

import itertools

import numpy as np
import pytest

from kernfw.losses import (
    LOSSES,
    MaxHinge,
    MulticlassLoss,
    StructuredHinge,
    TopKHinge,
    Usunier,
    WeightedTopKHinge,
    WeightedUsunier,
    dual_vertices,
    make_loss,
)

M = 5
RHO = np.array([0.5, 0.3, 0.3, 0.1, 0.0])


def all_losses(m=M, k=3, rho=RHO):
    return [
        MaxHinge(),
        StructuredHinge(),
        TopKHinge(k),
        Usunier(k),
        WeightedTopKHinge(rho),
        WeightedUsunier(rho),
    ]


def random_margins(rng, n=40, m=M):
    """Margin vectors with a zero on the true label, as the solvers produce them."""
    a = rng.normal(scale=1.0, size=(n, m))
    y = rng.integers(0, m, n)
    a[np.arange(n), y] = 0.0
    return a, y


def definition(loss, a):
    """Φ from its sorted-entries definition (table of math.md §1.2)."""
    srt = -np.sort(-a, axis=1)
    rho = loss.rho(a.shape[1])
    if loss.positive_part:
        return np.maximum(srt, 0) @ rho
    return np.maximum(srt @ rho, 0)


@pytest.mark.parametrize("loss", all_losses(), ids=lambda l: l.name)
def test_value_matches_definition(loss, rng):
    a, _ = random_margins(rng)
    np.testing.assert_allclose(loss.value(a), definition(loss, a), atol=1e-12)


@pytest.mark.parametrize("loss", all_losses(), ids=lambda l: l.name)
def test_lmo_is_feasible_and_attains_the_loss(loss, rng):
    a, _ = random_margins(rng)
    beta = loss.lmo(a)
    np.testing.assert_allclose(np.einsum("ij,ij->i", beta, a), definition(loss, a), atol=1e-12)
    rho = loss.rho(M)
    assert np.all(beta >= 0) and np.all(beta.sum(axis=1) <= rho.sum() + 1e-12)
    # β is a (scaled, capped) rearrangement of ρ: sorted β is dominated by ρ
    assert np.all(-np.sort(-beta, axis=1) <= rho + 1e-12)


def _table_rho(loss, m):
    """ρ of math.md §1.3's table from the loss's constructor arguments (not ``loss.rho``)."""
    if loss.name in ("max_hinge", "structured_hinge"):
        return np.eye(m)[0]
    if loss.name in ("topk_hinge", "usunier"):
        return np.r_[np.full(loss.k, 1.0 / loss.k), np.zeros(m - loss.k)]
    return np.asarray(loss.get_params()["rho"], dtype=float)


def _vertices(loss, m):
    """Every vertex of ``B`` (math.md §1.3): {0} ∪ permutations of ρ for the top-k family,
    permutations of ρ with any entries zeroed for the Usunier (positive-part) family."""
    perms = {tuple(p) for p in itertools.permutations(_table_rho(loss, m))}
    if loss.name in ("usunier", "weighted_usunier"):
        masks = list(itertools.product((0.0, 1.0), repeat=m))
        return np.unique([np.multiply(p, z) for p in perms for z in masks], axis=0)
    return np.array([np.zeros(m)] + sorted(perms))


def _in_B(loss, beta, m, tol=1e-12):
    """Membership in ``B`` from its inequality description (Rado; math.md §1.3)."""
    rho = _table_rho(loss, m)
    if np.any(beta < -tol):
        return False
    partial = np.cumsum(-np.sort(-beta))
    if loss.name in ("usunier", "weighted_usunier"):  # 0 ≤ β ≤ p, p in the permutahedron
        return bool(np.all(partial <= np.cumsum(rho) + tol))
    theta = beta.sum() / rho.sum()  # β = θ p, θ ∈ [0, 1]
    return theta <= 1 + tol and (
        theta <= tol or bool(np.all(partial / theta <= np.cumsum(rho) + 1e-9))
    )


@pytest.mark.parametrize("loss", all_losses(), ids=lambda l: l.name)
def test_lmo_against_enumeration_of_the_vertices(loss, rng):
    """⟨LMO(a), a⟩ = max over every vertex of B, and LMO(a) ∈ B (brute force, m = 5)."""
    a, _ = random_margins(rng, n=25)
    a = np.vstack(
        [
            a,
            np.zeros(M),
            -np.abs(a[:3]) - 0.1,  # loss 0: β may be 0
            np.round(a[3:8]),
        ]
    )  # ties
    V = _vertices(loss, M)
    best = (a @ V.T).max(axis=1)
    for beta in (loss.lmo(a), np.array([loss.lmo_row(row) for row in a])):
        np.testing.assert_allclose(np.einsum("ij,ij->i", beta, a), best, atol=1e-12)
        assert all(_in_B(loss, row, M) for row in beta)


@pytest.mark.parametrize("loss", all_losses(), ids=lambda l: l.name)
def test_lmo_row_equals_vectorized(loss, rng):
    a, _ = random_margins(rng, n=10)
    for row in a:
        np.testing.assert_allclose(
            loss.lmo_row(row) @ row, loss.lmo(row[None])[0] @ row, atol=1e-14
        )


def test_k1_losses_equal_max_hinge_and_k2_topk_equals_usunier(rng):
    a, _ = random_margins(rng)
    mh = MaxHinge().value(a)
    for loss in (
        TopKHinge(1),
        Usunier(1),
        WeightedTopKHinge([1, 0, 0, 0, 0]),
        WeightedUsunier([1, 0, 0, 0, 0]),
    ):
        np.testing.assert_allclose(loss.value(a), mh, atol=1e-14)
    np.testing.assert_allclose(TopKHinge(2).value(a), Usunier(2).value(a), atol=1e-14)
    # for k = 3 the two differ on these margins (a_y = 0 is not always in the top 3)
    assert np.max(np.abs(TopKHinge(3).value(a) - Usunier(3).value(a))) > 1e-3


def test_unweighted_equals_weighted_with_uniform_rho(rng):
    a, _ = random_margins(rng)
    rho = np.array([1 / 3, 1 / 3, 1 / 3, 0, 0])
    np.testing.assert_allclose(TopKHinge(3).value(a), WeightedTopKHinge(rho).value(a), atol=1e-14)
    np.testing.assert_allclose(Usunier(3).value(a), WeightedUsunier(rho).value(a), atol=1e-14)


def test_dual_vertex_value_is_the_loss(rng):
    """⟨−c_i − s_i, u_i⟩ = Φ(s_i; y_i) for u_i = (1ᵀβ)e_y − β (math.md §1.6)."""
    n = 30
    S = rng.normal(size=(n, M))
    y = rng.integers(0, M, n)
    for loss in all_losses():
        C = loss.costs(y, M)
        G = C + S
        a = G - G[np.arange(n), y][:, None]
        U = dual_vertices(loss.lmo(a), y)
        np.testing.assert_allclose(np.einsum("ij,ij->i", -G, U), loss.value(a), atol=1e-12)
        np.testing.assert_allclose(U.sum(axis=1), 0, atol=1e-14)
        off = np.ones_like(U, dtype=bool)
        off[np.arange(n), y] = False
        assert np.all(U[off] <= 0) and np.all(U[~off] >= 0)


def test_structured_costs():
    cost = np.array([[0, 1, 2], [3, 0, 1], [1, 1, 0]], dtype=float)
    y = np.array([0, 2, 1, 0])
    C = StructuredHinge(cost).costs(y, 3)
    np.testing.assert_array_equal(C, cost[y])
    per_example = cost[y] * 2
    np.testing.assert_array_equal(StructuredHinge(per_example).costs(y, 3), per_example)
    np.testing.assert_array_equal(StructuredHinge().costs(y, 3), 1 - np.eye(3)[y])


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: TopKHinge(5).check(5), "smaller than the number of classes"),
        (lambda: Usunier(7).check(5), "smaller than the number of classes"),
        (lambda: TopKHinge(0), "k must be an integer >= 1"),
        (lambda: TopKHinge(1.5), "k must be an integer >= 1"),
        (lambda: WeightedTopKHinge([0.2, 0.5, 0.0]), "nonincreasing"),
        (lambda: WeightedUsunier([0.5, 0.3, 0.1]), "rho_m must be 0"),
        (lambda: WeightedUsunier([0.5, -0.1, -0.2]), "nonnegative"),
        (lambda: WeightedTopKHinge([0, 0, 0]), "positive entry"),
        (lambda: WeightedTopKHinge([0.5, 0.2, 0.0]).check(4), "length 3 but there are 4"),
        (lambda: StructuredHinge(np.ones((3, 3))).check(3), "zero diagonal"),
        (lambda: StructuredHinge(-np.eye(3)), "nonnegative"),
        (lambda: StructuredHinge(np.ones((3, 4))).check(3), "4 columns"),
        (
            lambda: StructuredHinge(np.ones((4, 3)) - np.eye(4, 3)).costs(np.array([0, 1]), 3),
            r"shape \(m, m\)",
        ),
        (lambda: StructuredHinge(np.ones((2, 3))).costs(np.array([0, 1]), 3), "zero on the true"),
        (lambda: MaxHinge().check(1), "at least 2 classes"),
        (lambda: make_loss("nope"), "unknown loss"),
        (lambda: make_loss("weighted_topk"), "needs rho"),
        (lambda: make_loss("max_hinge", cost=np.zeros((2, 2))), "only used by"),
    ],
)
def test_bad_parameters_raise_value_error(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_make_loss_and_custom_objects():
    assert make_loss("topk_hinge", k=2) == TopKHinge(2)
    assert make_loss("usunier", k=2) != TopKHinge(2)
    assert set(LOSSES) == {
        "max_hinge",
        "structured_hinge",
        "topk_hinge",
        "usunier",
        "weighted_topk",
        "weighted_usunier",
    }
    obj = WeightedUsunier(RHO)
    assert make_loss(obj) is obj
    assert "rho=" in repr(obj)
    with pytest.raises(TypeError):
        make_loss(3)
    assert issubclass(WeightedUsunier, MulticlassLoss)


@pytest.mark.cvxpy
@pytest.mark.parametrize("loss", all_losses(), ids=lambda l: l.name)
def test_loss_equals_lp_over_polytope(loss, rng):
    """Φ(a) = max_{β∈B} ⟨β, a⟩ with B of math.md §1.3, by cvxpy."""
    from kernfw.reference import loss_polytope_lp

    a, _ = random_margins(rng, n=4)
    for row in a:
        assert abs(loss_polytope_lp(row, loss) - loss.value(row[None])[0]) < 1e-7
