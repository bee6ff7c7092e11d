"""The shared Frank-Wolfe machinery: the loop, step rules, block sampling, averaging."""

import dataclasses
import math
import time
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from kernfw.fw import (
    BlockCoordinateIterate,
    Certificate,
    FWIterate,
    FWResult,
    RunBudget,
    StoppingRule,
    WeightedAverage,
    as_rule,
    away_step_max,
    block_order,
    quadratic_step,
    run,
    standard_step,
)
from kernfw.fw.loop import STALL_CERTIFICATES

# --- a real problem: Euclidean projection onto the simplex ----------------------------------


def project_simplex(c):
    """argmin_{α ∈ Δ} ½‖α − c‖² by the sort-and-threshold formula (the reference)."""
    u = np.sort(c)[::-1]
    css = np.cumsum(u) - 1.0
    k = np.nonzero(u - css / np.arange(1, len(c) + 1) > 0)[0][-1]
    return np.maximum(c - css[k] / (k + 1), 0.0)


class SimplexProjection(FWIterate):
    """Frank-Wolfe on f(α) = ½‖α − c‖² over the simplex.

    Vertex s = e_j, j = argmin ∇f; FW gap g = ⟨∇f, α − s⟩ ≥ f(α) − f*; the
    dual bound is f(α) − g.  ``line_search`` uses the exact step on the quadratic
    (slope g, curvature ‖s − α‖²), otherwise the agnostic 2/(t+2).
    """

    def __init__(self, c, line_search=True):
        self.c = np.asarray(c, dtype=float)
        self.alpha = np.zeros_like(self.c)
        self.alpha[0] = 1.0
        self.line_search = line_search

    def _direction(self):
        grad = self.alpha - self.c
        j = int(np.argmin(grad))
        s = np.zeros_like(self.alpha)
        s[j] = 1.0
        return grad, s

    def certificate(self):
        grad, s = self._direction()
        f = 0.5 * float(np.sum((self.alpha - self.c) ** 2))
        gap = float(grad @ (self.alpha - s))
        return Certificate(
            primal=f, dual=f - gap, gap=gap, extra={"support": int(np.sum(self.alpha > 0))}
        )

    def step(self, t):
        grad, s = self._direction()
        d = s - self.alpha
        if self.line_search:
            gamma = quadratic_step(float(-grad @ d), float(d @ d))
        else:
            gamma = standard_step(t)
        self.alpha += gamma * d
        return gamma

    def solution(self):
        return {"alpha": self.alpha.copy()}


C_VECTOR = np.array([0.9, 0.4, -0.2, 0.35, 0.1, -1.0])


def test_line_search_fw_converges_to_the_projection():
    alpha_star = project_simplex(C_VECTOR)
    f_star = 0.5 * np.sum((alpha_star - C_VECTOR) ** 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = run(SimplexProjection(C_VECTOR), tol=1e-8, max_iter=5000)
    assert isinstance(res, FWResult)
    assert res.converged and res.status == "converged" and res.gap <= 1e-8
    assert res.dual <= f_star + 1e-15 <= res.primal + 2e-15
    assert res.primal - f_star <= res.gap + 1e-15
    # strong convexity: ‖α − α*‖² ≤ 2 (f(α) − f*) ≤ 2 gap
    assert np.sum((res["alpha"] - alpha_star) ** 2) <= 2 * res.gap + 1e-15
    h = res.history
    assert set(h) >= {"iteration", "time", "primal", "dual", "gap", "step", "support"}
    assert len({len(v) for v in h.values()}) == 1
    assert np.all(np.diff(h["primal"]) <= 1e-15)  # exact line search never goes up
    assert np.all(h["gap"] >= -1e-15)
    assert np.all(h["dual"] <= f_star + 1e-12)
    assert np.all(np.diff(h["iteration"]) == 1) and h["iteration"][-1] == res.n_iter
    assert math.isnan(h["step"][0]) and np.all((h["step"][1:] >= 0) & (h["step"][1:] <= 1))
    assert res.time >= h["time"][-1] >= 0


def test_agnostic_step_meets_the_2C_over_t_plus_2_bound():
    alpha_star = project_simplex(C_VECTOR)
    f_star = 0.5 * np.sum((alpha_star - C_VECTOR) ** 2)
    with pytest.warns(ConvergenceWarning):
        res = run(
            SimplexProjection(C_VECTOR, line_search=False), tol=0.0, max_iter=300, keep_best=False
        )
    # f(α_t) − f* ≤ 2 C_f / (t + 2) with C_f ≤ diam(Δ)² = 2
    excess = res.history["primal"] - f_star
    t = res.history["iteration"]
    assert np.all(excess <= 4.0 / (t + 2) + 1e-12)
    assert res.history["step"][1] == 1.0 and res.history["step"][2] == pytest.approx(2 / 3)


# --- scripted iterates: the loop's bookkeeping, number by number -------------------------------


class Scripted(FWIterate):
    """An iterate whose t-th certificate reports ``gaps[t]`` (primal = gap, dual = 0)."""

    def __init__(self, gaps, sleep=0.0):
        self.gaps = list(gaps)
        self.t = 0
        self.sleep = sleep
        self.certified, self.stepped = [], []

    def certificate(self):
        self.certified.append(self.t)
        g = self.gaps[min(self.t, len(self.gaps) - 1)]
        return Certificate(primal=g, dual=0.0, gap=g, extra={"calls": len(self.certified)})

    def step(self, t):
        assert t == self.t
        if self.sleep:
            time.sleep(self.sleep)
        self.stepped.append(t)
        self.t += 1
        return 1.0 / (t + 1)

    def solution(self):
        return {"t": np.array(self.t)}


def test_max_iter_warns_and_returns_the_best_iterate():
    it = Scripted([5.0, 1.0, 3.0, 4.0, 2.0])
    with pytest.warns(ConvergenceWarning) as record:
        res = run(it, tol=0.5, max_iter=4, remedy="increase max_iter", name="Toy")
    message = str(record[0].message)
    assert (
        "Toy stopped at max_iter=4" in message
        and "duality gap 1 before its stopping rule (gap + rounding <= tol=0.5) held" in message
    )
    assert "the best iterate is returned" in message and "increase max_iter" in message
    assert res.status == "max_iter" and not res.converged and res.n_iter == 4
    assert res.gap == 1.0 and res.primal == 1.0 and int(res["t"]) == 1
    np.testing.assert_array_equal(res.history["gap"], [5, 1, 3, 4, 2])
    np.testing.assert_array_equal(res.history["calls"], [1, 2, 3, 4, 5])
    assert it.stepped == [0, 1, 2, 3]


class Rounded(Scripted):
    """A scripted iterate whose certificates carry the rounding bound ``ρ = 0.1``."""

    def certificate(self):
        return dataclasses.replace(super().certificate(), rounding=0.1)


def test_a_gap_within_its_rounding_that_breaks_the_rule_stops_the_run():
    # the rule gap + 0.1 <= 0.05 cannot hold; at t = 2 the gap 0.08 is within ρ = 0.1
    it = Rounded([5.0, 1.0, 0.08, 0.01])
    with pytest.warns(ConvergenceWarning) as record:
        res = run(it, tol=0.05, max_iter=100, name="Toy")
    message = str(record[0].message)
    assert "Toy stopped with duality gap 0.08 within its rounding bound 0.1" in message
    assert "cannot hold at this floating-point precision" in message
    assert res.status == "rounding" and not res.converged
    assert res.n_iter == 2 and res.gap == 0.08 and it.stepped == [0, 1]


def test_the_rounding_floor_needs_the_gap_within_rounding_and_tol_above_zero():
    # ρ alone meets the rule: the run converges at the gap 0.01
    res = run(Rounded([5.0, 1.0, 0.01]), tol=0.2, max_iter=100)
    assert res.status == "converged" and res.n_iter == 2
    # tol = 0 asks for max_iter iterations, whatever the rounding
    with pytest.warns(ConvergenceWarning, match="stopped at max_iter=5"):
        res = run(Rounded([5.0, 0.0]), tol=0.0, max_iter=5)
    assert res.status == "max_iter" and res.n_iter == 5


def test_keep_best_false_returns_the_last_iterate():
    with pytest.warns(ConvergenceWarning, match="the last iterate is returned"):
        res = run(Scripted([5.0, 1.0, 3.0, 4.0, 2.0]), tol=0.5, max_iter=4, keep_best=False)
    assert res.gap == 2.0 and int(res["t"]) == 4


def test_a_converged_run_returns_the_last_iterate_without_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = run(Scripted([5.0, 0.2, 0.4, 0.01]), tol=0.3, max_iter=10)
    assert res.converged and res.status == "converged"
    assert res.n_iter == 1 and res.gap == 0.2 and int(res["t"]) == 1


def test_converged_at_the_start():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = run(Scripted([0.0]), tol=0.0, max_iter=10)
    assert res.converged and res.n_iter == 0 and len(res.history["gap"]) == 1


def test_check_every_certifies_every_k_iterations_and_at_the_end():
    it = Scripted(np.linspace(10, 1, 20))
    with pytest.warns(ConvergenceWarning):
        res = run(it, tol=0.0, max_iter=10, check_every=3)
    assert it.certified == [0, 3, 6, 9, 10]
    np.testing.assert_array_equal(res.history["iteration"], [0, 3, 6, 9, 10])
    assert it.stepped == list(range(10)) and res.n_iter == 10
    # the step column is the last step taken before each certificate
    np.testing.assert_allclose(res.history["step"][1:], [1 / 3, 1 / 6, 1 / 9, 1 / 10])


def test_check_every_tests_convergence_only_when_certifying():
    it = Scripted([5.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    res = run(it, tol=0.5, max_iter=10, check_every=4)
    assert it.certified == [0, 4] and res.n_iter == 4 and res.converged


def test_callback_sees_each_row_and_can_stop_the_run():
    rows = []

    def callback(row):
        rows.append(dict(row))
        return row["iteration"] == 2

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # stopping by callback is not a convergence failure
        res = run(Scripted([5.0, 4.0, 3.0, 2.0, 1.0]), tol=0.0, max_iter=10, callback=callback)
    assert res.status == "callback" and not res.converged and res.n_iter == 2
    assert [r["iteration"] for r in rows] == [0, 1, 2]
    assert [r["gap"] for r in rows] == [5.0, 4.0, 3.0]
    assert set(rows[0]) == {
        "iteration",
        "time",
        "primal",
        "dual",
        "gap",
        "rounding",
        "step",
        "calls",
    }


def test_callback_returning_none_continues():
    with pytest.warns(ConvergenceWarning):
        res = run(Scripted([3.0, 2.0, 1.0]), tol=0.0, max_iter=2, callback=lambda row: None)
    assert res.status == "max_iter" and res.n_iter == 2


def test_max_time_stops_certifies_and_warns():
    it = Scripted([1.0], sleep=0.02)
    with pytest.warns(ConvergenceWarning, match="stopped at max_time=0.1s"):
        res = run(it, tol=0.0, max_iter=10**6, max_time=0.1, check_every=1000)
    assert res.status == "max_time" and not res.converged
    assert 1 <= res.n_iter < 1000
    # the iterate reached when the time ran out is certified once more
    assert it.certified == [0, res.n_iter]
    assert res.time >= 0.1


def test_max_iter_zero_certifies_once():
    it = Scripted([2.0])
    with pytest.warns(ConvergenceWarning):
        res = run(it, tol=1.0, max_iter=0)
    assert it.certified == [0] and it.stepped == [] and res.n_iter == 0


@pytest.mark.parametrize(
    "tol,max_iter,match", [(-1.0, 5, "tol"), (np.nan, 5, "tol"), (1e-3, -1, "max_iter")]
)
def test_bad_budgets(tol, max_iter, match):
    with pytest.raises(ValueError, match=match):
        run(Scripted([1.0]), tol=tol, max_iter=max_iter)


class OnDual(Scripted):
    """``Scripted`` with ``D = 100``, ``P = 100 + gap`` and a rule relative to ``|D|``."""

    gap_scale = "dual"

    def certificate(self):
        cert = super().certificate()
        return dataclasses.replace(cert, primal=cert.gap + 100.0, dual=100.0)


def test_stopping_rule_on_the_problems_scale():
    res = run(OnDual([50.0, 20.0, 5.0]), tol=0.1, max_iter=5)  # gap <= 0.1 * 100
    assert res.converged and res.n_iter == 2
    res = run(OnDual([50.0, 20.0, 5.0]), tol=StoppingRule(25.0, "absolute"), max_iter=5)
    assert res.converged and res.n_iter == 1


@pytest.mark.parametrize(
    "scale,size", [("primal", 4.0), ("dual", 3.0), ("radius", 2.0), ("absolute", 1.0)]
)
def test_stopping_rule_scales(scale, size):
    cert = Certificate(primal=-4.0, dual=-3.0, gap=1.0, extra={"radius2": 2.0}, rounding=0.5)
    rule = StoppingRule(0.5, scale)
    factor = 1.25 if scale == "radius" else 0.5  # (1 + 0.5)^2 - 1 for the radius rule
    assert rule.size(cert) == size and rule.factor == factor
    assert rule.holds(cert) == (1.5 <= factor * size)
    a, b, absolute = rule.estimate(shift=2.0)
    assert (a, b, absolute) == {
        "primal": (0.5, 0.0, True),
        "dual": (0.5, 0.0, True),
        "radius": (1.25, 2.5, False),
        "absolute": (0.0, 0.5, False),
    }[scale]


def test_stopping_rule_floor():
    cert = Certificate(primal=1.0, dual=1.0, gap=1e-3, rounding=2e-3)
    assert StoppingRule(1e-3, "primal").at_floor(cert)  # rounding alone breaks the rule
    assert not StoppingRule(1e-2, "primal").at_floor(cert)  # the rule holds
    assert not StoppingRule(0.0, "primal").at_floor(cert)  # tol = 0 runs the budget
    far = dataclasses.replace(cert, gap=1.0)
    assert not StoppingRule(1e-3, "primal").at_floor(far)  # not yet optimal


@pytest.mark.parametrize("tol,match", [(-1.0, "tol"), (np.nan, "tol"), ("1", "tol")])
def test_stopping_rule_rejects_bad_tol(tol, match):
    with pytest.raises(ValueError, match=match):
        as_rule(tol, "primal")
    with pytest.raises(ValueError, match="scale"):
        StoppingRule(1e-3, "relative")


class Floored(Scripted):
    """``Scripted`` whose gaps carry a rounding bound ``ρ = 1e-13``."""

    def certificate(self):
        return dataclasses.replace(super().certificate(), rounding=1e-13)


def test_a_gap_stalled_at_its_rounding_floor_stops_the_run():
    # the gap falls, then wanders between 2ρ and 3ρ: above ρ, so not optimal "up to
    # rounding" by the bound, but no longer falling; tol = 1e-20 cannot hold
    gaps = [1e-6, 1e-9, 1e-12] + [3e-13, 2e-13, 2.5e-13] * 10
    with pytest.warns(ConvergenceWarning, match="no longer falling, within 1000 times its"):
        res = run(Floored(gaps), tol=1e-20, max_iter=1000)
    assert res.status == "rounding" and res.n_iter == 3 + STALL_CERTIFICATES
    # far above the floor, a plateau is not a floor: the budget runs out
    with pytest.warns(ConvergenceWarning, match="max_iter=40"):
        res = run(Floored([1e-6] * 50), tol=1e-20, max_iter=40)
    assert res.status == "max_iter"
    # tol = 0 asks for the whole budget
    with pytest.warns(ConvergenceWarning, match="max_iter=40"):
        res = run(Floored(gaps), tol=0.0, max_iter=40)
    assert res.status == "max_iter"


def test_run_budget_runs_its_budget_without_warning():
    class Online(Scripted):
        def stopping_rule(self, tol):
            return RunBudget()

    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        res = run(Online([0.0, 0.0, 0.0]), tol=1.0, max_iter=2)
    assert res.n_iter == 2 and not res.converged and res.status == "max_iter"


def test_history_fills_missing_extra_columns_with_nan():
    class Extras(Scripted):
        def certificate(self):
            cert = super().certificate()
            cert.extra = {"even": 1.0} if self.t % 2 == 0 else {"odd": 2.0}
            return cert

    with pytest.warns(ConvergenceWarning):
        res = run(Extras([3.0, 2.0, 1.5]), tol=0.0, max_iter=2)
    np.testing.assert_array_equal(res.history["even"], [1.0, np.nan, 1.0])
    np.testing.assert_array_equal(res.history["odd"], [np.nan, 2.0, np.nan])


def test_result_repr_and_items():
    res = FWResult(
        solution={"a": 1},
        primal=1.0,
        dual=0.5,
        gap=0.5,
        n_iter=3,
        converged=False,
        status="max_iter",
        history={},
        time=0.1,
    )
    assert res["a"] == 1
    assert repr(res) == "FWResult(status='max_iter', n_iter=3, primal=1, dual=0.5, gap=0.5)"


# --- step rules --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "slope,curvature,step_max",
    [
        (1.0, 4.0, 1.0),
        (3.0, 2.0, 1.0),
        (-1.0, 2.0, 1.0),
        (0.5, 2.0, 0.1),
        (2.0, 1.0, 5.0),
        (0.0, 1.0, 1.0),
        (1e-3, 1e3, 1.0),
    ],
)
def test_quadratic_step_maximizes_the_quadratic(slope, curvature, step_max):
    gamma = quadratic_step(slope, curvature, step_max)
    grid = np.linspace(0.0, step_max, 200001)
    values = slope * grid - 0.5 * curvature * grid**2
    assert 0.0 <= gamma <= step_max
    assert slope * gamma - 0.5 * curvature * gamma**2 >= values.max() - 1e-12
    assert gamma == pytest.approx(min(max(slope / curvature, 0.0), step_max))


@pytest.mark.parametrize(
    "slope,step_max,expected", [(1.0, 1.0, 1.0), (2.0, 0.3, 0.3), (0.0, 1.0, 0.0), (-1.0, 1.0, 0.0)]
)
def test_quadratic_step_without_curvature_is_linear(slope, step_max, expected):
    assert quadratic_step(slope, 0.0, step_max) == expected
    assert quadratic_step(slope, -1e-18, step_max) == expected  # round-off below zero


def test_standard_step():
    assert [standard_step(t) for t in range(4)] == [1.0, 2 / 3, 0.5, 0.4]


@pytest.mark.parametrize("weight", [0.0, 0.25, 0.5, 0.9])
def test_away_step_max_keeps_the_iterate_feasible(weight):
    alpha = np.array([weight, (1 - weight) / 2, (1 - weight) / 2])
    gamma = away_step_max(weight)
    moved = alpha + gamma * (alpha - np.array([1.0, 0.0, 0.0]))  # away from vertex 0
    assert moved[0] == pytest.approx(0.0, abs=1e-15)  # the vertex is dropped
    assert np.all(moved >= -1e-15) and moved.sum() == pytest.approx(1.0)
    assert away_step_max(1.0) == math.inf


# --- block-coordinate mechanics ----------------------------------------------------------


def test_block_order():
    uniform = block_order(50, np.random.default_rng(0))
    assert uniform.shape == (50,) and uniform.min() >= 0 and uniform.max() < 50
    assert len(np.unique(uniform)) < 50  # with replacement (almost surely)
    np.testing.assert_array_equal(uniform, block_order(50, np.random.default_rng(0)))
    perm = block_order(50, np.random.default_rng(0), sample="perm")
    np.testing.assert_array_equal(np.sort(perm), np.arange(50))
    with pytest.raises(ValueError, match="sample must be one of"):
        block_order(5, np.random.default_rng(0), sample="cyclic")


def test_weighted_average_is_the_2_over_k_plus_2_weighting():
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(6, 3))
    scalars = rng.normal(size=6)
    avg = WeightedAverage()
    for k, (x, s) in enumerate(zip(xs, scalars)):
        avg.update(w=x, loss=s)
        weights = 2.0 * np.arange(1, k + 2) / ((k + 1) * (k + 2))  # (t+1)·2/((k+1)(k+2))
        assert weights.sum() == pytest.approx(1.0)
        np.testing.assert_allclose(avg["w"], weights @ xs[: k + 1], rtol=1e-12)
        assert avg["loss"] == pytest.approx(weights @ scalars[: k + 1], rel=1e-12)
        assert isinstance(avg["loss"], float)
    assert avg.k == 6
    first = WeightedAverage()
    x0 = np.ones(2)
    first.update(w=x0)
    x0[:] = 5.0  # the average keeps its own copy
    np.testing.assert_array_equal(first["w"], [1.0, 1.0])


class Blocks(BlockCoordinateIterate):
    """Records the visited blocks; block i 'takes' the step i."""

    def __init__(self, n, **kw):
        super().__init__(n, **kw)
        self.visits, self.ks = [], []

    def block_step(self, i):
        self.visits.append(i)
        self.ks.append(self.k)
        return float(i)

    def certificate(self):
        return Certificate(primal=1.0, dual=0.0, gap=1.0)

    def solution(self):
        return {"visits": np.array(self.visits)}


def test_block_coordinate_pass():
    it = Blocks(5, random_state=3, sample="perm")
    mean_step = it.step(0)
    assert sorted(it.visits) == [0, 1, 2, 3, 4] and mean_step == 2.0
    assert it.ks == [0, 1, 2, 3, 4] and it.k == 5
    it.step(1)
    assert it.ks[5:] == [5, 6, 7, 8, 9]
    again = Blocks(5, random_state=3, sample="perm")
    again.step(0)
    again.step(1)
    assert again.visits == it.visits
    uniform = Blocks(5, random_state=0)
    uniform.step(0)
    np.testing.assert_array_equal(uniform.visits, block_order(5, np.random.default_rng(0)))
    with pytest.raises(ValueError, match="sample must be one of"):
        Blocks(5, sample="cyclic")


def test_block_coordinate_under_the_loop_counts_passes():
    it = Blocks(4, random_state=0, sample="perm")
    with pytest.warns(ConvergenceWarning):
        res = run(it, tol=0.0, max_iter=6, check_every=2)
    assert res.n_iter == 6 and it.k == 24
    np.testing.assert_array_equal(res.history["iteration"], [0, 2, 4, 6])


class RoundedOnDual(OnDual):
    """``OnDual`` whose gaps have the rounding bound ``ρ = 1e-6``."""

    def certificate(self):
        return dataclasses.replace(super().certificate(), rounding=1e-6)


def test_small_problem_rule_runs_past_tol_to_the_floor():
    """``to_floor`` (the rule of small problems, math.md §0): past ``gap + ρ ≤ τ·|D|`` the
    run goes on until the gap is within its rounding bound, and is converged there; a budget
    that ends first ends a converged run when the rule is met, and warns otherwise."""
    gaps = [50.0, 5.0, 1e-3, 5e-7, 1e-7]
    assert run(RoundedOnDual(gaps), tol=0.1, max_iter=10).n_iter == 1  # gap 5 <= 0.1 * 100
    floor = StoppingRule(0.1, None, to_floor=True)
    res = run(RoundedOnDual(gaps), tol=floor, max_iter=10)
    assert res.converged and res.status == "converged" and res.n_iter == 3 and res.gap == 5e-7
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        res = run(RoundedOnDual(gaps), tol=floor, max_iter=2)  # met, the floor not reached
    assert res.converged and res.n_iter == 2 and res.gap == 1e-3
    with pytest.warns(ConvergenceWarning, match="run on to the rounding floor"):
        res = run(RoundedOnDual([50.0, 40.0]), tol=floor, max_iter=3)
    assert not res.converged and res.status == "max_iter"
    rule = as_rule(floor, "dual")
    assert rule.scale == "dual" and rule.to_floor and as_rule(rule, "primal") is rule
    cert = Certificate(primal=101.0, dual=100.0, gap=1.0, rounding=1e-6)
    assert rule.met(cert) and not rule.holds(cert) and not rule.at_floor(cert)
    assert rule.goal(cert) == 0.0 and rule.estimate() == (0.0, 0.0, False)
    assert StoppingRule(0.1, "dual").goal(cert) == pytest.approx(10.0)
    assert not StoppingRule(0.0, "dual", to_floor=True).at_floor(  # tol = 0: the budget
        dataclasses.replace(cert, gap=1e-7)
    )
