"""The L2-loss ε-insensitive support vector regression as a simplex QP (math.md §2.15).

The regression ``min ½‖w‖² + ½b² + C Σ_i s_i (ξ_i² + ξ_i*²)`` with the tube
``−ε − ξ_i* ≤ y_i − (wᵀφ(x_i) + b) ≤ ε + ξ_i`` has a dual over ``2n`` multipliers
``γ = (α, α*) ≥ 0``: ``max_{γ≥0} pᵀγ − ½γᵀK̃γ`` with the signed points of the core vector
regression (``σ = (1ₙ, −1ₙ)``, ``K̃_kl = σ_k σ_l (K_kl + 1) + δ_kl / (2C s_k)``, indices
mod ``n``) and the linear term ``p_k = σ_k y_k − ε``.  A bound ``1ᵀγ ≤ B`` that the
optimum satisfies (:func:`mass_bound`) and a slack point turn the cone into ``B`` times
the simplex of ``2n + 1`` vertices, the slack being the origin (a zero column):
``γ = B α``, and the dual is ``(B²/2)`` times the simplex QP
``max_{α∈Δ} qᵀα − αᵀQα`` with ``Q = K̃`` (zero row and column for the slack) and
``q = 2p/B``.  This module holds ``Q`` as an operator (:class:`L2SVRKernel`: nothing
``2n × 2n`` is formed; its column source lets the compiled core evaluate columns),
the iterate whose certificate is the regression's own duality gap
(:class:`L2SVRIterate`), the vertex-coordinate passes on explicit features with the same
certificate (:class:`L2SVRCoordinateIterate`, math.md §2.13), :func:`solve_l2svr` and the
recovery :func:`l2svr_recover`.
"""

import math
import numbers

import numpy as np

from ..._threads import one_blas_thread
from ..._validation import check_positive
from ...fw.result import rounding_bound
from ...operators.base import KernelOperator, as_index, check_block
from ...operators.gram import Gram
from .certificate import simplex_certificate
from .coordinate import VertexCoordinateIterate, operator_features
from .dense import solve_dense_simplex_qp
from .iterate import SimplexQPIterate
from .l2svm import DCD_MAX_PASSES, check_example_weights, choose_l2svm_solver
from .solve import check_max_iter, check_tol, default_max_iter, drive
from .start import check_alpha0

__all__ = [
    "L2SVRKernel",
    "L2SVRIterate",
    "L2SVRCoordinateIterate",
    "L2SVR_SOLVERS",
    "mass_bound",
    "solve_l2svr",
    "l2svr_recover",
]

#: the regression's algorithms: Frank-Wolfe with away steps, plain Frank-Wolfe, the
#: vertex-coordinate passes on explicit features and ``"auto"`` (one of the first and third)
L2SVR_SOLVERS = ("auto", "mfw", "lsfw", "dcd")


def _check_penalty(C, epsilon):
    """``C > 0`` and ``ε ≥ 0`` as floats (ValueError otherwise)."""
    if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real):
        raise ValueError(f"epsilon must be a real number, got {epsilon!r}")
    if not (math.isfinite(epsilon) and epsilon >= 0):
        raise ValueError(f"epsilon must be a finite number >= 0, got {epsilon!r}")
    return check_positive("C", C), float(epsilon)


class L2SVRKernel(KernelOperator):
    """``Q`` of the regression's simplex QP: ``2n`` signed points and the slack (§2.15).

    ``Q_kl = σ_k σ_l (K_{k mod n, l mod n} + 1) + δ_kl c_k`` for ``k, l < 2n`` with the
    signs ``σ = (1ₙ, −1ₙ)`` and the diagonal terms ``c_k = 1/(2C s_{k mod n})``; row and
    column ``2n`` (the slack) are zero.  An operator wrapper: it answers the operator
    protocol from the base operator without forming any ``2n × 2n`` matrix.

    Parameters
    ----------
    base : KernelOperator
        The kernel ``K`` on the ``n`` training points.
    C : float > 0
        Penalty of the squared slacks.
    sample_weight : array-like of shape (n,) or None
        Positive weights ``s_i`` (None: ones).

    Attributes
    ----------
    signs : ndarray of shape (2n + 1,)
        ``σ`` (0 for the slack).
    inv_c : ndarray of shape (2n + 1,)
        ``c`` (0 for the slack).
    """

    def __init__(self, base, C, sample_weight=None):
        if not isinstance(base, KernelOperator):
            raise TypeError(f"base must be a KernelOperator, got {type(base).__name__}")
        self.base, self.C = base, check_positive("C", C)
        m = base.n
        w = check_example_weights(sample_weight, m, "the regression's")
        self.sample_weight = np.ones(m) if w is None else w
        self.n = 2 * m + 1
        self.dtype = np.float64
        self.signs = np.r_[np.ones(m), -np.ones(m), 0.0]
        half = 1.0 / (2.0 * self.C * self.sample_weight)
        self.inv_c = np.r_[half, half, 0.0]

    def _points(self, idx):
        """The base points ``k mod n`` of indices ``idx`` (the slack maps to point 0)."""
        return idx % self.base.n

    def column_source(self):
        """The base operator's :class:`~kernfw.operators.base.ColumnSource` with the signs
        ``σ`` as labels and the diagonal terms ``c`` (the compiled column repeats the base
        column over the copies, :func:`~kernfw.operators._columns_numba.evaluate_column`),
        or None when the base operator has none."""
        inner = self.base.column_source()
        if inner is None:
            return None
        return inner._replace(labels=self.signs, inv_c=self.inv_c)

    def diag(self):
        d = np.asarray(self.base.diag(), dtype=np.float64) + 1.0
        return np.r_[d, d, 0.0] + self.inv_c

    def columns(self, idx):
        idx = as_index(idx, self.n)
        out = np.zeros((self.n, idx.size))
        points = np.flatnonzero(idx < self.n - 1)  # the slack's column is zero: no kernel
        if points.size:
            base = np.asarray(self.base.columns(self._points(idx[points])), dtype=np.float64)
            base += 1.0
            signs = np.multiply.outer(self.signs[:-1], self.signs[idx[points]])
            out[:-1, points] = np.concatenate([base, base]) * signs
        out[idx, np.arange(idx.size)] += self.inv_c[idx]
        return out

    def matmat(self, V):
        V = check_block(V, self.n)
        m = self.base.n
        sV = V * (self.signs if V.ndim == 1 else self.signs[:, None])
        beta = sV[:m] + sV[m : 2 * m]  # the coefficients of the base points
        h = self.base.matmat(beta) + beta.sum(axis=0)
        out = np.concatenate([h, h, np.zeros_like(h[:1])])
        out *= self.signs if V.ndim == 1 else self.signs[:, None]
        out += V * (self.inv_c if V.ndim == 1 else self.inv_c[:, None])
        return out

    def cross(self, X_new, idx=None):
        idx = np.arange(self.n) if idx is None else as_index(idx, self.n)
        return (self.base.cross(X_new, self._points(idx)) + 1.0) * self.signs[idx]

    def subset(self, idx):
        idx = as_index(idx, self.n)
        return Gram(self.columns(idx)[idx])


def mass_bound(y, C, epsilon, sample_weight):
    """``B ≥ 1ᵀγ*``, the bound that makes the dual's cone a scaled simplex (math.md §2.15).

    ``1ᵀγ* = 2C Σ s_i e_i*`` with the tube violations ``e_i*`` of the optimum, and
    ``C Σ s_i e_i*² ≤ P* ≤ P(0) = C Σ s_i e_i(0)²`` (the model ``w = 0``, ``b = 0``), so by
    Cauchy–Schwarz ``1ᵀγ* ≤ 2C √(Σ s_i · Σ s_i e_i(0)²)`` with ``e_i(0) = max(0, |y_i| − ε)``.
    Returns 1 when that is 0 (then ``γ* = 0``, and any ``B > 0`` bounds it).
    """
    e0 = np.maximum(np.abs(y) - epsilon, 0.0)
    bound = 2.0 * C * math.sqrt(float(sample_weight.sum()) * float(sample_weight @ e0**2))
    return bound if bound > 0 else 1.0


def regression_certificate(p, B, inv_c, alpha, v, f, n_terms, extra):
    """The certificate of the regression at the simplex QP's ``α`` (math.md §2.15).

    With ``γ = Bα`` and the residuals ``r_k = p_k − σ_k f(x_k)`` (from ``v = Qα``), the
    primal at the model of ``γ`` minus the dual ``D = (B²/2) f`` is the sum of the
    nonnegative terms ``C s_k r_k₊² + γ_k²/(4C s_k) − γ_k r_k``: O(n).

    Parameters
    ----------
    p : ndarray of shape (2n,)
        The linear term ``p_k = σ_k y_k − ε``.
    B : float
        The mass bound.
    inv_c : ndarray of shape (2n + 1,)
        The diagonal terms ``1/(2C s_k)`` of ``Q`` (0 for the slack, last).
    alpha, v : ndarray of shape (2n + 1,)
        ``α`` and ``Qα`` (the slack last).
    f : float
        ``f(α) = qᵀα − αᵀQα``.
    n_terms : int
        The terms summed into ``v`` (the rounding bound).
    extra : dict
        The certificate's extra columns.
    """
    gamma = B * alpha[:-1]
    penalty = 1.0 / inv_c[:-1]
    r = p - B * v[:-1] + gamma / penalty
    pos = np.maximum(r, 0.0)
    terms = 0.5 * (penalty * pos * pos + gamma * gamma / penalty) - gamma * r
    dual = 0.5 * B**2 * f
    gap = float(np.maximum(terms, 0.0).sum())
    magnitude = float(np.abs(terms).sum() + 2.0 * np.abs(gamma * r).sum()) + abs(dual)
    return simplex_certificate(dual, gap, extra, rounding_bound(n_terms, magnitude))


class L2SVRIterate(SimplexQPIterate):
    """FW / MFW on the regression's simplex QP, certified by the regression's duality gap.

    The steps are those of :class:`~kernfw.solvers.simplex_qp.SimplexQPIterate` on
    ``Q = L2SVRKernel`` and ``q = 2p/B``; the certificate is that of the regression
    (:func:`regression_certificate`, math.md §2.15), computed in O(n) from ``v = Qα``.

    Parameters
    ----------
    Q : L2SVRKernel
        The operator.
    p : ndarray of shape (2n,)
        The linear term ``p_k = σ_k y_k − ε``.
    B : float
        The mass bound.
    solver, alpha0, rng
        As :class:`~kernfw.solvers.simplex_qp.SimplexQPIterate`.
    """

    #: ``tol`` is relative to the dual value ``|D|``
    gap_scale = "dual"

    def __init__(self, Q, p, B, solver, alpha0, rng):
        self.p, self.B = p, float(B)
        super().__init__(Q, np.r_[2.0 * p / self.B, 0.0], solver, alpha0, rng)
        self.gap_scale = "dual"

    def certificate(self):
        extra = {"coreset": self.active.size, "away_steps": self.n_away, "drop_steps": self.n_drop}
        return regression_certificate(
            self.p,
            self.B,
            self.Q.inv_c,
            self.alpha,
            self.v,
            self.objective(),
            self.n + self.steps,
            extra,
        )


class L2SVRCoordinateIterate(VertexCoordinateIterate):
    """Vertex-coordinate passes on the regression's simplex QP over explicit features.

    The ``2n + 1`` coordinates of ``Q = L2SVRKernel`` on features ``x_i`` (math.md §2.13,
    §2.15): the signed copies ``z_k = σ_k (x_{k mod n}, 1)`` with the diagonal terms
    ``1/(2C s_k)`` and the linear term ``q_k = 2p_k/B``, and the slack (``z = 0``,
    ``q = 0``); certified by the regression's duality gap (:func:`regression_certificate`).

    Parameters
    ----------
    X : ndarray of shape (n, d) or scipy.sparse.csr_matrix
        The features.
    Q : L2SVRKernel
        The operator (its signs and diagonal terms).
    p : ndarray of shape (2n,)
        The linear term ``p_k = σ_k y_k − ε``.
    B : float
        The mass bound.
    alpha0 : ndarray of shape (2n + 1,)
        The start on the simplex.
    rng : numpy.random.Generator
        The order of the coordinates in each pass.
    """

    def __init__(self, X, Q, p, B, alpha0, rng):
        self.p, self.B = p, float(B)
        m = X.shape[0]
        rows = np.r_[np.arange(m), np.arange(m), 0]
        q = np.r_[2.0 * p / self.B, 0.0]
        super().__init__(X, rows, Q.signs, Q.inv_c, q, alpha0, rng)

    def certificate(self):
        v = self._current_margins()
        alpha = self.beta / self.state[0]["mass"]
        f = float(alpha @ self.q) - float(alpha @ v)
        n_terms = 2 * self.n + self.d
        return regression_certificate(
            self.p, self.B, self.inv_c, alpha, v, f, n_terms, self._extra()
        )


def l2svr_recover(alpha, B, n):
    """The regression's model from the simplex QP's ``α`` (math.md §2.15).

    Parameters
    ----------
    alpha : ndarray of shape (2n + 1,)
        The simplex QP's solution.
    B : float
        The mass bound (``γ = Bα``).
    n : int
        The number of training points.

    Returns
    -------
    dict
        ``coef`` (n,) ``β = α − α*`` (``f(x) = Σ_i β_i (k(x_i, x) + 1)``), ``b = Σ β_i``,
        ``support`` (the indices with ``β_i ≠ 0``) and ``gamma`` (``(α, α*)``, 2n).
    """
    gamma = B * alpha[: 2 * n]
    beta = gamma[:n] - gamma[n:]
    support = np.flatnonzero(beta)
    return {"coef": beta, "b": float(beta.sum()), "support": support, "gamma": gamma}


#: problems of at most this many points are solved exactly first (:func:`_start`)
DENSE_MAX_POINTS = 200


def _start(Q, q, alpha0):
    """``(α₀, iterations)``: ``alpha0``; else, up to :data:`DENSE_MAX_POINTS` points, the exact
    optimum of the simplex QP by the active-set method of math.md §3.10 on the stored ``Q``
    (the iterate then certifies it at once) and its iterations, else the slack vertex
    ``α = e_{2n}`` (``γ = 0``: the zero model)."""
    if alpha0 is not None:
        return check_alpha0(alpha0, Q.n), 0
    start = np.zeros(Q.n)
    start[-1] = 1.0
    if Q.n > 2 * DENSE_MAX_POINTS + 1:
        return start, 0
    alpha, _, n_iter = solve_dense_simplex_qp(Q.dense(), q, beta0=start, tol=0.0)
    return alpha, n_iter


#: passes in a run of ``solver="dcd"`` between two certificates, at most: a certificate costs
#: about one pass, and the passes' estimate (the FW gap of the simplex QP, which puts all of
#: the mass ``B`` on one coordinate) stays far above the regression's gap, so the runs end by
#: their length; on Friedman's data (5,000–50,000 points, linear and Nyström features) runs
#: of 3 passes took 0.4–0.9 times the time of runs of 10 at the default ``tol``
DCD_CHECK_EVERY = 3


def _run_passes(op, Q, p, B, start, tol, max_iter, random_state, check_every, budget):
    """``solver="dcd"``: vertex-coordinate passes on the features of ``op`` (math.md §2.13)."""
    X = operator_features(op)
    max_passes = check_max_iter(max_iter, DCD_MAX_PASSES)
    rng = np.random.default_rng(0 if random_state is None else random_state)
    iterate = L2SVRCoordinateIterate(X, Q, p, B, start, rng)
    check_every = DCD_CHECK_EVERY if check_every is None else check_every
    name = "DCD (L2-SVR vertex-coordinate passes)"
    return iterate.drive(tol, max_passes, check_every, name, **budget)


def solve_l2svr(
    op,
    y,
    C,
    epsilon,
    sample_weight=None,
    solver="auto",
    tol=1e-3,
    max_iter=None,
    alpha0=None,
    random_state=None,
    callback=None,
    max_time=None,
    check_every=None,
):
    """Train the L2-loss ε-insensitive SVR (math.md §2.15) by FW, MFW or vertex-coordinate
    passes on the simplex.

    Parameters
    ----------
    op : KernelOperator
        The kernel ``K`` on the ``n`` training points (any backend).
    y : array-like of shape (n,)
        Targets.
    C : float > 0
        Penalty ``C`` of ``C Σ s_i (ξ_i² + ξ_i*²)``.
    epsilon : float >= 0
        Half-width ``ε`` of the tube.
    sample_weight : array-like of shape (n,) or None
        Positive weights ``s_i`` (None: ones).
    solver : {"auto", "mfw", "lsfw", "dcd"}
        Frank-Wolfe with away steps, plain Frank-Wolfe (math.md §2.3), or passes of
        vertex-coordinate steps on explicit features (``"dcd"``, math.md §2.13: ``op`` must
        have ``features()``; ``max_iter`` then counts passes, None is 1000, and
        ``check_every`` bounds the passes between certificates, None is 3).  ``"auto"``:
        ``"dcd"`` when ``op`` has explicit features, else ``"mfw"``
        (:func:`~kernfw.solvers.simplex_qp.choose_l2svm_solver`).
    tol : float > 0 or StoppingRule
        The regression's duality gap relative to its dual value: ``P − D ≤ tol·|D|``.
    max_iter : int or None
        Iterations (one kernel column each; None: ``max(100000, 20·(2n + 1))``), or passes
        of ``"dcd"``.  Up to 200 points ``n_iter`` also counts the iterations of the exact
        active-set start.
    alpha0 : array-like of shape (2n + 1,) or None
        Warm start on the simplex of the same ``B``.  None: up to 200 points the exact
        optimum of the active-set method (math.md §2.15), which the first certificate
        certifies; beyond, the slack vertex (``γ = 0``).
    random_state, callback, max_time, check_every
        As :func:`~kernfw.solvers.simplex_qp.solve_simplex_qp`; ``random_state`` also
        orders the coordinates of ``"dcd"``'s passes (None: a fixed order,
        ``numpy.random.default_rng(0)``).

    Returns
    -------
    FWResult
        ``solution`` holds ``alpha`` (2n + 1), ``v`` (``Qα``), ``coef`` (n,
        ``β = α − α*``), ``b``, ``support`` (indices with ``β_i ≠ 0``), ``gamma``
        (``(α, α*)``) and ``B``; ``dual`` is the regression's dual value ``D``,
        ``primal = D + gap`` its primal objective at the returned model.
    """
    if not isinstance(op, KernelOperator):
        raise TypeError(f"op must be a KernelOperator, got {type(op).__name__}")
    if solver not in L2SVR_SOLVERS:
        raise ValueError(f"solver must be one of {L2SVR_SOLVERS}, got {solver!r}")
    C, epsilon = _check_penalty(C, epsilon)
    n = op.n
    y = np.asarray(y, dtype=np.float64)
    if y.shape != (n,) or not np.all(np.isfinite(y)):
        raise ValueError(f"y must be a finite array of shape ({n},), got shape {y.shape}")
    Q = L2SVRKernel(op, C, sample_weight)
    B = mass_bound(y, C, epsilon, Q.sample_weight)
    p = np.r_[y, -y] - epsilon
    tol = check_tol(tol)
    if solver == "auto":
        solver = choose_l2svm_solver(op)
    with one_blas_thread():
        start, exact_iterations = _start(Q, np.r_[2.0 * p / B, 0.0], alpha0)
        budget = {"max_time": max_time, "callback": callback}
        if solver == "dcd":
            result = _run_passes(
                op, Q, p, B, start, tol, max_iter, random_state, check_every, budget
            )
        else:
            max_iter = check_max_iter(max_iter, default_max_iter(Q.n))
            rng = None if random_state is None else np.random.default_rng(random_state)
            iterate = L2SVRIterate(Q, p, B, solver, start, rng)
            problem = "L2-SVR simplex QP"
            result = drive(iterate, tol, max_iter, check_every, solver, problem, **budget)
    result.solution.update(l2svr_recover(result.solution["alpha"], B, n), B=B)
    result.n_iter += exact_iterations  # the active-set method's iterations count too
    return result
