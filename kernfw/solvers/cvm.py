"""Core vector machine (CVM): Bădoiu–Clarkson core-set iterations (the baseline of [Frandi2013]).

The baseline that [Frandi2013] compares MFW with ([Tsang2005]), on
the same problem as :func:`kernfw.solvers.meb.solve_simplex_qp`::

    maximize  f(α) = qᵀα − αᵀQα   over the unit simplex.

Each CVM iteration

1. solves the problem restricted to the core set ``S`` (a small QP, solved by
   the simplex-QP solver itself — MFW, warm-started from the previous core
   solution — on the ``|S| × |S|`` block ``Q_SS``);
2. computes ``v = Q_{:,S} α_S`` on all points from the columns of ``S`` (the
   columns are requested from the operator once, when a point joins ``S``:
   they are foreseeable, so the start fetches its two columns in one call);
3. finds the FW vertex (for the MEB: the farthest point) ``i* = argmax_i g_i``,
   ``g = q − 2v``, whose FW gap ``g_{i*} − αᵀg`` certifies ``f* − f(α)``;
4. stops by the (1+ε) rule ``‖z_{i*} − c‖ ≤ (1+ε) r`` (``stop="radius"``,
   math.md §2.5) or the relative/absolute gap; otherwise adds ``i*`` to ``S``.

The core QP is solved to ``inner_tol`` (relative gap): it only has to be good
enough for the outer (1+ε) test; the outer certificate is exact for the
returned ``α`` whatever the inner accuracy.  Memory: the ``n × |S|`` columns
of the core set.
"""

import math
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ..fw import Certificate, FWIterate
from ..operators.gram import Gram
from ..operators.psd import NotPSDError

#: each core QP is solved to this fraction of the FW gap the outer stopping rule accepts
INNER_FRACTION = 0.1

__all__ = [
    "CoreVectorIterate",
    "INNER_FRACTION",
    "ball_shift",
    "simplex_certificate",
    "simplex_converged",
    "simplex_stopping_rule",
    "simplex_stop_estimate",
    "cvm_first_point",
    "cvm_second_point",
    "raise_not_psd",
    "NEGATIVE_CURVATURE",
]


#: a curvature ``dᵀQd`` below −this × the scale ``max(|Q_ii|, |2v_i|, |αᵀQα|)`` is not round-off: Q is not PSD
NEGATIVE_CURVATURE = 1e-8


def raise_not_psd(curvature, i):
    """The error of a line search that met negative curvature ``dᵀQd < 0`` (``Q`` not PSD)."""
    raise NotPSDError(
        f"the kernel matrix is not positive semidefinite: the line search toward point {i} "
        f"met negative curvature d^T Q d = {curvature:.3g} < 0, so the dual is not concave "
        "and no duality gap can be certified. Use a PSD kernel (e.g. 'rbf' or 'linear'), or "
        "repair a precomputed Gram matrix (clip its negative eigenvalues, or add a multiple "
        "of the identity)."
    )


def ball_shift(diag, q):
    """The constant ``c`` with ``diag(Q) = q + c·1`` (then ``r² = f(α) + c``); ValueError if
    ``diag(Q) − q`` is not constant (``stop="radius"`` needs a ball)."""
    shift = diag if q is None else diag - q
    c = float(shift[0]) if shift.size else 0.0
    if not np.allclose(shift, c, rtol=1e-10, atol=1e-12 * max(1.0, abs(c))):
        raise ValueError(
            "stop='radius' needs diag(Q) − q to be constant (a ball: the MEB with "
            "q = diag(Q), or an L2-SVM whose kernel has a constant diagonal such as "
            "RBF); use stop='relative' or stop='gap' for this problem"
        )
    return c


def simplex_certificate(f, gap, stop, shift, extra):
    """Certificate of an iterate with value ``f = f(α)`` and FW gap ``gap`` (math.md §2.5).

    ``primal = f + gap``; for ``stop="radius"`` ``extra`` gains ``radius2``
    (``r² = f + c``, ``c`` the :func:`ball_shift`) and ``delta = gap / r²``.
    """
    gap = max(gap, 0.0)
    if stop == "radius":
        r2 = f + shift
        extra["radius2"] = r2
        extra["delta"] = gap / r2 if r2 > 0 else (0.0 if gap <= 0 else math.inf)
    return Certificate(primal=f + gap, dual=f, gap=gap, extra=extra)


def simplex_converged(cert, tol, stop):
    """The stopping rules of :func:`~kernfw.solvers.meb.solve_simplex_qp` (``STOPS``) on a certificate."""
    if stop == "gap":
        return cert.gap <= tol
    if stop == "relative":
        return cert.gap <= tol * abs(cert.dual)
    return cert.extra["delta"] <= (1.0 + tol) ** 2 - 1.0


def simplex_stop_estimate(tol, stop, shift):
    """Coefficients ``(a, b, absolute)`` of the O(1) form ``max(gap, 0) ≤ a·f + b`` (``|f|``
    when ``absolute``) of :func:`simplex_converged`'s rule, ``f = f(α)``: what a solver
    tests between certificates to end a run of steps early (the certificate decides)."""
    if stop == "gap":
        return 0.0, float(tol), False
    if stop == "relative":
        return float(tol), 0.0, True
    eps = (1.0 + tol) ** 2 - 1.0
    return eps, eps * shift, False


def simplex_stopping_rule(tol, stop):
    """:func:`simplex_converged`'s rule in words (for the ``ConvergenceWarning``)."""
    if stop == "gap":
        return f"gap <= tol={tol:.3g}"
    if stop == "relative":
        return f"gap <= tol*|D| with tol={tol:.3g}"
    return f"radius within a factor 1 + tol={tol:.3g} of the optimum"


def cvm_first_point(n, rng):
    """The first point ``a`` of the CVM start: 0, or uniform with a generator (math.md §2.6)."""
    return 0 if rng is None else int(rng.integers(n))


def cvm_second_point(diag, col_a, a):
    """``b = argmax_i ‖z_i − z_a‖² = argmax_i (Q_ii − 2Q_ia)``, or None if every point is ``z_a``."""
    b = int(np.argmax(diag - 2.0 * col_a))
    dist2 = diag[b] - 2.0 * col_a[b] + diag[a]
    # every ‖z_i − z_a‖² = Q_ii − 2Q_ia + Q_aa ≥ 0 for a PSD Q: the 2 × 2 principal minors
    nearest = int(np.argmin(diag - 2.0 * col_a))
    d2_min = diag[nearest] - 2.0 * col_a[nearest] + diag[a]
    if d2_min < -NEGATIVE_CURVATURE * max(
        abs(diag[nearest]), abs(2.0 * col_a[nearest]), abs(diag[a]), 1e-300
    ):
        raise_not_psd(d2_min, nearest)
    if b == a or dist2 <= 0:
        return None
    return b


class CoreVectorIterate(FWIterate):
    """CVM state: core set ``S``, its weights ``α_S``, its columns ``Q_{:,S}`` and ``v = Qα``.

    One :meth:`step` is one core-set iteration (add the FW vertex, re-solve the
    core QP).

    Parameters
    ----------
    Q : KernelOperator
        The PSD matrix ``Q`` (``diag`` and ``columns`` only).
    q : ndarray of shape (n,) or None
        Linear term (None: zero).
    stop : {"gap", "relative", "radius"}
        Outer stopping rule (as :func:`~kernfw.solvers.meb.solve_simplex_qp`).
    rng : numpy.random.Generator or None
        Picks the first point (None: point 0).
    tol : float
        The outer tolerance; each core QP is solved to an absolute FW gap of
        ``INNER_FRACTION`` × the gap the outer rule accepts at the current value.
    inner_solve : callable
        ``inner_solve(Q_SS, q_S, alpha0, tol) -> FWResult``: the simplex-QP
        solver for the core QP (:func:`kernfw.solvers.meb.solve_simplex_qp`
        with MFW and the relative-gap stop, passed in by it).
    alpha0 : ndarray of shape (n,) or None
        Warm start: its support is the first core set.
    """

    def __init__(self, Q, q, stop, rng, tol, inner_solve, alpha0=None):
        self.Q, self.n, self.q, self.stop = Q, Q.n, q, stop
        self._inner_solve = inner_solve
        self.tol = float(tol)
        self.diag = np.asarray(Q.diag(), dtype=np.float64)
        self.inner_fraction = INNER_FRACTION
        self.qa = self.ava = 0.0
        self.ball_shift = ball_shift(self.diag, q) if stop == "radius" else 0.0
        self.inner_iterations = 0
        self.columns_fetched = 0
        self._core = np.empty(16, dtype=np.intp)
        self._cols = np.empty((self.n, 16))  # Q_{:,S}, grown by doubling
        self._core_gram = np.empty((16, 16))  # Q_SS, grown with it
        self._size = 0
        if alpha0 is None:
            a = cvm_first_point(self.n, rng)
            col_a = self._fetch([a])
            b = cvm_second_point(self.diag, col_a[:, 0], a)
            self._add_columns([a], col_a)
            if b is not None:
                self._add_columns([b], self._fetch([b]))
            weights = np.full(self._size, 1.0 / self._size)
        else:
            support = np.flatnonzero(alpha0)
            self._add_columns(support, self._fetch(support))
            weights = alpha0[support]
        self._solve_core(weights)

    @property
    def core(self):
        """The core set ``S`` (indices, in the order they joined)."""
        return self._core[: self._size]

    # -- columns and the core QP -------------------------------------------------------
    def _fetch(self, idx):
        """Columns ``Q_{:,idx}`` as float64 (one operator call for all of them)."""
        idx = np.asarray(idx, dtype=np.intp)
        self.columns_fetched += idx.size
        return np.asarray(self.Q.columns(idx), dtype=np.float64)

    def _add_columns(self, idx, cols):
        """Append points ``idx`` (columns ``cols``) to the core set, growing ``Q_{:,S}`` and
        ``Q_SS`` by doubling (no re-copy per point)."""
        idx = np.asarray(idx, dtype=np.intp)
        k, m = self._size, idx.size
        if k + m > self._cols.shape[1]:
            cap = max(2 * self._cols.shape[1], k + m)
            cols_new = np.empty((self.n, cap))
            cols_new[:, :k] = self._cols[:, :k]
            gram_new = np.empty((cap, cap))
            gram_new[:k, :k] = self._core_gram[:k, :k]
            core_new = np.empty(cap, dtype=np.intp)
            core_new[:k] = self._core[:k]
            self._cols, self._core_gram, self._core = cols_new, gram_new, core_new
        self._cols[:, k : k + m] = cols
        self._core[k : k + m] = idx
        self._size = k + m
        S = self._core[: k + m]
        self._core_gram[k : k + m, : k + m] = cols[S].T
        self._core_gram[: k + m, k : k + m] = cols[S]

    def _solve_core(self, weights):
        """Solve the QP on ``S`` from the warm start ``weights``; set ``α_S`` and ``v = Q_{:,S}α_S``."""
        k = self._size
        sub = Gram(self._core_gram[:k, :k], check=False)
        q_core = None if self.q is None else self.q[self.core]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            res = self._inner_solve(sub, q_core, weights / weights.sum(), self._inner_tol())
        self.inner_iterations += res.n_iter
        self.alpha_core = res.solution["alpha"]
        self.v = self._cols[:, :k] @ self.alpha_core
        self.qa = 0.0 if self.q is None else float(self.q[self.core] @ self.alpha_core)
        self.ava = float(self.alpha_core @ self.v[self.core])
        g = -2.0 * self.v if self.q is None else self.q - 2.0 * self.v
        self._vertex = int(np.argmax(g))
        self._gap = float(g[self._vertex] - (self.qa - 2.0 * self.ava))

    def _inner_tol(self):
        """Absolute FW-gap target of the core QP: a fraction of the outer rule's gap."""
        f = self.qa - self.ava
        if self.stop == "gap":
            accepted = self.tol
        elif self.stop == "relative":
            accepted = self.tol * abs(f)
        else:
            accepted = ((1.0 + self.tol) ** 2 - 1.0) * (f + self.ball_shift)
        if not accepted > 0:  # before the first solve (f = 0): the diagonal's scale
            accepted = self.tol * float(np.max(np.abs(self.diag)))
        return max(self.inner_fraction * accepted, 1e-300)

    # -- FWIterate protocol --------------------------------------------------------------
    def certificate(self):
        extra = {"coreset": int(self.core.size), "inner_iterations": self.inner_iterations}
        return simplex_certificate(self.qa - self.ava, self._gap, self.stop, self.ball_shift, extra)

    def is_converged(self, cert, tol):
        return simplex_converged(cert, tol, self.stop)

    def stopping_rule(self, tol):
        return simplex_stopping_rule(tol, self.stop)

    def step(self, t):
        i = self._vertex
        if np.any(self.core == i):  # the core QP was not solved accurately enough
            self.inner_fraction *= 0.1
            self._solve_core(self.alpha_core)
            return 0.0
        self._add_columns([i], self._fetch([i]))
        self._solve_core(np.append(self.alpha_core, 0.0))
        return math.nan

    def solution(self):
        alpha = np.zeros(self.n)
        alpha[self.core] = self.alpha_core
        return {"alpha": alpha, "v": self.v.copy(), "support": np.flatnonzero(alpha > 0)}
