"""Safe sample screening of the L2-SVM along C (math.md §2.17): the rule never removes a
support vector of the final fit (against tight unscreened fits and cvxpy), its radius is
not smaller than it must be, its parts match brute force, and the screened fit is certified
on the full problem."""

import numpy as np
import pytest
from sklearn.metrics.pairwise import pairwise_kernels

from kernfw.operators import Gram
from kernfw.solvers.simplex_qp import L2SVMKernel, PathStart, solve_l2svm, solve_l2svm_screened
from kernfw.solvers.simplex_qp.screening import (
    best_margin,
    margin_slack,
    screen_l2svm,
    screening_gap,
    shift_c,
)


def _problem(n, seed, kernel, d=2):
    """Two noisy classes; ``kernel`` "linear" (most points far from the margin) or "rbf"."""
    rng = np.random.default_rng(seed)
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    X = rng.normal(size=(n, d))
    X[:, 0] += (1.0 + seed % 3) * y
    K = X @ X.T if kernel == "linear" else pairwise_kernels(X, metric="rbf", gamma=0.5)
    w = rng.uniform(0.3, 3.0, size=n) if seed % 2 else None
    return Gram(K), y, w


def _inv_c(op, y, C, w):
    return L2SVMKernel(op, y, C, w).inv_c


def _norms(op):
    return np.sqrt(op.diag() + 1.0)


def _mask_at(op, y, w, previous, C_previous, C, deflate=1.0):
    """The mask of the start ``previous`` (a result at ``C_previous``) at ``C``, with the
    certified gap multiplied by ``deflate`` (1: the rule as it is)."""
    alpha = previous.solution["alpha"]
    inv_c = _inv_c(op, y, C, w)
    v = shift_c(alpha, previous.solution["v"], inv_c * C / C_previous, inv_c)
    if deflate == 1.0:
        return screen_l2svm(alpha, v, inv_c, _norms(op), previous.n_iter)
    rho, gap, error = screening_gap(alpha, v, inv_c, previous.n_iter)
    margins = v - alpha * inv_c
    return margins - rho - 2 * error > margin_slack(deflate * gap, rho, _norms(op))


def _tight(op, y, C, w):
    return solve_l2svm(op, y, C, tol=1e-11, sample_weight=w, max_iter=200_000)


CASES = [(kernel, seed) for kernel in ("linear", "rbf") for seed in range(8)]


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("kernel, seed", CASES)
def test_screening_never_removes_a_support_vector_of_the_tight_fit(kernel, seed):
    op, y, w = _problem(120, seed, kernel)
    C0 = 0.5
    removed = 0
    for tol in (1e-2, 1e-6):
        previous = solve_l2svm(op, y, C0, tol=tol, sample_weight=w)
        for C in (0.25, 0.5, 0.6, 1.0, 2.0):
            mask = _mask_at(op, y, w, previous, C0, C)
            tight = _tight(op, y, C, w)
            alpha, v = tight.solution["alpha"], tight.solution["v"]
            # the optimum's α is 0 on every removed point, and its margin is at least ρ*
            assert np.all(alpha[mask] <= 1e-9), (C, tol, np.flatnonzero(mask & (alpha > 0)))
            margins = v - alpha * _inv_c(op, y, C, w)
            assert np.all(margins[mask] >= tight.solution["rho"] - 1e-9)
            removed += int(mask.sum())
    if kernel == "linear":  # the rule is not vacuous: it removes points here
        assert removed > 0.1 * 10 * y.size


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_a_deflated_radius_removes_support_vectors():
    """The tests above would see a radius too small: shrinking the certified gap (the
    squared radius) by 100 makes the rule remove support vectors of the tight fit."""
    wrong = 0
    for seed in range(8):
        op, y, w = _problem(120, seed, "linear")
        previous = solve_l2svm(op, y, 0.5, tol=1e-2, sample_weight=w)
        for C in (0.25, 1.0, 2.0):
            sv = _tight(op, y, C, w).solution["alpha"] > 1e-9
            assert not np.any(_mask_at(op, y, w, previous, 0.5, C) & sv)
            wrong += int(np.sum(_mask_at(op, y, w, previous, 0.5, C, deflate=0.01) & sv))
    assert wrong > 0


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("kernel", ["linear", "rbf"])
def test_at_the_optimum_the_rule_removes_every_clear_non_support_vector(kernel):
    """With a gap near 0 the ball shrinks to the optimum: every point whose optimal margin
    is clearly above ρ* is removed (the rule is not looser than its radius)."""
    n_clear = 0
    for seed in range(4):
        op, y, w = _problem(120, seed, kernel)
        tight = _tight(op, y, 1.0, w)
        inv_c = _inv_c(op, y, 1.0, w)
        alpha, v = tight.solution["alpha"], tight.solution["v"]
        mask = screen_l2svm(alpha, v, inv_c, _norms(op), tight.n_iter)
        clear = (v - alpha * inv_c) > tight.solution["rho"] * (1 + 1e-3)
        np.testing.assert_array_equal(mask[clear], True)
        assert not np.any(mask & (alpha > 0))
        n_clear += int(clear.sum())
    assert n_clear > 10


def test_margin_slack_is_the_maximum_over_the_unknown_suboptimality():
    norms = np.array([0.1, 0.5, 1.0, np.sqrt(2.0), 3.0])
    for gap, rho in [(1e-4, 1e-2), (0.3, 0.5), (2.0, 1.0), (0.0, 1.0)]:
        delta = np.linspace(0.0, min(gap, rho), 200_001)
        brute = np.max(norms[:, None] * np.sqrt(delta) - delta, axis=1)
        np.testing.assert_allclose(margin_slack(gap, rho, norms), brute, rtol=1e-6, atol=1e-12)


def test_best_margin_is_the_best_primal_along_the_model():
    rng = np.random.default_rng(0)
    for _ in range(10):
        n = 30
        margins, cost = rng.normal(0.5, 1.0, size=n), rng.uniform(0.1, 5.0, size=n)
        sq_norm = rng.uniform(0.05, 2.0)
        r = np.linspace(1e-6, 10.0, 200_001)
        A = sq_norm + (np.maximum(r[:, None] - margins, 0.0) ** 2) @ cost
        brute = np.max(r * r / A)
        value = best_margin(sq_norm, margins, cost)
        assert value >= brute * (1 - 1e-12) and value <= brute * (1 + 1e-5)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("seed", range(6))
def test_the_certified_gap_brackets_the_optimum(seed):
    """ρ_P ≤ ρ* ≤ ρ: the gap of :func:`screening_gap` bounds ρ − ρ*, at the previous C's
    solution moved to a new C, and it is no larger than the FW gap."""
    op, y, w = _problem(100, seed, "rbf" if seed % 3 else "linear")
    previous = solve_l2svm(op, y, 1.0, tol=1e-3, sample_weight=w)
    for C in (0.3, 1.0, 4.0):
        inv_c = _inv_c(op, y, C, w)
        alpha = previous.solution["alpha"]
        v = shift_c(alpha, previous.solution["v"], inv_c * C, inv_c)
        np.testing.assert_allclose(v, L2SVMKernel(op, y, C, w).matmat(alpha), atol=1e-12)
        rho, gap, _ = screening_gap(alpha, v, inv_c, previous.n_iter)
        rho_star = _tight(op, y, C, w).solution["rho"]
        assert rho - gap <= rho_star * (1 + 1e-9) and rho_star <= rho * (1 + 1e-12)
        assert gap <= 2 * (rho - v.min()) + 1e-12


@pytest.mark.cvxpy
@pytest.mark.parametrize("seed", [1, 2, 4, 5])
def test_screened_points_are_zero_at_the_cvxpy_optimum(seed):
    from kernfw.reference import l2svm_reference

    op, y, w = _problem(40, seed, "linear")
    previous = solve_l2svm(op, y, 1.0, tol=1e-5, sample_weight=w)
    removed = 0
    for C in (0.5, 1.0, 2.0):
        mask = _mask_at(op, y, w, previous, 1.0, C)
        ref = l2svm_reference(op.dense(), y, C, sample_weight=w)
        assert np.all(ref["alpha"][mask] <= 1e-6)
        assert np.all(y[mask] * ref["h"][mask] >= ref["rho"] - 1e-6)
        removed += int(mask.sum())
    assert removed >= 10


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("seed", [1, 2, 4, 5])
def test_the_screened_fit_is_certified_on_the_full_problem(seed):
    op, y, w = _problem(150, seed, "linear")
    tol = 1e-5
    previous = solve_l2svm(op, y, 1.0, tol=tol, sample_weight=w)
    for C in (0.8, 1.5, 3.0):
        res = solve_l2svm_screened(op, y, C, PathStart.of(previous, 1.0), sample_weight=w, tol=tol)
        assert res.solution["screened"].size > 0
        assert res.converged and res.gap + res.rounding <= tol * abs(res.dual)
        # the certificate is the full problem's: recomputed here from α on all points
        alpha = res.solution["alpha"]
        assert alpha.shape == y.shape and np.all(alpha[res.solution["screened"]] == 0)
        v = L2SVMKernel(op, y, C, w).matmat(alpha)
        rho = alpha @ v
        assert 2 * (rho - v.min()) <= tol * rho * (1 + 1e-6)
        # and it agrees with the unscreened fit within the two gaps
        plain = solve_l2svm(op, y, C, tol=tol, sample_weight=w, alpha0=previous.solution["alpha"])
        assert abs(res.dual - plain.dual) <= res.gap + plain.gap + 1e-12


def test_a_screened_fit_that_misses_its_tolerance_continues_on_the_full_problem():
    """A start whose products ``v`` are wrong makes the rule remove support vectors (of the
    smaller ``C``, whose support is larger); the full problem's run then takes them back,
    and the result is still certified."""
    op, y, w = _problem(150, 0, "linear")
    previous = solve_l2svm(op, y, 1.0, tol=1e-6)
    alpha = previous.solution["alpha"]
    v = previous.solution["v"] + 10.0  # every margin far above ρ: all but the support go
    v[alpha > 0] = previous.solution["v"][alpha > 0]
    res = solve_l2svm_screened(op, y, 0.2, PathStart(alpha, v, 1.0), tol=1e-6)
    tight = _tight(op, y, 0.2, None)
    assert res.solution["screened"].size > 0 and res.converged
    assert np.any(tight.solution["alpha"][res.solution["screened"]] > 0)
    np.testing.assert_allclose(res.dual, tight.dual, rtol=1e-5)


def test_without_a_start_the_screened_fit_is_the_plain_fit():
    op, y, w = _problem(80, 1, "rbf")
    res = solve_l2svm_screened(op, y, 1.0, None, sample_weight=w, tol=1e-6)
    plain = solve_l2svm(op, y, 1.0, sample_weight=w, tol=1e-6)
    assert res.solution["screened"].size == 0
    np.testing.assert_array_equal(res.solution["alpha"], plain.solution["alpha"])


def test_a_start_of_another_problem_is_an_error():
    op, y, w = _problem(30, 1, "rbf")
    start = PathStart(np.full(20, 0.05), np.zeros(20), 1.0)
    with pytest.raises(ValueError, match="shape \\(30,\\)"):
        solve_l2svm_screened(op, y, 2.0, start)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_the_search_path_screens_and_its_fits_stay_certified(monkeypatch):
    """The grid search's L2SVC path on a kernel kept as features (the screened route): the
    rule removes points, and every fit is certified and agrees with the plain fit."""
    from kernfw import L2SVC
    from kernfw.model_selection.l2svm_path import fit_l2svc_path
    from kernfw.operators import Features
    from kernfw.solvers.simplex_qp import screening

    rng = np.random.default_rng(3)
    y = np.where(rng.random(300) < 0.5, 1, 0)
    X = rng.normal(size=(300, 2))
    X[:, 0] += 3.0 * (2 * y - 1)
    removed = []
    rule = screening.screen_l2svm

    def spy(*args):
        mask = rule(*args)
        removed.append(int(mask.sum()))
        return mask

    monkeypatch.setattr(screening, "screen_l2svm", spy)
    train = np.arange(200)
    Cs = [0.5, 1.0, 2.0, 4.0]
    steps = [(k, {"C": C}) for k, C in enumerate(Cs)]
    estimator = L2SVC(kernel="linear", tol=1e-6)
    fits = list(fit_l2svc_path(estimator, Features(X), train, y, steps))
    assert len(removed) == len(Cs) - 1 and max(removed) >= 0.25 * train.size
    yb = np.where(y[train] == 1, 1.0, -1.0)
    for (_, model, _, cert), C in zip(fits, Cs):
        assert cert["converged"] == 1.0
        plain = solve_l2svm(Features(X[train]), yb, C, tol=1e-10, solver="dcd")
        # the models lie in balls of radius √gap around the optimum (math.md §2.17)
        h = (X[200:] @ X[train].T + 1.0) @ (plain.solution["alpha"] * yb)
        h_path = model.decision_function(np.arange(200, 300)[:, None])
        radius = np.sqrt(cert["duality_gap"]) + np.sqrt(plain.gap)
        bound = radius * np.sqrt(np.sum(X[200:] ** 2, axis=1) + 1.0)
        assert np.all(np.abs(h_path - h) <= bound + 1e-12)
        assert np.mean(np.where(h > 0, 1, 0) == model.predict(np.arange(200, 300)[:, None])) > 0.99
