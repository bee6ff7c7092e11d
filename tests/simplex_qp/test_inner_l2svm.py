"""The compiled pairwise FW of the MKL inner L2-SVM (``simplex_qp._numba.solve_problems``): the optimum
against cvxpy, its vertices (LPs) and line search (a 1-D maximization), the optimum of the
operator path (``solve_l2svm``, away-step FW), its certificate, warm starts, and its
refusals (an indefinite kernel, the iteration budget)."""

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from kernfw.kernels import make_operator
from kernfw.operators import Gram, KernelStack, MultiKernel
from kernfw.operators.psd import NotPSDError
from kernfw.solvers.mkl import inner_svm
from kernfw.solvers.mkl.inner_svm import L2SVM, coding_matrix, one_vs_rest

pytest.importorskip("numba")


def _problem(n=80, seed=0, C=2.0, tol=1e-10):
    """``(K_γ, L2SVM)``: a stacked weighted kernel and three one-vs-rest problems (more than
    EXACT_MAX points: the compiled pairwise FW solves them, not the exact active set)."""
    X = np.random.default_rng(seed).normal(size=(n, 3))
    y = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5).astype(int)
    specs = [("rbf", {"gamma": 0.5}), "linear", ("poly", {"degree": 2})]
    mk = MultiKernel([make_operator(X, s, normalization="trace") for s in specs])
    K = KernelStack(mk).weighted([0.5, 0.3, 0.2]).copy()
    return K, L2SVM(coding_matrix(one_vs_rest(y, 3), n), C=C, tol=tol)


def _values(K, svm, alphas):
    """``f_r = −α_rᵀQ_rα_r`` with ``Q_r = y yᵀ∘(K + 11ᵀ) + I/C`` per problem."""
    out = []
    for y, a in zip(svm.codes, alphas):
        Q = np.outer(y, y) * (K + 1.0) + np.eye(y.size) / svm.C
        out.append(-float(a @ Q @ a))
    return np.array(out)


def _op(K):
    return Gram(K, check=False, symmetric=True)


def test_reaches_the_cvxpy_optimum_with_a_certified_gap():
    from kernfw.reference.meb import l2svm_reference

    pytest.importorskip("cvxpy")
    K, svm = _problem()
    sol = svm.solve(_op(K))
    f = _values(K, svm, sol.state)
    best = np.array([l2svm_reference(K, y, svm.C)["objective"] for y in svm.codes])
    np.testing.assert_allclose(f, best, rtol=1e-6)
    assert np.sum(best - f) <= sol.inner_gap + 1e-7 * np.abs(best).sum()  # a true bound
    assert 0.0 <= sol.inner_gap <= 1e-10 * np.abs(f).sum() + 1e-14
    for a in sol.state:
        assert np.all(a >= 0) and a.sum() == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("warm", [False, True])
def test_the_optimum_of_the_operator_path(warm):
    """The compiled pairwise FW and the operator path (away-step FW, ``solve_l2svm``) reach
    the same optimum: values within the sum of their certified gaps, from a cold and a
    warm start."""
    K, svm = _problem(n=60, seed=1, tol=1e-9)
    start = None
    if warm:  # the solution on another kernel, as CSKL's next weight vector starts
        start = svm.solve(_op(np.ascontiguousarray(0.7 * K + 0.3 * np.eye(60)))).state
    compiled = svm.solve(_op(K), start)
    numpy = L2SVM(svm.codes, C=svm.C, tol=svm.tol, solver="mfw").solve(_op(K), start)
    f_compiled = _values(K, svm, compiled.state)
    f_numpy = _values(K, svm, numpy.state)
    assert np.sum(np.abs(f_compiled - f_numpy)) <= compiled.inner_gap + numpy.inner_gap
    assert compiled.inner_gap <= 1e-9 * np.abs(f_compiled).sum()
    np.testing.assert_allclose(np.array(compiled.state), np.array(numpy.state), atol=1e-4)


def _q(K, y, C):
    return np.outer(y, y) * (K + 1.0) + np.eye(y.size) / C


def test_pairwise_vertices_are_the_lp_solution_and_the_best_step():
    """The FW vertex maximizes ``⟨∇f, s⟩`` over the simplex (the LP solved by cvxpy); the
    away vertex is the active entry whose clipped exact step towards it lowers ``αᵀQα``
    most (every candidate's step computed from ``Q``), read along runs of ``K``'s rows."""
    cp = pytest.importorskip("cvxpy")
    lib = pytest.importorskip("kernfw.solvers.simplex_qp._numba")
    K, svm = _problem(n=30, seed=4)
    rng = np.random.default_rng(4)
    y = svm.codes[0]
    Q = _q(K, y, svm.C)
    alpha = rng.dirichlet(np.ones(30)) * (rng.uniform(size=30) < 0.5)
    alpha /= alpha.sum()
    v = Q @ alpha
    grad = -2.0 * v
    i = lib._fw_vertex(v)
    s = cp.Variable(30)
    best = cp.Problem(cp.Maximize(grad @ s), [s >= 0, cp.sum(s) == 1]).solve()
    assert grad[i] == pytest.approx(best, rel=1e-7)
    seg = np.array([[0, 12], [12, 30]])  # two runs: the same points
    j = lib._away_vertex(K[i], seg, y, np.diag(Q).copy(), alpha, v, i)
    decrease = np.zeros(30)
    for k in np.flatnonzero((alpha > 0) & (v > v[i])):
        d = np.zeros(30)
        d[i], d[k] = 1.0, -1.0
        curv = d @ Q @ d
        step = min((v[k] - v[i]) / curv, alpha[k])
        decrease[k] = alpha @ Q @ alpha - (alpha + step * d) @ Q @ (alpha + step * d)
    assert decrease.max() > 0 and j == int(np.argmax(decrease))


def test_pairwise_step_is_the_exact_line_search():
    """The closed-form pairwise step maximizes ``f(α + γ(e_i − e_j))`` over ``[0, α_j]``
    (a bounded 1-D maximization), and updates ``v = Qα`` and ``αᵀQα``."""
    from scipy.optimize import minimize_scalar

    lib = pytest.importorskip("kernfw.solvers.simplex_qp._numba")
    K, svm = _problem(n=30, seed=5)
    rng = np.random.default_rng(5)
    for trial in range(6):
        y = svm.codes[trial % 3]
        Q = _q(K, y, svm.C)
        alpha = rng.dirichlet(np.ones(30))
        v = Q @ alpha
        i = lib._fw_vertex(v)
        j = lib._away_vertex(K[i], np.array([[0, 30]]), y, np.diag(Q).copy(), alpha, v, i)
        d = np.zeros(30)
        d[i], d[j] = 1.0, -1.0
        line = minimize_scalar(
            lambda g: (alpha + g * d) @ Q @ (alpha + g * d),
            bounds=(0.0, alpha[j]),
            method="bounded",
            options={"xatol": 1e-12},
        )
        a, w = alpha.copy(), v.copy()
        glob, seg = np.arange(30), np.array([[0, 30]])  # the points: one run of K's rows
        gamma, ava, not_psd, vertex = lib._pairwise_step(
            K, glob, seg, y, np.full(y.size, 1.0 / svm.C), a, w, alpha @ v, i, j
        )
        assert not not_psd and vertex == int(np.argmin(w))
        assert gamma == pytest.approx(line.x, abs=1e-8)
        np.testing.assert_allclose(a, alpha + gamma * d, atol=1e-15)
        np.testing.assert_allclose(w, Q @ a, rtol=1e-12, atol=1e-14)
        assert ava == pytest.approx(a @ Q @ a, rel=1e-12)
        if gamma == alpha[j]:  # a drop step leaves α_j exactly 0
            assert a[j] == 0.0


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_blockwise_passes_are_the_entrywise_rules_with_the_first_of_ties(dtype):
    """The passes by blocks, over three runs of ``K``'s indices (block edges inside runs and
    at their ends), on points that come in copies (tied values): the FW vertex is
    ``np.argmin`` (the first of ties), the away vertex the first maximizer of the decrease
    ``γ_j(2δ_j − γ_j c_j)`` computed entry by entry, and the step's ``v`` and its next FW
    vertex those of the entrywise update, bit for bit (float64 and float32 ``K``)."""
    lib = pytest.importorskip("kernfw.solvers.simplex_qp._numba")
    rng = np.random.default_rng(11)
    seg = np.array([[0, 300], [350, 700], [713, 1013]])
    glob = np.concatenate([np.arange(lo, hi) for lo, hi in seg])
    copies = rng.integers(0, 300, 1020)  # K's 1020 indices: each point of the problem twice
    copies[glob] = rng.permutation(np.repeat(np.arange(300, 300 + glob.size // 2), 2))
    X = rng.normal(size=(300 + glob.size // 2, 3))[copies]
    K = np.exp(-0.5 * ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)).astype(dtype)
    inv_c = np.full(glob.size, 0.5)
    m = X.shape[0]
    y = rng.choice([-1.0, 1.0], m)[copies][glob]
    alpha = (rng.random(m) * (rng.random(m) < 0.5))[copies][glob]
    alpha /= alpha.sum()
    v = rng.random(m)[copies][glob]
    q_diag = K[glob, glob] + 1.0 + inv_c
    i = lib._fw_vertex(v)
    assert i == int(np.argmin(v)) and np.sum(v == v[i]) > 1  # a tie, the first kept
    row = K[glob[i], glob].astype(np.float64)
    delta = v - v[i]
    curv = q_diag[i] + q_diag - 2.0 * y[i] * y * (row + 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        step = np.where(curv <= 0.0, alpha, np.minimum(delta / curv, alpha))
    gain = np.where((alpha > 0) & (delta > 0), step * (2.0 * delta - step * curv), 0.0)
    j = lib._away_vertex(K[glob[i]], seg, y, q_diag, alpha, v, i)
    assert j == int(np.argmax(gain)) and np.sum(gain == gain[j]) > 1
    a, w = alpha.copy(), v.copy()
    gamma, ava, not_psd, vertex = lib._pairwise_step(K, glob, seg, y, inv_c, a, w, 1.0, i, j)
    assert gamma > 0.0 and not not_psd
    r_i, r_j = K[glob[i], glob].astype(np.float64), K[glob[j], glob].astype(np.float64)
    expected = v + gamma * y * (y[i] * (r_i + 1.0) - y[j] * (r_j + 1.0))
    expected[i] += gamma * inv_c[i]
    expected[j] -= gamma * inv_c[j]
    np.testing.assert_array_equal(w, expected)
    assert vertex == int(np.argmin(expected)) and np.sum(expected == expected[vertex]) > 1


def test_problems_split_over_threads_give_the_same_numbers(monkeypatch):
    """Slices of the problems in three threads: each problem is solved as alone, so the
    solutions and certificates are the single thread's, bit for bit."""
    K, svm = _problem(n=80, seed=2, tol=1e-8)  # above EXACT_MAX: the compiled pairwise FW
    monkeypatch.setattr(inner_svm, "THREADED_MIN_POINTS", 10**9)
    alone = svm.solve(_op(K))
    calls = []
    monkeypatch.setattr(inner_svm, "THREADED_MIN_POINTS", 1)
    monkeypatch.setattr(inner_svm, "available_threads", lambda: calls.append(1) or 3)
    threaded = svm.solve(_op(K))
    assert calls  # the threaded path ran
    np.testing.assert_array_equal(np.array(threaded.state), np.array(alone.state))
    assert threaded.inner_gap == alone.inner_gap and threaded.offset == alone.offset


def test_a_warm_start_at_the_optimum_takes_no_step():
    K, svm = _problem(tol=1e-8)
    first = svm.solve(_op(K))
    lib = pytest.importorskip("kernfw.solvers.simplex_qp._numba")
    A = np.array(first.state)
    inv_c = np.full(K.shape[0], 1.0 / svm.C)
    _, _, n_iter, status, _ = lib.solve_problems(K, svm.codes, inv_c, A, 1e-8, 1000)
    assert np.all(n_iter == 0) and np.all(status == lib.STATUS_CONVERGED)
    np.testing.assert_array_equal(A, np.array(first.state))


def test_negative_curvature_is_refused():
    K, svm = _problem(C=10.0)
    with pytest.raises(NotPSDError, match="not positive semidefinite"):
        svm.solve(_op(np.ascontiguousarray(-2.0 * K)))


def test_the_iteration_budget_warns_and_reports_its_gap(monkeypatch):
    K, svm = _problem(tol=1e-12)
    monkeypatch.setattr(inner_svm, "_max_iter", lambda n: 3)
    with pytest.warns(ConvergenceWarning, match="max_iter=3"):
        sol = svm.solve(_op(K))
    f = _values(K, svm, sol.state)
    exact = L2SVM(svm.codes, svm.C, 1e-12)
    monkeypatch.undo()
    best = _values(K, exact, exact.solve(_op(K)).state)
    assert np.sum(best - f) <= sol.inner_gap and sol.inner_gap > 1e-6


def test_small_blocks_inside_a_small_block_keep_its_limit(monkeypatch):
    """A small :func:`thread_limit` block inside another sets no limit of its own (one
    BLAS limit for the outer block), and reports the threads as they were outside the
    outer block."""
    from kernfw import _threads

    limits = []
    real = _threads.one_blas_thread

    def counted():
        limits.append(1)
        return real()

    monkeypatch.setattr(_threads, "one_blas_thread", counted)
    outside = _threads.available_threads()
    with _threads.thread_limit(10.0) as parallel:
        assert parallel is False
        with _threads.thread_limit(10.0) as inner:
            assert inner is False
            assert _threads.available_threads() == outside
        with _threads.thread_limit(2 * _threads.SMALL_WORK) as large:
            assert large is True
    assert limits == [1]
    assert _threads.available_threads() == outside


def test_one_blas_thread_sets_every_blas_pool_to_one_and_restores_it():
    """Inside the block threadpoolctl reports one thread for every BLAS library; after
    it, the counts from before (also when the block raises)."""
    from threadpoolctl import threadpool_info, threadpool_limits

    from kernfw import _threads

    def blas_counts():
        return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]

    with threadpool_limits(2, user_api="blas"):
        before = blas_counts()
        assert 2 in before  # (a single-threaded BLAS build stays at 1)
        with _threads.one_blas_thread():
            assert blas_counts() == [1] * len(before)
        assert blas_counts() == before
        with pytest.raises(RuntimeError), _threads.one_blas_thread():
            raise RuntimeError("inside")
        assert blas_counts() == before
