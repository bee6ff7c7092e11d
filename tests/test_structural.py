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
from kernfw.solvers.structural import (
    BCFW,
    StructuredProblem,
    multiclass_kernel_bcfw,
    structural_bcfw,
    structural_fw,
)
from kernfw.structured import Chain, Matching, MultiClass, StructuredModel


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        yield


def multiclass_data(n=30, m=4, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = rng.integers(0, m, size=n)
    return X, y


def chain_data():
    return make_chains(8, n_states=3, n_features=4, length=(2, 4), noise=1.0, random_state=0)


def assert_certified(result, p_star, gap_max):
    """math.md §6: |P − P*| ≤ max(gap, 1e-7) + 1e-6|P*|, D ≤ P* + 1e-8, gap ≤ gap_max."""
    assert result.gap <= gap_max
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
        result = structural_fw(model, X, y, MC_LAM, max_passes=50000, tol=1e-4)
    else:
        result = structural_bcfw(model, X, y, MC_LAM, averaging=solver == "bcfw-wavg",
                                 max_passes=50000, tol=1e-4, gap_every=10, random_state=0)
    assert result.converged
    assert_certified(result, ref["primal"], 1e-4)
    assert_history_bounds(result, ref["primal"])


@pytest.mark.cvxpy
def test_multiclass_pairwise_reaches_cvxpy_optimum_linearly(multiclass_reference):
    X, y, model, ref = multiclass_reference
    result = multiclass_kernel_bcfw(Features(X), y, MC_LAM, pairwise=True, max_passes=3000,
                                    tol=1e-9, gap_every=10, random_state=0)
    assert result.converged and result.n_iter < 1000
    assert abs(result.primal - ref["primal"]) <= 1e-8
    assert_history_bounds(result, ref["primal"])
    W = (Features(X).primal(result["dual_coef"])).T
    np.testing.assert_allclose(W.ravel(), ref["w"], atol=1e-4)
    plain = multiclass_kernel_bcfw(Features(X), y, MC_LAM, max_passes=result.n_iter, tol=0,
                                   gap_every=result.n_iter, random_state=0)
    assert plain.gap > 100 * max(result.gap, 1e-10)        # FW block steps: sublinear


@pytest.mark.cvxpy
def test_label_costs_reach_cvxpy_optimum():
    """Structured hinge with a cost matrix Δ: pairwise and BCFW against cvxpy."""
    from kernfw.reference import structural_primal

    X, y = multiclass_data(n=24, m=3, d=4, seed=4)
    cost = np.array([[0.0, 1.0, 3.0], [1.0, 0.0, 0.5], [2.0, 0.5, 0.0]])
    ref = structural_primal(MultiClass(3, cost=cost).initialize(X, y), X, y, MC_LAM)
    pairwise = StructuredSVM(MultiClass(3, cost=cost), lam=MC_LAM, solver="pairwise",
                             max_passes=3000, tol=1e-9, random_state=0).fit(X, y)
    assert abs(pairwise.primal_objective_ - ref["primal"]) <= 1e-8
    np.testing.assert_allclose(pairwise.coef_, ref["w"], atol=1e-4)
    bcfw = StructuredSVM(MultiClass(3, cost=cost), lam=MC_LAM, max_passes=5000, tol=1e-4,
                         gap_every=10, random_state=0).fit(X, y)
    assert bcfw.converged_
    assert abs(bcfw.primal_objective_ - ref["primal"]) <= bcfw.duality_gap_ + 1e-6


@pytest.mark.cvxpy
def test_kernel_bcfw_with_rbf_kernel_function_reaches_cvxpy_optimum():
    from kernfw.reference import factor_gram, structural_primal

    X, y = multiclass_data(n=40, m=3, d=3, seed=1)
    op = KernelFunction(X, "rbf", gamma=0.5, cache_size=0)       # nothing cached: K never stored
    F = factor_gram(Gram(op.dense()).dense())
    ref = structural_primal(MultiClass(3).initialize(F, y), F, y, 0.05)
    result = multiclass_kernel_bcfw(op, y, 0.05, pairwise=True, max_passes=3000, tol=1e-9,
                                    gap_every=10, random_state=0)
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
        result = structural_fw(model, X, Y, 1.0, max_passes=20000, tol=1e-4)
    else:
        result = structural_bcfw(model, X, Y, 1.0, averaging=solver == "bcfw-wavg",
                                 sample="perm", max_passes=20000, tol=1e-4, gap_every=10,
                                 random_state=0)
    assert result.converged
    assert_certified(result, ref["primal"], 1e-4)
    assert_history_bounds(result, ref["primal"])


@pytest.mark.cvxpy
def test_matching_bcfw_reaches_cvxpy_optimum():
    from kernfw.reference import structural_objective, structural_primal

    rng = np.random.default_rng(5)
    Y = [rng.permutation(4) for _ in range(6)]
    X = [rng.normal(size=(4, 4, 3)) + 1.5 * np.eye(4)[y][:, :, None] * [1.0, 0.5, 0.0]
         for y in Y]
    model = Matching().initialize(X, Y)
    ref = structural_primal(model, X, Y, 0.5)
    result = structural_bcfw(model, X, Y, 0.5, averaging=False, max_passes=20000, tol=1e-4,
                             gap_every=10, random_state=0)
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
    svm = StructuredSVM(model, lam=0.3, solver="fw", max_passes=20000, tol=1e-4).fit(list(X), Y)
    ref = structural_primal(Sign().initialize(list(X), Y), list(X), Y, 0.3)
    assert svm.converged_
    assert abs(svm.primal_objective_ - ref["primal"]) <= svm.duality_gap_ + 1e-6
    assert model.size_joint_feature is None       # the estimator worked on a copy


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

        best = minimize_scalar(lambda g: -dual(g), bounds=(0.0, 1.0), method="bounded",
                               options={"xatol": 1e-12})
        w_before, ell_before = iterate.w.copy(), iterate.ell
        gamma = iterate.block_step(i)
        if z @ z > 1e-12:                                  # otherwise D is flat along it
            assert gamma == pytest.approx(best.x, abs=1e-6)
            checked += 1
        assert problem.dual(iterate.w, iterate.ell) >= -best.fun - 1e-12
        assert problem.dual(iterate.w, iterate.ell) >= problem.dual(w_before, ell_before) - 1e-15
    assert checked >= problem.n // 2


def test_kernel_bcfw_equals_explicit_bcfw_on_linear_features():
    X, y = multiclass_data()
    explicit = structural_bcfw(MultiClass(4), X, y, 0.1, averaging=True, max_passes=40,
                               gap_every=4, random_state=3)
    kernel = multiclass_kernel_bcfw(Features(X), y, 0.1, averaging=True, max_passes=40,
                                    gap_every=4, random_state=3)
    W = Features(X).primal(kernel["dual_coef"]).T
    np.testing.assert_allclose(W.ravel(), explicit["w"], atol=1e-12)
    for key in ("primal", "dual", "gap", "oracle_calls"):
        np.testing.assert_allclose(kernel.history[key], explicit.history[key], atol=1e-12)


def test_kernel_backends_agree():
    X, y = multiclass_data(n=25, m=3, d=4, seed=2)
    runs = [multiclass_kernel_bcfw(op, y, 0.3, pairwise=True, max_passes=500, tol=1e-10,
                                   gap_every=5, random_state=0)
            for op in (Gram(X @ X.T), Features(X), KernelFunction(X, "linear", cache_size=0),
                       KernelFunction(X, "linear"))]                   # cached columns reused
    for r in runs:
        assert r.converged
        np.testing.assert_allclose(r["S"], runs[0]["S"], atol=1e-6)   # the optimal scores


def test_same_random_state_same_iterates():
    X, Y = chain_data()
    a = structural_bcfw(Chain(3), X, Y, 0.1, max_passes=6, gap_every=2, random_state=7)
    b = structural_bcfw(Chain(3), X, Y, 0.1, max_passes=6, gap_every=2, random_state=7)
    c = structural_bcfw(Chain(3), X, Y, 0.1, max_passes=6, gap_every=2, random_state=8)
    np.testing.assert_array_equal(a["w"], b["w"])
    np.testing.assert_array_equal(a.history["primal"], b.history["primal"])
    assert not np.array_equal(a["w"], c["w"])
    e1 = StructuredSVM(Chain(3), lam=0.1, max_passes=6, random_state=1).fit(X, Y)
    e2 = StructuredSVM(Chain(3), lam=0.1, max_passes=6, random_state=1).fit(X, Y)
    np.testing.assert_array_equal(e1.coef_, e2.coef_)


def test_history_counts_passes_and_oracle_calls():
    X, Y = chain_data()
    result = structural_bcfw(Chain(3), X, Y, 0.1, sample="perm", max_passes=9, tol=0,
                             gap_every=3, random_state=0)
    h = result.history
    np.testing.assert_array_equal(h["iteration"], [0, 3, 6, 9])
    np.testing.assert_array_equal(h["oracle_calls"], [0, 24, 48, 72])
    np.testing.assert_array_equal(h["pass"], [0, 3, 6, 9])
    assert np.all(np.isfinite(result["block_gaps"]))      # perm visits every block
    fw = structural_fw(Chain(3), X, Y, 0.1, max_passes=4, tol=0)
    np.testing.assert_array_equal(fw.history["pass"], [0, 1, 2, 3, 4])


def test_fw_line_search_beats_standard_step():
    X, y = multiclass_data()
    ls = structural_fw(MultiClass(4), X, y, 0.1, max_passes=200, tol=0)
    std = structural_fw(MultiClass(4), X, y, 0.1, step="standard", max_passes=200, tol=0)
    assert ls.gap < std.gap
    assert np.all(np.diff(ls.history["dual"]) >= -1e-12)      # exact line search: monotone dual


def test_bcfw_standard_step_runs():
    X, y = multiclass_data()
    result = structural_bcfw(MultiClass(4), X, y, 0.1, step="standard", max_passes=20,
                             random_state=0)
    assert result.gap < result.history["gap"][0]


def test_bad_solver_arguments():
    X, y = multiclass_data()
    with pytest.raises(ValueError, match="lam"):
        structural_bcfw(MultiClass(4), X, y, 0.0)
    with pytest.raises(ValueError, match="step"):
        structural_fw(MultiClass(4), X, y, 0.1, step="exact")
    with pytest.raises(ValueError, match="sample"):
        structural_bcfw(MultiClass(4), X, y, 0.1, sample="cyclic")
    with pytest.raises(ValueError, match="gap_every"):
        structural_bcfw(MultiClass(4), X, y, 0.1, gap_every=0)
    with pytest.raises(ValueError, match="labels"):
        multiclass_kernel_bcfw(Features(X), y + 10, 0.1, n_classes=4)


# -- SSG baseline -------------------------------------------------------------------------------

def test_ssg_first_step_and_run():
    from kernfw.solvers.subgradient import StructuralSSG, structural_ssg

    X, y = multiclass_data()
    problem = StructuredProblem(MultiClass(4), X, y, 0.1)
    ssg = StructuralSSG(problem, random_state=0)
    i = int(np.random.default_rng(0).integers(0, problem.n))
    ssg.block_step(i)                                           # γ = 1: w = ψ_i(ŷ)/λ
    model = problem.model
    y_hat = model.loss_augmented_decode(X[i], y[i], np.zeros(problem.dim))
    psi = model.joint_feature(X[i], y[i]) - model.joint_feature(X[i], y_hat)
    np.testing.assert_allclose(ssg.w, psi / 0.1)

    fw = multiclass_kernel_bcfw(Features(X), y, 0.1, pairwise=True, max_passes=1000, tol=1e-9,
                                random_state=0)
    for averaging in (False, True):
        result = structural_ssg(MultiClass(4), X, y, 0.1, averaging=averaging, max_passes=100,
                                gap_every=20, random_state=0)
        assert result.gap == np.inf and result.n_iter == 100
        assert 0 <= result.primal - fw.primal < 0.05
    projected = structural_ssg(MultiClass(4), X, y, 0.1, project=True, max_passes=10,
                               random_state=0)
    assert np.linalg.norm(projected["w_last"]) <= np.sqrt(1 / 0.1) + 1e-12


# -- estimator --------------------------------------------------------------------------------

def test_estimator_fits_chains():
    X, Y = make_chains(40, n_states=3, n_features=4, length=(3, 6), noise=0.5,
                       random_state=1)
    svm = StructuredSVM(Chain(3), lam=0.05, max_passes=20, gap_every=4, random_state=0)
    assert svm.fit(X, Y) is svm
    pred = svm.predict(X)
    assert len(pred) == len(X) and all(len(p) == len(y) for p, y in zip(pred, Y))
    loss = np.mean([np.mean(p != y) for p, y in zip(pred, Y)])
    assert svm.score(X, Y) == pytest.approx(loss) and loss < 0.2
    assert svm.n_passes_ == 20 == svm.n_iter_
    assert svm.primal_objective_ == pytest.approx(svm.primal_objective(X, Y))
    assert svm.primal_objective_ - svm.dual_objective_ == pytest.approx(svm.duality_gap_)
    assert {"oracle_calls", "pass", "gap", "primal"} <= set(svm.history_)
    assert svm.coef_.shape == (svm.model_.size_joint_feature,)


@pytest.mark.parametrize("solver", ["fw", "bcfw", "pairwise", "ssg"])
def test_estimator_solvers_agree_on_multiclass(solver):
    X, y = multiclass_data()
    ref = StructuredSVM(MultiClass(4), lam=0.1, solver="pairwise", max_passes=500, tol=1e-9,
                        random_state=0).fit(X, y)
    svm = StructuredSVM(MultiClass(4), lam=0.1, solver=solver, max_passes=300, tol=1e-4,
                        random_state=0).fit(X, y)
    assert svm.primal_objective_ - ref.primal_objective_ <= (
        svm.duality_gap_ if solver != "ssg" else 0.02) + 1e-9
    assert svm.primal_objective_ >= ref.primal_objective_ - 1e-9
    assert np.mean(svm.predict(X) == ref.predict(X)) > 0.9


def test_multiclass_svm_max_hinge_same_optimum():
    """§3.7: StructuredSVM(MultiClass(m), lam) and MultiClassSVM("max_hinge", lam) share P."""
    from kernfw import MultiClassSVM

    X, y = multiclass_data()
    structured = StructuredSVM(MultiClass(4), lam=0.1, solver="pairwise", max_passes=1000,
                               tol=1e-9, random_state=0).fit(X, y)
    mc = MultiClassSVM(loss="max_hinge", lam=0.1, kernel="linear", tol=1e-5,
                       max_iter=100000).fit(X, y)
    assert structured.duality_gap_ <= 1e-9 and mc.duality_gap_ <= 1e-5
    assert 0 <= mc.primal_objective_ - structured.primal_objective_ <= mc.duality_gap_ + 1e-9
    np.testing.assert_allclose(mc.coef_, structured.coef_.reshape(4, -1), atol=1e-3)
    bcfw = StructuredSVM(MultiClass(4), lam=0.1, solver="bcfw", averaging=False,
                         max_passes=5000, tol=1e-4, gap_every=10, random_state=0).fit(X, y)
    assert bcfw.converged_
    assert abs(bcfw.primal_objective_ - mc.primal_objective_) <= (
        bcfw.duality_gap_ + mc.duality_gap_)


def test_estimator_contract():
    X, y = multiclass_data()
    svm = StructuredSVM(MultiClass(4), lam=0.1, max_passes=5, random_state=0)
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


@pytest.mark.parametrize("params,match", [
    ({"lam": 0.0}, "lam"),
    ({"solver": "sgd"}, "solver"),
    ({"max_passes": -1}, "max_passes"),
    ({"gap_every": 0}, "gap_every"),
    ({"sample": "cyclic"}, "sample"),
    ({"model": object()}, "model"),
])
def test_estimator_bad_parameters(params, match):
    X, y = multiclass_data()
    with pytest.raises(ValueError, match=match):
        StructuredSVM(**{"model": MultiClass(4), **params}).fit(X, y)


def test_pairwise_needs_multiclass():
    X, Y = chain_data()
    with pytest.raises(ValueError, match="MultiClass"):
        StructuredSVM(Chain(3), solver="pairwise").fit(X, Y)


def test_verbose_prints_progress(capsys):
    X, y = multiclass_data()
    StructuredSVM(MultiClass(4), lam=0.1, max_passes=4, gap_every=2, verbose=1).fit(X, y)
    assert "StructuredSVM" in capsys.readouterr().err


def test_sklearn_callbacks_see_every_gap_computation():
    ProgressBar = pytest.importorskip("sklearn.callback").ProgressBar  # scikit-learn >= 1.9

    X, y = multiclass_data()
    svm = StructuredSVM(MultiClass(4), lam=0.1, max_passes=4, gap_every=2)
    svm.set_callbacks(ProgressBar())
    svm.fit(X, y)
    assert svm.n_passes_ == 4


def test_outputs_as_plain_lists():
    X, Y = chain_data()
    arrays = StructuredSVM(Chain(3), lam=0.1, max_passes=3, random_state=0).fit(X, Y)
    lists = StructuredSVM(Chain(3), lam=0.1, max_passes=3, random_state=0).fit(
        [x.tolist() for x in X], [y.tolist() for y in Y])
    np.testing.assert_array_equal(arrays.coef_, lists.coef_)
    assert lists.score(X, [y.tolist() for y in Y]) == arrays.score(X, Y)
