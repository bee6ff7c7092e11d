"""Online MKL (math.md §4): proxes against cvxpy, CRF marginals against enumeration,
kernelized = explicit iterates (multi-class and chains, hinge and CRF), sparsity along a
λ path, the batch optimum against cvxpy, and the two estimators."""

import itertools
import pickle
import warnings

import numpy as np
import pytest
from scipy.special import logsumexp
from sklearn.base import clone
from sklearn.datasets import make_blobs
from sklearn.utils.estimator_checks import parametrize_with_checks

from kernfw import OnlineMKLClassifier
from kernfw.estimators.online_mkl import OnlineMKLStructured
from kernfw.kernels import make_operator
from kernfw.operators import Gram
from kernfw.solvers.mkl.crf import chain_marginals, softmax_marginals
from kernfw.solvers.mkl.online import (
    ExplicitGroup,
    GroupParameters,
    default_eta0,
    solve_online_mkl,
)
from kernfw.solvers.mkl.prox import make_regularizer, prox_squared_l1, prox_squared_l21
from kernfw.structured import Chain, Matching, MultiClass

LAM = 0.05
SPECS = [
    ("linear", {"columns": [0, 1]}),
    ("linear", {"columns": [2, 3]}),
    ("rbf", {"gamma": 0.5, "columns": [4, 5]}),
    ("rbf", {"gamma": 0.5, "columns": [6, 7]}),
]
INFORMATIVE = [0, 1]


def _data(n=60, seed=0):
    """Three classes; groups 0 and 1 see the class centres, groups 2 and 3 only noise."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 3
    centers = np.array([[2.0, 0.0], [-1.0, 1.7], [-1.0, -1.7]])
    X = np.hstack(
        [
            centers[y] + 0.7 * rng.normal(size=(n, 2)),
            centers[y][:, ::-1] + rng.normal(size=(n, 2)),
            rng.normal(size=(n, 4)),
        ]
    )
    return X, y


def _chains(n=25, q=3, d=5, seed=0):
    """Short chains whose letters show their state in the first q features (plus noise)."""
    rng = np.random.default_rng(seed)
    Y = [rng.integers(0, q, size=rng.integers(2, 5)) for _ in range(n)]
    X = [np.eye(q, d)[y] * 1.5 + rng.normal(size=(y.size, d)) for y in Y]
    return X, Y


@pytest.fixture(scope="module")
def problem():
    X, y = _data()
    return X, y, make_operator(X, SPECS, normalization="trace")


def _multiclass_groups(X, m, cols):
    d = X.shape[1]
    return [ExplicitGroup((np.arange(m)[:, None] * d + np.asarray(g)[None]).ravel()) for g in cols]


# -- proximal operators (each against cvxpy) ---------------------------------------------------
def _prox_case(seed):
    rng = np.random.default_rng(seed)
    v = [rng.normal(size=3), 0.1 * rng.normal(size=2), rng.normal(size=4), np.zeros(2)]
    return v, [np.arange(0, 3), np.arange(3, 5), np.arange(5, 9), np.arange(9, 11)]


def _apply(kind, v, idx, tau, tau2):
    params = GroupParameters(11, idx, [], 1)
    params.w[:] = np.concatenate(v)
    make_regularizer(kind, tau, tau2).prox(params, 1.0)
    return params.w


@pytest.mark.cvxpy
@pytest.mark.parametrize("tau", [0.01, 0.3, 3.0])
def test_prox_squared_l1_matches_cvxpy(tau):
    from kernfw.reference import prox_squared_l1_reference

    v = np.random.default_rng(1).normal(size=7)
    np.testing.assert_allclose(
        prox_squared_l1(v, tau), prox_squared_l1_reference(v, tau), atol=1e-8
    )


@pytest.mark.cvxpy
@pytest.mark.parametrize("kind", ["squared_l21", "l21"])
@pytest.mark.parametrize("tau", [0.01, 0.3, 3.0])
@pytest.mark.parametrize("seed", [0, 2])
def test_group_prox_matches_cvxpy(kind, tau, seed):
    from kernfw.reference import prox_group_reference

    v, idx = _prox_case(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # Clarabel "inaccurate"
        ref = np.concatenate(prox_group_reference(v, kind, tau))
    np.testing.assert_allclose(_apply(kind, v, idx, tau, 0.0), ref, atol=1e-8)


@pytest.mark.cvxpy
@pytest.mark.parametrize("tau2", [0.05, 0.5])
def test_ridge_and_l1_prox_match_cvxpy(tau2):
    """The single-term proxes of the composite regularizers."""
    from kernfw.reference import prox_group_reference

    v, idx = _prox_case(3)
    params = GroupParameters(11, idx, [], 1)
    params.w[:] = np.concatenate(v)
    params.soft_threshold(tau2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        l1 = np.concatenate(prox_group_reference(v, "l1", 0.0, tau2))
        ridge = np.concatenate(prox_group_reference(v, "ridge", 0.0, tau2))
    np.testing.assert_allclose(params.w, l1, atol=1e-8)
    # elastic = squared ℓ2,1 prox, then the ridge prox θ/(1+ηλ₂) (Alg. 1's sequence)
    elastic = _apply("elastic", v, idx, 0.3, tau2)
    squared = _apply("squared_l21", v, idx, 0.3, 0.0)
    np.testing.assert_allclose(elastic, squared / (1 + tau2), rtol=1e-14)
    np.testing.assert_allclose(np.concatenate(v) / (1 + tau2), ridge, atol=1e-8)


@pytest.mark.cvxpy
@pytest.mark.parametrize("tau", [0.01, 0.3, 3.0])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sparse_group_lasso_prox_is_the_prox_of_the_sum(tau, seed):
    """ℓ1 then ℓ2,1 in sequence = the prox of τ‖·‖_{2,1} + τ₂‖·‖₁ (math.md §4.6).

    Checked by its optimality conditions to 1e-12 and against cvxpy, whose solution
    is within its own accuracy here (Clarabel stops at a 1e-10 gap, i.e. ≲ 1e-6 in z):
    our point must be at least as good as cvxpy's.
    """
    from kernfw.reference import prox_group_reference

    tau2 = 0.2
    v, idx = _prox_case(seed)
    z = _apply("sparse_group_lasso", v, idx, tau, tau2)
    for g in idx:
        vg, zg = np.concatenate(v)[g], z[g]
        if np.linalg.norm(zg) == 0:  # 0 ∈ ∂: ‖S_τ₂(v_g)‖ ≤ τ
            s = np.sign(vg) * np.maximum(np.abs(vg) - tau2, 0)
            assert np.linalg.norm(s) <= tau + 1e-12
        else:  # v − z = τ z/‖z‖ + τ₂ ∂|z|
            r = vg - zg - tau * zg / np.linalg.norm(zg)
            nz = zg != 0
            np.testing.assert_allclose(r[nz], tau2 * np.sign(zg[nz]), atol=1e-12)
            assert np.all(np.abs(r[~nz]) <= tau2 + 1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ref = np.concatenate(prox_group_reference(v, "sparse_group_lasso", tau, tau2))

    def objective(u):
        fit = 0.5 * np.sum((u - np.concatenate(v)) ** 2)
        return fit + tau * sum(np.linalg.norm(u[g]) for g in idx) + tau2 * np.abs(u).sum()

    assert objective(z) <= objective(ref) + 1e-12
    np.testing.assert_allclose(z, ref, atol=1e-6)


def test_prox_zeros_whole_groups_and_keeps_directions():
    groups = [np.array([3.0, 4.0]), np.array([0.1, 0.0]), np.array([0.0, 1.0])]
    out = prox_squared_l21(groups, 0.5)
    assert np.all(out[1] == 0)
    np.testing.assert_allclose(out[0] / np.linalg.norm(out[0]), [0.6, 0.8])
    assert prox_squared_l1(np.array([2.0]), 3.0)[0] == pytest.approx(0.5)
    np.testing.assert_allclose(prox_squared_l1(np.array([1.0, -0.1]), 1.0), [0.5, 0.0])


# -- CRF marginals against enumeration ---------------------------------------------------------
@pytest.mark.parametrize("T, q", [(1, 3), (2, 2), (3, 3), (4, 2)])
def test_forward_backward_equals_brute_force(T, q):
    rng = np.random.default_rng(T * 10 + q)
    theta, G = 2 * rng.normal(size=(T, q)), 2 * rng.normal(size=(q, q))
    mu, pairs, log_z = chain_marginals(theta, G)
    labelings = np.array(list(itertools.product(range(q), repeat=T)))
    f = theta[np.arange(T), labelings].sum(axis=1)
    f += G[labelings[:, :-1], labelings[:, 1:]].sum(axis=1)
    p = np.exp(f - logsumexp(f))
    assert log_z == pytest.approx(logsumexp(f), rel=1e-12)
    brute_mu = np.zeros((T, q))
    brute_pairs = np.zeros((q, q))
    for y, py in zip(labelings, p):
        brute_mu[np.arange(T), y] += py
        for a, b in zip(y[:-1], y[1:]):
            brute_pairs[a, b] += py
    np.testing.assert_allclose(mu, brute_mu, atol=1e-12)
    np.testing.assert_allclose(pairs, brute_pairs, atol=1e-12)
    p1, z1 = softmax_marginals(theta[0])
    np.testing.assert_allclose(p1, np.exp(theta[0] - logsumexp(theta[0])), atol=1e-15)


@pytest.mark.parametrize("normalize", [True, False])
def test_chain_crf_loss_and_gradient_equal_enumeration(normalize):
    """The chain CRF loss on the per-letter scale (math.md §4.6):
    ``L = (1/T) log Σ_y exp(T f(y)) − f(y_i)`` (T = 1 unnormalized), its gradient
    ``E_p[φ] − φ(y_i)`` with ``p ∝ exp(T f)``, by enumeration of all labelings."""
    from kernfw.solvers.mkl.online import _FactoredOracle

    rng = np.random.default_rng(4)
    q, d = 3, 2
    X = [rng.normal(size=(T, d)) for T in (1, 2, 3, 4)]
    Y = [rng.integers(0, q, size=x.shape[0]) for x in X]
    model = Chain(q, normalize=normalize).initialize(X, Y)
    oracle = _FactoredOracle(model, X, Y, "crf")
    w = rng.normal(size=model.size_joint_feature)
    for i, (x, y) in enumerate(zip(X, Y)):
        T = x.shape[0]
        temp = T if normalize else 1
        ys = [np.array(c) for c in itertools.product(range(q), repeat=T)]
        phis = np.array([model.joint_feature(x, c) for c in ys])
        f = phis @ w
        p = np.exp(temp * f - logsumexp(temp * f))
        loss, direction, delta = oracle.evaluate(i, w)
        own = model.joint_feature(x, y)
        assert loss == pytest.approx(logsumexp(temp * f) / temp - own @ w, rel=1e-12)
        np.testing.assert_allclose(direction, own - p @ phis, atol=1e-12)
        mu = np.zeros((T, q))
        for c, pc in zip(ys, p):
            mu[np.arange(T), c] += pc
        np.testing.assert_allclose(delta, np.eye(q)[y] - mu, atol=1e-12)


def chain_marginals_numpy(theta, G):
    """The forward-backward recursion in numpy, in log space (the reference of the
    compiled recursion's shifted exponentials)."""
    T, q = theta.shape
    alpha = np.empty((T, q))
    beta = np.zeros((T, q))
    alpha[0] = theta[0]
    for t in range(1, T):
        alpha[t] = theta[t] + logsumexp(alpha[t - 1][:, None] + G, axis=0)
    for t in range(T - 2, -1, -1):
        beta[t] = logsumexp(G + (theta[t + 1] + beta[t + 1])[None, :], axis=1)
    log_z = float(logsumexp(alpha[-1]))
    mu = np.exp(alpha + beta - log_z)
    pair_counts = np.zeros((q, q))
    for t in range(T - 1):
        pair_counts += np.exp(alpha[t][:, None] + G + (theta[t + 1] + beta[t + 1])[None, :] - log_z)
    return mu, pair_counts, log_z


@pytest.mark.slow
def test_compiled_forward_backward_equals_numpy():
    rng = np.random.default_rng(1)
    for T in (1, 2, 7):
        theta, G = 3 * rng.normal(size=(T, 26)), rng.normal(size=(26, 26))
        for a, b in zip(chain_marginals(theta, G), chain_marginals_numpy(theta, G)):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    for T in (2, 7):  # scores of hundreds: shifted sums underflow, the log-space fallbacks
        theta, G = 300 * rng.normal(size=(T, 26)), 100 * rng.normal(size=(26, 26))
        for a, b in zip(chain_marginals(theta, G), chain_marginals_numpy(theta, G)):
            assert np.all(np.isfinite(a))
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-13)


class DenseScores:
    """The scores of :class:`~kernfw.solvers.mkl.kernel_groups.KernelGroups` from dense
    blocks ``K`` (Mk, T, n_S), by ``einsum`` (the reference of the compiled passes)."""

    @staticmethod
    def nodes(K, A):
        return np.matmul(K, A[:, : K.shape[2]])

    @staticmethod
    def combined(K, s, B):
        return np.tensordot(s, K, axes=1) @ B[: K.shape[2]]

    @staticmethod
    def shared_inner(K, delta, B):
        return np.einsum("ktj,tj->k", K, delta @ B[: K.shape[2]].T)

    @classmethod
    def inner_pair(cls, K, delta, B, weights, D):
        ns = K.shape[2]
        weighted = np.einsum("ktj,jk,tj->k", K, weights[:ns], delta @ D[:ns].T)
        return cls.shared_inner(K, delta, B), weighted

    @classmethod
    def averaged_combined(cls, K, s, B, weights, D):
        ns = K.shape[2]
        return cls.combined(K, s, B) + np.einsum("ktj,jk,jc->tc", K, weights[:ns], D[:ns])


def test_compiled_group_scores_equal_dense_scores_and_blocks_equal_columns():
    """KernelGroups: blocks from shared inner products (rbf, poly, linear, trace-scaled)
    and from a Gram = the operators' columns; compiled scores = dense scores."""
    from kernfw.solvers.mkl.kernel_groups import KernelGroups

    rng = np.random.default_rng(2)
    X = rng.normal(size=(40, 5))
    binary = (rng.random((40, 9)) < 0.4).astype(float)  # exact float32 products
    bops = list(make_operator(binary, ["linear", "rbf", ("poly", {"degree": 3})]).operators)
    bgroups = KernelGroups(bops)
    bgroups.add(np.arange(0, 40, 3))
    bgroups.prefetch(np.arange(5, 25))
    bgroups.add(np.array([1, 2]))  # new columns of the prefetched products
    bdense = np.array([op.dense() for op in bops])
    for P in (np.arange(6, 9), np.array([20, 4])):
        np.testing.assert_allclose(
            bgroups.block(P), bdense[:, P][:, :, bgroups.support], rtol=1e-13, atol=1e-15
        )
    specs = ["linear", ("poly", {"degree": 2, "gamma": 0.2}), ("sigmoid", {"gamma": 0.1})] + [
        ("rbf", {"gamma": g})
        for g in (0.6, 0.3, 0.45, 1.2)  # 0.3 · (2, 1, 1.5, 4)
    ]
    ops = list(make_operator(X, specs, normalization="trace", backend="function").operators)
    ops += [make_operator(X, ("rbf", {"gamma": 0.1, "columns": [0, 2]}), backend="gram")]
    ops += [make_operator(X, "laplacian", backend="function")]  # no view: the protocol
    groups = KernelGroups(ops)
    support = rng.permutation(40)[:25]
    groups.add(support)
    groups.prefetch(np.arange(10, 30))
    P = np.array([12, 13, 14])
    K = groups.block(P)
    dense = np.array([op.dense() for op in ops])
    np.testing.assert_allclose(K, dense[:, P][:, :, groups.support], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(groups.block(P, P), dense[:, P][:, :, P], rtol=1e-12, atol=1e-14)
    groups.add(np.array([0, 1]))  # slots past the prefetched products
    np.testing.assert_allclose(
        groups.block(P), dense[:, P][:, :, groups.support], rtol=1e-12, atol=1e-14
    )
    A = rng.normal(size=(len(ops), 40, 4))
    B, s, delta = rng.normal(size=(40, 4)), rng.random(len(ops)), rng.normal(size=(3, 4))
    for products_only in (False, True):  # mixed sources; one compiled program for all
        if products_only:
            ops, dense = ops[: len(specs)], dense[: len(specs)]
            A, s = A[: len(ops)], s[: len(ops)]
            groups = KernelGroups(ops)
            groups.add(rng.permutation(40)[:30])
            groups.prefetch(np.arange(10, 20))
        K, Kn = groups.at(P), dense[:, P][:, :, groups.support]
        assert (type(K).__name__ == "_Program") is products_only
        np.testing.assert_allclose(K.nodes(A), DenseScores.nodes(Kn, A), rtol=1e-11)
        np.testing.assert_allclose(K.combined(s, B), DenseScores.combined(Kn, s, B), rtol=1e-11)
        np.testing.assert_allclose(
            K.shared_inner(delta, B), DenseScores.shared_inner(Kn, delta, B), rtol=1e-11
        )


def test_integer_feature_tables_equal_dense_scores():
    """Small-integer features: every kernel is a table over inner products / squared
    distances; the compiled table passes (over several blocks of the support, with the
    coefficients stored by state or by slot, the rows' kinds kept by the caller or read
    off the coefficients) equal the dense scores and blocks."""
    from kernfw.solvers.mkl.kernel_groups import KernelGroups

    rng = np.random.default_rng(3)
    X = rng.integers(0, 3, size=(300, 7)).astype(float)  # values 0, 1, 2
    specs = ["linear"] + [("poly", {"degree": p, "gamma": 0.1, "coef0": 1.0}) for p in (2, 3)]
    specs += [("rbf", {"gamma": g}) for g in (0.05, 0.1, 0.2, 0.3)]  # γ_0 · (1, 2, 4, 6)
    ops = list(make_operator(X, specs, normalization="trace", backend="function").operators)
    groups = KernelGroups(ops)
    support = rng.permutation(300)[:280]  # three blocks of the compiled passes
    groups.add(support)
    P = np.array([3, 250, 251, 7])
    K = groups.at(P)
    assert type(K).__name__ == "_Tables"
    dense = np.array([op.dense() for op in ops])
    Kn = dense[:, P][:, :, groups.support]
    np.testing.assert_allclose(K.dense(), Kn, rtol=1e-12)
    numpy_groups = DenseScores
    q, Mk = 5, len(ops)
    B, s = rng.normal(size=(300, q)), rng.random(Mk)
    weights, D = rng.normal(size=(300, Mk)), rng.normal(size=(300, q))
    D[:10] = 0.0  # rows outside the visited set
    D[200:210] = 0.0
    rows = groups.slot[support[10:150]]
    D[rows] = B[rows]  # rows that entered the support in this epoch: D_j = B_j
    kinds = np.where(np.any(D != 0, axis=1), np.where(np.all(D == B, axis=1), 1, 2), 0)
    kinds = kinds.astype(np.int8)
    by_state = np.zeros((q, 300)).T  # the storage of KernelGroups.zeros with tables
    by_state[:] = B
    np.testing.assert_allclose(K.combined(s, B), numpy_groups.combined(Kn, s, B), rtol=1e-11)
    dense_delta = rng.normal(size=(4, q))  # a CRF round: every state
    dense_delta[1] = 0.0
    sparse = np.zeros((4, q))  # a hinge round: +1 at the truth, −1 at the decoding
    sparse[[0, 2], [1, 3]], sparse[[0, 2], [4, 0]] = 1.0, -1.0
    for delta in (dense_delta, sparse):
        expected = numpy_groups.inner_pair(Kn, delta, B, weights, D)
        for got in (
            K.inner_pair(delta, B, weights, D),
            K.inner_pair(delta, by_state, weights, D, kinds),
        ):
            for a, b in zip(got, expected):
                np.testing.assert_allclose(a, b, rtol=1e-11)
        np.testing.assert_allclose(
            K.shared_inner(delta, B), numpy_groups.shared_inner(Kn, delta, B), rtol=1e-11
        )
    np.testing.assert_allclose(
        K.averaged_combined(s, B, weights, D),
        numpy_groups.averaged_combined(Kn, s, B, weights, D),
        rtol=1e-11,
    )


@pytest.mark.parametrize("loss", ["hinge", "crf"])
def test_epoch_average_norms_equal_quadratic_forms(loss):
    """Dual averaging's epoch average keeps ``‖θ̄_k‖`` by identities: equal to
    ``sqrt(ā_kᵀ K_k ā_k)`` of the returned coefficients."""
    rng = np.random.default_rng(4)
    Y = [rng.integers(0, 3, size=rng.integers(2, 6)) for _ in range(30)]
    X = [np.clip(np.eye(3, 8)[y] + (rng.random((y.size, 8)) > 0.7), 0, 1) for y in Y]
    F = np.vstack(X)
    specs = ["linear", ("poly", {"degree": 2, "gamma": 0.2}), ("rbf", {"gamma": 0.2})]
    ops = list(make_operator(F, specs, normalization="trace", backend="function").operators)
    res = solve_online_mkl(Chain(3), X, Y, ops, loss=loss, lam=0.01, max_iter=3, random_state=0)
    sol = res.solution
    S, A = sol["support"], sol["coef"]
    exact = [
        np.sqrt(np.einsum("jc,jl,lc->", A[k], op.dense()[np.ix_(S, S)], A[k]))
        for k, op in enumerate(ops)
    ]
    np.testing.assert_allclose(sol["norms"], exact, rtol=1e-9)
    assert np.all(sol["norms"] > 0)


# -- kernelized = explicit ---------------------------------------------------------------------
@pytest.mark.parametrize("loss", ["hinge", "crf"])
@pytest.mark.parametrize(
    "averaging, solver",
    [
        ("none", "proximal"),
        ("epoch", "proximal"),
        ("weighted", "proximal"),
        ("none", "dual_averaging"),
        ("epoch", "dual_averaging"),
    ],
)
def test_multiclass_kernelized_iterates_equal_explicit_features(loss, averaging, solver):
    X, y = _data()
    cols = [[0, 1], [2, 3], [4, 5], [6, 7]]
    K = make_operator(X, [("linear", {"columns": g}) for g in cols])
    kw = dict(
        loss=loss,
        lam=LAM,
        eta0=0.5,
        max_iter=8,
        random_state=0,
        averaging=averaging,
        solver=solver,
    )
    a = solve_online_mkl(MultiClass(3), X, y, list(K.operators), **kw)
    b = solve_online_mkl(MultiClass(3), X, y, _multiclass_groups(X, 3, cols), **kw)
    np.testing.assert_allclose(a.history["primal"], b.history["primal"], rtol=1e-10)
    np.testing.assert_allclose(a["norms"], b["norms"], rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(a.history["mistakes"], b.history["mistakes"])
    W = b["w"].reshape(3, -1)
    for k, g in enumerate(cols):  # θ_k from the kernel coefficients = explicit θ_k
        theta = X[a["support"]][:, g].T @ a["coef"][k]
        np.testing.assert_allclose(theta, W[:, g].T, atol=1e-10)
        assert np.linalg.norm(theta) == pytest.approx(a["norms"][k], rel=1e-10)


@pytest.mark.parametrize("loss", ["hinge", "crf"])
@pytest.mark.parametrize("solver", ["proximal", "dual_averaging"])
def test_chain_kernelized_iterates_equal_explicit_features(loss, solver):
    X, Y = _chains()
    q, d = 3, 5
    model = Chain(q).initialize(X, Y)
    U = np.arange(q * d).reshape(q, d)
    trans = ExplicitGroup(np.arange(q * d, model.size_joint_feature))
    explicit = [ExplicitGroup(U[:, :2].ravel()), ExplicitGroup(U[:, 2:].ravel()), trans]
    feats = np.concatenate(X)
    K = make_operator(feats, [("linear", {"columns": [0, 1]}), ("linear", {"columns": [2, 3, 4]})])
    kw = dict(loss=loss, lam=0.01, eta0=0.5, max_iter=6, random_state=0, solver=solver)
    a = solve_online_mkl(Chain(q), X, Y, explicit, **kw)
    b = solve_online_mkl(Chain(q), X, Y, [trans] + list(K.operators), **kw)
    np.testing.assert_allclose(a.history["primal"], b.history["primal"], rtol=1e-10)
    np.testing.assert_allclose(a["norms"][[2, 0, 1]], b["norms"], rtol=1e-10)
    Ua = a["w"][: q * d].reshape(q, d)
    for k, cols in enumerate([[0, 1], [2, 3, 4]]):
        theta = feats[b["support"]][:, cols].T @ b["coef"][k]  # (d_k, q)
        np.testing.assert_allclose(theta, Ua[:, cols].T, atol=1e-10)
    np.testing.assert_allclose(a["w"][q * d :], b["w"][q * d :], atol=1e-10)


def test_maintained_kernel_norms_equal_quadratic_forms(problem):
    """‖θ_k‖² kept by the identity of math.md §4.4 = a_kᵀ K_k a_k (last iterate)."""
    X, y, K = problem
    for loss in ("hinge", "crf"):
        res = solve_online_mkl(
            MultiClass(3),
            X,
            y,
            list(K.operators),
            loss=loss,
            lam=LAM,
            max_iter=5,
            random_state=1,
            averaging="none",
        )
        S, A = res["support"], res["coef"]
        for k, op in enumerate(K.operators):
            quad = np.einsum("sc,st,tc->", A[k], op.dense()[np.ix_(S, S)], A[k])
            assert res["norms"][k] == pytest.approx(np.sqrt(quad), rel=1e-9)


# -- sparsity ----------------------------------------------------------------------------------
@pytest.mark.parametrize("regularizer", ["l21", "sparse_group_lasso"])
def test_large_lambda_zeroes_every_group(problem, regularizer):
    X, y, K = problem
    res = solve_online_mkl(
        MultiClass(3),
        X,
        y,
        list(K.operators),
        regularizer=regularizer,
        lam=50.0,
        max_iter=2,
        random_state=0,
    )
    assert np.all(res["norms"] == 0) and res.history["active_groups"][-1] == 0
    mixed = solve_online_mkl(
        MultiClass(3),
        X,
        y,
        _multiclass_groups(X, 3, [[0, 1], [2, 3]]) + list(K.operators[2:]),
        regularizer=regularizer,
        lam=50.0,
        max_iter=2,
        random_state=0,
    )
    assert np.all(mixed["norms"] == 0) and np.all(mixed["w"] == 0)


def test_active_groups_fall_monotonically_along_a_lambda_path():
    from kernfw import sweep

    X, y = _data(n=90, seed=3)
    specs = [("linear", {"columns": [j]}) for j in range(8)] + [
        ("rbf", {"gamma": 0.5, "columns": [0, 1]})
    ]
    lams = np.geomspace(1e-3, 10.0, 9)
    table = sweep(
        OnlineMKLClassifier(specs, regularizer="l21", max_iter=5, random_state=0, averaging="none"),
        X,
        y,
        "lam",
        lams,
    )
    active = table["n_active"].astype(int).tolist()
    assert all(a >= b for a, b in zip(active, active[1:])), active
    assert active[0] == 9 and active[-1] == 0


# -- the batch objective -------------------------------------------------------------------------
@pytest.mark.cvxpy
def test_objective_decreases_over_epochs_toward_the_optimum(problem):
    from kernfw.reference import online_mkl_reference

    X, y, K = problem
    res = solve_online_mkl(
        MultiClass(3),
        X,
        y,
        list(K.operators),
        lam=LAM,
        eta0=0.5,
        max_iter=30,
        random_state=0,
        averaging="uniform",
    )
    F = res.history["primal"]
    assert F.shape == (31,) and F[0] == pytest.approx(1.0)  # θ = 0: F(0) = 1
    assert np.all(np.diff(F) < 0)  # the averaged predictor's F decreases
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ref = online_mkl_reference([op.dense() for op in K.operators], y, LAM)
    assert np.all(F >= ref["value"] - 1e-7)  # F* is a lower bound
    assert F[-1] - ref["value"] < 0.02
    np.testing.assert_allclose(res["beta"], ref["beta"], atol=0.05)
    assert not res.converged and res.gap == np.inf


@pytest.mark.cvxpy
def test_cost_sensitive_hinge_matches_cvxpy(problem):
    from kernfw.reference import online_mkl_reference

    X, y, K = problem
    cost = np.array([[0.0, 1.0, 3.0], [1.0, 0.0, 1.0], [3.0, 1.0, 0.0]])
    res = solve_online_mkl(
        MultiClass(3, cost=cost),
        X,
        y,
        list(K.operators),
        lam=LAM,
        eta0=0.5,
        max_iter=40,
        random_state=0,
        radius="auto",
    )
    F = res.history["primal"]
    assert F[0] == pytest.approx(np.mean(cost[y].max(axis=1)))  # F(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ref = online_mkl_reference([op.dense() for op in K.operators], y, LAM, cost=cost)
    assert ref["value"] - 1e-7 <= F[-1] <= ref["value"] + 0.03
    assert np.linalg.norm(res["norms"]) <= res["radius"] + 1e-12


def test_weights_concentrate_on_informative_kernels(problem):
    X, y, K = problem
    res = solve_online_mkl(
        MultiClass(3), X, y, list(K.operators), lam=LAM, eta0=0.5, max_iter=30, random_state=0
    )
    assert res["beta"].sum() == pytest.approx(1.0)
    assert res["beta"][INFORMATIVE].sum() > 0.95


def test_ball_projection_bounds_the_norm(problem):
    X, y, K = problem
    kw = dict(lam=LAM, eta0=5.0, max_iter=3, random_state=0, averaging="none")
    res = solve_online_mkl(MultiClass(3), X, y, list(K.operators), radius=0.5, **kw)
    assert np.linalg.norm(res["norms"]) <= 0.5 + 1e-12
    free = solve_online_mkl(MultiClass(3), X, y, list(K.operators), **kw)
    assert np.linalg.norm(free["norms"]) > 0.5


# -- the multi-class estimator -------------------------------------------------------------------
def test_estimator_scores_and_weights(problem):
    X, y, K = problem
    clf = OnlineMKLClassifier(SPECS, lam=LAM, eta0=0.5, max_iter=20, random_state=0).fit(X, y)
    res = solve_online_mkl(
        MultiClass(3), X, y, list(K.operators), lam=LAM, eta0=0.5, max_iter=20, random_state=0
    )
    np.testing.assert_allclose(clf.kernel_weights_, res["beta"])
    assert clf.objective_ == pytest.approx(res.primal)
    assert clf.duality_gap_ == np.inf and not clf.converged_
    assert clf.score(X, y) > 0.9 and clf.lam_ == LAM
    scores = sum(op.cross(X, clf.support_) @ clf.dual_coef_[k] for k, op in enumerate(K.operators))
    np.testing.assert_allclose(clf.decision_function(X), scores, atol=1e-10)
    assert clf.group_norm_path_.shape == (21, 4)
    np.testing.assert_allclose(clf.group_norm_path_[-1], clf.group_norms_)


def test_estimator_mixes_feature_groups_and_kernels():
    X, y = _data()
    clf = OnlineMKLClassifier(
        kernel=[("rbf", {"gamma": 0.5, "columns": [4, 5]})],
        groups=[[0, 1], [2, 3]],
        lam=LAM,
        max_iter=10,
        random_state=0,
    ).fit(X, y)
    assert clf.n_groups_ == 3 and clf.group_norms_.shape == (3,)
    assert clf.score(X, y) > 0.9
    # the same groups as linear kernels on trace-normalized columns: same model
    same = OnlineMKLClassifier(
        kernel=[
            ("linear", {"columns": [0, 1]}),
            ("linear", {"columns": [2, 3]}),
            ("rbf", {"gamma": 0.5, "columns": [4, 5]}),
        ],
        lam=LAM,
        max_iter=10,
        random_state=0,
    ).fit(X, y)
    np.testing.assert_allclose(clf.group_norms_, same.group_norms_, rtol=1e-9)
    np.testing.assert_allclose(clf.decision_function(X), same.decision_function(X), atol=1e-9)
    only = OnlineMKLClassifier(
        groups=[[0, 1], [2, 3]], loss="crf", cost=None, lam=LAM, max_iter=5, random_state=0
    ).fit(X, y)
    assert only.n_kernels_ == 0 and only.score(X, y) > 0.9


def test_precomputed_equals_specs():
    X, y = _data()
    Xtr, Xte, ytr = X[:45], X[45:], y[:45]
    a = OnlineMKLClassifier(SPECS, lam=LAM, max_iter=5, random_state=0).fit(Xtr, ytr)
    raw = make_operator(Xtr, SPECS)
    grams = [op.dense() for op in raw.operators]
    tests = [op.cross(Xte) for op in raw.operators]
    b = OnlineMKLClassifier("precomputed", lam=LAM, max_iter=5, random_state=0).fit(grams, ytr)
    np.testing.assert_allclose(a.kernel_weights_, b.kernel_weights_, atol=1e-12)
    np.testing.assert_allclose(a.decision_function(Xte), b.decision_function(tests), atol=1e-9)


def test_binary_decision_pickle_and_clone():
    X, y = _data()
    yb = np.where(y == 0, "pos", "neg")
    clf = OnlineMKLClassifier(SPECS, lam=LAM, max_iter=5, random_state=0).fit(X, yb)
    dec = clf.decision_function(X)
    assert dec.shape == (60,)
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[(dec > 0).astype(int)])
    again = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(again.decision_function(X), dec)
    assert clone(clf).get_params() == clf.get_params()


def test_c_convention_and_no_deprecated_aliases():
    X, y = _data()
    new = OnlineMKLClassifier(SPECS, eta0=0.5, max_iter=3, random_state=0).fit(X, y)
    assert new.lam_ == pytest.approx(1.0 / X.shape[0])  # λ = 1/(C n), C = 1
    assert new.n_iter_ == 3  # epochs, the unit of max_iter
    for old in ("kernels", "eta", "n_epochs", "average", "method"):
        with pytest.raises(TypeError, match=old):
            OnlineMKLClassifier(**{old: None})
    half = OnlineMKLClassifier(SPECS, C=0.5, max_iter=1, random_state=0).fit(X, y)
    assert half.lam_ == pytest.approx(2.0 / X.shape[0])


def test_bad_input(problem):
    X, y, K = problem
    with pytest.raises(ValueError, match="empty group list"):
        solve_online_mkl(MultiClass(3), X, y, [])
    with pytest.raises(ValueError, match="empty kernel list"):
        OnlineMKLClassifier([]).fit(X, y)
    with pytest.raises(ValueError, match="lam must be"):
        solve_online_mkl(MultiClass(3), X, y, list(K.operators), lam=0.0)
    with pytest.raises(ValueError, match="max_iter"):
        solve_online_mkl(MultiClass(3), X, y, list(K.operators), max_iter=0)
    with pytest.raises(ValueError, match="radius"):
        solve_online_mkl(MultiClass(3), X, y, list(K.operators), radius=-1.0)
    with pytest.raises(ValueError, match="positions"):
        solve_online_mkl(MultiClass(3), X, y, [Gram(np.eye(50))])
    with pytest.raises(ValueError, match="disjoint"):
        OnlineMKLClassifier(groups=[[0, 1], [1, 2]]).fit(X, y)
    with pytest.raises(ValueError, match="column indices"):
        OnlineMKLClassifier(groups=[[0, 99]]).fit(X, y)
    with pytest.raises(ValueError, match="zero diagonal"):
        OnlineMKLClassifier(SPECS, cost=np.ones((3, 3))).fit(X, y)
    clf = OnlineMKLClassifier("precomputed", max_iter=1).fit([op.dense() for op in K.operators], y)
    with pytest.raises(ValueError, match="expected 4 test Gram"):
        clf.predict([np.zeros((3, 60))])


#: the epochs visit the examples in a random order drawn over the rows given: a weighted fit
#: and the fit on repeated rows (other rows, in another order, W rounds per epoch instead of
#: n₊) are two different stochastic runs of the same weighted objective, equal in
#: expectation, not to 1e-7 (math.md §4.9; scikit-learn's SGD estimators fail these checks
#: too).  What the weights make exact is tested in test_online_mkl_weights.py: a weight of 0
#: is the row removed (the same run), unit and uniformly scaled weights the unweighted run.
#: Neither small problems help: these methods certify nothing, so there is no floor to run
#: on to (a stochastic subgradient average nears the optimum as O(1/√T)), and an order that
#: visits an example of weight k as k rounds would pass by construction, not by the method.
_STOCHASTIC_ORDER = dict.fromkeys(
    (
        "check_sample_weight_equivalence_on_dense_data",
        "check_sample_weight_equivalence_on_sparse_data",
    ),
    "online steps in a random order of the rows: weighted and repeated rows are other runs",
)


@parametrize_with_checks(
    [
        OnlineMKLClassifier(["linear", "rbf"], max_iter=2, random_state=0),
        OnlineMKLClassifier(loss="crf", max_iter=2, random_state=0),
        # a MultiClass model with 4 classes covers the labels the checks draw (0..3); a
        # Chain model's inputs are sequences, which the checks cannot make
        OnlineMKLStructured(MultiClass(4), max_iter=2, random_state=0),
        OnlineMKLStructured(MultiClass(4), loss="crf", max_iter=2, random_state=0),
    ],
    expected_failed_checks=lambda estimator: _STOCHASTIC_ORDER,
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


# -- the defaults on generated chains ----------------------------------------------------------
@pytest.mark.parametrize("loss", ["hinge", "crf"])
def test_objective_decreases_every_epoch_at_the_defaults(loss):
    """Dual averaging, the average of each epoch: F falls from epoch to epoch (the full
    objective; the last iterate's F fluctuates)."""
    from kernfw.datasets import make_chains

    X, Y = make_chains(100, random_state=0)
    est = OnlineMKLStructured(Chain(3), loss=loss, objective_sample=None, random_state=0)
    F = est.fit(X, Y).history_["primal"]
    assert F.shape == (11,) and np.all(np.diff(F) < 0), F
    assert F[0] == pytest.approx(1.0 if loss == "hinge" else np.log(3))  # F(0)
    last = OnlineMKLStructured(Chain(3), loss=loss, averaging="none", objective_sample=None)
    assert not np.all(np.diff(last.set_params(random_state=0).fit(X, Y).history_["primal"]) < 0)


def test_crf_and_hinge_reach_comparable_error_on_generated_chains():
    """The CRF on the per-letter scale and the hinge with the same defaults (λ, η₀)."""
    from kernfw.datasets import make_chains

    X, Y = make_chains(400, n_states=4, noise=1.5, random_state=1)
    errors = {}
    for loss in ("hinge", "crf"):
        est = OnlineMKLStructured(Chain(4), loss=loss, max_iter=5, random_state=0)
        errors[loss] = 1.0 - est.fit(X[:200], Y[:200]).score(X[200:], Y[200:])
    assert abs(errors["crf"] - errors["hinge"]) < 0.03, errors
    assert max(errors.values()) < 0.42, errors  # a constant labeling errs on 0.75


# -- the structured estimator -----------------------------------------------------------------
@pytest.mark.parametrize("loss", ["hinge", "crf"])
def test_structured_chain_with_mixed_groups(loss):
    X, Y = _chains(n=40)
    groups = [("features", [0, 1, 2]), ("features", [3, 4]), "transitions", ("rbf", {"gamma": 0.3})]
    est = OnlineMKLStructured(
        Chain(3), groups, loss=loss, lam=0.01, eta0=0.5, max_iter=8, random_state=0
    ).fit(X, Y)
    assert est.group_names_[:3] == ["features [0, 1, 2]", "features [3, 4]", "transitions"]
    assert est.group_norms_.shape == (4,) and est.score(X, Y) > 0.8
    F = est.history_["primal"]
    assert F[-1] < F[1]
    pred = est.predict(X)
    assert all(p.shape == y.shape for p, y in zip(pred, Y))
    assert clone(est).get_params()["groups"] == groups
    again = pickle.loads(pickle.dumps(est))
    assert all(np.array_equal(a, b) for a, b in zip(again.predict(X), pred))


def test_structured_multiclass_equals_the_classifier():
    X, y = _data()
    a = OnlineMKLStructured(MultiClass(3), SPECS, lam=LAM, max_iter=4, random_state=0).fit(X, y)
    b = OnlineMKLClassifier(SPECS, lam=LAM, max_iter=4, random_state=0).fit(X, y)
    np.testing.assert_allclose(a.group_norms_, b.group_norms_, rtol=1e-10)
    np.testing.assert_array_equal(a.predict(X), np.searchsorted(b.classes_, b.predict(X)))


def test_structured_matching_is_hinge_only():
    rng = np.random.default_rng(0)
    Y = [rng.permutation(3) for _ in range(20)]
    X = []
    for y in Y:
        x = rng.normal(size=(3, 3, 4)) * 0.3
        x[np.arange(3), y, 0] += 1.0
        X.append(x)
    est = OnlineMKLStructured(
        Matching(), [np.array([0]), np.array([1, 2, 3])], lam=0.01, max_iter=5, random_state=0
    ).fit(X, Y)
    assert est.score(X, Y) > 0.9
    assert est.group_norms_[0] > est.group_norms_[1]
    with pytest.raises(ValueError, match="hinge"):
        OnlineMKLStructured(Matching(), loss="crf", lam=0.01).fit(X, Y)
    with pytest.raises(ValueError, match="kernel groups need"):
        OnlineMKLStructured(Matching(), ["rbf"], lam=0.01).fit(X, Y)


def test_default_eta0_depends_on_the_loss():
    """``eta0="auto"``: the loss's scale ``s`` (1 for the hinge, ``1 + log(q − 1)`` for the
    CRF) on chains and for the proximal method, ``3s/(λ√n)`` for multi-class dual averaging
    (math.md §4.7); the string round-trips through get_params / clone and ``eta0_`` holds the
    value used."""
    from kernfw.datasets import make_chains

    assert default_eta0("hinge", 26) == 1.0
    assert default_eta0("crf", 26) == pytest.approx(1.0 + np.log(25.0))
    assert default_eta0("crf", 2) == 1.0  # two classes: the logistic loss, the hinge's scale
    assert default_eta0("hinge", 3, lam=0.01, n_examples=400) == pytest.approx(3.0 / (0.01 * 20))
    assert default_eta0("crf", 3, 0.01, 400) == pytest.approx(15.0 * (1.0 + np.log(2.0)))
    Xm = np.random.default_rng(0).normal(size=(64, 3))
    ym = np.arange(64) % 3
    clf = OnlineMKLClassifier(["linear"], max_iter=1, random_state=0)
    assert clf.fit(Xm, ym).eta0_ == pytest.approx(3.0 * np.sqrt(64))  # λ = 1/n: 3√n
    assert clf.set_params(C=0.5).fit(Xm, ym).eta0_ == pytest.approx(1.5 * np.sqrt(64))
    assert clf.set_params(solver="proximal").fit(Xm, ym).eta0_ == 1.0
    est = OnlineMKLStructured(Chain(3), loss="crf", max_iter=2, random_state=0)
    assert est.get_params()["eta0"] == "auto" and clone(est).get_params()["eta0"] == "auto"
    X, Y = make_chains(30, random_state=0)
    assert est.fit(X, Y).eta0_ == pytest.approx(1.0 + np.log(2.0))
    assert est.set_params(loss="hinge").fit(X, Y).eta0_ == 1.0
    assert est.set_params(eta0=0.5).fit(X, Y).eta0_ == 0.5
    with pytest.raises(ValueError, match="eta0"):
        est.set_params(eta0="fast").fit(X, Y)


def test_structured_fit_takes_y_by_keyword():
    """``fit(X, y=...)``, as scikit-learn's tools call it (the sample-weight checks do)."""
    X, y = make_blobs(40, centers=3, random_state=0)
    est = OnlineMKLStructured(MultiClass(3), max_iter=2, random_state=0)
    by_keyword = est.fit(X=X, y=y, sample_weight=np.ones(40)).coef_.copy()
    np.testing.assert_array_equal(by_keyword, clone(est).fit(X, y).coef_)
