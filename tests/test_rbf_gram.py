"""The float32 RBF Gram (kernfw.operators.rbf_gram): its values against scikit-learn's
float64 kernel within float32 tolerances (never bit for bit), its exact symmetry, and
the Gram operators and solvers that rely on that symmetry."""

import numpy as np
import pytest
from sklearn.metrics.pairwise import rbf_kernel

from kernfw.kernels import make_operator
from kernfw.operators import Gram, PairwiseKernel
from kernfw.operators import _rbf_gram_numba as compiled
from kernfw.operators.rbf_gram import DIRECT_MAX_FEATURES, rbf_block, rbf_gram

#: float32 kernel values against the float64 reference: a few roundings of values ≤ 1
ATOL = 5e-6


def points(n, d, offset=0.0, seed=0):
    return np.random.default_rng(seed).normal(size=(n, d)) + offset


@pytest.mark.parametrize("d", [1, 5, DIRECT_MAX_FEATURES, DIRECT_MAX_FEATURES + 1, 80])
@pytest.mark.parametrize("n", [1, 63, 64, 65, 200])
def test_rbf_gram_matches_float64_kernel(n, d):
    X = points(n, d)
    gamma = 1.0 / d
    K = rbf_gram(X, gamma)
    assert K.dtype == np.float32 and K.shape == (n, n) and K.flags.c_contiguous
    np.testing.assert_allclose(K, rbf_kernel(X, X, gamma=gamma), rtol=0, atol=ATOL)
    assert np.array_equal(K, K.T)  # bit for bit
    assert np.all(np.diagonal(K) == 1.0)


def test_rbf_gram_is_accurate_on_data_far_from_the_origin():
    """Centring keeps the float32 distances relative to the spread, not the offset."""
    X = points(150, 40, offset=1e3)
    K = rbf_gram(X, 1.0 / 40)
    np.testing.assert_allclose(K, rbf_kernel(X, X, gamma=1.0 / 40), rtol=0, atol=ATOL)


def test_rbf_gram_underflows_to_zero():
    X = np.array([[0.0], [1.0], [30.0]])
    K = rbf_gram(X, 1.0)
    assert K[0, 2] == 0.0 and K[2, 1] == 0.0
    assert K[0, 1] == pytest.approx(np.exp(-1.0), rel=1e-6)


@pytest.mark.parametrize("d", [3, 50])
def test_parallel_and_serial_tiles_agree_exactly(d):
    Xc = points(300, d).astype(np.float32)
    Xc -= Xc.mean(axis=0)
    if d <= DIRECT_MAX_FEATURES:
        XT = np.ascontiguousarray(Xc.T)
        K1, K2 = np.empty((300, 300), np.float32), np.empty((300, 300), np.float32)
        compiled.direct_tiles(XT, 0.2, K1)
        compiled.direct_tiles_parallel(XT, 0.2, K2)
    else:
        sq = np.einsum("ij,ij->i", Xc, Xc)
        K1, K2 = Xc @ Xc.T, None
        K2 = K1.copy()
        compiled.product_tiles(K1, sq, 0.2)
        compiled.product_tiles_parallel(K2, sq, 0.2)
    assert np.array_equal(K1, K2)


@pytest.mark.parametrize("d", [4, 60])
def test_tiles_agree_with_the_product_formula(d):
    X = points(120, d)
    K = rbf_gram(X, 0.1)
    centred = np.asarray(X - X.mean(axis=0), dtype=np.float32)
    sq = np.einsum("ij,ij->i", centred, centred)
    np.testing.assert_allclose(K, rbf_block(centred, centred, sq, sq, 0.1), rtol=0, atol=ATOL)


def test_float32_rbf_gram_operator_is_known_symmetric():
    X = points(90, 6)
    op = make_operator(X, "rbf", gamma=0.2, gram_dtype=np.float32)
    assert isinstance(op, Gram) and op.dtype == np.float32 and op.symmetric
    assert op.dense_factors()[2] is True
    np.testing.assert_allclose(op.dense(), rbf_kernel(X, X, gamma=0.2), rtol=0, atol=ATOL)
    sub = op.subset([5, 1, 70])
    assert sub.symmetric and np.array_equal(sub.dense(), sub.dense().T)
    # float64 storage and other kernels keep scikit-learn's values, symmetry not claimed
    assert not make_operator(X, "rbf", gamma=0.2).symmetric
    assert not make_operator(X, "poly", gram_dtype=np.float32).symmetric
    assert Gram(op.dense()).symmetric  # validated: symmetric bit for bit
    skewed = op.dense().copy()
    skewed[3, 7] = np.nextafter(skewed[3, 7], np.float32(2.0))
    assert not Gram(skewed).symmetric  # within the tolerance, but not bit for bit


def test_from_kernel_needs_a_numeric_gamma_for_the_float32_path():
    X = points(30, 3)
    op = Gram.from_kernel(PairwiseKernel("rbf"), X, np.float32)  # sklearn's default γ
    assert not op.symmetric and op.dtype == np.float32
    np.testing.assert_allclose(op.dense(), rbf_kernel(X, X), rtol=0, atol=ATOL)


def test_block_fw_skips_the_symmetry_test_of_a_known_symmetric_gram(monkeypatch):
    """The compiled passes read the rows of a Gram built symmetric without testing it."""
    from kernfw.operators import gram

    def refuse(K):
        raise AssertionError("the symmetry of a Gram built symmetric was tested")

    K = rbf_gram(points(40, 3), 0.5)
    monkeypatch.setattr(gram, "check_gram", refuse)
    assert Gram(K, check=False, symmetric=True).stored_gram(by_columns=True) is K
    with pytest.raises(AssertionError):
        Gram(K, check=False).stored_gram(by_columns=True)
