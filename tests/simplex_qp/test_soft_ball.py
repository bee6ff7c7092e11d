"""The ν-soft minimum enclosing ball (math.md §2.9) against cvxpy: optimum, LMO, line search."""

import numpy as np
import pytest
from scipy.optimize import minimize_scalar
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics.pairwise import rbf_kernel

from kernfw.operators import Gram
from kernfw.solvers.simplex_qp.soft_ball import SoftBallIterate, soft_ball_radius2, solve_soft_ball

pytestmark = pytest.mark.cvxpy


def _gram(kind, seed=0, n=40):
    rng = np.random.RandomState(seed)
    X = rng.normal(size=(n, 3))
    X[:3] += 6.0  # three far outliers
    return rbf_kernel(X, gamma=0.3) if kind == "rbf" else X @ X.T


@pytest.mark.parametrize("kind", ["rbf", "linear"])
@pytest.mark.parametrize("nu", [0.05, 0.2, 0.5, 0.93])
def test_optimum_matches_cvxpy(kind, nu):
    from kernfw.reference.meb import soft_ball_reference

    K = _gram(kind)
    result = solve_soft_ball(Gram(K), nu, tol=1e-9)
    ref = soft_ball_reference(K, nu)
    scale = abs(ref["objective"])
    assert result.converged
    # the certificate brackets the optimum: D ≤ P* ≤ P (up to the reference's accuracy)
    assert result.dual <= ref["objective"] + 1e-7 * scale
    assert result.primal >= ref["objective"] - 1e-7 * scale
    assert result.primal - result.dual <= 1e-9 * abs(result.primal) + 1e-15
    alpha = result.solution["alpha"]
    u = 1.0 / (nu * K.shape[0])
    assert alpha.min() >= 0.0 and alpha.max() <= u * (1 + 1e-12)
    assert alpha.sum() == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(alpha, ref["alpha"], atol=5e-5)


@pytest.mark.parametrize("nu", [0.1, 0.33])
def test_certificate_is_the_lp_over_the_capped_simplex(nu):
    import cvxpy as cp

    K = _gram("rbf", seed=1)
    it = SoftBallIterate(Gram(K), nu)
    for t in range(7):
        it.step(t)
    g = it.q - 2.0 * it.v
    s = cp.Variable(K.shape[0])
    lp = cp.Problem(cp.Maximize(g @ s), [s >= 0, s <= it.u, cp.sum(s) == 1])
    lp.solve(solver=cp.CLARABEL)
    cert = it.certificate()
    assert cert.gap == pytest.approx(lp.value - it.alpha @ g, abs=1e-7)
    assert cert.gap >= 0.0


def test_pairwise_step_is_the_exact_line_search():
    K = _gram("rbf", seed=2)
    it = SoftBallIterate(Gram(K), 0.25)
    for t in range(5):
        alpha = it.alpha.copy()
        g = it.q - 2.0 * it.v
        room, mass = alpha < it.u * (1 - 1e-12), alpha > 0
        i = np.flatnonzero(room)[np.argmax(g[room])]
        j = np.flatnonzero(mass)[np.argmin(g[mass])]
        step_max = min(it.u - alpha[i], alpha[j])
        d = np.zeros_like(alpha)
        d[i], d[j] = 1.0, -1.0

        def f(gamma, alpha=alpha, d=d):
            a = alpha + gamma * d
            return -(np.diag(K) @ a - a @ K @ a)

        best = minimize_scalar(
            f, bounds=(0.0, step_max), method="bounded", options={"xatol": 1e-12}
        )
        gamma = it.step(t)
        assert gamma == pytest.approx(best.x, abs=1e-7)
        np.testing.assert_allclose(it.v, K @ it.alpha, atol=1e-12)


@pytest.mark.parametrize("nu", [0.1, 0.3, 0.6])
def test_nu_bounds_the_fraction_of_training_outliers(nu):
    K = _gram("rbf", seed=3, n=100)
    result = solve_soft_ball(Gram(K), nu, tol=1e-8)
    alpha = result.solution["alpha"]
    d = np.diag(K) - 2.0 * K @ alpha + alpha @ K @ alpha
    R2 = result.solution["radius2"]
    assert R2 == pytest.approx(soft_ball_radius2(d, nu), rel=1e-12)
    outside = np.mean(d > R2 + 1e-9)
    assert outside <= nu
    assert np.mean(alpha > 0) >= nu - 1e-12  # ν ≤ the fraction of support points


def test_bad_nu_and_budget():
    K = _gram("linear")
    with pytest.raises(ValueError, match="nu must lie in"):
        solve_soft_ball(Gram(K), 0.0)
    with pytest.raises(ValueError, match="hard ball"):
        solve_soft_ball(Gram(K), 1.0 / K.shape[0])
    with pytest.warns(ConvergenceWarning, match="soft ball"):
        result = solve_soft_ball(Gram(_gram("rbf")), 0.1, tol=1e-12, max_iter=3, check_every=1)
    assert not result.converged and result.gap > 0


def _backends(X, K):
    """Operators of the same kernel: compiled column views (stored Gram in both orders and
    float32, the RBF from float64 or float32 features, a two-column cache) and operators
    served through ``Q.columns`` (a product kernel, features, a sum of kernels)."""
    from kernfw.operators import Features, KernelFunction, MultiKernel

    linear = X @ X.T
    return {
        "gram": (Gram(K), K),
        "gram-fortran": (Gram(np.asfortranarray(K)), K),
        "gram-float32": (Gram(K.astype(np.float32)), K.astype(np.float32).astype(float)),
        "rbf": (KernelFunction(X, "rbf", gamma=0.3), K),
        "rbf-float32": (KernelFunction(X, "rbf", gamma=0.3, dtype=np.float32), K),
        "rbf-no-cache": (KernelFunction(X, "rbf", gamma=0.3, cache_size=0), K),
        "linear": (KernelFunction(X, "linear"), linear),
        "features": (Features(X), linear),
        "sum": (MultiKernel([Gram(K), Features(X)], [0.5, 0.5]), 0.5 * (K + linear)),
    }


@pytest.mark.parametrize(
    "backend",
    ["gram", "gram-fortran", "gram-float32", "rbf", "rbf-float32", "rbf-no-cache", "linear"]
    + ["features", "sum"],
)
def test_every_operator_backend_reaches_the_optimum(backend):
    rng = np.random.RandomState(4)
    X = rng.normal(size=(70, 3))
    X[:4] += 5.0
    op, K = _backends(X, rbf_kernel(X, gamma=0.3))[backend]
    single = backend.endswith("float32")
    compiled = backend.startswith(("gram", "rbf"))  # the compiled columns of a view
    assert (SoftBallIterate(op, 0.3)._source is not None) == compiled
    result = solve_soft_ball(op, 0.3, tol=1e-6 if single else 1e-9)
    exact = solve_soft_ball(Gram(K), 0.3, tol=1e-10)
    assert result.converged
    alpha = result.solution["alpha"]
    assert alpha.min() >= 0.0 and alpha.max() <= 1.0 / (0.3 * 70) * (1 + 1e-12)
    assert alpha.sum() == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(result.solution["v"], K @ alpha, atol=1e-5 if single else 1e-10)
    value = np.diag(K) @ alpha - alpha @ K @ alpha
    assert value == pytest.approx(exact.dual, rel=1e-5 if single else 1e-8)


@pytest.mark.parametrize("backend", ["gram", "rbf", "rbf-no-cache", "features"])
def test_compiled_step_is_the_best_point_on_its_pairwise_segment(backend):
    """Each step (compiled pair, line search and update) against a dense grid of the
    segment ``α + γ(e_i − e_j)``, ``0 ≤ γ ≤ min(u − α_i, α_j)``: the pair is the first-order
    one and the step maximizes ``f`` on the segment."""
    rng = np.random.RandomState(5)
    X = rng.normal(size=(60, 4))
    op, K = _backends(X, rbf_kernel(X, gamma=0.3))[backend]
    it = SoftBallIterate(op, 0.2)
    q = np.diag(K)
    for t in range(12):
        alpha = it.alpha.copy()
        g = q - 2.0 * K @ alpha
        gamma = it.step(t)
        i, j = int(it._st["i"]), int(it._st["j"])
        room, mass = alpha < it.u * (1 - 1e-12), alpha > 0
        assert i == np.flatnonzero(room)[np.argmax(g[room])]
        assert j == np.flatnonzero(mass)[np.argmin(g[mass])]
        d = np.zeros_like(alpha)
        d[i], d[j] = 1.0, -1.0
        grid = np.linspace(0.0, min(it.u - alpha[i], alpha[j]), 20001)
        points = alpha[None, :] + grid[:, None] * d[None, :]
        values = points @ q - np.einsum("gi,ij,gj->g", points, K, points)
        assert gamma == pytest.approx(grid[np.argmax(values)], abs=grid[1] + 1e-15)
        f = q @ it.alpha - it.alpha @ K @ it.alpha
        assert f >= values.max() - 1e-14
        np.testing.assert_allclose(it.alpha, alpha + gamma * d, atol=1e-15)
        np.testing.assert_allclose(it.v, K @ it.alpha, atol=1e-12)
