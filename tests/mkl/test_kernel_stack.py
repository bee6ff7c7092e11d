"""KernelStack: the base kernels of a MultiKernel formed once; weighted sums and
quadratic forms against the MultiKernel's own answers (within float64 rounding), exact
symmetry, and the MKL objective that uses it."""

import numpy as np
import pytest

from kernfw.kernels import make_operator
from kernfw.operators import KernelStack, MultiKernel
from kernfw.solvers.mkl import inner_svm
from kernfw.solvers.mkl.inner_svm import KernelWeightObjective, make_inner_svm

TOL = dict(rtol=1e-12, atol=1e-12)


@pytest.fixture
def kernels():
    X = np.random.default_rng(0).normal(size=(70, 4))
    specs = ["linear", ("rbf", {"gamma": 0.3}), ("poly", {"degree": 2}), ("rbf", {"gamma": 2.0})]
    return MultiKernel([make_operator(X, s, normalization="trace") for s in specs])


@pytest.mark.parametrize("weights", [[0.1, 0.2, 0.3, 0.4], [0.0, 1.0, 0.0, 0.5]])
def test_weighted_sum_matches_the_multikernel(kernels, weights):
    stack = KernelStack(kernels)
    K = stack.weighted(weights)
    expected = kernels.with_weights(weights).dense()
    np.testing.assert_allclose(K, expected, **TOL)
    assert np.array_equal(K, K.T)  # bit for bit
    assert K is stack.weighted(weights)  # the reused buffer


def test_compiled_sum_adds_the_kernels_in_order(kernels):
    """``K_w = Σ_j (w_j s_j) D_j`` summed kernel by kernel, zero weights skipped: the same
    sums bit for bit as numpy's in that order."""
    weights = np.array([0.3, 0.0, 1.7, 0.25])
    stack = KernelStack(kernels)
    expected = None
    for wj, Dj in zip(weights * stack.scale, stack.D):
        if wj != 0:
            expected = Dj * wj if expected is None else expected + wj * Dj
    assert np.array_equal(stack.weighted(weights), expected)


def test_bad_weights_are_refused(kernels):
    stack = KernelStack(kernels)
    with pytest.raises(ValueError, match="nonnegative"):
        stack.weighted([1.0, -1.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="all zero"):
        stack.weighted([0.0, 0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="expected 4"):
        stack.weighted([1.0, 1.0])


def test_quadratic_forms_match_the_multikernel(kernels):
    stack = KernelStack(kernels)
    V = np.random.default_rng(1).normal(size=(70, 3))
    V[::3] = 0.0
    rows = np.flatnonzero(np.any(V != 0, axis=1))
    expected = kernels.per_kernel_quad(V).sum(axis=1)
    np.testing.assert_allclose(stack.per_kernel_quad(V), expected, rtol=1e-10)
    np.testing.assert_allclose(stack.per_kernel_quad(V, rows), expected, rtol=1e-10)
    np.testing.assert_allclose(
        stack.per_kernel_quad(V[:, 0]), kernels.per_kernel_quad(V[:, 0]), rtol=1e-10
    )


def test_megabytes():
    assert KernelStack.megabytes(3, 100) == pytest.approx(4 * 100**2 * 8 / 2**20)


@pytest.mark.parametrize("svm", ["l2", "c"])
def test_objective_with_and_without_the_stack_agree(kernels, svm, monkeypatch):
    y = np.arange(70) % 3
    gamma = np.array([0.5, 0.25, 0.0, 0.25])

    def evaluate():
        inner = make_inner_svm(svm, y, 3, C=1.0, tol=1e-10)
        return KernelWeightObjective(kernels, inner)

    with_stack = evaluate()
    assert with_stack.stack is not None
    ev = with_stack.evaluate(gamma)
    monkeypatch.setattr(inner_svm, "STACK_MAX_MB", 0.0)
    without = evaluate()
    assert without.stack is None
    ev0 = without.evaluate(gamma)
    np.testing.assert_allclose(ev.d, ev0.d, rtol=1e-6)
    assert ev.value == pytest.approx(ev0.value, rel=1e-6)


def test_inner_tolerance_follows_the_outer_gap(kernels, monkeypatch):
    """CSKL solves the SVM loosely far from the optimum and no tighter than the certificate
    it stops on needs (math.md §5.3: J(γ) − J* ≤ G + ε for any inner ε, and the stopping
    rule counts ε)."""
    from kernfw.solvers.mkl import weights
    from kernfw.solvers.mkl.cskl import solve_cskl

    y = np.arange(70) % 2
    tols = []
    original = inner_svm.L2SVM.solve

    def record(self, op, warm=None, cutoff=None):
        tols.append(self.tol)
        return original(self, op, warm, cutoff)

    monkeypatch.setattr(inner_svm.L2SVM, "solve", record)
    result = solve_cskl(kernels, y, t=1.0, tol=1e-3, inner_tol=1e-7)
    monkeypatch.undo()
    assert tols[0] == weights.INNER_TOL_START
    assert all(b <= a for a, b in zip(tols, tols[1:]))  # never loosened
    assert tols[-1] == 1e-7 and result.converged  # the inner tolerance asked: the last
    assert result.gap <= 1e-3 * abs(result.primal)
    tols.clear()
    monkeypatch.setattr(inner_svm.L2SVM, "solve", record)
    loose = solve_cskl(kernels, y, t=1.0, tol=1e-3)  # default: as loose as the rule allows
    monkeypatch.undo()
    inner = loose.history["inner_gap"][-1]
    assert loose.converged and tols[-1] > 1e-6 and len(tols) <= len(result.history["gap"]) + 2
    assert 0 < inner <= loose.gap <= 1e-3 * abs(loose.primal)  # G + ε: ε counted
    assert loose.primal - result.primal <= 1e-3 * abs(result.primal)
    tight = solve_cskl(kernels, y, t=1.0, tol=1e-7, inner_tol=1e-10)
    assert result.primal - tight.primal <= 1e-3 * abs(tight.primal) + 1e-7
    np.testing.assert_allclose(result["gamma"], tight["gamma"], atol=0.05)


def test_grams_computed_into_the_stack_are_adopted_not_copied():
    """make_operators(out=) computes each Gram into its slot, exactly symmetric; the stack
    adopts those slots (one copy of every kernel) and copies in the others."""
    from kernfw.kernels import make_operators

    X = np.random.default_rng(2).normal(size=(90, 6))
    specs = [("rbf", {"gamma": 0.2}), "linear", ("poly", {"degree": 2}), ("rbf", {"gamma": 1.0})]
    out = np.empty((4, 90, 90))
    ops = make_operators(X, specs, normalization="trace", out=out)
    mk = MultiKernel(ops)
    stack = KernelStack(mk, out)
    assert stack.D is out
    for j in (0, 2, 3):  # Grams: their matrices are the slots themselves
        assert ops[j].base.K is not None and np.shares_memory(ops[j].base.K, out[j])
        assert ops[j].base.symmetric and np.array_equal(out[j], out[j].T)
    assert not np.shares_memory(ops[1].base.dense(), out)  # the linear kernel: features
    weights = np.array([0.4, 0.3, 0.2, 0.1])
    reference = MultiKernel(make_operators(X, specs, normalization="trace"), weights).dense()
    K = stack.weighted(weights)
    np.testing.assert_allclose(K, reference, **TOL)
    assert np.array_equal(K, K.T)
    V = np.random.default_rng(3).normal(size=(90, 2))
    np.testing.assert_allclose(stack.per_kernel_quad(V), mk.per_kernel_quad(V).sum(axis=1), **TOL)
    # a matrix in another kernel's slot would be overwritten: refused
    with pytest.raises(ValueError, match="another slot"):
        KernelStack(MultiKernel([ops[2], ops[0], ops[1], ops[3]]), out)


def test_grams_symmetric_bit_for_bit_are_copied_as_they_are(monkeypatch):
    """A Gram validated as symmetric bit for bit is copied into the stack unchanged (no
    symmetrizing pass: the compiled symmetrize is not called for it); one symmetric only
    within rounding is symmetrized, ``½(K + Kᵀ)``."""
    from kernfw.operators import Gram, normalize
    from kernfw.operators import _combination_numba as lib

    rng = np.random.default_rng(4)
    F = rng.normal(size=(60, 5))
    exact = F @ F.T
    exact = np.tril(exact) + np.tril(exact, -1).T  # symmetric bit for bit
    rounded = exact.copy()
    rounded[3, 7] = np.nextafter(rounded[3, 7], np.inf)  # one entry one ulp off
    grams = [Gram(exact), Gram(rounded)]
    assert grams[0].symmetric and not grams[1].symmetric
    calls = []
    real = lib.symmetrize_into
    monkeypatch.setattr(lib, "symmetrize_into", lambda K, out: calls.append(1) or real(K, out))
    stack = KernelStack(MultiKernel([normalize(g, "trace") for g in grams]))
    assert calls == [1]  # only the second kernel
    assert np.array_equal(stack.D[0], exact) and not np.shares_memory(stack.D[0], exact)
    assert np.array_equal(stack.D[1], stack.D[1].T)
    assert stack.D[1][3, 7] == (rounded[3, 7] + rounded[7, 3]) * 0.5
    np.testing.assert_allclose(stack.scale, [60 / np.trace(exact), 60 / np.trace(rounded)])


def test_the_mkl_estimators_form_one_copy_of_each_kernel(monkeypatch):
    """CSKL's objective uses the stack its kernels were computed into (no second copy)."""
    from kernfw import CSKLClassifier
    from kernfw.solvers.mkl import weights as weights_module

    X = np.random.default_rng(4).normal(size=(60, 3))
    y = (X[:, 0] > 0).astype(int)
    seen = []
    original = weights_module.KernelWeightObjective

    def spy(kernels, svm):
        objective = original(kernels, svm)
        seen.append((kernels.stack, objective.stack))
        return objective

    monkeypatch.setattr(weights_module, "KernelWeightObjective", spy)
    CSKLClassifier().fit(X, y)
    assert seen and all(own is not None and used is own for own, used in seen)


def test_mirror_lower_makes_the_matrix_exactly_symmetric():
    from kernfw.operators.gram import mirror_lower

    A = np.random.default_rng(5).normal(size=(300, 300))  # more than one tile either way
    compiled = mirror_lower(A.copy())
    assert np.array_equal(compiled, compiled.T)
    assert np.array_equal(np.tril(compiled), np.tril(A))  # the lower triangle kept
    assert np.array_equal(compiled, np.tril(A) + np.tril(A, -1).T)


def test_pickled_multikernel_drops_its_stack():
    import pickle

    X = np.random.default_rng(6).normal(size=(30, 3))
    mk = MultiKernel([make_operator(X, s, normalization="trace") for s in ["rbf", "poly"]])
    mk.stack = KernelStack(mk)
    assert mk.with_weights([1.0, 2.0]).stack is mk.stack
    assert mk.subset([0, 1]).stack is None
    assert pickle.loads(pickle.dumps(mk)).stack is None
