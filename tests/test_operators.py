"""Kernel operators: the four backends agree, float32 is kept, normalizations,
MultiKernel re-weighting, the KernelFunction cache and every bad input."""

import pickle
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics.pairwise import pairwise_kernels
from sklearn.utils.extmath import safe_sparse_dot

from kernfw.kernels import make_operator
from kernfw.operators import (
    Features,
    Gram,
    KernelFunction,
    KernelOperator,
    MultiKernel,
    Normalized,
    PairwiseKernel,
    normalize,
)
from kernfw.operators._products_numba import POLY, kernel_of_products

N, N_NEW, D = 40, 7, 5
TOL = dict(rtol=1e-10, atol=1e-10)


def quadratic_kernel(A, B):
    """A callable kernel on blocks, as sklearn.svm.SVC accepts: (a·b + 1)²."""
    return (safe_sparse_dot(A, B.T, dense_output=True) + 1.0) ** 2


#: name -> (metric, params) of the kernels every backend is checked on
KERNELS = {
    "linear": ("linear", {}),
    "rbf": ("rbf", {"gamma": 0.3}),
    "poly": ("poly", {"gamma": 0.5, "degree": 3, "coef0": 1.0}),
    "callable": (quadratic_kernel, {}),
}


def reference(kernel, A, B):
    metric, params = KERNELS[kernel]
    if callable(metric):
        return metric(A, B)
    return pairwise_kernels(A, B, metric=metric, **params)


def sparsify(A):
    """A CSR copy of ``A`` with about half of the entries zeroed."""
    A = A.copy()
    A[np.abs(A) < 0.7] = 0.0
    return sp.csr_matrix(A)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, D))
    X_new = rng.normal(size=(N_NEW, D))
    return X, X_new


# --- backends on one kernel -------------------------------------------------------------


def _gram(kernel, X):
    metric, params = KERNELS[kernel]
    pk = PairwiseKernel(metric, params)
    return Gram(reference(kernel, X, X), kernel=pk, X=X)


def _function(kernel, X, **kw):
    metric, params = KERNELS[kernel]
    return KernelFunction(X, metric, cache_size=0.002, batch_size=7, **kw, **params)


def _make(kernel, X, backend):
    metric, params = KERNELS[kernel]
    return make_operator(X, (metric, dict(params)), backend=backend)


BACKENDS = {
    "gram": lambda k, X: _gram(k, X),
    "gram(sparse X)": lambda k, X: _gram(k, sparsify(X)),
    "make_operator(gram)": lambda k, X: _make(k, X, "gram"),
    "function": lambda k, X: _function(k, X),
    "function(sparse X)": lambda k, X: _function(k, sparsify(X)),
    "make_operator(function)": lambda k, X: _make(k, X, "function"),
    "features": lambda k, X: Features(X),
    "features(sparse X)": lambda k, X: Features(sparsify(X)),
    "features(sparse, d > n)": lambda k, X: Features(sparsify(X)),
    "multi(gram)": lambda k, X: MultiKernel([_gram(k, X)]),
    "multi(function)": lambda k, X: MultiKernel([_function(k, X)], [1.0]),
    "multi(features)": lambda k, X: MultiKernel([Features(X)]),
    "multi(gram + function, weights 1/4, 3/4)": lambda k, X: MultiKernel(
        [_gram(k, X), _function(k, X)], [0.25, 0.75]
    ),
}
SPARSE_BACKENDS = {
    "gram(sparse X)",
    "function(sparse X)",
    "features(sparse X)",
    "features(sparse, d > n)",
}
LINEAR_ONLY = {"features", "features(sparse X)", "features(sparse, d > n)", "multi(features)"}

CASES = [(b, k) for b in BACKENDS for k in KERNELS if k == "linear" or b not in LINEAR_ONLY]


@pytest.fixture(scope="module")
def wide_data():
    rng = np.random.default_rng(1)
    return rng.normal(size=(12, 3 * D)), rng.normal(size=(N_NEW, 3 * D))


def _case(backend, kernel, data, wide_data):
    X, X_new = wide_data if backend == "features(sparse, d > n)" else data
    op = BACKENDS[backend](kernel, X)
    if backend in SPARSE_BACKENDS:
        X, X_new = sparsify(X), sparsify(X_new)
    return op, X.toarray() if sp.issparse(X) else X, X_new


def _normalized_references(op, K):
    """``(operator, reference)`` pairs: ``op`` and its three normalizations."""
    n, d = K.shape[0], np.diag(K)
    H = np.eye(n) - 1.0 / n
    pairs = [(op, K), (normalize(op, "trace"), n * K / d.sum())]
    pairs.append((normalize(op, "center"), H @ K @ H))
    if np.all(d > 0):
        pairs.append((normalize(op, "unit_diagonal"), K / np.sqrt(np.outer(d, d))))
    return pairs


def _gram_of_products(form):
    """``scale · k_code(⟨x_i, x_j⟩, ‖x_i‖², ‖x_j‖²)`` of a product form, entry by entry."""
    Z = np.asarray(form.features, dtype=np.float64)
    ip, sq = Z @ Z.T, np.einsum("ij,ij->i", Z, Z)
    args = (form.code, form.gamma, form.coef0, form.degree)
    values = [
        [kernel_of_products(*args, ip[i, j], sq[i], sq[j]) for j in range(len(Z))]
        for i in range(len(Z))
    ]
    return form.scale * np.array(values)


@pytest.mark.parametrize("backend,kernel", CASES)
def test_backends_answer_the_questions_like_the_reference_gram(backend, kernel, data, wide_data):
    """features, stored_gram, matmat64, block and product_form (when a backend answers
    them), on the backend and on its normalizations, against the dense reference Gram."""
    op, X, _ = _case(backend, kernel, data, wide_data)
    n = X.shape[0]
    V = np.random.default_rng(4).normal(size=(n, 3))
    rows, cols = np.array([3, 0, n - 1]), np.array([5, 3, 1, 0, 2])
    for nop, K in _normalized_references(op, reference(kernel, X, X)):
        np.testing.assert_allclose(nop.block(rows, cols), K[np.ix_(rows, cols)], **TOL)
        np.testing.assert_allclose(nop.block(cols, rows), K[np.ix_(cols, rows)], **TOL)
        for W in (V, V[:, 0]):
            assert nop.matmat64(W).dtype == np.float64
            np.testing.assert_allclose(nop.matmat64(W), K @ W, **TOL)
        Phi = nop.features()
        if Phi is not None:
            Phi = Phi.toarray() if sp.issparse(Phi) else Phi
            np.testing.assert_allclose(Phi @ Phi.T, K, **TOL)
        if nop.stored_gram() is not None:
            np.testing.assert_allclose(nop.stored_gram(), K, **TOL)
            np.testing.assert_allclose(nop.stored_gram(by_columns=True).T, K, **TOL)
        if nop.product_form() is not None:
            np.testing.assert_allclose(_gram_of_products(nop.product_form()), K, **TOL)


def test_a_float32_gram_sums_its_products_in_float64():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(300, 4))
    K = (X @ X.T).astype(np.float32)
    K64, V = K.astype(np.float64), rng.normal(size=(300, 2)) * 1e4
    for W in (V, V[:, 1]):
        error = np.abs(Gram(K).matmat64(W) - K64 @ W)
        assert np.all(error <= 1e-13 * (np.abs(K64) @ np.abs(W)))  # float32 sums: ~1e-7


@pytest.mark.parametrize("backend,kernel", CASES)
def test_backends_agree_with_the_reference_gram(backend, kernel, data, wide_data):
    op, X, X_new = _case(backend, kernel, data, wide_data)
    n = X.shape[0]
    K = reference(kernel, X, X)
    K_new = reference(kernel, X_new.toarray() if sp.issparse(X_new) else X_new, X)
    rng = np.random.default_rng(3)
    v, V = rng.normal(size=n), rng.normal(size=(n, 3))
    idx = np.array([3, 0, n - 1, 5, 3])  # repeated and unsorted on purpose
    assert isinstance(op, KernelOperator) and op.n == n and op.shape == (n, n)
    np.testing.assert_allclose(op.diag(), np.diag(K), **TOL)
    np.testing.assert_allclose(op.matmat(v), K @ v, **TOL)
    np.testing.assert_allclose(op.matmat(V), K @ V, **TOL)
    np.testing.assert_allclose(op.quad(v), v @ K @ v, **TOL)
    np.testing.assert_allclose(op.quad(V), np.einsum("ir,ij,jr->r", V, K, V), **TOL)
    np.testing.assert_allclose(op.columns(idx), K[:, idx], **TOL)
    np.testing.assert_allclose(op.columns(idx), K[:, idx], **TOL)  # now from the cache
    np.testing.assert_allclose(op.dense(), K, **TOL)
    np.testing.assert_allclose(op.cross(X_new), K_new, **TOL)
    np.testing.assert_allclose(op.cross(X_new, idx), K_new[:, idx], **TOL)
    np.testing.assert_allclose(
        op.new_diag(X_new),
        np.diag(reference(kernel, *(2 * [X_new.toarray() if sp.issparse(X_new) else X_new]))),
        **TOL,
    )
    sub = op.subset(idx[:4])
    assert type(sub) is type(op) and sub.n == 4
    np.testing.assert_allclose(sub.dense(), K[np.ix_(idx[:4], idx[:4])], **TOL)
    np.testing.assert_allclose(sub.matmat(v[:4]), K[np.ix_(idx[:4], idx[:4])] @ v[:4], **TOL)
    np.testing.assert_allclose(sub.cross(X_new), K_new[:, idx[:4]], **TOL)
    np.testing.assert_allclose(sub.diag(), np.diag(K)[idx[:4]], **TOL)
    # what a fitted model keeps: the same predictions, no Gram block of the points
    pred = op.predictor(idx[:4])
    assert pred.n == 4 and not isinstance(pred, Gram)
    np.testing.assert_allclose(pred.cross(X_new), K_new[:, idx[:4]], **TOL)
    np.testing.assert_allclose(pred.cross_matmat(X_new, V[:4]), K_new[:, idx[:4]] @ V[:4], **TOL)


def test_boolean_and_negative_indices(data):
    X, _ = data
    op, K = Features(X), X @ X.T
    mask = np.zeros(N, dtype=bool)
    mask[[1, 4]] = True
    np.testing.assert_allclose(op.columns(mask), K[:, [1, 4]], **TOL)
    np.testing.assert_allclose(op.columns([-1]), K[:, [N - 1]], **TOL)
    np.testing.assert_allclose(op.columns(2), K[:, [2]], **TOL)
    assert op.columns([]).shape == (N, 0)


def test_precomputed_gram_cross_takes_a_test_gram(data):
    X, X_new = data
    K, K_new = X @ X.T, X_new @ X.T
    op = make_operator(K, "precomputed")
    assert isinstance(op, Gram) and op.kernel is None
    np.testing.assert_allclose(op.cross(K_new), K_new, **TOL)
    np.testing.assert_allclose(op.cross(K_new, [2, 5]), K_new[:, [2, 5]], **TOL)
    with pytest.raises(TypeError, match="cannot evaluate k\\(x, x\\)"):
        op.new_diag(K_new)


def test_features_primal_is_xt_v(data):
    X, _ = data
    V = np.random.default_rng(0).normal(size=(N, 2))
    for A in (X, sparsify(X)):
        op = Features(A)
        dense = A.toarray() if sp.issparse(A) else A
        np.testing.assert_allclose(op.primal(V), dense.T @ V, **TOL)
        np.testing.assert_allclose(op.primal(V[:, 0]), dense.T @ V[:, 0], **TOL)
        assert isinstance(op.primal(V), np.ndarray)


@settings(max_examples=25, deadline=None, database=None, derandomize=True)
@given(
    seed=st.integers(0, 2**32 - 1),
    a=st.floats(-3, 3),
    b=st.floats(-3, 3),
    backend=st.sampled_from(
        [
            "gram",
            "function(sparse X)",
            "features(sparse X)",
            "multi(gram + function, weights 1/4, 3/4)",
        ]
    ),
)
def test_matmat_is_linear_and_symmetric(seed, a, b, backend):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(15, 3))
    op = BACKENDS[backend]("linear" if "features" in backend else "rbf", X)
    U, W = rng.normal(size=(15, 2)), rng.normal(size=(15, 2))
    np.testing.assert_allclose(
        op.matmat(a * U + b * W), a * op.matmat(U) + b * op.matmat(W), rtol=1e-9, atol=1e-9
    )
    # uᵀ (K w) = wᵀ (K u): K is symmetric
    np.testing.assert_allclose(U.T @ op.matmat(W), (W.T @ op.matmat(U)).T, rtol=1e-9, atol=1e-9)


# --- float32 ----------------------------------------------------------------------------


def _float32_ops(X32):
    Xs32 = sparsify(X32.astype(np.float64)).astype(np.float32)
    K32 = (X32 @ X32.T).astype(np.float32)
    return {
        "gram": Gram(K32),
        "gram(kernel)": make_operator(X32, "rbf", backend="gram"),
        "features": Features(X32),
        "features(sparse)": Features(Xs32),
        "features(sparse, d > n)": Features(sp.csr_matrix(X32[:3])),
        "function": KernelFunction(X32, "rbf", gamma=0.2, cache_size=1.0),
        "function(sparse)": KernelFunction(Xs32, "poly", degree=2, gamma=0.1, coef0=1.0),
        "function(callable)": KernelFunction(X32, quadratic_kernel),
        "multi": MultiKernel([Features(X32), KernelFunction(X32, "rbf", gamma=0.2)], [0.3, 0.7]),
        "trace": normalize(KernelFunction(X32, "poly", gamma=0.2), "trace"),
        "unit_diagonal": normalize(Features(X32), "unit_diagonal"),
        "center": normalize(make_operator(X32, "rbf", backend="gram"), "center"),
    }


def _stored_arrays(op):
    """Every array an operator keeps (recursively)."""
    for value in vars(op).values():
        if isinstance(value, KernelOperator):
            yield from _stored_arrays(value)
        elif isinstance(value, (list, tuple)) and value and isinstance(value[0], KernelOperator):
            for sub in value:
                yield from _stored_arrays(sub)
        elif isinstance(value, np.ndarray) and value.dtype.kind == "f" and value.ndim >= 1:
            if value is not getattr(op, "weights", None):  # MultiKernel weights: float64
                yield value
        elif sp.issparse(value):
            yield value.data
        elif isinstance(value, dict):
            yield from (v for v in value.values() if isinstance(v, np.ndarray))


FLOAT32_OPS = (
    "gram",
    "gram(kernel)",
    "features",
    "features(sparse)",
    "features(sparse, d > n)",
    "function",
    "function(sparse)",
    "function(callable)",
    "multi",
    "trace",
    "unit_diagonal",
    "center",
)


@pytest.mark.parametrize("name", FLOAT32_OPS)
def test_float32_stays_float32(name, data):
    X, X_new = data
    X32, X_new32 = X.astype(np.float32), X_new.astype(np.float32)
    op = _float32_ops(X32)[name]
    n = op.n
    V = np.ones((n, 2), dtype=np.float32)
    assert op.dtype == np.float32
    results = {
        "diag": op.diag(),
        "matmat": op.matmat(V),
        "matvec": op.matmat(V[:, 0]),
        "quad": op.quad(V[:, 0]),
        "columns": op.columns([0, 1]),
        "subset.matmat": op.subset([0, 2]).matmat(V[[0, 2]]),
    }
    if name != "gram":
        results["cross"] = op.cross(X_new32, [0, 1])
        results["new_diag"] = op.new_diag(X_new32)
        results["subset.cross"] = op.subset([0, 2]).cross(X_new32)
    for what, value in results.items():
        assert np.asarray(value).dtype == np.float32, what
    for arr in _stored_arrays(op):
        assert arr.dtype == np.float32, arr.shape
    if isinstance(op, KernelFunction):
        assert all(col.dtype == np.float32 for col in op._cache.values())


def test_float32_is_not_copied():
    X32 = np.random.default_rng(0).normal(size=(20, 3)).astype(np.float32)
    K32 = X32 @ X32.T
    Xs32 = sp.csr_matrix(X32)
    assert Gram(K32).K is K32
    assert make_operator(K32, "precomputed").K is K32
    assert Features(X32).X is X32
    assert Features(Xs32).X.data is Xs32.data
    assert KernelFunction(X32).X is X32
    assert make_operator(X32, "rbf", backend="function").X is X32
    assert make_operator(Xs32, "linear").X.data is Xs32.data


# --- normalizations ---------------------------------------------------------------------

NORM_BACKENDS = {
    "gram": lambda X: make_operator(X, "poly", gamma=0.3, coef0=1.0, backend="gram"),
    "function": lambda X: KernelFunction(
        X, "poly", gamma=0.3, coef0=1.0, degree=3, cache_size=0.001, batch_size=5
    ),
    "features": lambda X: Features(X),
    "features(sparse)": lambda X: Features(sp.csr_matrix(X)),
    "multi": lambda X: MultiKernel(
        [Features(X), KernelFunction(X, "poly", gamma=0.3, coef0=1.0)], [2.0, 0.5]
    ),
    "normalized(trace)": lambda X: normalize(Features(X), "trace"),
}


def _big_gram(backend, X, X_new):
    """Kernel of train + test points from a fresh operator over both."""
    Z = np.vstack([X, X_new])
    return NORM_BACKENDS[backend](Z).dense()


def _normalize_big(K_big, n, kind):
    """The reference: normalize the (train + test) Gram with training statistics."""
    if kind == "trace":
        return n / np.trace(K_big[:n, :n]) * K_big
    if kind == "unit_diagonal":
        s = 1.0 / np.sqrt(np.diag(K_big))
        return s[:, None] * K_big * s
    m = np.zeros(len(K_big))
    m[:n] = 1.0 / n
    H = np.eye(len(K_big)) - np.outer(np.ones(len(K_big)), m)  # φ ↦ φ − mean of training φ
    return H @ K_big @ H.T


@pytest.mark.parametrize("kind", ["trace", "unit_diagonal", "center"])
@pytest.mark.parametrize("backend", list(NORM_BACKENDS))
def test_normalizations(kind, backend, data):
    X, X_new = data
    op = normalize(NORM_BACKENDS[backend](X), kind)
    assert isinstance(op, Normalized)
    K = op.dense()
    if kind == "trace":
        assert np.trace(K) == pytest.approx(N, rel=1e-12)
    elif kind == "unit_diagonal":
        np.testing.assert_allclose(np.diag(K), 1.0, rtol=1e-12)
        np.testing.assert_allclose(op.diag(), 1.0, rtol=1e-12)
    else:
        np.testing.assert_allclose(K.mean(axis=1), 0.0, atol=1e-10 * np.abs(K).max())
        np.testing.assert_allclose(op.matmat(np.ones(N)), 0.0, atol=1e-9 * np.abs(K).max())
    # consistency with the normalized Gram of train + test points
    if backend == "normalized(trace)":  # the inner trace statistics are those of X
        Z = np.vstack([X, X_new])
        base_big = N / np.trace(X @ X.T) * (Z @ Z.T)
    else:
        base_big = _big_gram(backend, X, X_new)
    Kt = _normalize_big(base_big, N, kind)
    scale = max(1.0, np.abs(Kt).max())
    tol = dict(rtol=1e-10, atol=1e-10 * scale)
    np.testing.assert_allclose(K, Kt[:N, :N], **tol)
    np.testing.assert_allclose(op.diag(), np.diag(Kt)[:N], **tol)
    V = np.random.default_rng(0).normal(size=(N, 2))
    np.testing.assert_allclose(op.matmat(V), Kt[:N, :N] @ V, **tol)
    np.testing.assert_allclose(op.matmat(V[:, 0]), Kt[:N, :N] @ V[:, 0], **tol)
    np.testing.assert_allclose(op.cross(X_new), Kt[N:, :N], **tol)
    np.testing.assert_allclose(op.new_diag(X_new), np.diag(Kt)[N:], **tol)
    idx = np.array([4, 1, 30])
    np.testing.assert_allclose(op.cross(X_new, idx), Kt[N:, idx], **tol)
    sub = op.subset(idx)
    np.testing.assert_allclose(sub.dense(), Kt[np.ix_(idx, idx)], **tol)
    np.testing.assert_allclose(sub.matmat(V[idx]), Kt[np.ix_(idx, idx)] @ V[idx], **tol)
    np.testing.assert_allclose(sub.diag(), np.diag(Kt)[idx], **tol)
    np.testing.assert_allclose(sub.cross(X_new), Kt[N:, idx], **tol)
    np.testing.assert_allclose(sub.new_diag(X_new), np.diag(Kt)[N:], **tol)
    pred = op.predictor(idx)
    np.testing.assert_allclose(pred.cross(X_new), Kt[N:, idx], **tol)
    np.testing.assert_allclose(pred.cross_matmat(X_new, V[idx]), Kt[N:, idx] @ V[idx], **tol)
    np.testing.assert_allclose(pred.new_diag(X_new), np.diag(Kt)[N:], **tol)


@pytest.mark.parametrize("kind", ["trace", "center"])
def test_normalized_precomputed_gram_with_test_gram(kind, data):
    X, X_new = data
    Z = np.vstack([X, X_new])
    K_big = Z @ Z.T
    op = make_operator(K_big[:N, :N], "precomputed", normalization=kind)
    Kt = _normalize_big(K_big, N, kind)
    np.testing.assert_allclose(op.dense(), Kt[:N, :N], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(op.cross(K_big[N:, :N]), Kt[N:, :N], rtol=1e-10, atol=1e-10)


def test_unit_diagonal_needs_positive_diagonal():
    X = np.zeros((3, 2))
    X[0, 0] = 1.0
    with pytest.raises(ValueError, match="K_ii > 0"):
        normalize(Features(X), "unit_diagonal")
    with pytest.raises(ValueError, match="positive trace"):
        normalize(Features(np.zeros((3, 2))), "trace")
    op = normalize(Features(np.eye(2)), "unit_diagonal")
    with pytest.raises(ValueError, match="k\\(x, x\\) > 0"):
        op.cross(np.zeros((1, 2)))


def test_normalize_none_and_bad_kind(data):
    X, _ = data
    op = Features(X)
    assert normalize(op, None) is op
    with pytest.raises(ValueError, match="unknown normalization 'cosine'"):
        normalize(op, "cosine")
    with pytest.raises(TypeError, match="KernelOperator"):
        Normalized(X, "trace")


# --- MultiKernel ------------------------------------------------------------------------


def _three_kernels(X):
    return [
        Features(X),
        KernelFunction(X, "rbf", gamma=0.2, cache_size=1.0),
        make_operator(X, "poly", degree=2, gamma=0.1, backend="gram"),
    ]


def test_multikernel_is_the_weighted_sum(data):
    X, X_new = data
    ops, ref = _three_kernels(X), _three_kernels(X)
    w = np.array([0.5, 0.0, 2.0])
    mk = MultiKernel(ops, w)
    K = sum(wj * op.dense() for wj, op in zip(w, ref))
    np.testing.assert_allclose(mk.dense(), K, **TOL)
    np.testing.assert_allclose(mk.diag(), np.diag(K), **TOL)
    np.testing.assert_allclose(mk.matmat(np.ones((N, 2))), K @ np.ones((N, 2)), **TOL)
    np.testing.assert_allclose(
        mk.cross(X_new, [1, 2]), sum(wj * op.cross(X_new, [1, 2]) for wj, op in zip(w, ref)), **TOL
    )
    # the zero-weight kernel is never evaluated
    assert ops[1].misses == 0 and ops[1].hits == 0
    # all weights zero: the zero kernel is refused, not silently multiplied (issue 23)
    with pytest.raises(ValueError, match="kernel weights are all zero"):
        MultiKernel(ops, [0.0, 0.0, 0.0])


@pytest.mark.parametrize(
    "weights, message",
    [
        ([1.0, np.nan, 0.5], "must be finite"),
        ([1.0, np.inf, 0.5], "must be finite"),
        ([1.0, -0.1, 0.5], "must be nonnegative"),
        ([0.0, 0.0, 0.0], "all zero"),
        ([1.0, 1.0], "expected 3 kernel weights"),
    ],
)
def test_kernel_weights_are_refused(data, weights, message):
    X, _ = data
    with pytest.raises(ValueError, match=message):
        MultiKernel(_three_kernels(X), weights)


def test_per_kernel_quad(data):
    X, _ = data
    ops = _three_kernels(X)
    mk = MultiKernel(ops, [1.0, 0.0, 1.0])
    rng = np.random.default_rng(5)
    v, V = rng.normal(size=N), rng.normal(size=(N, 3))
    d = mk.per_kernel_quad(v)
    assert d.shape == (3,)
    np.testing.assert_allclose(d, [v @ op.dense() @ v for op in ops], **TOL)
    D_ = mk.per_kernel_quad(V)
    assert D_.shape == (3, 3)
    np.testing.assert_allclose(
        D_, [np.einsum("ir,ij,jr->r", V, op.dense(), V) for op in ops], **TOL
    )
    # weights do not enter: vᵀ K_w v = Σ_j w_j d_j
    assert mk.quad(v) == pytest.approx(d[0] + d[2], rel=1e-12)


def test_with_weights_recomputes_nothing(data):
    X, _ = data
    ops = _three_kernels(X)
    kf = ops[1]
    mk = MultiKernel(ops, [1.0, 1.0, 1.0])
    idx = [0, 3, 9]
    first = mk.columns(idx)
    misses = kf.misses
    assert misses == 3
    w = np.array([0.0, 2.0, 0.5])
    mk2 = mk.with_weights(w)
    assert all(a is b for a, b in zip(mk2.operators, mk.operators))
    assert mk.weights.tolist() == [1.0, 1.0, 1.0]  # the original is unchanged
    again = mk2.columns(idx)
    assert kf.misses == misses and kf.hits == 3
    np.testing.assert_allclose(again, 2.0 * kf.columns(idx) + 0.5 * ops[2].columns(idx), **TOL)
    assert first.shape == again.shape
    sub = mk2.subset([1, 2])
    np.testing.assert_allclose(sub.weights, w)


def test_multikernel_cross_with_one_test_gram_per_kernel(data):
    X, X_new = data
    Z = np.vstack([X, X_new])
    K1, K2 = Z @ Z.T, pairwise_kernels(Z, metric="rbf", gamma=0.2)
    mk = make_operator([K1[:N, :N], K2[:N, :N]], ["precomputed", "precomputed"])
    assert isinstance(mk, MultiKernel) and mk.p == 2
    mk = mk.with_weights([0.3, 0.7])
    expected = 0.3 * K1[N:, :N] + 0.7 * K2[N:, :N]
    np.testing.assert_allclose(mk.cross([K1[N:, :N], K2[N:, :N]]), expected, **TOL)
    np.testing.assert_allclose(mk.cross(np.stack([K1[N:, :N], K2[N:, :N]])), expected, **TOL)
    with pytest.raises(ValueError, match="expected 2 test inputs"):
        mk.cross([K1[N:, :N]] * 3)
    # a nested list of rows is one input for every kernel, not one per kernel
    feats = MultiKernel([Features(X), Features(X)])
    np.testing.assert_allclose(feats.cross(X_new[:2].tolist()), 2 * X_new[:2] @ X.T, **TOL)


# --- KernelFunction cache ---------------------------------------------------------------


def _cache_for(columns, n, itemsize=8):
    """``cache_size`` in MB that holds exactly ``columns`` columns."""
    return (columns * n * itemsize + 1) / 2**20


def test_cache_counts_hits_and_misses(data):
    X, _ = data
    kf = KernelFunction(X, "rbf", gamma=0.5, cache_size=_cache_for(10, N))
    assert kf.max_cached == 10
    kf.columns([0, 1, 2])
    assert (kf.hits, kf.misses) == (0, 3)
    kf.columns([1, 2, 3])
    assert (kf.hits, kf.misses) == (2, 4)
    assert kf.cache_info == {"hits": 2, "misses": 4, "cached": 4, "max_cached": 10}
    kf.matmat(np.ones(N))  # matmat streams rows and leaves the cache alone
    assert kf.cache_info["cached"] == 4 and kf.misses == 4
    kf.clear_cache()
    assert kf.cache_info == {"hits": 0, "misses": 0, "cached": 0, "max_cached": 10}


def test_cache_evicts_least_recently_used(data):
    X, _ = data
    kf = KernelFunction(X, "rbf", gamma=0.5, cache_size=_cache_for(3, N))
    assert kf.max_cached == 3
    kf.columns([0, 1, 2])
    kf.columns([0])  # 0 becomes the most recently used: order 1, 2, 0
    kf.columns([3])  # evicts 1
    assert list(kf._cache) == [2, 0, 3]
    hits, misses = kf.hits, kf.misses
    kf.columns([1])  # 1 was evicted: a miss, evicts 2
    assert (kf.hits, kf.misses) == (hits, misses + 1)
    assert list(kf._cache) == [0, 3, 1]
    np.testing.assert_allclose(
        kf.columns([2, 0, 3, 1]),
        pairwise_kernels(X, X[[2, 0, 3, 1]], metric="rbf", gamma=0.5),
        **TOL,
    )


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_cache_respects_its_megabyte_bound(dtype):
    n = 1000
    X = np.random.default_rng(0).normal(size=(n, 4)).astype(dtype)
    cache_mb = 0.1
    kf = KernelFunction(X, "rbf", gamma=0.5, cache_size=cache_mb, batch_size=16)
    itemsize = np.dtype(dtype).itemsize
    assert kf.max_cached == int(cache_mb * 2**20 // (n * itemsize))
    rng = np.random.default_rng(1)
    for _ in range(20):
        kf.columns(rng.integers(0, n, size=30))
        cached = sum(col.nbytes for col in kf._cache.values())
        assert len(kf._cache) <= kf.max_cached
        assert cached <= cache_mb * 2**20
    assert len(kf._cache) == kf.max_cached


def test_zero_cache_caches_nothing(data):
    X, _ = data
    kf = KernelFunction(X, "rbf", cache_size=0)
    kf.columns([1, 1, 2])
    kf.columns([1])
    assert kf.cache_info == {"hits": 0, "misses": 4, "cached": 0, "max_cached": 0}


def test_pickling_drops_the_cache(data):
    X, X_new = data
    kf = KernelFunction(X, "poly", degree=2, gamma=0.3, cache_size=1.0)
    cols = kf.columns([1, 5, 7])
    clone = pickle.loads(pickle.dumps(kf))
    assert len(clone._cache) == 0 and len(kf._cache) == 3
    np.testing.assert_allclose(clone.columns([1, 5, 7]), cols, **TOL)
    np.testing.assert_allclose(clone.cross(X_new), kf.cross(X_new), **TOL)
    assert len(clone._cache) == 3


def test_column_memory_is_cache_plus_n_batch():
    """n = 20,000 points (d = 20, RBF): 100 columns stay within the cache budget,
    the answer itself and a few n × batch blocks (an n × n matrix would take 3.2 GB)."""
    n, d, batch, cache_mb = 20_000, 20, 32, 8.0
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, d))
    kf = KernelFunction(X, "rbf", gamma=0.05, cache_size=cache_mb, batch_size=batch)
    idx = rng.choice(n, size=100, replace=False)
    tracemalloc.start()
    try:
        C = kf.columns(idx)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    bound = cache_mb * 2**20 + C.nbytes + 4 * n * batch * 8 + 2**20
    assert peak <= bound, (peak / 2**20, bound / 2**20)
    assert bound < n * n * 8 / 50
    np.testing.assert_allclose(
        C[:, :3], pairwise_kernels(X, X[idx[:3]], metric="rbf", gamma=0.05), **TOL
    )


# --- bad input --------------------------------------------------------------------------


@pytest.mark.parametrize("bad,what", [(np.nan, "NaN"), (np.inf, "infinity")])
def test_nonfinite_features_raise(bad, what, data):
    X, _ = data
    Xb = X.copy()
    Xb[3, 1] = bad
    for build in (
        Features,
        KernelFunction,
        lambda A: make_operator(A, "rbf"),
        lambda A: Features(sp.csr_matrix(A)),
    ):
        with pytest.raises(ValueError, match=what):
            build(Xb)
    for op in (Features(X), KernelFunction(X), make_operator(X, "rbf", backend="gram")):
        with pytest.raises(ValueError, match=f"X_new contains {what}"):
            op.cross(Xb)
        with pytest.raises(ValueError, match=f"X_new contains {what}"):
            op.new_diag(Xb)


@pytest.mark.parametrize("bad,what", [(np.nan, "NaN"), (np.inf, "infinity")])
def test_nonfinite_gram_raises(bad, what, data):
    X, _ = data
    K = X @ X.T
    Kb = K.copy()
    Kb[2, 2] = bad
    with pytest.raises(ValueError, match=f"Gram matrix contains {what}"):
        Gram(Kb)
    with pytest.raises(ValueError, match=what):
        make_operator(Kb, "precomputed")
    K_test = K[:3].copy()
    K_test[0, 1] = bad
    with pytest.raises(ValueError, match="test Gram contains NaN or infinity"):
        Gram(K).cross(K_test)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("order", ["C", "F"])
def test_compiled_gram_check_agrees_with_numpy(dtype, order):
    """The one-pass compiled check finds numpy's max |K|, max |K − Kᵀ| and non-finite
    entries (tiles of both sizes cut through the matrix)."""
    from kernfw.operators import _gram_check_numba as lib

    rng = np.random.default_rng(7)
    for n in (1, 63, 64, 65, 200):
        A = rng.normal(size=(n, n))
        K = np.asarray(
            (A + A.T) / 2 + 1e-3 * rng.normal(size=(n, n)) * (rng.random((n, n)) < 0.01),
            dtype=dtype,
            order=order,
        )
        finite, scale, asym = lib.gram_summary(K)
        assert finite
        assert scale == np.abs(K).max()
        K64 = K.astype(np.float64)
        assert asym == pytest.approx(np.abs(K64 - K64.T).max(), rel=1e-12, abs=0)
        for bad in (np.nan, np.inf, -np.inf):
            Kb = K.copy(order=order)
            Kb[n - 1, n // 2] = bad
            assert not lib.gram_summary(Kb)[0]
    Kb = (A + A.T).astype(dtype)
    Kb[3, 5] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        Gram(Kb)


def test_a_gram_symmetric_up_to_rounding_is_held_transposed(data):
    """K within the symmetry tolerance but not bit for bit: the operator holds the view Kᵀ
    (no copy), whose columns are K's contiguous rows; an exactly symmetric K is kept and
    flagged."""
    X, _ = data
    K = np.ascontiguousarray(X @ X.T)
    K = (K + K.T) / 2
    exact = Gram(K)
    assert exact.symmetric and exact.K is K
    skewed = K.copy()
    skewed[3, 7] = np.nextafter(skewed[3, 7], np.inf)
    op = Gram(skewed)
    assert not op.symmetric and op.K.base is skewed and op.K.flags.f_contiguous
    np.testing.assert_array_equal(op.columns([7]), skewed[[7], :].T)  # the row, as a column
    np.testing.assert_array_equal(op.matmat(np.eye(N)[:, 3]), skewed[3])
    np.testing.assert_array_equal(op.diag(), np.diag(skewed))


def test_gram_shape_and_symmetry_are_checked(data):
    X, _ = data
    K = X @ X.T
    with pytest.raises(ValueError, match="must be square, got shape \\(40, 39\\)"):
        Gram(K[:, :-1])
    Kb = K.copy()
    Kb[0, 1] += 1e-3
    with pytest.raises(ValueError, match="not symmetric"):
        Gram(Kb)
    with pytest.raises(ValueError, match="not symmetric"):
        make_operator(Kb, "precomputed")
    # a perturbation within the tolerance is accepted, also in float32
    Kok = K.copy()
    Kok[0, 1] += 1e-12
    assert Gram(Kok).n == N
    K32 = K.astype(np.float32)
    K32[0, 1] *= 1 + 1e-7
    assert Gram(K32).dtype == np.float32
    # the blockwise check finds an asymmetry far from the diagonal of a larger matrix
    big = np.eye(1200)
    big[1100, 3] = 0.5
    with pytest.raises(ValueError, match="max \\|K - K.T\\| = 0.5"):
        Gram(big)
    assert Gram(Kb, check=False).n == N  # validated callers may skip the check


def test_cross_on_precomputed_gram_needs_a_test_gram(data):
    X, X_new = data
    op = Gram(X @ X.T)
    with pytest.raises(ValueError, match="needs a test Gram of shape \\(n_test, n_train=40\\)"):
        op.cross(X_new)  # features instead of a test Gram
    with pytest.raises(ValueError, match="needs a test Gram"):
        op.cross(np.ones(N))  # 1-D


def test_wrong_feature_count_in_cross(data):
    X, X_new = data
    for op in (
        Features(X),
        Features(sp.csr_matrix(X)),
        KernelFunction(X),
        make_operator(X, "rbf", backend="gram"),
        MultiKernel([Features(X)]),
        normalize(KernelFunction(X), "center"),
    ):
        with pytest.raises(ValueError, match="X_new has 3 features, the training data had 5"):
            op.cross(X_new[:, :3])
        with pytest.raises(ValueError, match="X_new has 3 features"):
            op.new_diag(X_new[:, :3])


def test_multikernel_bad_input(data):
    X, _ = data
    with pytest.raises(ValueError, match="different sizes n: \\[40, 39\\]"):
        MultiKernel([Features(X), Features(X[:-1])])
    with pytest.raises(ValueError, match="at least one kernel"):
        MultiKernel([])
    with pytest.raises(TypeError, match="KernelOperator"):
        MultiKernel([X])
    ops = [Features(X), KernelFunction(X)]
    with pytest.raises(ValueError, match="nonnegative"):
        MultiKernel(ops, [1.0, -0.1])
    with pytest.raises(ValueError, match="finite"):
        MultiKernel(ops, [1.0, np.nan])
    with pytest.raises(ValueError, match="expected 2 kernel weights"):
        MultiKernel(ops, [1.0])
    with pytest.raises(ValueError, match="nonnegative"):
        MultiKernel(ops).with_weights([-1.0, 1.0])


def test_kernel_spec_bad_input(data):
    X, _ = data
    with pytest.raises(ValueError, match="unknown kernel 'gaussian'"):
        KernelFunction(X, "gaussian")
    with pytest.raises(ValueError, match="unknown kernel 'gaussian'"):
        make_operator(X, "gaussian")
    with pytest.raises(TypeError, match="string or a callable"):
        PairwiseKernel(3)
    for gamma in (0.0, -1.0, np.nan, np.inf):
        with pytest.raises(ValueError, match="gamma"):
            KernelFunction(X, "rbf", gamma=gamma)
    for gamma in ("big", True):
        with pytest.raises((TypeError, ValueError), match="gamma"):
            KernelFunction(X, "rbf", gamma=gamma)
    with pytest.raises(ValueError, match="degree must be a nonnegative integer"):
        KernelFunction(X, "poly", degree=-1)
    with pytest.raises(ValueError, match="degree must be a nonnegative integer"):
        KernelFunction(X, "poly", degree=2.5)
    with pytest.raises(TypeError, match="unexpected \\['degree'\\]"):
        KernelFunction(X, "rbf", degree=2)
    with pytest.raises(ValueError, match="cache_size"):
        KernelFunction(X, cache_size=-1)
    with pytest.raises(ValueError, match="batch_size"):
        KernelFunction(X, batch_size=0)


def test_callable_kernel_output_is_checked(data):
    X, _ = data
    with pytest.raises(ValueError, match="returned shape"):
        KernelFunction(X, lambda A, B: np.ones((2, 2))).columns([0])
    with pytest.raises(ValueError, match="returned NaN or infinity"):
        KernelFunction(X, lambda A, B: np.full((len(A), len(B)), np.nan)).columns([0])


def test_block_and_index_checks(data):
    X, _ = data
    op = Features(X)
    with pytest.raises(
        ValueError, match="matmat expects an array of shape \\(40,\\) or \\(40, r\\)"
    ):
        op.matmat(np.ones(N + 1))
    with pytest.raises(ValueError, match="matmat expects"):
        op.matmat(np.ones((N, 2, 2)))
    with pytest.raises(IndexError, match="out of range"):
        op.columns([N])
    with pytest.raises(TypeError, match="integers"):
        op.columns([0.5])
    with pytest.raises(ValueError, match="boolean index"):
        op.columns(np.ones(3, dtype=bool))


def test_repr(data):
    X, _ = data
    assert repr(Features(X.astype(np.float32))) == "Features(n=40, dtype=float32)"
    assert "weights=[0.5, 1.0]" in repr(MultiKernel([Features(X)] * 2, [0.5, 1.0]))


# -- arrays for compiled kernels and sweeps (the protocol's tree methods) -----------------------


def test_the_arrays_of_each_backend():
    from kernfw.operators import KernelFunction, MultiKernel, normalize

    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 4))
    F = Features(X).features()
    assert F.flags.c_contiguous
    np.testing.assert_array_equal(F, X)
    Xs = sp.csr_matrix((np.ones(3), ([0, 0, 1], [2, 2, 0])), shape=(2, 3))  # a duplicate
    F = Features(Xs).features()
    assert F.has_canonical_format and F.nnz == 2
    assert F[0, 2] == 2.0
    K = X @ X.T
    assert Gram(K).features() is None and Gram(K).stored_gram() is K
    for op in (KernelFunction(X, "rbf"), MultiKernel([Gram(K)]), normalize(Gram(K), "trace")):
        assert op.features() is None
    # the questions: who answers what (their values: test_backends_answer_the_questions...)
    assert Gram(K).stored_gram() is K and Features(X).features() is X
    assert Features(X).product_form().features is X and Features(Xs).product_form() is None
    assert KernelFunction(X, "rbf").product_form() is not None
    for op in (
        KernelFunction(X, "laplacian"),
        MultiKernel([Gram(K)]),
        normalize(Gram(K), "center"),
    ):
        assert op.features() is None and op.stored_gram() is None and op.product_form() is None


def test_detach_attach_and_materialize_operator_trees():
    """A sweep's round trip: on-the-fly kernels become Grams in given memory, the Grams
    leave the (pickled) tree once each and come back; the kernel is unchanged."""
    from kernfw.operators import (
        ArraySlot,
        KernelFunction,
        MultiKernel,
        Normalized,
        materialize,
        normalize,
    )

    rng = np.random.default_rng(1)
    X = rng.normal(size=(30, 3))
    op = MultiKernel(
        [
            normalize(KernelFunction(X, "rbf", gamma=0.3), "center"),
            make_operator(X, "linear"),
            KernelFunction(X, "poly", degree=2),
        ],
        [0.5, 1.0, 0.2],
    )
    allocated = []

    def allocate(shape, dtype):
        allocated.append(np.empty(shape, dtype))
        return allocated[-1]

    big = materialize(op, allocate, max_mb=1e-3)  # no Gram fits: unchanged kernels
    assert not allocated and isinstance(big.operators[2], KernelFunction)
    dense = materialize(op, allocate, max_mb=100)
    assert len(allocated) == 2 and isinstance(dense.operators[2], Gram)
    centered = dense.operators[0]
    assert isinstance(centered, Normalized) and centered._stats["train"] is centered.base
    assert centered.base.K is allocated[0]
    np.testing.assert_array_equal(allocated[0], allocated[0].T)  # exactly symmetric
    np.testing.assert_allclose(dense.dense(), op.dense(), atol=1e-12)
    store = []
    shell = dense.detach_arrays(store)
    assert len(store) == 2 and store[0] is allocated[0]
    assert isinstance(shell.operators[0].base.K, ArraySlot)
    assert shell.operators[0]._stats["train"].K.index == 0  # shared, detached once
    back = pickle.loads(pickle.dumps(shell)).attach_arrays(store)
    assert back.operators[2].K is store[1]
    np.testing.assert_allclose(back.dense(), op.dense(), atol=1e-12)
    Xn = rng.normal(size=(4, 3))
    np.testing.assert_allclose(back.cross(Xn), op.cross(Xn), atol=1e-12)


def test_column_source_of_on_the_fly_rbf_and_the_l2svm_kernel():
    """The RBF column source reproduces the operator's columns; the L2-SVM kernel adds its
    labels and 1/C; a stored Gram is read by columns; other operators have none."""
    from kernfw.operators import KernelFunction, MultiKernel
    from kernfw.operators.base import SOURCE_GRAM, SOURCE_RBF, SOURCE_RBF32
    from kernfw.solvers.simplex_qp import L2SVMKernel

    rng = np.random.default_rng(3)
    X = rng.normal(size=(30, 5))
    for kw in ({"gamma": 0.4}, {"gamma": "scale"}, {"feature_columns": [0, 3]}, {}):
        op = KernelFunction(X, "rbf", cache_size=3.0, **kw)
        source = op.column_source()
        assert source.code == SOURCE_RBF and source.matrix.flags.c_contiguous
        assert source.matrix.dtype == np.float64 and source.cache_mb == 3.0
        Z, g, sq = source.matrix.T, source.gamma, source.sq_norms
        np.testing.assert_allclose(sq, np.einsum("ij,ij->i", Z, Z), rtol=1e-15)
        D = np.maximum(sq[:, None] + sq[None, :] - 2 * Z @ Z.T, 0.0)
        np.testing.assert_allclose(np.exp(-g * D), op.dense(), rtol=1e-13, atol=1e-15)
        assert op.features() is None and op.stored_gram() is None
        assert source.labels is None and source.inv_c is None
    y = np.where(X[:, 0] > 0, 1.0, -1.0)
    lv = L2SVMKernel(op, y, 3.0).column_source()
    assert lv.code == SOURCE_RBF and np.allclose(lv.inv_c, 1 / 3.0) and lv.inv_c.shape == (30,)
    np.testing.assert_array_equal(lv.labels, y)
    K = X @ X.T
    K = (K + K.T) / 2
    gram = Gram(K).column_source()
    assert gram.code == SOURCE_GRAM and np.shares_memory(gram.matrix, K)
    np.testing.assert_array_equal(gram.matrix[:, 4], K[:, 4])
    assert Features(X).column_source() is None
    assert L2SVMKernel(Gram(K), y, 1.0).column_source().code == SOURCE_GRAM
    poly = KernelFunction(X, "poly", degree=2, gamma=0.3, coef0=1.0)
    assert poly.column_source() is None  # the other kernels of products: product_form
    form = poly.product_form()
    assert form.features is X and form[1:] == (POLY, 0.3, 1.0, 2, 1.0)
    scaled = normalize(poly, "trace").product_form()
    assert scaled.features is X and scaled.code == POLY
    assert scaled.scale == pytest.approx(X.shape[0] / np.trace(poly.dense()))
    assert normalize(poly, "center").product_form() is None
    assert L2SVMKernel(poly, y, 1.0).column_source() is None
    for other in (
        KernelFunction(X, "laplacian"),
        KernelFunction(X.astype(np.float32), "rbf", dtype=np.float64),
        MultiKernel([Gram(K)]),
    ):
        assert other.column_source() is None
        assert L2SVMKernel(other, y, 1.0).column_source() is None
    # float32 values (float32 features, or dtype=float32): float32 columns of the features
    for op in (
        KernelFunction(X.astype(np.float32), "rbf"),
        KernelFunction(X, "rbf", dtype=np.float32),
    ):
        source = op.column_source()
        assert source.code == SOURCE_RBF32 and source.matrix.dtype == np.float32
        np.testing.assert_array_equal(source.matrix.T, X.astype(np.float32))


# -- float32 features against float64 blocks: no float64 copy of the features ---------------------
@pytest.mark.parametrize("shape", [(1000,), (1000, 3)])
def test_float32_products_are_float64_without_a_whole_copy(shape, monkeypatch):
    from kernfw.operators import products

    monkeypatch.setattr(products, "BLOCK_ENTRIES", 4096)
    rng = np.random.default_rng(0)
    A = rng.normal(size=(1000, 40)).astype(np.float32)
    V = rng.normal(size=shape)
    B = rng.normal(size=(40,) + shape[1:])
    A64 = A.astype(np.float64)
    tracemalloc.start()
    AtV, AB = products.tmatmul(A, V), products.matmul(A, B)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert AtV.dtype == AB.dtype == np.float64
    np.testing.assert_allclose(AtV, A64.T @ V, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(AB, A64 @ B, rtol=1e-10, atol=1e-10)
    assert peak < A64.nbytes / 2  # a float64 copy of A would be A64.nbytes
    op = Features(A)
    np.testing.assert_allclose(op.matmat(V), A64 @ (A64.T @ V), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize(
    "metric, params",
    [
        ("linear", {}),
        ("rbf", {"gamma": 0.3}),
        ("poly", {"gamma": 0.2, "degree": 2, "coef0": 1.0}),
        ("sigmoid", {"gamma": 0.05, "coef0": 0.5}),
        ("laplacian", {"gamma": 0.1}),
    ],
)
def test_gram_from_kernel_matches_sklearn(metric, params):
    """``Gram.from_kernel`` on dense float64 points (one product ``X Xᵀ``, no second
    validation) gives scikit-learn's kernel values, to rounding."""
    X = np.random.default_rng(3).normal(size=(40, 6))
    op = Gram.from_kernel(PairwiseKernel(metric, params), X, np.float64)
    assert op.dtype == np.float64
    expected = pairwise_kernels(X, X, metric=metric, **params)
    np.testing.assert_allclose(op.dense(), expected, rtol=1e-12, atol=1e-12)
