"""Kernel specs → operators: backend choice, SVC-style parameters, lists of kernels."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics.pairwise import pairwise_kernels, rbf_kernel
from sklearn.svm import SVC

from kernfw.kernels import (
    BACKEND_CHOICES,
    KernelSpec,
    make_operator,
    make_operators,
    parse_spec,
    resolve_gamma,
)
from kernfw.operators import Features, Gram, KernelFunction, KernelOperator, MultiKernel, Normalized

TOL = dict(rtol=1e-10, atol=1e-10)


@pytest.fixture(scope="module")
def Xy():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 4)) * [1.0, 2.0, 0.5, 3.0]
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    return X, y


# --- gamma as SVC resolves it ------------------------------------------------------------


@pytest.mark.parametrize("sparse", [False, True])
def test_gamma_scale_matches_svc(sparse, Xy):
    X, y = Xy
    X = sp.csr_matrix(np.where(np.abs(X) > 0.5, X, 0.0)) if sparse else X
    svc = SVC(kernel="rbf", gamma="scale").fit(X, y)
    assert resolve_gamma("scale", X) == pytest.approx(svc._gamma, rel=1e-12)
    assert resolve_gamma("auto", X) == 0.25
    assert resolve_gamma(2, X) == 2.0 and isinstance(resolve_gamma(np.float32(2), X), float)
    op = make_operator(X, "rbf", gamma="scale")
    Xd = X.toarray() if sparse else X
    np.testing.assert_allclose(
        op.dense(), pairwise_kernels(Xd, metric="rbf", gamma=svc._gamma), **TOL
    )


def test_gamma_scale_of_constant_data_is_one():
    assert resolve_gamma("scale", np.ones((5, 3))) == 1.0


def test_gamma_scale_of_float32_data_uses_float64_variance():
    X = np.random.default_rng(1).normal(size=(50, 3)).astype(np.float32)
    expected = 1.0 / (3 * X.astype(np.float64).var())
    assert resolve_gamma("scale", X) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("gamma", [0, -1.0, np.nan, np.inf, "large", None, True])
def test_bad_gamma_raises(gamma, Xy):
    X, _ = Xy
    with pytest.raises(ValueError, match="gamma"):
        resolve_gamma(gamma, X)
    with pytest.raises((ValueError, TypeError), match="gamma"):
        make_operator(X, "rbf", gamma=gamma)


@pytest.mark.parametrize("kernel", ["linear", "rbf", "poly", "sigmoid"])
def test_svc_defaults_give_the_svc_kernel(kernel, Xy):
    """make_operator(X, kernel) is the kernel SVC(kernel=kernel) trains on."""
    X, y = Xy
    svc = SVC(kernel=kernel).fit(X, y)
    params = {
        "linear": {},
        "rbf": {"gamma": svc._gamma},
        "poly": {"gamma": svc._gamma, "degree": 3, "coef0": 0.0},
        "sigmoid": {"gamma": svc._gamma, "coef0": 0.0},
    }[kernel]
    expected = pairwise_kernels(X, metric=kernel, **params)
    for backend in ("auto", "gram", "function"):
        op = make_operator(X, kernel, backend=backend)
        np.testing.assert_allclose(op.dense(), expected, **TOL)
        np.testing.assert_allclose(op.diag(), np.diag(expected), **TOL)


# --- backend choice ----------------------------------------------------------------------


def test_auto_backend_choice(Xy):
    X, _ = Xy
    n = X.shape[0]
    assert isinstance(make_operator(X, "rbf"), Gram)  # small: a Gram
    assert isinstance(make_operator(X, "rbf", gram_max_mb=0.001), KernelFunction)
    budget = n * n * 8 / 2**20
    assert isinstance(make_operator(X, "rbf", gram_max_mb=budget), Gram)
    assert isinstance(make_operator(X, "rbf", gram_max_mb=0.99 * budget), KernelFunction)
    assert isinstance(make_operator(X, "linear"), Features)  # d < n
    assert isinstance(make_operator(sp.csr_matrix(X), "linear"), Features)
    wide = np.random.default_rng(0).normal(size=(5, 20))  # d >= n, dense: a Gram
    assert isinstance(make_operator(wide, "linear"), Gram)
    assert isinstance(make_operator(wide, "linear", backend="features"), Features)
    assert isinstance(make_operator(X, "linear", backend="gram"), Gram)
    assert isinstance(make_operator(X, "linear", backend="function"), KernelFunction)
    assert isinstance(make_operator(sp.csr_matrix(X), "rbf"), Gram)
    # float32 halves the Gram's memory, so it fits a smaller budget
    X32 = X.astype(np.float32)
    assert isinstance(make_operator(X32, "rbf", gram_max_mb=0.6 * budget), Gram)


def test_cache_size_reaches_the_kernel_function(Xy):
    X, _ = Xy
    op = make_operator(X, "rbf", backend="function", cache_size=1.5)
    assert op.cache_size == 1.5
    assert op.max_cached == int(1.5 * 2**20 // (X.shape[0] * 8))


def test_bad_backend(Xy):
    X, _ = Xy
    for backend in ("dense", "Gram", None):
        with pytest.raises(ValueError, match="backend must be one of"):
            make_operator(X, "linear", backend=backend)
    with pytest.raises(ValueError, match="backend='features' needs the linear kernel"):
        make_operator(X, "rbf", backend="features")
    with pytest.raises(ValueError, match="backend='features' needs the linear kernel"):
        make_operator(X, ("linear", {"columns": [0, 1]}), backend="features")
    assert BACKEND_CHOICES == ("auto", "gram", "function", "features")


# --- specs -------------------------------------------------------------------------------


def test_parse_spec_fills_svc_defaults():
    spec = parse_spec("poly", gamma=0.5, degree=2, coef0=1.0)
    assert isinstance(spec, KernelSpec)
    assert spec.params == {"gamma": 0.5, "degree": 2, "coef0": 1.0}
    assert parse_spec("rbf").params == {"gamma": "scale"}
    assert parse_spec("linear").params == {}
    assert parse_spec("sigmoid", coef0=2.0).params == {"gamma": "scale", "coef0": 2.0}
    spec = parse_spec(("rbf", {"gamma": 2.0, "columns": slice(0, 2), "normalize": "center"}))
    assert spec.params == {"gamma": 2.0} and spec.columns == slice(0, 2)
    assert spec.normalization == "center"
    assert "KernelSpec('rbf'" in repr(spec)


def test_bad_specs(Xy):
    X, _ = Xy
    with pytest.raises(TypeError, match="\\(name, params_dict\\)"):
        parse_spec(("rbf", 1.0, 2))
    with pytest.raises(TypeError, match="string, a callable or a KernelOperator"):
        make_operator(X, 3.0)
    with pytest.raises(ValueError, match="unknown kernel 'rbff'"):
        make_operator(X, "rbff")
    with pytest.raises(ValueError, match="unknown normalization 'l2'"):
        make_operator(X, "rbf", normalization="l2")
    with pytest.raises(ValueError, match="unknown normalization 'l2'"):
        make_operator(X, ("rbf", {"normalize": "l2"}))
    with pytest.raises(ValueError, match="degree must be a nonnegative integer"):
        make_operator(X, "poly", degree=-2)
    with pytest.raises(TypeError, match="unexpected \\['degree'\\]"):
        make_operator(X, ("rbf", {"degree": 2}))
    with pytest.raises(ValueError, match="empty kernel list"):
        make_operator(X, [])


def test_feature_columns(Xy):
    X, _ = Xy
    op = make_operator(X, ("rbf", {"gamma": 0.3, "columns": slice(1, 3)}), backend="function")
    np.testing.assert_allclose(
        op.dense(), pairwise_kernels(X[:, 1:3], metric="rbf", gamma=0.3), **TOL
    )
    X_new = X[:4] + 1.0
    np.testing.assert_allclose(
        op.cross(X_new), pairwise_kernels(X_new[:, 1:3], X[:, 1:3], metric="rbf", gamma=0.3), **TOL
    )
    # gamma="scale" is resolved on the columns the kernel sees
    op = make_operator(X, ("rbf", {"columns": [3]}))
    assert op.kernel.params["gamma"] == pytest.approx(1.0 / X[:, [3]].var())
    lin = make_operator(X, ("linear", {"columns": [0, 2]}))
    np.testing.assert_allclose(lin.dense(), X[:, [0, 2]] @ X[:, [0, 2]].T, **TOL)


def test_callable_kernel(Xy):
    X, _ = Xy

    def kernel(A, B):
        return (A @ B.T) ** 2

    for backend in ("gram", "function"):
        op = make_operator(X, kernel, backend=backend)
        np.testing.assert_allclose(op.dense(), (X @ X.T) ** 2, **TOL)
        np.testing.assert_allclose(op.diag(), np.sum(X * X, axis=1) ** 2, **TOL)


def test_normalization_argument_and_spec(Xy):
    X, _ = Xy
    op = make_operator(X, "poly", degree=2, normalization="trace")
    assert isinstance(op, Normalized) and op.kind == "trace"
    assert np.trace(op.dense()) == pytest.approx(X.shape[0])
    op = make_operator(X, ("poly", {"normalize": "unit_diagonal"}), normalization="trace")
    assert op.kind == "unit_diagonal"


def test_operator_passes_through(Xy):
    X, _ = Xy
    base = Features(X)
    assert make_operator(X, base) is base
    assert make_operator(None, base) is base
    wrapped = make_operator(X, base, normalization="center")
    assert isinstance(wrapped, Normalized) and wrapped.base is base
    assert make_operator(X, [base, "rbf"]).operators[0] is base


# --- lists of kernels --------------------------------------------------------------------


def test_list_of_specs_gives_a_multikernel(Xy):
    X, _ = Xy
    op = make_operator(
        X, ["linear", ("rbf", {"gamma": 0.2}), ("poly", {"degree": 2})], normalization="trace"
    )
    assert isinstance(op, MultiKernel) and op.p == 3
    assert all(isinstance(k, Normalized) for k in op.operators)
    for k in op.operators:
        assert np.trace(k.dense()) == pytest.approx(X.shape[0])
    np.testing.assert_allclose(op.weights, 1.0)


def test_precomputed_single_list_and_stack(Xy):
    X, _ = Xy
    K1 = X @ X.T
    K2 = pairwise_kernels(X, metric="rbf", gamma=0.5)
    op = make_operator(K1, "precomputed")
    assert isinstance(op, Gram) and op.K is K1
    nested = make_operator(K1.tolist(), "precomputed")  # one Gram as nested lists
    assert isinstance(nested, Gram) and nested.n == X.shape[0]
    for grams in ([K1, K2], (K1, K2), np.stack([K1, K2])):
        mk = make_operator(grams, "precomputed")
        assert isinstance(mk, MultiKernel) and mk.p == 2
        np.testing.assert_allclose(mk.dense(), K1 + K2, **TOL)
    mk = make_operator([K1, K2], ["precomputed", "precomputed"], normalization="trace")
    assert all(np.trace(k.dense()) == pytest.approx(X.shape[0]) for k in mk.operators)
    with pytest.raises(ValueError, match="expected 3 Gram matrices, got 2"):
        make_operator([K1, K2], ["precomputed"] * 3)
    with pytest.raises(ValueError, match="need a list \\(or 3-D array\\) of Gram matrices"):
        make_operator(K1, ["precomputed"] * 2)
    with pytest.raises(ValueError, match="kernels have different sizes"):
        make_operator([K1, K2[:-1, :-1]], "precomputed")
    with pytest.raises(ValueError, match="must be square"):
        make_operator(X, "precomputed")


@pytest.mark.parametrize("backend", ["gram", "function", "features"])
def test_float32_through_make_operator(backend, Xy):
    X, _ = Xy
    X32 = X.astype(np.float32)
    kernel = "linear" if backend == "features" else "rbf"
    op = make_operator(X32, kernel, backend=backend, normalization="center")
    assert op.dtype == np.float32
    assert op.matmat(np.ones(X.shape[0], np.float32)).dtype == np.float32
    assert op.cross(X32[:3]).dtype == np.float32
    assert isinstance(op, KernelOperator)


def test_make_operators_share_one_inner_product(monkeypatch):
    """The Gram kernels of a list on dense float64 features share one ``X Xᵀ``; their
    values are those of one ``make_operator`` call per spec."""
    import kernfw.kernels as kernels
    from kernfw.operators.pairwise import InnerProducts

    computed = []

    class Counted(InnerProducts):
        def get(self):
            if self._products is None:
                computed.append(1)
            return super().get()

    monkeypatch.setattr(kernels, "InnerProducts", Counted)
    X = np.random.default_rng(0).normal(size=(30, 40))  # d > n: linear as a Gram too
    specs = [("rbf", {"gamma": 0.1}), ("rbf", {"gamma": 1.0}), "linear", ("poly", {"degree": 2})]
    ops = kernels.make_operators(X, specs, normalization="trace")
    assert computed == [1]
    for op, spec in zip(ops, specs):
        alone = kernels.make_operator(X, spec, normalization="trace")
        np.testing.assert_allclose(op.dense(), alone.dense(), rtol=1e-12, atol=1e-14)
    # a kernel on some of the columns computes its own products
    ops = kernels.make_operators(X, [("rbf", {"gamma": 0.1, "columns": slice(0, 5)})])
    expected = rbf_kernel(X[:, :5], gamma=0.1)
    np.testing.assert_allclose(ops[0].dense(), expected, rtol=1e-12, atol=1e-14)


def test_make_operators_rejects_bad_options():
    X = np.random.default_rng(0).normal(size=(10, 3))
    with pytest.raises(ValueError, match="2 kernel specs but 1 option sets"):
        make_operators(X, ["rbf", "linear"], [{}])
    with pytest.raises(ValueError, match="takes features"):
        make_operators(X, ["precomputed"])
    with pytest.raises(ValueError, match="backend must be one of"):
        make_operators(X, ["rbf"], [{"backend": "magic"}])
