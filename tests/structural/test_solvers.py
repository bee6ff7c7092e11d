"""Structural SVM solvers and estimator (math.md §3) against cvxpy and against each other."""

import pickle
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.estimator_checks import (
    check_get_params_invariance,
    check_no_attributes_set_in_init,
    check_set_params,
)

from kernfw import StructuredSVM
from kernfw.datasets import make_chains
from kernfw.fw import Certificate
from kernfw.operators import Features, Gram, KernelFunction
from kernfw.solvers.multiclass import solve_multiclass
from kernfw.solvers.structural import (
    BCFW,
    StructuredProblem,
    solve_structural_bcfw,
    solve_structural_cutting_plane,
    solve_structural_fw,
)
from kernfw.structured import Chain, Matching, MultiClass, StructuredModel

#: a run stopped by its budget on purpose (fixed passes, tol=0): its ConvergenceWarning is expected
FIXED_BUDGET = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def multiclass_data(n=30, m=4, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = rng.integers(0, m, size=n)
    return X, y


def chain_data():
    return make_chains(8, n_states=3, n_features=4, length=(2, 4), noise=1.0, random_state=0)


def assert_certified(result, p_star, rtol):
    """math.md §6: |P − P*| ≤ max(gap, 1e-7) + 1e-6|P*|, D ≤ P* + 1e-8, gap ≤ rtol·|P|
    (``tol`` is the relative gap)."""
    assert result.gap <= rtol * abs(result.primal)
    assert abs(result.primal - p_star) <= max(result.gap, 1e-7) + 1e-6 * abs(p_star)
    assert result.dual <= p_star + 1e-8


def assert_history_bounds(result, p_star):
    """Every certified iterate: P − P* ≤ gap and D ≤ P*."""
    h = result.history
    assert np.all(h["primal"] - p_star <= h["gap"] + 1e-9)
    assert np.all(h["dual"] <= p_star + 1e-9)
    assert np.all(h["gap"] >= -1e-12)


# -- against cvxpy: multi-class -----------------------------------------------------------------

MC_LAM = 0.3


@pytest.fixture(scope="module")
def multiclass_reference():
    from kernfw.reference import structural_primal

    X, y = multiclass_data()
    model = MultiClass(4).initialize(X, y)
    return X, y, model, structural_primal(model, X, y, MC_LAM)


@pytest.mark.cvxpy
@pytest.mark.parametrize("solver", ["fw", "bcfw", "bcfw-wavg"])
def test_multiclass_fw_and_bcfw_reach_cvxpy_optimum(multiclass_reference, solver):
    X, y, model, ref = multiclass_reference
    if solver == "fw":
        result = solve_structural_fw(model, X, y, MC_LAM, max_iter=50000, tol=1e-4)
    else:
        result = solve_structural_bcfw(
            model,
            X,
            y,
            MC_LAM,
            averaging="weighted" if solver == "bcfw-wavg" else "none",
            max_iter=50000,
            tol=1e-4,
            check_every=10,
            random_state=0,
        )
    assert result.converged
    assert_certified(result, ref["primal"], 1e-4)
    assert_history_bounds(result, ref["primal"])


@pytest.mark.cvxpy
def test_multiclass_pairwise_reaches_cvxpy_optimum_linearly(multiclass_reference):
    """solver="pairwise" is the multi-class dual solver with pairwise block steps (§3.7, §3.9)."""
    X, y, model, ref = multiclass_reference
    svm = StructuredSVM(
        MultiClass(4),
        lam=MC_LAM,
        solver="pairwise",
        max_iter=3000,
        tol=1e-9,
        check_every=10,
        random_state=0,
    ).fit(X, y)
    assert svm.converged_ and svm.n_iter_ < 1000
    assert abs(svm.primal_objective_ - ref["primal"]) <= 1e-8
    assert np.all(svm.history_["primal"] - ref["primal"] <= svm.history_["gap"] + 1e-9)
    assert np.all(svm.history_["dual"] <= ref["primal"] + 1e-9)
    np.testing.assert_allclose(svm.coef_, ref["w"], atol=1e-4)
    from kernfw.reference import structural_objective

    assert structural_objective(model, X, y, MC_LAM, svm.coef_) == pytest.approx(
        svm.primal_objective_, abs=1e-10
    )  # coef_ is the certified point
    with pytest.warns(ConvergenceWarning, match="max_iter"):
        plain = solve_structural_bcfw(
            MultiClass(4),
            X,
            y,
            MC_LAM,
            averaging="none",
            max_iter=svm.n_iter_,
            tol=0,
            check_every=svm.n_iter_,
            random_state=0,
        )
    assert plain.gap > 100 * max(svm.duality_gap_, 1e-10)  # FW block steps: sublinear


@pytest.mark.cvxpy
def test_label_costs_reach_cvxpy_optimum():
    """Structured hinge with a cost matrix Δ: pairwise and BCFW against cvxpy."""
    from kernfw.reference import structural_primal

    X, y = multiclass_data(n=24, m=3, d=4, seed=4)
    cost = np.array([[0.0, 1.0, 3.0], [1.0, 0.0, 0.5], [2.0, 0.5, 0.0]])
    ref = structural_primal(MultiClass(3, cost=cost).initialize(X, y), X, y, MC_LAM)
    pairwise = StructuredSVM(
        MultiClass(3, cost=cost),
        lam=MC_LAM,
        solver="pairwise",
        max_iter=3000,
        tol=1e-9,
        random_state=0,
    ).fit(X, y)
    assert abs(pairwise.primal_objective_ - ref["primal"]) <= 1e-8
    np.testing.assert_allclose(pairwise.coef_, ref["w"], atol=1e-4)
    bcfw = StructuredSVM(
        MultiClass(3, cost=cost),
        lam=MC_LAM,
        solver="bcfw",
        max_iter=5000,
        tol=1e-4,
        check_every=10,
        random_state=0,
    ).fit(X, y)
    assert bcfw.converged_
    assert abs(bcfw.primal_objective_ - ref["primal"]) <= bcfw.duality_gap_ + 1e-6


@pytest.mark.cvxpy
def test_kernel_bcfw_with_rbf_kernel_function_reaches_cvxpy_optimum():
    from kernfw.reference import factor_gram, structural_primal

    X, y = multiclass_data(n=40, m=3, d=3, seed=1)
    op = KernelFunction(X, "rbf", gamma=0.5, cache_size=0)  # nothing cached: K never stored
    F = factor_gram(Gram(op.dense()).dense())
    ref = structural_primal(MultiClass(3).initialize(F, y), F, y, 0.05)
    result = solve_multiclass(
        op, y, lam=0.05, solver="bcfw", max_iter=3000, tol=1e-9, check_every=10, random_state=0
    )
    assert result.converged
    assert abs(result.primal - ref["primal"]) <= 1e-8
    assert op.misses > 0 and op.cache_info["cached"] == 0


# -- against cvxpy: chains and matchings ------------------------------------------------------------


@pytest.fixture(scope="module")
def chain_reference():
    from kernfw.reference import structural_primal

    X, Y = chain_data()
    model = Chain(3).initialize(X, Y)
    return X, Y, model, structural_primal(model, X, Y, 1.0)


@pytest.mark.cvxpy
@pytest.mark.parametrize("solver", ["fw", "bcfw", "bcfw-wavg"])
def test_chain_solvers_reach_cvxpy_optimum(chain_reference, solver):
    X, Y, model, ref = chain_reference
    if solver == "fw":
        result = solve_structural_fw(model, X, Y, 1.0, max_iter=20000, tol=1e-4)
    else:
        result = solve_structural_bcfw(
            model,
            X,
            Y,
            1.0,
            averaging="weighted" if solver == "bcfw-wavg" else "none",
            sample="perm",
            max_iter=20000,
            tol=1e-4,
            check_every=10,
            random_state=0,
        )
    assert result.converged
    assert_certified(result, ref["primal"], 1e-4)
    assert_history_bounds(result, ref["primal"])


@pytest.mark.cvxpy
def test_matching_bcfw_reaches_cvxpy_optimum():
    from kernfw.reference import structural_objective, structural_primal

    rng = np.random.default_rng(5)
    Y = [rng.permutation(4) for _ in range(6)]
    X = [rng.normal(size=(4, 4, 3)) + 1.5 * np.eye(4)[y][:, :, None] * [1.0, 0.5, 0.0] for y in Y]
    model = Matching().initialize(X, Y)
    ref = structural_primal(model, X, Y, 0.5)
    result = solve_structural_bcfw(
        model, X, Y, 0.5, averaging="none", max_iter=20000, tol=1e-4, check_every=10, random_state=0
    )
    assert result.converged
    assert_certified(result, ref["primal"], 1e-4)
    assert structural_objective(model, X, Y, 0.5, result["w"]) == pytest.approx(result.primal)


class Sign(StructuredModel):
    """A user model with only the required methods: y ∈ {−1, +1}, φ = y x / 2."""

    def joint_feature(self, x, y):
        return 0.5 * y * np.asarray(x, dtype=float)

    def loss(self, y_true, y):
        return float(y_true != y)

    def loss_augmented_decode(self, x, y_true, w):
        return max((-1, 1), key=lambda y: self.loss(y_true, y) + w @ self.joint_feature(x, y))

    def decode(self, x, w):
        return 1 if w @ x >= 0 else -1

    def labelings(self, x):
        return iter((-1, 1))


@pytest.mark.cvxpy
def test_user_model_is_a_binary_svm():
    from kernfw.reference import structural_primal

    X, y = multiclass_data(n=25, m=2, d=3, seed=3)
    Y = list(2 * y - 1)
    model = Sign()
    svm = StructuredSVM(model, lam=0.3, solver="lsfw", max_iter=20000, tol=1e-4).fit(list(X), Y)
    ref = structural_primal(Sign().initialize(list(X), Y), list(X), Y, 0.3)
    assert svm.converged_
    assert abs(svm.primal_objective_ - ref["primal"]) <= svm.duality_gap_ + 1e-6
    assert model.size_joint_feature is None  # the estimator worked on a copy


# -- identities and equivalences (no cvxpy) -----------------------------------------------------


def test_block_gaps_sum_to_the_duality_gap():
    X, Y = chain_data()
    problem = StructuredProblem(Chain(3), X, Y, 0.1)
    iterate = BCFW(problem, random_state=0)
    for t in range(7):
        iterate.step(t)
    gaps = np.array([iterate.block_direction(i)[0] for i in range(problem.n)])
    cert = iterate.certificate()
    assert np.all(gaps >= -1e-12)
    assert gaps.sum() == pytest.approx(cert.gap, abs=1e-12)
    assert isinstance(cert, Certificate) and cert.gap > 0


def test_block_step_is_the_exact_line_search():
    """The closed-form BCFW step maximizes D along the block direction (1-D numerical check)."""
    from scipy.optimize import minimize_scalar

    X, Y = chain_data()
    problem = StructuredProblem(Chain(3), X, Y, 0.1)
    iterate = BCFW(problem, random_state=0)
    iterate.step(0)
    iterate.step(1)
    n, lam = problem.n, problem.lam
    checked = 0
    for i in range(problem.n):
        gap, z, ds, loss_s = iterate.block_direction(i)

        def dual(gamma):
            w = iterate.w - gamma * z / (lam * n)
            return problem.dual(w, iterate.ell + gamma * (loss_s - iterate.block_loss[i]))

        best = minimize_scalar(
            lambda g: -dual(g), bounds=(0.0, 1.0), method="bounded", options={"xatol": 1e-12}
        )
        w_before, ell_before = iterate.w.copy(), iterate.ell
        gamma = iterate.block_step(i)
        if z @ z > 1e-12:  # otherwise D is flat along it
            assert gamma == pytest.approx(best.x, abs=1e-6)
            checked += 1
        assert problem.dual(iterate.w, iterate.ell) >= -best.fun - 1e-12
        assert problem.dual(iterate.w, iterate.ell) >= problem.dual(w_before, ell_before) - 1e-15
    assert checked >= problem.n // 2


def test_multiclass_dual_block_steps_equal_structural_bcfw():
    """§3.7: BCFW on MultiClass and the multi-class dual's FW block steps are the same method.

    The two are written independently (joint features and oracles here; the closed-form
    LMO and ``W = Xᵀ Aᵀ/(λn)`` there); with the same block order their iterates agree.
    """
    from kernfw.solvers.multiclass import BlockFW, MulticlassDual

    X, y = multiclass_data()
    lam = 0.1
    structural = BCFW(StructuredProblem(MultiClass(4), X, y, lam), random_state=3)
    dual = MulticlassDual(Features(X), y, "max_hinge", lam)
    block = BlockFW(dual, *dual.start(), random_state=3, block_step="fw")
    for t in range(40):
        structural.step(t)
        block.step(t)
    W = X.T @ block.At / (lam * len(y))  # (d, m)
    np.testing.assert_allclose(W.T.ravel(), structural.w, atol=1e-10)
    a, b = structural.certificate(), block.certificate()
    assert a.primal == pytest.approx(b.primal, abs=1e-10)
    assert a.dual == pytest.approx(b.dual, abs=1e-10)
    assert a.gap > 1e-6  # not trivially converged


@FIXED_BUDGET
def test_same_random_state_same_iterates():
    X, Y = chain_data()
    a = solve_structural_bcfw(Chain(3), X, Y, 0.1, max_iter=6, check_every=2, random_state=7)
    b = solve_structural_bcfw(Chain(3), X, Y, 0.1, max_iter=6, check_every=2, random_state=7)
    c = solve_structural_bcfw(Chain(3), X, Y, 0.1, max_iter=6, check_every=2, random_state=8)
    np.testing.assert_array_equal(a["w"], b["w"])
    np.testing.assert_array_equal(a.history["primal"], b.history["primal"])
    assert not np.array_equal(a["w"], c["w"])
    e1 = StructuredSVM(Chain(3), lam=0.1, max_iter=6, random_state=1).fit(X, Y)
    e2 = StructuredSVM(Chain(3), lam=0.1, max_iter=6, random_state=1).fit(X, Y)
    np.testing.assert_array_equal(e1.coef_, e2.coef_)


@FIXED_BUDGET
def test_history_counts_passes_and_oracle_calls():
    X, Y = chain_data()
    result = solve_structural_bcfw(
        Chain(3), X, Y, 0.1, sample="perm", max_iter=9, tol=0, check_every=3, random_state=0
    )
    h = result.history
    np.testing.assert_array_equal(h["iteration"], [0, 3, 6, 9])
    np.testing.assert_array_equal(h["oracle_calls"], [0, 24, 48, 72])
    np.testing.assert_array_equal(h["pass"], [0, 3, 6, 9])
    assert np.all(np.isfinite(result["block_gaps"]))  # perm visits every block
    fw = solve_structural_fw(Chain(3), X, Y, 0.1, max_iter=4, tol=0)
    np.testing.assert_array_equal(fw.history["pass"], [0, 1, 2, 3, 4])


@FIXED_BUDGET
def test_fw_line_search_beats_standard_step():
    X, y = multiclass_data()
    ls = solve_structural_fw(MultiClass(4), X, y, 0.1, max_iter=200, tol=0)
    std = solve_structural_fw(MultiClass(4), X, y, 0.1, step="standard", max_iter=200, tol=0)
    assert ls.gap < std.gap
    assert np.all(np.diff(ls.history["dual"]) >= -1e-12)  # exact line search: monotone dual


@FIXED_BUDGET
def test_bcfw_standard_step_runs():
    X, y = multiclass_data()
    result = solve_structural_bcfw(
        MultiClass(4), X, y, 0.1, step="standard", max_iter=20, random_state=0
    )
    assert result.gap < result.history["gap"][0]


def test_bad_solver_arguments():
    X, y = multiclass_data()
    with pytest.raises(ValueError, match="lam"):
        solve_structural_bcfw(MultiClass(4), X, y, 0.0)
    with pytest.raises(ValueError, match="step"):
        solve_structural_fw(MultiClass(4), X, y, 0.1, step="exact")
    with pytest.raises(ValueError, match="sample"):
        solve_structural_bcfw(MultiClass(4), X, y, 0.1, sample="cyclic")
    with pytest.raises(ValueError, match="check_every"):
        solve_structural_bcfw(MultiClass(4), X, y, 0.1, check_every=0)


# -- SSG baseline -------------------------------------------------------------------------------


def test_ssg_first_step_and_run():
    from kernfw.solvers.structural import StructuralSSG, solve_structural_ssg

    X, y = multiclass_data()
    problem = StructuredProblem(MultiClass(4), X, y, 0.1)
    ssg = StructuralSSG(problem, random_state=0)
    i = int(np.random.default_rng(0).integers(0, problem.n))
    ssg.block_step(i)  # γ = 1: w = ψ_i(ŷ)/λ
    model = problem.model
    y_hat = model.loss_augmented_decode(X[i], y[i], np.zeros(problem.dim))
    psi = model.joint_feature(X[i], y[i]) - model.joint_feature(X[i], y_hat)
    np.testing.assert_allclose(ssg.w, psi / 0.1)

    fw = solve_multiclass(
        Features(X), y, lam=0.1, solver="bcfw", max_iter=1000, tol=1e-9, random_state=0
    )
    for averaging in ("none", "weighted"):
        result = solve_structural_ssg(
            MultiClass(4),
            X,
            y,
            0.1,
            averaging=averaging,
            max_iter=100,
            check_every=20,
            random_state=0,
        )
        assert result.gap == np.inf and result.n_iter == 100
        assert 0 <= result.primal - fw.primal < 0.05
    projected = solve_structural_ssg(
        MultiClass(4), X, y, 0.1, project=True, max_iter=10, random_state=0
    )
    assert np.linalg.norm(projected["w_last"]) <= np.sqrt(1 / 0.1) + 1e-12
    with pytest.raises(ValueError, match="check_every"):
        solve_structural_ssg(MultiClass(4), X, y, 0.1, check_every=0)


# -- estimator --------------------------------------------------------------------------------


@FIXED_BUDGET
def test_estimator_fits_chains():
    X, Y = make_chains(40, n_states=3, n_features=4, length=(3, 6), noise=0.5, random_state=1)
    svm = StructuredSVM(Chain(3), lam=0.05, max_iter=20, check_every=4, random_state=0)
    assert svm.fit(X, Y) is svm
    pred = svm.predict(X)
    assert len(pred) == len(X) and all(len(p) == len(y) for p, y in zip(pred, Y))
    loss = np.mean([np.mean(p != y) for p, y in zip(pred, Y)])
    assert svm.task_loss(X, Y) == pytest.approx(loss) and loss < 0.2
    assert svm.score(X, Y) == pytest.approx(1.0 - loss)  # higher is better
    assert svm.n_iter_ == 20
    assert svm.primal_objective_ == pytest.approx(svm.primal_objective(X, Y))
    assert svm.lam_ == 0.05 and svm.n_features_in_ == 4 and svm.solver_ == "bcfw"
    assert {"oracle_calls", "pass", "gap", "primal"} <= set(svm.history_)
    assert svm.coef_.shape == (svm.model_.size_joint_feature,)


@pytest.mark.cvxpy
@pytest.mark.parametrize("solver", ["bcfw", "lsfw", "cutting_plane"])
@FIXED_BUDGET
def test_estimator_gap_bounds_the_suboptimality(chain_reference, solver):
    """Independent check of the certificate: ``P(coef_)`` by enumerating every labeling,
    ``P*`` from cvxpy; every certified iterate has ``P − P* ≤ gap`` and the bound is tight
    enough that half the gap would not be one."""
    from kernfw.reference import structural_objective

    X, Y, model, ref = chain_reference
    svm = StructuredSVM(
        Chain(3),
        lam=1.0,
        solver=solver,
        averaging="none",
        max_iter=12,
        tol=0.0,
        check_every=1,
        random_state=0,
    ).fit(X, Y)
    p_enum = structural_objective(model, X, Y, 1.0, svm.coef_)
    assert p_enum == pytest.approx(svm.primal_objective_, abs=1e-10)
    assert 0 <= p_enum - ref["primal"] <= svm.duality_gap_ + 1e-9
    assert svm.dual_objective_ <= ref["primal"] + 1e-9
    sub, gap = svm.history_["primal"] - ref["primal"], svm.history_["gap"]
    assert np.all(sub <= gap + 1e-9) and np.all(sub >= -1e-9)
    assert np.any(sub > 0.5 * gap)


@pytest.mark.cvxpy
def test_cutting_plane_reaches_cvxpy_optimum(multiclass_reference, chain_reference):
    cases = ((MultiClass(4), multiclass_reference, MC_LAM), (Chain(3), chain_reference, 1.0))
    for model, (X, Y, _, ref), lam in cases:
        result = solve_structural_cutting_plane(model, X, Y, lam, tol=1e-6, max_iter=500)
        assert result.converged
        assert_certified(result, ref["primal"], 1e-6)
        assert_history_bounds(result, ref["primal"])
        h = result.history
        np.testing.assert_array_equal(h["cuts"], np.arange(h["cuts"].size) + 1)
        assert np.all(np.diff(h["dual"]) >= -1e-9)  # the restricted duals only grow


def _far_from_the_origin():
    """issue 23: 100 points at N(100, 1) in two dimensions, binary labels, MultiClass(4)."""
    rng = np.random.RandomState(0)
    return rng.normal(loc=100, size=(100, 2)), rng.randint(0, 2, 100)


@pytest.mark.cvxpy
def test_cutting_plane_does_not_stall_far_from_the_origin():
    # once: the gap stayed at 0.062 from iteration 20 to 60 (objective 0.9602; cvxpy
    # 0.9483): the inner QP (away-step FW on Q = AAᵀ/(2λ), entries ~5e5) made no progress
    from kernfw.reference import structural_primal

    X, y = _far_from_the_origin()
    svm = StructuredSVM(MultiClass(4), solver="cutting_plane", max_iter=60, tol=1e-8).fit(X, y)
    p_star = structural_primal(svm.model_, X, y, svm.lam_)["primal"]
    assert p_star == pytest.approx(0.9483, abs=1e-4)
    assert svm.converged_ and svm.duality_gap_ <= 1e-8
    assert abs(svm.primal_objective_ - p_star) <= svm.duality_gap_ + 1e-6 * p_star
    gaps = np.asarray(svm.history_["gap"])
    assert gaps[20:].max(initial=0.0) < 0.062 and np.all(np.diff(svm.history_["dual"]) >= -1e-9)


@pytest.mark.cvxpy
@pytest.mark.parametrize(
    "shift, scale", [(0.0, 1.0), (1e4, 1.0), (0.0, 1e3), (0.0, 1e-3), (1e3, 10)]
)
def test_cutting_plane_reaches_cvxpy_on_shifted_and_scaled_data(shift, scale):
    from kernfw.reference import structural_primal

    X, y = multiclass_data(n=40, m=3, d=3, seed=1)
    X = (X + shift) * scale
    lam = 0.05
    result = solve_structural_cutting_plane(MultiClass(3), X, y, lam, tol=1e-7, max_iter=300)
    ref = structural_primal(MultiClass(3).initialize(X, y), X, y, lam)
    assert result.converged
    assert_certified(result, ref["primal"], 1e-7)
    assert_history_bounds(result, ref["primal"])


def test_cutting_plane_working_set_keeps_no_duplicate_and_drops_idle_cuts():
    from kernfw.solvers.structural import CuttingPlane, StructuredProblem

    X, y = multiclass_data()
    iterate = CuttingPlane(StructuredProblem(MultiClass(4), X, y, 0.3), max_idle=2)
    phi_hat, loss = iterate.problem.oracle_pass(iterate.w)
    assert iterate.add_cut(phi_hat, loss) and not iterate.add_cut(phi_hat, loss)
    assert iterate.b.size == 2
    iterate.beta = np.array([0.0, 1.0])  # the true-output cut ξ ≥ 0 idles ...
    iterate.idle = np.array([3, 0])
    iterate.drop_idle_cuts()  # ... and leaves after max_idle iterations
    assert iterate.b.size == 1 and iterate.b[0] == loss / 30 and iterate.beta.tolist() == [1.0]


def test_cutting_plane_check_estimator_far_from_the_origin():
    # once: check_estimator on this estimator ran past 5 minutes
    from sklearn.utils.estimator_checks import check_estimator

    # a given model keeps its joint features: the intercept for the class-weight check
    est = StructuredSVM(MultiClass(4), solver="cutting_plane", max_iter=60, fit_intercept=True)
    failed = [r for r in check_estimator(est, on_fail=None) if r["status"] == "failed"]
    assert not failed, failed[0]
    X, y = _far_from_the_origin()
    assert est.fit(X, y).converged_


def test_cutting_plane_estimator_matches_fw_within_gaps():
    X, y = multiclass_data()
    cp = StructuredSVM(MultiClass(4), lam=0.1, solver="cutting_plane", tol=1e-5).fit(X, y)
    fw = StructuredSVM(MultiClass(4), lam=0.1, solver="pairwise", tol=1e-8).fit(X, y)
    assert cp.converged_ and cp.duality_gap_ <= 1e-5
    assert abs(cp.primal_objective_ - fw.primal_objective_) <= cp.duality_gap_ + 1e-8
    assert cp.history_["pass"][-1] == cp.n_iter_


@pytest.mark.parametrize("solver", ["lsfw", "bcfw", "pairwise", "ssg"])
@FIXED_BUDGET
def test_estimator_solvers_agree_on_multiclass(solver):
    X, y = multiclass_data()
    ref = StructuredSVM(
        MultiClass(4), lam=0.1, solver="pairwise", max_iter=500, tol=1e-9, random_state=0
    ).fit(X, y)
    svm = StructuredSVM(
        MultiClass(4), lam=0.1, solver=solver, max_iter=300, tol=1e-4, random_state=0
    ).fit(X, y)
    assert (
        svm.primal_objective_ - ref.primal_objective_
        <= (svm.duality_gap_ if solver != "ssg" else 0.02) + 1e-9
    )
    assert svm.primal_objective_ >= ref.primal_objective_ - 1e-9
    assert np.mean(svm.predict(X) == ref.predict(X)) > 0.9


def test_multiclass_svm_max_hinge_same_optimum():
    """§3.7: StructuredSVM(MultiClass(m), lam) and MultiClassSVM("max_hinge", lam) share P."""
    from kernfw import MultiClassSVM

    X, y = multiclass_data()
    structured = StructuredSVM(
        MultiClass(4), lam=0.1, solver="pairwise", max_iter=1000, tol=1e-9, random_state=0
    ).fit(X, y)
    mc = MultiClassSVM(
        loss="max_hinge", lam=0.1, kernel="linear", fit_intercept=False, tol=1e-5, max_iter=100000
    ).fit(X, y)
    assert structured.duality_gap_ <= 1e-9 and mc.duality_gap_ <= 1e-5
    assert 0 <= mc.primal_objective_ - structured.primal_objective_ <= mc.duality_gap_ + 1e-9
    np.testing.assert_allclose(mc.coef_, structured.coef_.reshape(4, -1), atol=1e-3)
    bcfw = StructuredSVM(
        MultiClass(4),
        lam=0.1,
        solver="bcfw",
        averaging="none",
        max_iter=5000,
        tol=1e-4,
        check_every=10,
        random_state=0,
    ).fit(X, y)
    assert bcfw.converged_
    assert abs(bcfw.primal_objective_ - mc.primal_objective_) <= (
        bcfw.duality_gap_ + mc.duality_gap_
    )


@FIXED_BUDGET
def test_estimator_contract():
    X, y = multiclass_data()
    svm = StructuredSVM(MultiClass(4), lam=0.1, max_iter=5, random_state=0)
    check_no_attributes_set_in_init("StructuredSVM", svm)
    check_get_params_invariance("StructuredSVM", svm)
    check_set_params("StructuredSVM", svm)
    fitted = clone(svm).fit(X, y)
    restored = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(restored.predict(X), fitted.predict(X))
    assert not hasattr(svm, "coef_")
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        svm.predict(X)


@pytest.mark.parametrize(
    "params,match",
    [
        ({"lam": 0.0}, "lam"),
        ({"C": 0.0}, "C"),
        ({"solver": "sgd"}, "solver"),
        ({"solver": "fw"}, "solver"),
        ({"averaging": True}, "averaging"),
        ({"max_iter": -1}, "max_iter"),
        ({"check_every": 0}, "check_every"),
        ({"sample": "cyclic"}, "sample"),
        ({"model": object()}, "model"),
    ],
)
def test_estimator_bad_parameters(params, match):
    X, y = multiclass_data()
    with pytest.raises(ValueError, match=match):
        StructuredSVM(**{"model": MultiClass(4), **params}).fit(X, y)


def test_no_deprecated_names():
    for old in ("max_passes", "gap_every", "step"):
        with pytest.raises(TypeError, match=old):
            StructuredSVM(MultiClass(4), **{old: 4})


@FIXED_BUDGET
def test_C_gives_lam():
    X, y = multiclass_data()
    n = len(y)
    by_c = StructuredSVM(MultiClass(4), C=0.5, solver="bcfw", max_iter=5, random_state=0)
    by_lam = StructuredSVM(
        MultiClass(4), lam=1 / (0.5 * n), solver="bcfw", max_iter=5, random_state=0
    )
    assert by_c.fit(X, y).lam_ == pytest.approx(1 / (0.5 * n))
    np.testing.assert_allclose(by_c.coef_, by_lam.fit(X, y).coef_, rtol=1e-12)
    assert StructuredSVM(MultiClass(4), C=0.5, lam=0.3, max_iter=5).fit(X, y).lam_ == 0.3


@pytest.mark.parametrize("solver", ["lsfw", "bcfw"])
@FIXED_BUDGET
def test_standard_step_is_the_predefined_rule(solver):
    """solver="stdfw": γ_t = 2/(t+2); "stdbcfw": γ_k = 2n/(k+2n) (history step column:
    the mean block step of the pass); "lsfw" and "bcfw" take the exact steps."""
    X, y = multiclass_data()
    n = len(y)
    svm = StructuredSVM(
        MultiClass(4),
        lam=0.1,
        solver="std" + solver.removeprefix("ls"),
        max_iter=6,
        check_every=1,
        tol=0,
        random_state=0,
    ).fit(X, y)
    steps = svm.history_["step"][1:]
    if solver == "lsfw":
        expected = 2.0 / (np.arange(6) + 2.0)
    else:
        k = np.arange(6 * n).reshape(6, n)
        expected = (2.0 * n / (k + 2.0 * n)).mean(axis=1)
    np.testing.assert_allclose(steps, expected, rtol=1e-12)
    exact = StructuredSVM(
        MultiClass(4), lam=0.1, solver=solver, max_iter=6, check_every=1, tol=0, random_state=0
    ).fit(X, y)
    assert not np.allclose(exact.history_["step"][1:], expected)


def test_default_solver_and_score_on_multiclass():
    """Defaults pick the pairwise multi-class solver; ``score`` is the accuracy."""
    from sklearn.datasets import load_digits
    from sklearn.metrics import accuracy_score

    X, y = load_digits(return_X_y=True)
    X, y = X[:600], y[:600]
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        svm = StructuredSVM(MultiClass(10), random_state=0).fit(X, y)
    assert svm.solver_ == "pairwise" and svm.converged_ and svm.duality_gap_ <= svm.tol
    assert svm.lam_ == pytest.approx(1 / 600)
    assert svm.score(X, y) == pytest.approx(accuracy_score(y, svm.predict(X)))
    assert svm.n_features_in_ == 64


def _iris_far_from_the_origin():
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    return X + 100.0, y


def test_default_converges_far_from_the_origin():
    """The FW solvers crawl on iris + 100 (an ill-conditioned dual); the default hands over
    to the cutting plane and reaches its optimum, without a warning."""
    X, y = _iris_far_from_the_origin()
    reference = solve_structural_cutting_plane(MultiClass(3), X, y, 1 / 150, tol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        svm = StructuredSVM(MultiClass(3), random_state=0).fit(X, y)
    assert svm.solver_ == "cutting_plane" and svm.converged_
    assert svm.duality_gap_ <= 1e-2 * svm.primal_objective_
    assert reference.primal == pytest.approx(0.18551, abs=1e-4) and reference.converged
    assert 0 <= svm.primal_objective_ - reference.primal <= svm.duality_gap_ + 1e-9
    assert svm.primal_objective_ == pytest.approx(0.1868, abs=2e-3)


@FIXED_BUDGET
def test_pairwise_warning_names_the_estimator_and_its_parameters():
    X, y = _iris_far_from_the_origin()
    with pytest.warns(ConvergenceWarning) as record:
        StructuredSVM(MultiClass(3), solver="pairwise", max_iter=5, random_state=0).fit(X, y)
    message = str(record[0].message)
    assert "StructuredSVM solver='pairwise'" in message and "cutting_plane" in message
    for foreign in ("MultiClassSVM", "max_time", "smoothing"):
        assert foreign not in message


@FIXED_BUDGET
def test_sparse_input_multiclass_and_clear_error_for_chains():
    """Issue 12 reproducer: ``StructuredSVM(MultiClass(3)).fit(sp.csr_matrix(X), y)``."""
    import scipy.sparse as sp

    X, y = multiclass_data(m=3)
    X[np.abs(X) < 0.7] = 0.0
    for solver in ("bcfw", "lsfw", "pairwise", "cutting_plane", "ssg"):
        kw = dict(lam=0.1, solver=solver, max_iter=50, random_state=0)
        dense = StructuredSVM(MultiClass(3), **kw).fit(X, y)
        sparse = StructuredSVM(MultiClass(3), **kw).fit(sp.csr_matrix(X), y)
        bound = 0.02 if solver == "ssg" else dense.duality_gap_ + sparse.duality_gap_ + 1e-12
        assert abs(dense.primal_objective_ - sparse.primal_objective_) <= bound
        np.testing.assert_array_equal(sparse.predict(sp.csr_matrix(X)), sparse.predict(X))
    assert StructuredSVM(MultiClass(3)).fit(sp.csr_matrix(X), y).n_features_in_ == X.shape[1]
    Xc, Yc = chain_data()
    with pytest.raises(TypeError, match="sparse"):
        StructuredSVM(Chain(3)).fit([sp.csr_matrix(x) for x in Xc], Yc)
    with pytest.raises(TypeError, match="sparse"):
        StructuredSVM(Chain(3)).fit(sp.csr_matrix(np.vstack(Xc)), Yc)


def test_pairwise_needs_multiclass():
    X, Y = chain_data()
    with pytest.raises(ValueError, match="MultiClass"):
        StructuredSVM(Chain(3), solver="pairwise").fit(X, Y)


@FIXED_BUDGET
def test_verbose_prints_progress(capsys):
    X, y = multiclass_data()
    StructuredSVM(MultiClass(4), lam=0.1, max_iter=4, check_every=2, verbose=1).fit(X, y)
    assert "StructuredSVM" in capsys.readouterr().err


class _Recorder:
    """A scikit-learn fit callback that keeps the metadata of every finished task."""

    def __init__(self):
        self.rows = []

    def setup(self, estimator, context):
        pass

    def teardown(self, estimator, context):
        pass

    def on_fit_task_begin(self, estimator, context, **kwargs):
        pass

    def on_fit_task_end(self, estimator, context, *, metadata=None, **kwargs):
        if metadata and "gap" in metadata:
            self.rows.append(dict(metadata))
        return False


@pytest.mark.parametrize("solver", ["bcfw", "pairwise"])
@FIXED_BUDGET
def test_sklearn_callbacks_see_every_gap_computation(solver):
    ProgressBar = pytest.importorskip("sklearn.callback").ProgressBar  # scikit-learn >= 1.9

    X, y = multiclass_data()
    recorder = _Recorder()
    svm = StructuredSVM(MultiClass(4), lam=0.1, solver=solver, max_iter=6, check_every=2, tol=0)
    svm.set_callbacks(recorder, ProgressBar())
    svm.fit(X, y)
    assert svm.n_iter_ == 6
    assert [r["iteration"] for r in recorder.rows] == [0, 2, 4, 6]
    np.testing.assert_array_equal([r["gap"] for r in recorder.rows], svm.history_["gap"])
    np.testing.assert_array_equal([r["primal"] for r in recorder.rows], svm.history_["primal"])


@FIXED_BUDGET
def test_outputs_as_plain_lists():
    X, Y = chain_data()
    arrays = StructuredSVM(Chain(3), lam=0.1, max_iter=3, random_state=0).fit(X, Y)
    lists = StructuredSVM(Chain(3), lam=0.1, max_iter=3, random_state=0).fit(
        [x.tolist() for x in X], [y.tolist() for y in Y]
    )
    np.testing.assert_array_equal(arrays.coef_, lists.coef_)
    assert lists.score(X, [y.tolist() for y in Y]) == arrays.score(X, Y)


# -- the compiled chain core (kernfw.solvers.structural._numba) ----------------------------------


def _chain_iterates(compiled, averaging, step, passes=6):
    """BCFW passes on a chain problem: compiled, or the model's own block steps (the generic
    path of every other model)."""
    X, Y = make_chains(25, n_states=4, n_features=5, length=(1, 7), noise=1.0, random_state=3)
    problem = StructuredProblem(Chain(4), X, Y, 0.05)
    problem.chain = compiled
    iterate = BCFW(problem, averaging=averaging, step=step, random_state=0)
    for t in range(passes):
        iterate.step(t)
    problem.chain = True  # both certify with the compiled oracle pass
    return iterate


@pytest.mark.parametrize("averaging", [False, True])
@pytest.mark.parametrize("step", ["line_search", "standard"])
def test_compiled_chain_bcfw_equals_model_block_steps(averaging, step):
    """Same block order, same formulas: the iterates agree to rounding (not bit for bit:
    the compiled pass sums the node scores in another order and never forms z)."""
    ref = _chain_iterates(False, averaging, step)
    fast = _chain_iterates(True, averaging, step)
    scale = np.max(np.abs(ref.w))
    np.testing.assert_allclose(fast.w, ref.w, rtol=0, atol=1e-10 * scale)
    np.testing.assert_allclose(fast.stats, ref.stats, rtol=0, atol=1e-10)
    np.testing.assert_allclose(fast.block_loss, ref.block_loss, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fast.block_gaps, ref.block_gaps, rtol=0, atol=1e-10)
    assert fast.ell == pytest.approx(ref.ell, abs=1e-12)
    assert fast.k == ref.k and fast.oracle_calls == ref.oracle_calls
    a, b = fast.certificate(), ref.certificate()
    assert a.gap == pytest.approx(b.gap, rel=1e-9) and a.primal == pytest.approx(b.primal)
    if averaging:
        assert fast.average.k == ref.average.k
        np.testing.assert_allclose(fast.average["w"], ref.average["w"], atol=1e-10 * scale)


def test_compiled_chain_oracle_pass_equals_model_decoding():
    X, Y = make_chains(30, n_states=3, n_features=4, length=(1, 6), random_state=1)
    w = np.random.default_rng(0).normal(size=Chain(3).initialize(X, Y).size_joint_feature)
    problem = StructuredProblem(Chain(3), X, Y, 0.1)
    phi_c, loss_c = problem.oracle_pass(w)
    problem.chain = False  # the model's own decoding
    phi_n, loss_n = problem.oracle_pass(w)
    np.testing.assert_allclose(phi_c, phi_n, atol=1e-12)
    assert loss_c == pytest.approx(loss_n, abs=1e-12) and loss_n > 0


def test_compiled_core_serves_chain_models_only():
    X, Y = chain_data()
    assert StructuredProblem(Chain(3), X, Y, 0.1).chain
    assert not StructuredProblem(Matching(), *_matchings(), 0.1).chain
    assert not StructuredProblem(MultiClass(4), *multiclass_data(), 0.1).chain


def _matchings():
    rng = np.random.default_rng(5)
    Y = [rng.permutation(3) for _ in range(4)]
    X = [rng.normal(size=(3, 3, 2)) for _ in Y]
    return X, Y


# -- scikit-learn's estimator checks ----------------------------------------------------------------

from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402


# Without a model, or with a MultiClass one, the estimator is a classifier and runs the
# classifier checks (string labels, two classes, ...); the checks need 2-D X, so a Chain
# model cannot run them (its inputs are lists of sequences).  No check is expected to fail.
# The sample-weight checks compare a weighted fit with the fit on repeated rows to 1e-7:
# their problems are small (at most 64 examples), which every fit solves past tol to the
# rounding floor (math.md §0; the weighted problem of math.md §3.11 has one minimizer), at
# the defaults too.  The sublinear block solvers' weighted optimum is tested within the
# certified gaps (tests/structural/test_sample_weight.py).
@parametrize_with_checks(
    [
        StructuredSVM(),
        # a given model keeps its joint features (no intercept at "auto"); without one, a
        # linear model cannot favour a class on check_class_weight_classifiers' blobs
        StructuredSVM(MultiClass(4), solver="cutting_plane", fit_intercept=True, random_state=0),
        StructuredSVM(MultiClass(4), solver="pairwise", fit_intercept=True, random_state=0),
    ]
)
@FIXED_BUDGET
def test_sklearn_compatible(estimator, check):
    check(estimator)
