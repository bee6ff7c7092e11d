"""The float32 Nyström map (math.md §8.1): scikit-learn's features to float32 rounding, by
row blocks, the same map for training and new points."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.kernel_approximation import Nystroem

from kernfw.kernels import make_operator
from kernfw.operators import nystroem_features as module
from kernfw.operators.nystroem_features import float32_map_is_accurate, nystroem_features


@pytest.fixture(scope="module")
def points():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 6)) * 2.0 + 5.0  # an offset: the RBF block centres it away
    X_new = rng.normal(size=(40, 6)) * 2.0 + 5.0
    return X, X_new


def _laplacian(x, z, gamma):
    return np.exp(-gamma * np.abs(x - z).sum())


def _kernels():
    return [
        {"kernel": "rbf", "gamma": 0.05},
        {"kernel": "rbf"},  # rbf_kernel's default γ = 1 / d
        {"kernel": "poly", "gamma": 0.1, "degree": 3, "coef0": 1.0},  # 84 monomials, 40 landmarks
        {"kernel": "laplacian", "gamma": 0.1},
        {"kernel": _laplacian, "kernel_params": {"gamma": 0.1}},
    ]


def _relative_error(Phi, reference):
    return np.abs(Phi - reference).max() / np.abs(reference).max()


@pytest.mark.parametrize("params", _kernels())
def test_float32_features_are_sklearns_to_float32_rounding(points, params, monkeypatch):
    """Φ in float32, by blocks of 64 rows, against sklearn's float64 transform: Φ within
    1e-4 of max |Φ| and the approximated kernel Φ Φᵀ within 1e-4 of its largest entry."""
    X, X_new = points
    monkeypatch.setattr(module, "ROW_BLOCK", 64)  # several blocks and a ragged last one
    ny = Nystroem(n_components=40, random_state=0, **params).fit(X)
    assert float32_map_is_accurate(ny)
    for Z in (X, X_new):
        Phi, reference = nystroem_features(ny, Z, np.float32), ny.transform(Z)
        assert Phi.dtype == np.float32 and Phi.shape == (Z.shape[0], 40)
        assert _relative_error(Phi, reference) < 1e-4
        K, K_ref = Phi @ Phi[:50].T, reference @ reference[:50].T
        assert _relative_error(K, K_ref) < 1e-4


def test_float32_features_of_sparse_points(points):
    X, X_new = points
    X = np.where(np.abs(X - 5.0) > 1.0, X, 0.0)
    ny = Nystroem(gamma=0.05, n_components=60, random_state=0).fit(sp.csr_matrix(X))
    Phi = nystroem_features(ny, sp.csc_matrix(X), np.float32)
    assert _relative_error(Phi, ny.transform(X)) < 1e-4


@pytest.mark.parametrize("degree", [1, 2])
def test_a_rank_deficient_landmark_kernel_keeps_the_float64_map(points, degree):
    """More landmarks than the polynomial feature space has dimensions (7 or 28 for d = 6):
    K_CC is singular, the float32 map is off by more than the tolerance, and the operator
    stored in float32 evaluates the map in float64: Φ Φᵀ is still the kernel."""
    X, X_new = points
    ny = Nystroem(kernel="poly", degree=degree, gamma=0.1, coef0=1.0, n_components=60)
    ny.set_params(random_state=0).fit(X)
    Phi, reference = nystroem_features(ny, X, np.float32), ny.transform(X)
    assert _relative_error(Phi, reference) > module.FLOAT32_TOL
    assert not float32_map_is_accurate(ny)
    op = make_operator(
        X,
        "poly",
        degree=degree,
        gamma=0.1,
        coef0=1.0,
        approx="nystroem",
        n_components=60,
        random_state=0,
        gram_dtype=np.float32,
    )
    assert op.X.dtype == np.float32 and op.map_dtype == np.float64
    K = (0.1 * X_new @ X.T + 1.0) ** degree
    np.testing.assert_allclose(op.cross(X_new), K, rtol=0, atol=1e-5 * np.abs(K).max())


def test_float64_features_are_sklearns_transform(points):
    X, _ = points
    ny = Nystroem(gamma=0.05, n_components=50, random_state=0).fit(X)
    np.testing.assert_array_equal(nystroem_features(ny, X, np.float64), ny.transform(X))


def test_a_wrong_number_of_features_is_refused(points):
    X, _ = points
    ny = Nystroem(gamma=0.05, n_components=50, random_state=0).fit(X)
    with pytest.raises(ValueError, match="3 features, the Nystroem landmarks have 6"):
        nystroem_features(ny, X[:, :3], np.float32)


def test_the_operator_maps_new_points_as_its_training_points(points):
    """The float32 operator: its training features are sklearn's to float32 rounding, and
    its transform of the training points gives the training features again."""
    X, _ = points
    op = make_operator(
        X, "rbf", gamma=0.05, approx="nystroem", n_components=80, gram_dtype=np.float32
    )
    assert op.X.dtype == np.float32 and op.map_dtype == np.float32
    assert _relative_error(op.X, op.transformer.transform(X)) < 1e-4
    np.testing.assert_allclose(op.transform(X), op.X, rtol=0, atol=1e-6 * np.abs(op.X).max())
