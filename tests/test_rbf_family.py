"""SquaredDistances: the RBF Grams of many gamma from one matrix of squared distances."""

import numpy as np
import pytest
from sklearn.metrics.pairwise import euclidean_distances, rbf_kernel

from kernfw.operators import Gram
from kernfw.operators.rbf_family import SquaredDistances


def test_distances_and_grams_equal_scikit_learn_and_are_exactly_symmetric():
    X = np.random.default_rng(0).normal(loc=5.0, size=(300, 7))
    family = SquaredDistances(X)
    D = family.D
    assert np.array_equal(D, D.T) and np.all(np.diagonal(D) == 0) and D.min() >= 0
    np.testing.assert_allclose(D, euclidean_distances(X, squared=True), atol=1e-10)
    for gamma in (1e-3, 0.1, 3.0):
        op = family.gram(gamma)
        assert isinstance(op, Gram) and op.symmetric and op.K.dtype == np.float64
        assert np.array_equal(op.K, op.K.T) and np.all(np.diagonal(op.K) == 1.0)
        np.testing.assert_allclose(op.K, rbf_kernel(X, gamma=gamma), rtol=1e-12, atol=1e-14)
        # the operator evaluates new points with the same kernel
        Xt = X[:5] + 0.1
        np.testing.assert_allclose(op.cross(Xt), rbf_kernel(Xt, X, gamma=gamma), atol=1e-12)
    out = np.empty_like(D)
    assert family.gram(0.5, out=out).K is out


def test_bad_input():
    with pytest.raises(ValueError, match="float64"):
        SquaredDistances(np.ones((3, 2), dtype=np.float32))
    with pytest.raises(ValueError, match="gamma"):
        SquaredDistances(np.ones((3, 2))).gram(0.0)


def test_gram_block_equals_fancy_indexing():
    rng = np.random.default_rng(1)
    K = rng.normal(size=(120, 120))
    op = Gram(K, check=False)
    rows, cols = rng.integers(0, 120, 70), rng.permutation(120)[:90]
    np.testing.assert_array_equal(op.block(rows, cols), K[np.ix_(rows, cols)])
    np.testing.assert_array_equal(op.block([3, 1], [2]), K[np.ix_([3, 1], [2])])
