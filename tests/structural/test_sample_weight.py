"""Per-example weights of the structural SVM (math.md §3.11): every solver against cvxpy,
zero weights = removed examples, integer weights = repeated examples."""

import numpy as np
import pytest

from kernfw.datasets import make_chains
from kernfw.solvers.structural import (
    StructuredProblem,
    solve_structural_bcfw,
    solve_structural_cutting_plane,
    solve_structural_fw,
    solve_structural_ssg,
)
from kernfw.structured import Chain, Matching, MultiClass

LAM = 0.3


def multiclass_data(n=24, m=3, d=4, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, m, size=n)
    X = rng.normal(size=(n, d)) + np.eye(m, d)[y]
    return X, y


def weights(n, seed=1):
    return np.random.default_rng(seed).integers(0, 4, size=n).astype(float)


def chain_data():
    return make_chains(8, n_states=3, n_features=4, length=(2, 4), noise=1.0, random_state=0)


def matching_data():
    rng = np.random.default_rng(5)
    Y = [rng.permutation(3) for _ in range(6)]
    X = [rng.normal(size=(3, 3, 2)) + 1.5 * np.eye(3)[y][:, :, None] * [1.0, 0.5] for y in Y]
    return X, Y


def solve(name, model, X, Y, lam, c, tol=1e-6):
    if name == "fw":
        return solve_structural_fw(model, X, Y, lam, max_iter=20000, tol=tol, sample_weight=c)
    if name == "cutting_plane":
        return solve_structural_cutting_plane(
            model, X, Y, lam, max_iter=2000, tol=tol, sample_weight=c
        )
    return solve_structural_bcfw(
        model,
        X,
        Y,
        lam,
        averaging="none",
        max_iter=20000,
        tol=tol,
        check_every=10,
        random_state=0,
        sample_weight=c,
    )


#: the certified relative gaps asked of each solver (the FW solvers converge sublinearly)
TOL = {"fw": 1e-3, "bcfw": 3e-3, "cutting_plane": 1e-6}

CASES = {
    "multiclass": (lambda: MultiClass(3), multiclass_data),
    "chain": (lambda: Chain(3), chain_data),  # compiled BCFW passes
    "matching": (lambda: Matching(), matching_data),
}


@pytest.mark.cvxpy
@pytest.mark.parametrize("solver", ["fw", "bcfw", "cutting_plane"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_weighted_solvers_reach_the_weighted_cvxpy_optimum(case, solver):
    from kernfw.reference import structural_objective, structural_primal

    make_model, data = CASES[case]
    X, Y = data()
    c = weights(len(Y))
    model = make_model().initialize(X, Y)
    ref = structural_primal(model, X, Y, LAM, sample_weight=c)
    result = solve(solver, make_model(), X, Y, LAM, c, tol=TOL[solver])
    assert result.converged
    # P(w) − P* ≤ gap, D ≤ P*: the certificate holds for the weighted problem
    assert result.primal - ref["primal"] <= result.gap + 1e-7
    assert result.dual <= ref["primal"] + 1e-7
    assert result.gap <= TOL[solver] * result.primal
    assert structural_objective(model, X, Y, LAM, result["w"], sample_weight=c) == pytest.approx(
        result.primal, rel=1e-9
    )
    unweighted = structural_primal(model, X, Y, LAM)["primal"]
    assert abs(unweighted - ref["primal"]) > 2 * result.gap  # the weights change the problem


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("case", sorted(CASES))
def test_zero_and_integer_weights_equal_removed_and_repeated_examples(case):
    make_model, data = CASES[case]
    X, Y = data()
    c = weights(len(Y))
    rows = np.repeat(np.arange(len(Y)), c.astype(int))
    pick = (lambda Z: Z[rows]) if isinstance(X, np.ndarray) else (lambda Z: [Z[i] for i in rows])
    X_rep, Y_rep = pick(X), pick(Y) if not isinstance(Y, np.ndarray) else Y[rows]
    # the same problem up to the factor n/n_rep when λn is the same (λ = 1/(C n))
    lam, lam_rep = LAM / len(Y), LAM / rows.size
    weighted = solve("cutting_plane", make_model(), X, Y, lam, c, tol=1e-9)
    repeated = solve("cutting_plane", make_model(), X_rep, Y_rep, lam_rep, None, tol=1e-9)
    scale = rows.size / len(Y)
    bound = weighted.gap + repeated.gap * scale + 1e-12  # + rounding
    assert abs(weighted.primal - repeated.primal * scale) <= bound
    np.testing.assert_allclose(
        weighted["w"], repeated["w"], atol=1e-3 * np.abs(repeated["w"]).max()
    )
    bcfw = solve("bcfw", make_model(), X, Y, lam, c, tol=3e-3)
    assert abs(bcfw.primal - weighted.primal) <= bcfw.gap + weighted.gap + 1e-12


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_unit_weights_are_the_unweighted_problem():
    X, Y = chain_data()
    a = solve_structural_bcfw(Chain(3), X, Y, 0.1, max_iter=6, tol=0, random_state=7)
    b = solve_structural_bcfw(
        Chain(3), X, Y, 0.1, max_iter=6, tol=0, random_state=7, sample_weight=np.ones(len(Y))
    )
    np.testing.assert_allclose(a["w"], b["w"], rtol=1e-12, atol=1e-14)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_ssg_steps_scale_with_the_weights():
    X, y = multiclass_data()
    c = weights(len(y))
    ssg = solve_structural_ssg(
        MultiClass(3), X, y, LAM, max_iter=300, random_state=0, project=True, sample_weight=c
    )
    ref = solve("cutting_plane", MultiClass(3), X, y, LAM, c, tol=1e-8)
    assert ssg.primal - ref.primal <= 0.05 * ref.primal


def test_bad_weights_are_clear_errors():
    X, y = multiclass_data()
    with pytest.raises(ValueError, match="nonnegative"):
        StructuredProblem(MultiClass(3), X, y, LAM, sample_weight=-np.ones(len(y)))
    with pytest.raises(ValueError, match="shape"):
        StructuredProblem(MultiClass(3), X, y, LAM, sample_weight=np.ones(3))


# -- StructuredSVM.fit(X, y, sample_weight) ---------------------------------------------------
ESTIMATOR_SOLVERS = {  # solver -> (tol, max_iter) the estimator reaches on these problems
    "pairwise": (1e-6, 20000),
    "cutting_plane": (1e-6, 2000),
    "bcfw": (3e-3, 20000),
    "lsfw": (1e-3, 20000),
}


def _estimator(model, solver, **params):
    from kernfw import StructuredSVM

    tol, max_iter = ESTIMATOR_SOLVERS[solver]
    return StructuredSVM(model, solver=solver, tol=tol, max_iter=max_iter, random_state=0, **params)


@pytest.mark.cvxpy
@pytest.mark.parametrize(
    "case, solver",
    [("multiclass", s) for s in ESTIMATOR_SOLVERS]
    + [("chain", "bcfw"), ("chain", "cutting_plane")],
)
def test_estimator_reaches_the_weighted_cvxpy_optimum(case, solver):
    """λ = 1/(C Σ_i w_i) and loss weights v_i = n w_i / Σ_j w_j: the primal is
    λ/2‖w‖² + (1/Σ w) Σ_i w_i H_i(w) (math.md §3.11), certified within the gap."""
    from kernfw.reference import structural_primal

    make_model, data = CASES[case]
    X, Y = data()
    w = weights(len(Y))
    est = _estimator(make_model(), solver, C=2.0)
    if case == "chain" and solver == "bcfw":  # sublinear on this small λ: a looser gap
        est.set_params(tol=3e-2)
    est.fit(X, Y, sample_weight=w)
    assert est.lam_ == pytest.approx(1.0 / (2.0 * w.sum()))
    v = w * len(Y) / w.sum()
    ref = structural_primal(est.model_, X, Y, est.lam_, sample_weight=v)["primal"]
    assert est.converged_
    assert -1e-7 <= est.primal_objective_ - ref <= est.duality_gap_ + 1e-7
    assert est.dual_objective_ <= ref + 1e-7
    assert est.primal_objective(X, Y, sample_weight=w) == pytest.approx(
        est.primal_objective_, rel=1e-9
    )


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("solver", ["pairwise", "cutting_plane", "bcfw"])
@pytest.mark.parametrize("case", ["multiclass", "chain"])
def test_estimator_integer_weights_equal_repeated_rows_zero_weights_removed_rows(case, solver):
    if case == "chain" and solver == "pairwise":
        pytest.skip("pairwise steps are for MultiClass models")
    make_model, data = CASES[case]
    X, Y = data()
    w = weights(len(Y))
    rows = np.repeat(np.arange(len(Y)), w.astype(int))
    pick = (lambda Z: Z[rows]) if isinstance(X, np.ndarray) else (lambda Z: [Z[i] for i in rows])
    X_rep, Y_rep = pick(X), pick(Y) if not isinstance(Y, np.ndarray) else Y[rows]
    kept = np.flatnonzero(w > 0)
    pick = (lambda Z: Z[kept]) if isinstance(X, np.ndarray) else (lambda Z: [Z[i] for i in kept])
    X_kept, Y_kept = pick(X), pick(Y) if not isinstance(Y, np.ndarray) else Y[kept]
    weighted = _estimator(make_model(), solver).fit(X, Y, sample_weight=w)
    repeated = _estimator(make_model(), solver).fit(X_rep, Y_rep)
    removed = _estimator(make_model(), solver).fit(X_kept, Y_kept, sample_weight=w[kept])
    assert weighted.lam_ == repeated.lam_ == removed.lam_  # 1/(C Σ w) = 1/(C n_rep)
    for other in (repeated, removed):  # the same problem: optima within the two gaps
        bound = weighted.duality_gap_ + other.duality_gap_ + 1e-10
        assert abs(weighted.primal_objective_ - other.primal_objective_) <= bound
        # P is λ-strongly convex: ‖w − w*‖² ≤ 2 gap / λ for each fit
        dist = np.sqrt(2 * weighted.duality_gap_ / weighted.lam_) + np.sqrt(
            2 * other.duality_gap_ / other.lam_
        )
        assert np.linalg.norm(weighted.coef_ - other.coef_) <= dist + 1e-8
    if solver == "bcfw":  # its gap leaves the two fits' distance bound above their distance
        return
    unweighted = _estimator(make_model(), solver).fit(X, Y)
    assert np.linalg.norm(unweighted.coef_ - weighted.coef_) > 10 * (
        np.sqrt(2 * weighted.duality_gap_ / weighted.lam_)
        + np.sqrt(2 * unweighted.duality_gap_ / unweighted.lam_)
    )


def test_estimator_unit_weights_are_the_unweighted_fit():
    from kernfw import StructuredSVM

    X, y = multiclass_data()
    a = StructuredSVM(random_state=0).fit(X, y)
    b = StructuredSVM(random_state=0).fit(X, y, sample_weight=np.ones(len(y)))
    c = StructuredSVM(random_state=0).fit(X, y, sample_weight=np.full(len(y), 3.0))
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert c.lam_ == pytest.approx(a.lam_ / 3)  # λ = 1/(C Σ w): C scales with the weights


def test_estimator_bad_weights_are_clear_errors():
    from kernfw import StructuredSVM

    X, y = multiclass_data()
    with pytest.raises(ValueError, match="(?i)negative"):
        StructuredSVM().fit(X, y, sample_weight=-np.ones(len(y)))
    with pytest.raises(ValueError, match="non-zero"):
        StructuredSVM().fit(X, y, sample_weight=np.zeros(len(y)))
    with pytest.raises(ValueError, match=r"shape|length|samples"):
        StructuredSVM().fit(X, y, sample_weight=np.ones(3))
    with pytest.raises(ValueError, match="finite|NaN|infinity"):
        StructuredSVM().fit(X, y, sample_weight=np.full(len(y), np.nan))
