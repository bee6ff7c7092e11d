"""RBFFamily: the RBF Grams of many gamma (float64: from one matrix of squared distances)."""

import numpy as np
import pytest
from sklearn.metrics.pairwise import euclidean_distances, rbf_kernel

from kernfw.operators import Gram
from kernfw.operators.gram import block_times, index_runs
from kernfw.operators.rbf_family import RBFFamily
from kernfw.operators.rbf_gram import rbf_gram


def test_distances_and_grams_equal_scikit_learn_and_are_exactly_symmetric():
    X = np.random.default_rng(0).normal(loc=5.0, size=(300, 7))
    family = RBFFamily(X)
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
        RBFFamily(np.ones((3, 2), dtype=np.float32))
    with pytest.raises(ValueError, match="gamma"):
        RBFFamily(np.ones((3, 2))).gram(0.0)


def test_gram_block_equals_fancy_indexing():
    rng = np.random.default_rng(1)
    K = rng.normal(size=(120, 120))
    op = Gram(K, check=False)
    rows, cols = rng.integers(0, 120, 70), rng.permutation(120)[:90]
    np.testing.assert_array_equal(op.block(rows, cols), K[np.ix_(rows, cols)])
    np.testing.assert_array_equal(op.block([3, 1], [2]), K[np.ix_([3, 1], [2])])


def test_float32_family_is_the_estimators_gram_in_reused_memory():
    X = np.random.default_rng(2).normal(loc=3.0, size=(200, 6))
    family = RBFFamily(X, np.float32)
    assert family.D is None and family.n == 200
    out = np.empty((200, 200), dtype=np.float32)
    op = family.gram(0.3, out=out)
    assert op.K is out and op.symmetric and np.array_equal(out, out.T)
    np.testing.assert_array_equal(out, rbf_gram(X, 0.3))  # what L2SVC computes in float32
    np.testing.assert_allclose(out, rbf_kernel(X, gamma=0.3), atol=1e-6)
    with pytest.raises(ValueError, match="float32 or float64"):
        RBFFamily(X, np.int64)


def test_block_times_equals_the_product_of_the_block():
    rng = np.random.default_rng(3)
    K = rng.normal(size=(150, 150))
    rows = rng.permutation(150)[:40]
    cols = np.r_[10:30, 31:32, 60:100, 5:8]  # runs of consecutive indices
    W = rng.normal(size=(3, cols.size))
    for dtype in (np.float64, np.float32):
        Kd = K.astype(dtype)
        expected = Kd[np.ix_(rows, cols)].astype(np.float64) @ W.T
        np.testing.assert_allclose(block_times(Kd, rows, cols, W), expected, atol=1e-12)
        out = np.ones((rows.size, 3))
        assert block_times(Kd, rows, cols, W, out=out) is out
        np.testing.assert_allclose(out, expected + 1.0, atol=1e-12)
    runs, ends = index_runs(cols)
    np.testing.assert_array_equal(runs, [[10, 30], [31, 32], [60, 100], [5, 8]])
    np.testing.assert_array_equal(ends, [0, 4])
