"""Multi-category SVM by dual Frank-Wolfe (math.md §1): solver, reference checks, estimator."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize_scalar
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics.pairwise import rbf_kernel

from kernfw.fw import StoppingRule, run
from kernfw.losses import (
    MaxHinge,
    StructuredHinge,
    TopKHinge,
    Usunier,
    WeightedTopKHinge,
    WeightedUsunier,
)
from kernfw.operators import Features, Gram
from kernfw.solvers.multiclass import BlockFW, FullBatchFW, MulticlassDual, solve_multiclass

N, M, D = 30, 5, 5
LAM = 0.5


def absolute(tol):
    """The stopping rule of an absolute certified gap ``gap + rounding <= tol``."""
    return StoppingRule(tol, "absolute")


RHO = np.array([0.5, 0.3, 0.3, 0.1, 0.0])


def _data(seed=0, n=N, m=M, d=D):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = rng.integers(0, m, n)
    y[:m] = np.arange(m)
    cost = rng.uniform(0.5, 2.0, (m, m))
    np.fill_diagonal(cost, 0.0)
    return X, y, cost


X0, Y0, COST0 = _data()
LOSSES = {
    "max_hinge": MaxHinge(),
    "structured_hinge": StructuredHinge(COST0),
    "topk_hinge": TopKHinge(3),
    "usunier": Usunier(3),
    "weighted_topk": WeightedTopKHinge(RHO),
    "weighted_usunier": WeightedUsunier(RHO),
}
GAMMA = 0.2


def operator(kind, X=X0):
    if kind == "dense":
        return Features(X)
    if kind == "sparse":
        Xs = X.copy()
        Xs[np.abs(Xs) < 0.5] = 0.0
        return Features(sp.csr_matrix(Xs))
    return Gram(rbf_kernel(X, gamma=GAMMA))


def factor(op):
    from kernfw.reference import factor_gram

    return factor_gram(op.dense())


_REF = {}


def reference_value(loss_name, kind, sigma, lam=LAM):
    """cvxpy optimum P* (or P_σ*), cached across tests."""
    from kernfw.reference import multiclass_primal

    key = (loss_name, kind, sigma, lam)
    if key not in _REF:
        op = operator(kind)
        _REF[key] = multiclass_primal(factor(op), Y0, LOSSES[loss_name], lam, sigma)["value"]
    return _REF[key]


# -- agreement with cvxpy (math.md §6 recipe) ------------------------------------------------

DEFAULT_CASES = [
    (name, kind, sigma)
    for name, kind, sigma in [
        ("max_hinge", "rbf", 0.0),
        ("max_hinge", "dense", 0.0),
        ("structured_hinge", "sparse", 0.0),
        ("structured_hinge", "rbf", 0.1),
        ("topk_hinge", "dense", 0.1),
        ("topk_hinge", "rbf", 0.0),
        ("usunier", "sparse", 0.1),
        ("usunier", "rbf", 0.1),
        ("weighted_topk", "rbf", 0.1),
        ("weighted_topk", "sparse", 0.0),
        ("weighted_usunier", "dense", 0.0),
        ("weighted_usunier", "rbf", 0.1),
    ]
]
ALL_CASES = [
    (name, kind, sigma)
    for name in LOSSES
    for kind in ("dense", "sparse", "rbf")
    for sigma in (0.0, 0.1)
    if (name, kind, sigma) not in DEFAULT_CASES
]


def check_against_reference(loss_name, kind, sigma, solver="lsfw", tol=1e-5):
    P_star = reference_value(loss_name, kind, sigma)
    res = solve_multiclass(
        operator(kind),
        Y0,
        loss=LOSSES[loss_name],
        lam=LAM,
        smoothing=sigma,
        solver=solver,
        tol=absolute(tol),
        max_iter=200_000,
        random_state=0,
    )
    assert res.converged and res.gap <= tol
    assert abs(res.primal - P_star) <= max(res.gap, 1e-7) + 1e-6 * abs(P_star)
    assert res.dual <= P_star + 1e-8
    assert res.primal >= P_star - 1e-6 * abs(P_star)
    # the certificate is exact: P̃ − D_σ equals the FW gap
    assert abs((res.primal - res.dual) - res.gap) <= 1e-10
    return res


@pytest.mark.cvxpy
@pytest.mark.parametrize("loss_name, kind, sigma", DEFAULT_CASES)
def test_lsfw_matches_cvxpy(loss_name, kind, sigma):
    check_against_reference(loss_name, kind, sigma)


@pytest.mark.cvxpy
@pytest.mark.parametrize("loss_name, kind, sigma", ALL_CASES)
def test_lsfw_matches_cvxpy_full_grid(loss_name, kind, sigma):
    check_against_reference(loss_name, kind, sigma)


@pytest.mark.cvxpy
@pytest.mark.parametrize(
    "loss_name, kind, sigma",
    [
        ("weighted_usunier", "sparse", 0.1),
        ("topk_hinge", "rbf", 0.0),
        ("structured_hinge", "dense", 0.0),
        ("max_hinge", "rbf", 0.1),
    ],
)
def test_bcfw_matches_cvxpy(loss_name, kind, sigma):
    check_against_reference(loss_name, kind, sigma, solver="bcfw")


@pytest.mark.cvxpy
@pytest.mark.parametrize("name", list(LOSSES))
def test_direction_equals_lp_over_dual_domain(name, rng):
    """Closed-form LMO = the LP max over A_i (objective values, math.md §1.6)."""
    from kernfw.reference import multiclass_lmo_lp

    op = operator("rbf")
    problem = MulticlassDual(op, Y0, LOSSES[name], lam=LAM, smoothing=0.1)
    At, S = _random_feasible_iterate(problem, rng)
    U, phi, G = problem.direction(At, S)
    for i in range(0, N, 6):
        lp = multiclass_lmo_lp(-G[i], Y0[i], LOSSES[name])
        assert abs(lp - (-G[i] @ U[i])) <= 1e-7 * max(1.0, abs(lp))
        assert abs(phi[i] - (-G[i] @ U[i])) <= 1e-12


@pytest.mark.cvxpy
@pytest.mark.parametrize("name", ["max_hinge", "topk_hinge"])
def test_smoothed_reference_value_lies_between_dual_and_ptilde(name):
    """D_σ ≤ P_σ(W(A)) ≤ P̃ with P_σ from the per-example cvxpy envelope (§1.10)."""
    from kernfw.reference import smoothed_loss_value

    sigma = 0.3
    problem = MulticlassDual(operator("rbf"), Y0, LOSSES[name], lam=LAM, smoothing=sigma)
    At, S = problem.start()
    it = FullBatchFW(problem, At, S)
    for t in range(15):
        it.step(t)
    cert = it.certificate()
    env = np.mean([smoothed_loss_value(S[i], Y0[i], LOSSES[name], sigma) for i in range(N)])
    P_sigma = 0.5 * LAM * float(np.vdot(At, S)) / problem.scale + env
    assert cert.dual - 1e-9 <= P_sigma <= cert.primal + 1e-9


# -- closed-form line search = 1-D maximization (math.md §1.7, §1.10) ---------------------------


def _random_feasible_iterate(problem, rng, steps=7):
    """A feasible dual point: a random convex combination of LMO vertices."""
    At, S = problem.start()
    for _ in range(steps):
        U, _, _ = problem.direction(At, S + rng.normal(size=S.shape))
        gamma = rng.uniform(0.1, 0.7)
        At = (1 - gamma) * At + gamma * U
    return At, problem.scores(At)


def _best_step(dual_along):
    """``argmax_{γ ∈ [0, 1]} D(γ)`` by bounded scalar search (independent of the solver)."""
    best = minimize_scalar(
        lambda g: -dual_along(g), bounds=(0, 1), method="bounded", options={"xatol": 1e-12}
    )
    return best.x, -best.fun


@pytest.mark.parametrize("kind", ["dense", "rbf"])
@pytest.mark.parametrize("sigma", [0.0, 0.1])
@pytest.mark.parametrize("name", ["max_hinge", "usunier", "weighted_topk"])
def test_lsfw_step_maximizes_the_dual_along_the_fw_direction(name, sigma, kind, rng):
    """The step LSFW takes (FullBatchFW.step) is the exact line search of §1.7."""
    problem = MulticlassDual(operator(kind), Y0, LOSSES[name], lam=LAM, smoothing=sigma)
    At, S = _random_feasible_iterate(problem, rng)
    U, _, _ = problem.direction(At, S)
    dA = U - At
    iterate = FullBatchFW(problem, At.copy(), S.copy())
    gamma = iterate.step(1)

    def dual_along(g):  # scores recomputed from scratch, not the solver's update
        return problem.dual(At + g * dA, problem.scores(At + g * dA))

    best_x, best_value = _best_step(dual_along)
    assert 0 < gamma <= 1 and abs(gamma - best_x) <= 1e-6
    np.testing.assert_allclose(iterate.At, At + gamma * dA, rtol=0, atol=1e-12)
    np.testing.assert_allclose(iterate.S, problem.scores(iterate.At), rtol=1e-10, atol=1e-12)
    assert problem.dual(iterate.At, iterate.S) >= best_value - 1e-12


@pytest.mark.parametrize("kind", ["dense", "rbf"])
@pytest.mark.parametrize("sigma", [0.0, 0.1])
@pytest.mark.parametrize("name", ["max_hinge", "usunier", "weighted_topk"])
def test_block_step_maximizes_the_dual_along_its_block(name, sigma, kind, rng):
    """The block step BCFW takes (fw_block_step, §3.9 on §1's dual) is the exact
    line search of the full dual restricted to the block direction."""
    from .block_steps import fw_block_step

    problem = MulticlassDual(operator(kind), Y0, LOSSES[name], lam=LAM, smoothing=sigma)
    At, S = _random_feasible_iterate(problem, rng)
    K_diag = problem.op.diag()
    for i in rng.permutation(N)[:5]:
        g = problem.C[i] + S[i] + sigma * At[i]
        q = K_diag[i] / problem.scale + sigma
        _, d = fw_block_step(problem.loss, g.copy(), At[i].copy(), Y0[i], q, gamma_std=1.0)
        gamma, delta = fw_block_step(problem.loss, g.copy(), At[i].copy(), Y0[i], q)

        def dual_along(t, i=i, d=d):
            A = At.copy()
            A[i] += t * d
            return problem.dual(A, problem.scores(A))

        best_x, best_value = _best_step(dual_along)
        assert abs(gamma - best_x) <= 1e-6
        np.testing.assert_allclose(delta, gamma * d, rtol=0, atol=1e-15)
        assert dual_along(gamma) >= best_value - 1e-12


# -- certificates and convergence ------------------------------------------------------------------


@pytest.mark.cvxpy
@pytest.mark.parametrize("solver", ["lsfw", "stdfw", "bcfw", "pg"])
def test_reported_gap_bounds_primal_suboptimality(solver):
    P_star = reference_value("usunier", "rbf", 0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        res = solve_multiclass(
            operator("rbf"),
            Y0,
            loss=LOSSES["usunier"],
            lam=LAM,
            solver=solver,
            tol=0.0,
            max_iter=10 if solver == "bcfw" else 60,
            random_state=1,
        )
    h = res.history
    assert np.all(h["primal"] - P_star <= h["gap"] + 1e-9)
    assert np.all(h["dual"] <= P_star + 1e-9)
    assert np.all(h["primal"] >= P_star - 1e-9)


def _iterations_to(op, loss, solver, tol, sigma=0.0):
    res = solve_multiclass(
        op,
        Y0,
        loss=loss,
        lam=0.1,
        smoothing=sigma,
        solver=solver,
        tol=absolute(tol),
        max_iter=50_000,
    )
    assert res.converged
    return res.n_iter


# LSFW needs fewer iterations than StdFW to gap 1e-4 for the top-k family (λ = 0.1);
# exceptions (the hinge losses, where exact line search zig-zags) are recorded in
# docs/benchmarks/multiclass.md and checked in the next test.
@pytest.mark.parametrize(
    "name, kind, sigma",
    [
        ("weighted_topk", "dense", 0.0),
        ("weighted_usunier", "rbf", 0.0),
        ("topk_hinge", "rbf", 0.0),
        ("weighted_topk", "rbf", 0.1),
        ("weighted_usunier", "dense", 0.1),
    ],
)
def test_lsfw_needs_fewer_iterations_than_stdfw(name, kind, sigma):
    op = operator(kind)
    assert _iterations_to(op, LOSSES[name], "lsfw", 1e-4, sigma) < _iterations_to(
        op, LOSSES[name], "stdfw", 1e-4, sigma
    )


def test_lsfw_vs_stdfw_exception_max_hinge_is_recorded():
    """Known exception: for the max hinge (λ = 0.1, RBF) StdFW is faster than LSFW.

    Numbers pinned loosely so a change in either solver is noticed.
    """
    op = operator("rbf")
    ls = _iterations_to(op, LOSSES["max_hinge"], "lsfw", 1e-4)
    std = _iterations_to(op, LOSSES["max_hinge"], "stdfw", 1e-4)
    assert 1000 < std < ls < 5000


@pytest.mark.parametrize("sigma", [0.0, 0.1])
@pytest.mark.parametrize("name", list(LOSSES))
def test_lsfw_dual_is_monotone(name, sigma):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        res = solve_multiclass(
            operator("rbf"),
            Y0,
            loss=LOSSES[name],
            lam=0.1,
            smoothing=sigma,
            tol=absolute(1e-6),
            max_iter=300,
        )
    dual = res.history["dual"]
    assert np.all(np.diff(dual) >= -1e-12 * np.maximum(1, np.abs(dual[1:])))
    assert np.all(res.history["gap"] >= -1e-12)


def test_bcfw_features_equal_kernel_iterates():
    """BCFW with explicit features (W kept, O(d·m) steps) = BCFW on the Gram XXᵀ."""
    Xs = operator("sparse").X
    kw = dict(
        loss=LOSSES["weighted_usunier"],
        lam=0.3,
        smoothing=0.05,
        solver="bcfw",
        tol=0.0,
        max_iter=5,
        random_state=3,
        keep_best=False,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = solve_multiclass(Features(Xs), Y0, **kw)
        b = solve_multiclass(Gram((Xs @ Xs.T).toarray()), Y0, **kw)
        c = solve_multiclass(Features(Xs.toarray()), Y0, **kw)
    np.testing.assert_allclose(a["A"], b["A"], atol=1e-10)
    np.testing.assert_allclose(a["A"], c["A"], atol=1e-10)
    np.testing.assert_allclose(a["S"], b["S"], atol=1e-10)
    np.testing.assert_allclose(a.history["gap"], b.history["gap"], atol=1e-10)


def test_scores_are_kept_exactly():
    """The incrementally updated S equals K Aᵀ/(λn) recomputed."""
    op = operator("rbf")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for solver in ("lsfw", "stdfw", "bcfw", "pg"):
            res = solve_multiclass(
                op, Y0, loss=LOSSES["topk_hinge"], lam=0.2, solver=solver, tol=0.0, max_iter=40
            )
            np.testing.assert_allclose(res["S"], op.dense() @ res["A"].T / (0.2 * N), atol=1e-10)


def test_warm_start_from_previous_solution_with_new_lambda():
    op = operator("rbf")
    first = solve_multiclass(
        op, Y0, loss=LOSSES["usunier"], lam=0.2, tol=absolute(1e-4), max_iter=10_000
    )
    cold = solve_multiclass(
        op, Y0, loss=LOSSES["usunier"], lam=0.25, tol=absolute(1e-4), max_iter=10_000
    )
    warm = solve_multiclass(
        op,
        Y0,
        loss=LOSSES["usunier"],
        lam=0.25,
        tol=absolute(1e-4),
        max_iter=10_000,
        A_init=first["A"],
    )
    assert warm.converged and warm.n_iter < cold.n_iter
    assert abs(warm.primal - cold.primal) <= warm.gap + cold.gap
    with pytest.raises(ValueError, match="A_init must have shape"):
        solve_multiclass(op, Y0, A_init=np.zeros((N, M)))


def test_float32_gram_is_not_upcast_and_agrees():
    K = rbf_kernel(X0, gamma=GAMMA)
    r64 = solve_multiclass(Gram(K), Y0, loss=LOSSES["max_hinge"], lam=1.0, tol=absolute(1e-4))
    r32 = solve_multiclass(
        Gram(K.astype(np.float32)), Y0, loss=LOSSES["max_hinge"], lam=1.0, tol=absolute(1e-4)
    )
    assert r32.converged and abs(r32.primal - r64.primal) < 1e-3


def test_not_converged_warns_with_gap_tol_and_remedy():
    rule = r"duality gap .* before its stopping rule \(gap \+ rounding <= tol=1e-09\).*increase max_iter"
    with pytest.warns(ConvergenceWarning, match=rule):
        res = solve_multiclass(operator("rbf"), Y0, lam=0.1, tol=absolute(1e-9), max_iter=5)
    assert not res.converged and np.isfinite(res.gap)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(lam=0.0), "lam must be > 0"),
        (dict(lam=-1.0), "lam must be > 0"),
        (dict(smoothing=-0.1), "smoothing must be >= 0"),
        (dict(solver="newton"), "solver must be one of"),
        (dict(loss=TopKHinge(5)), "smaller than the number of classes"),
        (dict(solver="pg", smoothing=0.1), "smoothing=0 only"),
    ],
)
def test_solver_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        solve_multiclass(operator("rbf"), Y0, **kwargs)


def test_single_class_and_label_shape_errors():
    with pytest.raises(ValueError, match="at least 2 classes"):
        MulticlassDual(operator("rbf"), np.zeros(N, dtype=int))
    with pytest.raises(ValueError, match="y must have shape"):
        MulticlassDual(operator("rbf"), Y0[:-1])
    with pytest.raises(TypeError, match="KernelOperator"):
        MulticlassDual(np.eye(N), Y0)


def test_block_iterate_runs_standard_rule_and_perm_sampling():
    problem = MulticlassDual(operator("dense"), Y0, LOSSES["max_hinge"], lam=LAM)
    At, S = problem.start()
    it = BlockFW(problem, At, S, rule="standard", random_state=0, sample="perm")
    cert0 = it.certificate()
    for t in range(20):
        it.step(t)
    assert it.certificate().gap < cert0.gap


# -- compiled passes (numba) on every backend --------------------------------------------------


def _bcfw_run(op, loss, sigma=0.0, passes=15, **kw):
    """A BCFW run of ``passes`` passes (budget only: no stopping, the last iterate)."""
    args = dict(
        loss=loss,
        lam=0.3,
        smoothing=sigma,
        solver="bcfw",
        tol=0.0,
        max_iter=passes,
        random_state=3,
        keep_best=False,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return solve_multiclass(op, Y0, **{**args, **kw})


def _assert_same_run(fast, slow, atol=1e-12):
    np.testing.assert_allclose(fast["A"], slow["A"], rtol=0, atol=atol)
    np.testing.assert_allclose(fast["S"], slow["S"], rtol=0, atol=atol)
    np.testing.assert_allclose(fast.history["gap"], slow.history["gap"], rtol=0, atol=atol)
    np.testing.assert_allclose(
        fast.history["step"], slow.history["step"], rtol=0, atol=atol, equal_nan=True
    )


def _backend(name):
    """``(operator, the float64 Gram of its kernel)`` of each kind of backend."""
    from kernfw.kernels import make_operator
    from kernfw.operators import MultiKernel

    K, X32 = operator("rbf").K, X0.astype(np.float32)
    Xs = operator("sparse").X
    if name == "features":
        return Features(X0), Gram(X0 @ X0.T)
    if name == "sparse features":
        return Features(Xs), Gram((Xs @ Xs.T).toarray())
    if name == "float32 features":
        X64 = X32.astype(np.float64)
        return Features(X32), Gram(X64 @ X64.T)
    if name == "float32 gram":
        return Gram(K.astype(np.float32)), Gram(K.astype(np.float32).astype(np.float64))
    function = make_operator(X0, "rbf", gamma=GAMMA, backend="function", cache_size=0)
    if name == "function":
        return function, Gram(K)
    return MultiKernel([Gram(K), function], [0.25, 0.75]), Gram(K)


#: BCFW settings: every block step, averaging, shrinking of blocks and classes, rounds
_SETTINGS = [
    dict(loss=LOSSES["max_hinge"], shrink_classes=True, check_every="auto", sample="perm"),
    dict(loss=LOSSES["structured_hinge"], smoothing=0.1, block_step="pairwise"),
    dict(loss=LOSSES["usunier"], smoothing=0.1, block_step="fw", averaging=True, check_every=3),
    dict(loss=LOSSES["topk_hinge"], sample="perm"),
    dict(loss=LOSSES["weighted_usunier"], smoothing=0.1, shrinking=False),
]


@pytest.mark.parametrize(
    "backend",
    ["features", "sparse features", "float32 features", "float32 gram", "function", "multi"],
)
def test_bcfw_on_every_backend_equals_the_gram_run(backend):
    """Features (dense, CSR, float32), a float32 Gram, an on-the-fly kernel and a
    combination of kernels: the compiled passes take the same steps as on the float64
    Gram of the same kernel, with every block step, averaging and shrinking."""
    op, gram = _backend(backend)
    for settings in _SETTINGS:
        fast = _bcfw_run(op, passes=6, **settings)
        if backend == "float32 features" or settings.get("block_step") == "pairwise":
            # rounding-level differences change discrete choices (ties of pairwise steps,
            # a float32 diagonal): the certificate holds on the Gram of the kernel
            sigma = settings.get("smoothing", 0.0)
            problem = MulticlassDual(gram, Y0, settings["loss"], lam=0.3, smoothing=sigma)
            assert problem.objectives(fast["A"].T.copy()).gap == pytest.approx(fast.gap, rel=1e-6)
        else:
            _assert_same_run(fast, _bcfw_run(gram, passes=6, **settings), atol=1e-9)
        assert fast.gap < 0.5 * fast.history["gap"][0]  # it did move


@pytest.mark.parametrize("sigma", [0.0, 0.1])
@pytest.mark.parametrize("name", ["max_hinge", "structured_hinge"])
def test_hinge_certificate_equals_the_lmo_loop(rng, name, sigma):
    """The hinges' one-sweep certificate = the general loop of every loss (LMO vertex,
    then the sums) at random scores with ties: Φ, block gaps and sums bit for bit, the
    magnitude ``Σ M_i`` (two terms added in another order) to 1e-15."""
    lib = pytest.importorskip("kernfw.solvers.multiclass._numba")
    problem = MulticlassDual(operator("dense"), Y0, LOSSES[name], lam=LAM, smoothing=sigma)
    spec = BlockFW(problem, *problem.start()).spec
    At = rng.dirichlet(np.ones(problem.m), size=problem.n) - np.eye(problem.m)[Y0]
    S = np.round(rng.normal(size=At.shape), 1)  # ties among the margins
    S[:5] = 0.0  # blocks whose every margin is the cost
    hinge = lib._FAMILIES[lib.EXACT, True].certify(S, At, spec)
    general = lib._FAMILIES[lib.EXACT, False].certify(S, At, spec)
    np.testing.assert_array_equal(hinge[0], general[0])
    np.testing.assert_array_equal(hinge[1], general[1])
    assert hinge[2][:5] == general[2][:5]
    np.testing.assert_allclose(hinge[2][5], general[2][5], rtol=1e-15)


def test_shrinking_visits_fewer_blocks_and_reaches_the_same_optimum():
    """Active-set passes: same certified optimum, fewer block visits, exact certificates."""
    op = operator("dense")
    problem = MulticlassDual(op, Y0, LOSSES["max_hinge"], lam=0.5)
    results, visits = [], []
    for shrinking in (False, True):
        At, S = problem.start()
        it = BlockFW(problem, At, S, random_state=0, shrinking=shrinking)
        count = [0]
        blocks = it.blocks
        it.blocks = lambda: (order := blocks(), count.__setitem__(0, count[0] + order.size))[0]
        results.append(run(it, tol=absolute(1e-5), max_iter=5000, check_every=5))
        visits.append(count[0])
        assert results[-1].converged
    plain, shrunk = results
    assert abs(plain.primal - shrunk.primal) <= plain.gap + shrunk.gap
    assert visits[1] < 0.8 * visits[0]
    cert = problem.objectives(shrunk["A"].T.copy())  # the reported gap is the full one
    assert cert.gap == pytest.approx(shrunk.gap, rel=1e-9, abs=1e-14)
    assert 0 < it.active.size < N


def test_compiled_lmo_equals_lmo_row_with_ties(rng):
    """The compiled LMO (stable order, ties to the smaller index) = each loss's ``lmo_row``."""
    lib = pytest.importorskip("kernfw.solvers.multiclass._numba")
    for name, loss in LOSSES.items():
        kind, k, rho, r = lib.loss_code(loss, M)
        idx, beta = np.empty(r, dtype=np.int64), np.empty(M)
        for _ in range(40):
            a = rng.integers(-2, 3, M).astype(float) / 2  # many ties and zeros
            lib._lmo(a, kind, k, rho, r, idx, beta)
            np.testing.assert_array_equal(beta, loss.lmo_row(a), err_msg=f"{name} at {a}")


# -- block steps: exact sub-problem, pairwise, any operator ---------------------------------------


def _random_hinge_block(rng, m=6):
    """A random block ``α_i = Σ_j β_j (e_y − e_j)`` of the hinge domain and a gradient."""
    yi = int(rng.integers(m))
    beta = rng.dirichlet(np.ones(m)) * rng.uniform(0.2, 1.0)
    beta[rng.random(m) < 0.4] = 0.0  # some classes at the bound 0
    beta[yi] = 0.0
    alpha = -beta
    alpha[yi] = beta.sum()
    return rng.normal(size=m), alpha, yi


@pytest.mark.cvxpy
def test_exact_block_step_equals_the_block_qp_optimum(rng):
    """The exact block solve = cvxpy's minimizer of the block QP over the hinge domain."""
    import cvxpy as cp

    from .block_steps import exact_block_step

    checked = 0
    for _trial in range(12):
        g, alpha, yi = _random_hinge_block(rng)
        q = float(rng.uniform(0.05, 5.0))
        m = g.size
        a = cp.Variable(m)
        upper = np.zeros(m)
        upper[yi] = 1.0
        obj = g @ (a - alpha) + q / 2 * cp.sum_squares(a - alpha)
        prob = cp.Problem(cp.Minimize(obj), [cp.sum(a) == 0, a <= upper])
        prob.solve(solver="CLARABEL", tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
        step, delta, _ = exact_block_step(g.copy(), alpha, yi, q)
        new = alpha + delta
        assert abs(new.sum()) <= 1e-12 and np.all(new <= upper + 1e-15)
        np.testing.assert_allclose(new, a.value, atol=1e-7)
        value = g @ delta + q / 2 * delta @ delta
        assert value <= prob.value + 1e-10
        assert step == pytest.approx(0.5 * np.abs(delta).sum())
        checked += step > 0
    assert checked >= 10  # the blocks moved


def test_exact_block_step_leaves_an_optimal_block_alone(rng):
    from .block_steps import exact_block_step

    g, alpha, yi = _random_hinge_block(rng)
    step, delta, _ = exact_block_step(g.copy(), alpha, yi, 0.7)
    step2, delta2, _ = exact_block_step(g + 0.7 * delta, alpha + delta, yi, 0.7)
    assert step > 0 and step2 <= 1e-12 and np.abs(delta2).max() <= 1e-12


def _random_block(rng, loss, m=M, draws=3):
    """A block gradient and a feasible block: ``α = (1ᵀβ) e_y − β``, ``β`` a mean of
    ``draws`` LMO vertices of ``B`` (so on a face of ``A_i``, not at a vertex)."""
    yi = int(rng.integers(m))
    beta = np.zeros(m)
    for _ in range(draws):
        a = rng.normal(size=m)
        a[yi] = 0.0
        beta += loss.lmo_row(a) / draws
    alpha = -beta
    alpha[yi] += beta.sum()
    return rng.normal(scale=2.0, size=m), alpha, yi


@pytest.mark.cvxpy
@pytest.mark.parametrize("name", list(LOSSES))
def test_polytope_block_step_equals_the_block_qp_optimum(name, rng):
    """The exact block step of every loss (math.md §1.14) = cvxpy's minimizer of the
    block QP over ``A_i``, for curvatures from 1e-3 to 3 (small ``q``: long steps)."""
    from kernfw.reference import multiclass_block_qp
    from kernfw.solvers.multiclass._lmo import loss_code

    from .block_steps import polytope_block_step

    loss = LOSSES[name]
    moved = 0
    for trial in range(10):
        g, alpha, yi = _random_block(rng, loss)
        q = (1e-3, 0.05, 1.0, 3.0)[trial % 4]
        step, delta, gap = polytope_block_step(loss_code(loss, M), g, alpha, yi, q)
        ref = multiclass_block_qp(g, alpha, yi, q, loss)
        value = g @ delta + q / 2 * delta @ delta
        assert abs(value - ref["value"]) <= 1e-9 * max(1.0, abs(ref["value"]))
        new = alpha + delta
        assert abs(new.sum()) <= 1e-12 and np.all(np.delete(new, yi) <= 0.0)
        # the solution is unique (strictly convex): the same point as cvxpy's
        np.testing.assert_allclose(new, ref["alpha"], atol=1e-6)
        assert gap == pytest.approx(loss.value((g - g[yi])[None])[0] + g @ alpha, abs=1e-12)
        assert step == pytest.approx(0.5 * np.abs(delta).sum())
        moved += step > 0
    assert moved >= 8


@pytest.mark.parametrize("name", ["topk_hinge", "usunier", "weighted_topk", "weighted_usunier"])
def test_polytope_block_step_is_optimal_by_its_fw_gap_and_stays_put(name, rng):
    """At the step's point the block QP's FW gap (over the LMO vertex) is at rounding
    level, and a second step from there does not move (the step is exact, not a
    descent step)."""
    from kernfw.solvers.multiclass._lmo import loss_code

    from .block_steps import polytope_block_step

    loss = LOSSES[name]
    code = loss_code(loss, M)
    for _trial in range(20):
        g, alpha, yi = _random_block(rng, loss)
        q = float(rng.uniform(0.01, 3.0))
        step, delta, _ = polytope_block_step(code, g, alpha, yi, q)
        grad, new = g + q * delta, alpha + delta
        u = -loss.lmo_row(grad - grad[yi])
        u[yi] -= u.sum()
        assert grad @ (new - u) <= 1e-10
        step2, delta2, _ = polytope_block_step(code, grad, new, yi, q)
        assert np.abs(delta2).max() <= 1e-9


@pytest.mark.cvxpy
@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_biased_projections_equal_the_cvxpy_qp(k, rng):
    """The biased projections of math.md §1.14, ``min (q/2)‖b‖² + (q/2)(1ᵀb)² − ⟨a, b⟩``,
    as QPs: onto the capped simplex ``{0 ≤ b ≤ 1/k, 1ᵀb ≤ 1}`` and onto the top-(k−1)
    simplex ``{b ≥ 0, 1ᵀb ≤ (k−1)/k, b_j ≤ 1ᵀb/(k−1)}`` (k ≥ 3; the top-k hinge's step
    when the Usunier one leaves its polytope)."""
    import cvxpy as cp

    from kernfw.solvers.multiclass._block_qp import (
        capped_simplex_step,
        shifted_margins,
        topk_simplex_step,
    )

    m = 6
    for trial in range(12):
        g = rng.normal(scale=(0.3, 1.0, 3.0)[trial % 3], size=m)
        q = (0.01, 0.2, 1.0, 4.0)[trial % 4]
        yi = trial % m
        a, order, b = np.empty(m), np.empty(m, dtype=np.int64), np.empty(m)
        count = shifted_margins(g, np.zeros(m), yi, q, a, order)
        x = cp.Variable(m - 1)
        objective = q / 2 * cp.sum_squares(x) + q / 2 * cp.square(cp.sum(x)) - np.delete(a, yi) @ x
        sets = {"capped": [x >= 0, x <= 1.0 / k, cp.sum(x) <= 1]}
        if k >= 3:
            sets["topk"] = [x >= 0, cp.sum(x) <= (k - 1) / k, (k - 1) * x <= cp.sum(x)]
        for name, constraints in sets.items():
            if name == "capped":
                capped_simplex_step(a, order, count, q, 1.0 / k, b)
            else:
                topk_simplex_step(a, order, count, q, k, b)
            prob = cp.Problem(cp.Minimize(objective), constraints)
            prob.solve(solver="CLARABEL", tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
            mine = np.delete(b, yi)
            assert b[yi] == 0.0
            np.testing.assert_allclose(mine, x.value, atol=1e-7)
            value = q / 2 * mine @ mine + q / 2 * mine.sum() ** 2 - np.delete(a, yi) @ mine
            assert value <= prob.value + 1e-10


@pytest.mark.parametrize("m", [4, 6, 12])
def test_simplex_projections_equal_the_minimum_norm_point(m, rng):
    """The biased projections onto the capped simplex (Usunier) and the top-k simplex
    (top-k hinge, math.md §1.14) = Wolfe's minimum-norm point on the same polytope (the
    weighted loss with ρ = (1/k, …, 1/k, 0, …)), for every k, including k = m − 1, and
    the top-k polytope's constraints hold."""
    from kernfw.solvers.multiclass._lmo import loss_code

    from .block_steps import polytope_block_step

    for k in range(1, m):
        rho = np.r_[np.full(k, 1.0 / k), np.zeros(m - k)]
        for loss, same in (
            (TopKHinge(k), WeightedTopKHinge(rho)),
            (Usunier(k), WeightedUsunier(rho)),
        ):
            for trial in range(40):
                g, alpha, yi = _random_block(rng, loss, m, draws=1 + trial % 3)
                g *= (0.1, 1.0, 3.0)[trial % 3]
                q = (1e-3, 0.05, 0.3, 1.0, 5.0)[trial % 5]
                _, delta, _ = polytope_block_step(loss_code(loss, m), g, alpha, yi, q)
                _, ref, _ = polytope_block_step(loss_code(same, m), g, alpha, yi, q)
                value, best = (g @ d + q / 2 * d @ d for d in (delta, ref))
                assert value <= best + 1e-10 * max(1.0, abs(best))
                np.testing.assert_allclose(delta, ref, atol=1e-7)
                b = -np.delete(alpha + delta, yi)
                assert b.min() >= 0 and b.sum() <= 1 + 1e-12 and b.max() <= 1 / k + 1e-12
                if loss.name == "topk_hinge" and k > 1:
                    assert b.max() * (k - 1) <= b.sum() + 1e-12


def test_class_shrinking_drops_classes_and_keeps_the_optimum():
    """Exact steps with shrinking of inactive classes: classes leave the blocks between
    certificates, the certificate brings them back, the optimum is the same."""
    op = operator("sparse")
    problem = MulticlassDual(op, Y0, LOSSES["structured_hinge"], lam=0.1)
    results = []
    for shrink in (False, True):
        it = BlockFW(
            problem,
            *problem.start(),
            random_state=0,
            sample="perm",
            shrinking=True,
            shrink_classes=shrink,
        )
        if shrink:
            it.step(0)
            assert it.n_classes.min() < M  # some classes left
            it.certificate()
            assert np.all(it.n_classes == M)
        results.append(run(it, tol=absolute(1e-8), max_iter=20000, check_every=5))
        assert results[-1].converged
    assert abs(results[0].primal - results[1].primal) <= 2e-8
    np.testing.assert_allclose(results[0]["S"], results[1]["S"], atol=1e-5)


def test_compiled_csr_pass_equals_the_gram_run_on_long_rows():
    """The CSR pass sums the scores of four classes per sweep over the row and updates
    ``W`` two moved classes per sweep: rows of 0 to 25 nonzeros (every remainder mod 4), 7 classes, class
    shrinking (gathered classes) and adaptive rounds — the same run as on the Gram."""
    rng = np.random.default_rng(7)
    n, m, d = 40, 7, 30
    X = rng.normal(size=(n, d)) * (rng.uniform(size=(n, d)) < rng.uniform(0.0, 0.9, (n, 1)))
    X[0] = 0.0  # an empty row
    y = np.arange(n) % m
    args = dict(
        loss="max_hinge",
        lam=0.02,
        solver="bcfw",
        tol=1e-7,
        max_iter=30,
        random_state=1,
        keep_best=False,
        sample="perm",
        check_every="auto",
        shrink_classes=True,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fast = solve_multiclass(Features(sp.csr_matrix(X)), y, **args)
        slow = solve_multiclass(Gram(X @ X.T), y, **args)
    _assert_same_run(fast, slow, atol=1e-9)
    np.testing.assert_array_equal(fast.history["pass"], slow.history["pass"])
    assert fast.gap < 0.01 * fast.history["gap"][0]


def test_sparse_row_scores_sum_in_entry_order(rng):
    """``_sparse_row_scores`` on a subset of classes = the left-to-right sums, bit for bit."""
    lib = pytest.importorskip("kernfw.solvers.multiclass._numba")
    W = rng.normal(size=(20, 6))
    cl = np.array([4, 1, 5, 0, 2, 3])
    for nnz in range(12):
        idx = np.sort(rng.choice(20, nnz, replace=False)).astype(np.int32)
        x = rng.normal(size=nnz)
        for nc in range(1, 7):  # groups of four classes and every remainder
            s = np.full(6, np.nan)
            lib._sparse_row_scores(0, nnz, idx, x, W, cl, nc, s)
            expected = np.zeros(nc)
            for p in range(nnz):
                expected += x[p] * W[idx[p], cl[:nc]]
            np.testing.assert_array_equal(s[:nc], expected)


def test_sparse_scores_sum_in_entry_order(rng):
    """The certificate's ``S = X W`` on CSR features = the left-to-right sums of each
    row, bit for bit, for 1 to 9 classes (groups of four and every remainder)."""
    lib = pytest.importorskip("kernfw.solvers.multiclass._numba")
    X = sp.random(30, 20, density=0.3, random_state=3, format="csr")
    X.indices = X.indices.astype(np.int32)
    for m in range(1, 10):
        W = rng.normal(size=(20, m))
        S = lib.sparse_scores(X.indptr, X.indices, X.data, W)
        for i in range(30):
            expected = np.zeros(m)
            for p in range(X.indptr[i], X.indptr[i + 1]):
                expected += X.data[p] * W[X.indices[p]]
            np.testing.assert_array_equal(S[i], expected)


def test_visit_helpers_without_reference_counting(monkeypatch):
    """The per-visit helpers compile without numba's reference counting when numba has
    the switch, and with the default options when it does not."""
    lib = pytest.importorskip("kernfw.solvers.multiclass._numba")
    from numba.core import cpu

    assert lib._visit_options() == {"_nrt": False}
    assert lib._exact_block.targetoptions.get("_nrt") is False
    monkeypatch.setattr(cpu, "CPUTargetOptions", type("Options", (), {}))  # no _nrt
    assert lib._visit_options() == {}


# -- adaptive certificates (check_every="auto") ---------------------------------------------------


def test_adaptive_rounds_certify_less_and_reach_the_same_optimum():
    """check_every="auto": fewer certificates than certifying every pass, the same
    certified optimum; the run ends converged only on a certified gap ≤ tol."""
    op = operator("sparse")
    kw = dict(
        loss=LOSSES["max_hinge"],
        lam=0.05,
        solver="bcfw",
        sample="perm",
        tol=absolute(1e-6),
        max_iter=5000,
        random_state=0,
    )
    every = solve_multiclass(op, Y0, check_every=1, **kw)
    auto = solve_multiclass(op, Y0, check_every="auto", **kw)
    assert every.converged and auto.converged
    assert auto.gap <= 1e-6 and np.all(auto.history["gap"][:-1] > 1e-6)
    assert abs(auto.primal - every.primal) <= auto.gap + every.gap
    assert len(auto.history["gap"]) < 0.5 * len(every.history["gap"])
    cert = MulticlassDual(op, Y0, LOSSES["max_hinge"], lam=0.05).objectives(auto["A"].T.copy())
    assert cert.gap == pytest.approx(auto.gap, rel=1e-9, abs=1e-14)


def test_adaptive_rounds_respect_the_pass_budget():
    """With "auto" the run stops when max_iter passes are spent, and n_iter counts passes."""
    op = operator("dense")
    for max_iter in (0, 1, 7):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            res = solve_multiclass(
                op,
                Y0,
                loss="max_hinge",
                lam=1e-3,
                solver="bcfw",
                tol=0.0,
                max_iter=max_iter,
                check_every="auto",
                random_state=0,
                shrinking=False,
            )
        passes = res.history["pass"][-1]
        assert res.status == "max_iter" and passes == max_iter == res.n_iter


class _OwnLoss(Usunier):
    """A loss that is not built in (no loss code): FW block steps only."""


def test_block_step_errors():
    problem = MulticlassDual(operator("dense"), Y0, LOSSES["usunier"], lam=LAM)
    At, S = problem.start()
    with pytest.raises(ValueError, match="need the max or structured hinge"):
        BlockFW(problem, At, S, block_step="pairwise")
    with pytest.raises(ValueError, match="block_step must be"):
        BlockFW(problem, At, S, block_step="newton")
    own = MulticlassDual(operator("dense"), Y0, _OwnLoss(3), lam=LAM)
    with pytest.raises(ValueError, match="exact block steps need a built-in loss"):
        BlockFW(own, *own.start(), block_step="exact")
    with pytest.raises(ValueError, match="fw, pairwise and exact block steps need a built-in"):
        BlockFW(own, *own.start())
    hinge = MulticlassDual(operator("dense"), Y0, LOSSES["max_hinge"], lam=LAM)
    assert BlockFW(hinge, *hinge.start()).block_step_rule == "exact"
    assert BlockFW(hinge, *hinge.start(), rule="standard").block_step_rule == "fw"
    assert BlockFW(problem, At, S).block_step_rule == "exact"
    assert BlockFW(problem, At, S, rule="standard").block_step_rule == "fw"


@pytest.mark.cvxpy
@pytest.mark.parametrize("block_step", ["pairwise", "exact"])
def test_block_steps_on_an_on_the_fly_kernel_reach_the_cvxpy_optimum(block_step):
    """Pairwise / exact block steps on a KernelFunction (columns only, nothing cached)."""
    from kernfw.kernels import make_operator

    op = make_operator(X0, "rbf", gamma=GAMMA, backend="function", cache_size=0)
    P_star = reference_value("structured_hinge", "rbf", 0.0)
    res = solve_multiclass(
        op,
        Y0,
        loss=LOSSES["structured_hinge"],
        lam=LAM,
        solver="bcfw",
        block_step=block_step,
        tol=absolute(1e-9),
        max_iter=3000,
        check_every=5,
        random_state=0,
    )
    assert res.converged and not res.history["oracle_calls"][0]
    assert abs(res.primal - P_star) <= 1e-7 * max(1.0, abs(P_star))
    assert np.all(np.diff(res.history["oracle_calls"]) > 0)


def test_averaging_certifies_the_averaged_iterate():
    """BCFW-wavg: the certificate is the one of the averaged (feasible) dual point."""
    problem = MulticlassDual(operator("dense"), Y0, LOSSES["max_hinge"], lam=LAM)
    runs = []
    for averaging in (True, False):
        with pytest.warns(ConvergenceWarning):
            runs.append(
                solve_multiclass(
                    operator("dense"),
                    Y0,
                    lam=LAM,
                    solver="bcfw",
                    block_step="fw",
                    averaging=averaging,
                    tol=0.0,
                    max_iter=30,
                    check_every=10,
                    random_state=0,
                    keep_best=False,
                )
            )
    res, plain = runs
    cert = problem.objectives(res["A"].T.copy())
    assert cert.gap == pytest.approx(res.gap, rel=1e-9)
    assert not np.allclose(res["A"], plain["A"])  # not the last iterate
    assert res.gap < res.history["gap"][0]


def test_solvers_use_the_operator_protocol_only():
    """No multi-class solver module imports a concrete operator (issue 13.2) and the
    solver modules do not import each other in a circle (13.3)."""
    import ast
    import pathlib

    import kernfw.solvers as solvers

    root = pathlib.Path(solvers.__file__).parent / "multiclass"
    concrete = {"Gram", "Features", "KernelFunction", "MultiKernel", "Normalized"}
    for name in ("iterate", "problem", "pg", "solve", "_numba"):
        tree = ast.parse((root / f"{name}.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and "operators" in (node.module or ""):
                assert not concrete & {a.name for a in node.names}, name
            if isinstance(node, ast.Attribute):
                assert node.attr not in ("is_sparse",), name
        imports = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        if name == "problem":
            assert not {"iterate", "pg", "solve"} & imports, name


# -- estimator ---------------------------------------------------------------------------------

from sklearn.base import clone  # noqa: E402
from sklearn.model_selection import cross_val_score, train_test_split  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

from kernfw import MultiClassSVM  # noqa: E402

# two checks turn the precomputed linear Gram indefinite (K − mean(K); K rounded to
# integers): kernfw rejects an indefinite Gram with NotPSDError (its dual is not concave)
_INDEFINITE_GRAM = dict.fromkeys(
    ("check_positive_only_tag_during_fit", "check_estimators_dtypes"),
    "the check passes an indefinite precomputed Gram (NotPSDError)",
)


# predict_proba is calibrated on internal folds drawn over the rows: repeated rows are
# other folds than one weighted row (as SVC(probability=True)); decision_function agrees
_PROBABILITY_FOLDS = dict.fromkeys(
    (
        "check_sample_weight_equivalence_on_dense_data",
        "check_sample_weight_equivalence_on_sparse_data",
    ),
    "probability=True calibrates on folds of rows: repeated rows change the folds",
)


@parametrize_with_checks(
    [
        # at the defaults: the checks' problems are small (at most 64 examples), solved to
        # the rounding floor past tol, so that weighted and repeated fits agree to 1e-7
        MultiClassSVM(),
        MultiClassSVM(kernel="linear"),
        MultiClassSVM(solver="lsfw"),
        # with the intercept: check_class_weight_classifiers' Gram (γ = 0.5 on blobs of
        # std 20) is nearly the identity, so only b can favour the weighted class
        MultiClassSVM(kernel="precomputed", fit_intercept=True),
        MultiClassSVM(max_iter=200, tol=1e-2, probability=True, random_state=0),
    ],
    expected_failed_checks=lambda est: (
        _INDEFINITE_GRAM
        if est.kernel == "precomputed"
        else (_PROBABILITY_FOLDS if est.probability else {})
    ),
)
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        check(estimator)


def test_digits_rbf_max_hinge_accuracy():
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X / 16, y, test_size=0.3, random_state=0, stratify=y)
    clf = MultiClassSVM(lam=1e-3, solver="bcfw", tol=2e-3, max_iter=200, random_state=0).fit(
        Xtr, ytr
    )
    assert clf.converged_ and clf.duality_gap_ <= 2e-3
    assert clf.score(Xte, yte) >= 0.98


def test_digits_subset_rbf_max_hinge_accuracy():
    """Fast version: 600 training digits, 0.96 held-out accuracy at least."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(
        X / 16, y, train_size=600, test_size=600, random_state=0, stratify=y
    )
    clf = MultiClassSVM(lam=1e-3, solver="bcfw", tol=2e-3, max_iter=200, random_state=0).fit(
        Xtr, ytr
    )
    assert clf.converged_
    assert clf.score(Xte, yte) >= 0.96


def _strings(y):
    return np.array(["cat", "dog", "emu", "fox", "gnu"])[y]


@pytest.mark.parametrize("solver", ["lsfw", "stdfw", "bcfw", "pg"])
def test_estimator_objective_equals_solver(solver):
    kw = dict(loss="usunier", k=3, lam=LAM, solver=solver, tol=1e-4, max_iter=5000, random_state=0,
              fit_intercept=True)  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf = MultiClassSVM(kernel="rbf", gamma=GAMMA, **kw).fit(X0, _strings(Y0))
    assert list(clf.classes_) == ["cat", "dog", "emu", "fox", "gnu"]
    assert clf.dual_coef_.shape == (M, N)
    S = clf.decision_function(X0)
    # the intercept of intercept_scaling s = 1: b = s² A1/(λn) (math.md §1.15)
    np.testing.assert_allclose(clf.intercept_, clf.dual_coef_.sum(axis=1) / (LAM * N))
    np.testing.assert_allclose(
        S, rbf_kernel(X0, gamma=GAMMA) @ clf.dual_coef_.T / (LAM * N) + clf.intercept_, atol=1e-10
    )
    assert clf.primal_objective_ - clf.dual_objective_ == pytest.approx(clf.duality_gap_, abs=1e-10)
    for key in ("iteration", "time", "primal", "dual", "gap", "step"):
        assert clf.history_[key].shape == clf.history_["gap"].shape


def test_estimator_inputs_agree_linear_sparse_precomputed_operator():
    y = _strings(Y0)
    kw = dict(lam=LAM, tol=1e-5, max_iter=100_000, loss="weighted_topk", rho=RHO, solver="lsfw",
              fit_intercept=True)  # fmt: skip
    dense = MultiClassSVM(kernel="linear", **kw).fit(X0, y)
    sparse = MultiClassSVM(kernel="linear", **kw).fit(sp.csr_matrix(X0), y)
    pre = MultiClassSVM(kernel="precomputed", **kw).fit(X0 @ X0.T, y)
    oper = MultiClassSVM(kernel=Features(X0), **kw).fit(X0, y)
    for other in (sparse, pre, oper):
        assert abs(other.primal_objective_ - dense.primal_objective_) < 2e-5
    assert dense.coef_.shape == (M, D)
    np.testing.assert_allclose(dense.coef_, dense.dual_coef_ @ X0 / (LAM * N))
    Xt = np.random.default_rng(5).normal(size=(7, D))
    S = dense.decision_function(Xt)
    np.testing.assert_allclose(sparse.decision_function(sp.csr_matrix(Xt)), S, atol=1e-3)
    np.testing.assert_allclose(pre.decision_function(Xt @ X0.T), S, atol=1e-3)
    np.testing.assert_allclose(oper.decision_function(Xt), S, atol=1e-3)
    assert not hasattr(pre, "coef_")
    assert pre.__sklearn_tags__().input_tags.pairwise
    assert not dense.__sklearn_tags__().input_tags.pairwise


def test_precomputed_cross_validation_slices_rows_and_columns():
    K = rbf_kernel(X0, gamma=GAMMA)
    y = _strings(np.arange(N) % 3)
    scores = cross_val_score(MultiClassSVM(kernel="precomputed", lam=0.1, tol=1e-3), K, y, cv=3)
    assert scores.shape == (3,)


def test_predict_topk_and_score():
    y = _strings(Y0)
    clf = MultiClassSVM(kernel="rbf", gamma=GAMMA, lam=0.05, tol=1e-4, max_iter=20_000)
    clf.fit(X0, y)
    top = clf.predict_topk(X0, 3)
    S = clf.decision_function(X0)
    assert top.shape == (N, 3)
    np.testing.assert_array_equal(top[:, 0], clf.predict(X0))
    np.testing.assert_array_equal(top, clf.classes_[np.argsort(-S, axis=1)[:, :3]])
    assert clf.score(X0, y) == np.mean(clf.predict(X0) == y)
    with pytest.raises(ValueError, match="k must be an integer"):
        clf.predict_topk(X0, M + 1)


def test_warm_start_refit_with_new_lambda():
    clf = MultiClassSVM(
        kernel="rbf",
        gamma=GAMMA,
        loss="topk_hinge",
        k=2,
        lam=0.2,
        tol=1e-4,
        max_iter=20_000,
        warm_start=True,
    ).fit(X0, Y0)
    cold = clone(clf).set_params(lam=0.25, warm_start=False).fit(X0, Y0)
    clf.set_params(lam=0.25).fit(X0, Y0)
    assert clf.converged_ and clf.n_iter_ < cold.n_iter_
    assert abs(clf.primal_objective_ - cold.primal_objective_) <= 2e-4
    # a different loss is not warm-started from an unrelated dual point
    clf.set_params(loss="max_hinge").fit(X0, Y0)
    assert clf.converged_


def test_estimator_warns_and_returns_best_iterate():
    clf = MultiClassSVM(lam=1e-3, tol=1e-8, max_iter=3)
    rule = (  # (X0 is a small problem: run on past tol, math.md §0)
        r"stopping rule \(gap \+ rounding <= tol\*\|P\| with tol=1e-08, run on to the "
        r"rounding floor\).*To converge, .*smaller C"
    )
    with pytest.warns(ConvergenceWarning, match=rule):
        clf.fit(X0, Y0)
    assert not clf.converged_ and clf.duality_gap_ > 1e-8 * clf.primal_objective_


def test_verbose_and_sklearn_callbacks(capsys):
    MultiClassSVM(lam=0.5, verbose=1, tol=1e-3).fit(X0, Y0)
    assert "[MultiClassSVM] it" in capsys.readouterr().err
    ProgressBar = pytest.importorskip("sklearn.callback").ProgressBar  # scikit-learn >= 1.9
    clf = MultiClassSVM(lam=0.5, tol=1e-3)
    clf.set_callbacks(ProgressBar())
    clf.fit(X0, Y0)
    assert clf.converged_


def test_pickle_roundtrip():
    import pickle

    clf = MultiClassSVM(lam=0.5, tol=1e-3).fit(X0, _strings(Y0))
    again = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(again.predict(X0), clf.predict(X0))


@pytest.mark.parametrize(
    "params, match",
    [
        (dict(loss="topk_hinge", k=5), "smaller than the number of classes"),
        (dict(loss="usunier", k=9), "smaller than the number of classes"),
        (dict(loss="weighted_topk", rho=[0.1, 0.5, 0.3, 0.1, 0.0]), "nonincreasing"),
        (dict(loss="weighted_usunier", rho=[0.5, 0.3, 0.3, 0.1, 0.1]), "rho_m must be 0"),
        (dict(loss="weighted_usunier", rho=[0.5, 0.3, 0.0]), "length 3 but there are 5"),
        (dict(loss="weighted_topk"), "needs rho"),
        (dict(loss="structured_hinge", cost=np.ones((5, 5))), "zero diagonal"),
        (dict(loss="structured_hinge", cost=np.ones((4, 4))), "4 columns"),
        (dict(loss="structured_hinge", cost=np.ones((7, 5))), r"shape \(m, m\)"),
        (dict(lam=0.0), "lam"),
        (dict(lam=-1.0), "lam"),
        (dict(smoothing=-0.5), "smoothing"),
        (dict(solver="pg", smoothing=0.1), "smoothing=0 only"),
        (dict(solver="newton"), "solver"),
    ],
)
def test_estimator_bad_input(params, match):
    with pytest.raises(ValueError, match=match):
        MultiClassSVM(**params).fit(X0, Y0)


def test_fewer_than_two_classes():
    with pytest.raises(ValueError, match="class"):
        MultiClassSVM().fit(X0, np.zeros(N))


def test_operator_kernel_length_mismatch():
    with pytest.raises(ValueError, match="kernel operator has n=30"):
        MultiClassSVM(kernel=Features(X0)).fit(X0[:10], Y0[:10])


@pytest.mark.slow
def test_ctrl_c_in_compiled_passes_is_a_keyboard_interrupt(tmp_path):
    """SIGINT during compiled BCFW passes ends as KeyboardInterrupt (exit status 130, the
    process ends by SIGINT), not as a SystemError: the passes run in chunks, so Python regains
    control between them."""
    import os
    import signal
    import subprocess
    import sys
    import time

    script = tmp_path / "long_bcfw.py"
    script.write_text(
        "import numpy as np\n"
        "from kernfw.operators import Features\n"
        "from kernfw.solvers.multiclass import solve_multiclass\n"
        "rng = np.random.default_rng(0)\n"
        "X = rng.normal(size=(20000, 200)); y = rng.integers(0, 10, 20000)\n"
        "solve_multiclass(Features(X[:2000]), y[:2000], lam=1.0, solver='bcfw', max_iter=1)\n"
        "print('running', flush=True)\n"
        "solve_multiclass(Features(X), y, lam=1e-7, solver='bcfw', tol=0, max_iter=10**6,\n"
        "                 check_every=10**6, shrinking=False)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout.readline().strip() == "running"
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode in (130, -signal.SIGINT), err  # a shell shows 130
    assert "KeyboardInterrupt" in err and "SystemError" not in err


@pytest.mark.cvxpy
def test_pg_certifies_its_gap_as_documented():
    """``solver="pg"`` keeps its iterate dual feasible: its finite gap bounds P − P* (cvxpy
    confirms it) and it stops on ``tol``; the docs said it certifies nothing (gap inf)."""
    from pathlib import Path

    from sklearn.datasets import load_iris

    from kernfw import MultiClassSVM
    from kernfw.reference import compare

    X, y = load_iris(return_X_y=True)
    X, y = X[::3], y[::3]
    report = compare(MultiClassSVM(solver="pg", max_iter=20000), X, y, rtol=1e-2)
    est = report.estimator
    assert est.converged_ and np.isfinite(est.duality_gap_)
    assert 0 < est.duality_gap_ <= 1e-3 * est.primal_objective_  # tol = rtol / 10
    assert report.verified, report.reason  # |P − P*| within the certified gap
    root = Path(__file__).resolve().parents[2]
    math_text = " ".join((root / "docs" / "math.md").read_text().split())
    guide = " ".join((root / "docs" / "user_guide.md").read_text().split())
    assert "PG reports the primal $P$ only: no certified gap" not in math_text
    assert "projected-subgradient baseline; no certificate" not in guide
    assert "certifies its gap" in guide and "certifies its gap" in MultiClassSVM.__doc__
